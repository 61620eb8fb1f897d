"""Locating ptoas, its rebuild command line, and a content identity for it.

Pure functions (nothing is run): the lookup follows PyPTO's `find_ptoas_binary`
(reference section 5.2), the level inference and argv follow the rebuild path
of `pto_rebuild.py` (section 5.3). ptoas itself is never run here.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ToolchainError
from ..core.hashing import file_digest, text_digest
from ..core.procs import path_arg
from ..core.which import which

__all__ = ["PtoasLookup", "find_ptoas", "identity_files", "infer_level", "ptoas_argv", "ptoas_identity", "LEVELS"]

LEVELS = ("level2", "level3")

# A `pto.alloc_tile` line carrying a physical `addr =` operand selects level3
# (PyPTO-owned allocation). Same pattern as pto_rebuild.py (MULTILINE).
_ALLOC_TILE_ADDR_RE = re.compile(r"^\s*%\S+\s*=\s*pto\.alloc_tile\b.*\baddr\s*=", re.MULTILINE)

# Probed under $PTOAS_ROOT, in order: <=v0.50 launcher script, v0.55+ launcher,
# v0.51+ self-sufficient binary.
_ROOT_CANDIDATES = ("ptoas", "ptoas.sh", os.path.join("bin", "ptoas"))


@dataclass(frozen=True)
class PtoasLookup:
    """Result of `find_ptoas`.

    path:   resolved absolute path of the executable, None when not found.
    tried:  candidates probed, in order (for the error message).
    source: "--ptoas", "PTOAS_ROOT" or "PATH".
    """

    path: str | None
    tried: tuple[str, ...]
    source: str


def _is_executable_file(path: str) -> bool:
    """A regular file (symlinks followed) with an execute bit for us."""
    try:
        return os.path.isfile(path) and os.access(path, os.X_OK)
    except (OSError, ValueError):  # e.g. embedded NUL, name too long
        return False


def _resolved(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def find_ptoas(explicit: str | None = None, env: Mapping[str, str] | None = None) -> PtoasLookup:
    """Locate ptoas: `explicit` (--ptoas) wins; else PyPTO's rule.

    PTOAS_ROOT set and non-empty: probe $PTOAS_ROOT/ptoas, $PTOAS_ROOT/ptoas.sh,
    $PTOAS_ROOT/bin/ptoas (regular file with execute bit) and never fall back to
    PATH; otherwise `which("ptoas")` (core.which, as shutil.which) on env's PATH. An explicit value is
    a path (relative to the cwd), not looked up on PATH.
    """
    env = os.environ if env is None else env
    if explicit is not None:
        found = _resolved(explicit) if _is_executable_file(explicit) else None
        return PtoasLookup(found, (explicit,), "--ptoas")
    root = env.get("PTOAS_ROOT")
    if root:
        tried = tuple(os.path.join(root, c) for c in _ROOT_CANDIDATES)
        for cand in tried:
            if _is_executable_file(cand):
                return PtoasLookup(_resolved(cand), tried, "PTOAS_ROOT")
        return PtoasLookup(None, tried, "PTOAS_ROOT")
    search = env.get("PATH", os.defpath)
    tried = tuple(dict.fromkeys(os.path.join(d or os.curdir, "ptoas") for d in search.split(os.pathsep)))
    try:
        hit = which("ptoas", path=search)
    except (OSError, ValueError):
        hit = None
    return PtoasLookup(_resolved(hit) if hit else None, tried, "PATH")


def infer_level(pto_text: str) -> str:
    """`level3` iff some `%x = pto.alloc_tile ... addr =` line exists, else `level2`."""
    return "level3" if _ALLOC_TILE_ADDR_RE.search(pto_text) else "level2"


def ptoas_argv(ptoas: str, pto: str, out: str, level: str) -> tuple[str, ...]:
    """PyPTO's rebuild command line (no --pto-arch, no dump flags); the paths can only be paths."""
    if level not in LEVELS:
        raise ValueError(f"ptoas level must be one of {LEVELS}, got {level!r}")
    return (ptoas, path_arg(pto), "-o", path_arg(out), "--enable-insert-sync", f"--pto-level={level}")


def _is_launcher(path: str) -> bool:
    if os.path.basename(path) == "ptoas.sh":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def _launched_binaries(path: str) -> list[str]:
    """`bin/ptoas` next to a launcher script, or in its parent directory."""
    here = os.path.dirname(path)
    found: list[str] = []
    for cand in (os.path.join(here, "bin", "ptoas"), os.path.join(os.path.dirname(here), "bin", "ptoas")):
        cand = _resolved(cand)
        try:
            st = os.stat(cand)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode) and cand != path and cand not in found:
            found.append(cand)
    return found


def identity_files(path: str) -> list[str]:
    """The files `ptoas_identity` reads: the resolved executable, then the `bin/ptoas` a launcher runs."""
    resolved = _resolved(path)
    return [resolved, *(_launched_binaries(resolved) if _is_launcher(resolved) else [])]


def ptoas_identity(path: str) -> str:
    """xxh3-128 digest of ptoas's resolved path and content.

    For a launcher script (`ptoas.sh`, or a file starting with `#!`) the
    content of the sibling/parent `bin/ptoas` is folded in too. Shared
    libraries the binary loads are not covered.
    """
    try:
        resolved, *binaries = identity_files(path)
        parts = [resolved, file_digest(resolved)]
        for binary in binaries:
            parts += ["bin/ptoas", binary, file_digest(binary)]
    except (OSError, ValueError) as exc:
        raise ToolchainError(f"{path}: cannot read ptoas ({exc}); check --ptoas / PTOAS_ROOT") from exc
    return text_digest(*parts)
