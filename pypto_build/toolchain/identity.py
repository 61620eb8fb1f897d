"""Identities that decide whether binaries may be reused (PyPTO's `cache/binary_context.json` fields).

`BinaryContext` mirrors PyPTO's `cache/binary_context.json`. A revision that
cannot be established makes the context unknown: nothing is trusted, every
unit rebuilds and no stamp is written (fail closed).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..core.hashing import file_digest, text_digest
from ..core.confine import inside
from ..core.procs import run
from .compiler import PACKAGE_DIR

HOST_RUNTIME_DIR = PACKAGE_DIR / "platforms" / "host" / "headers"
GIT_TIMEOUT_S = 5.0
_LISTING_BYTES = 256 << 20      # `git ls-files` of a large checkout, kept whole


@dataclass(frozen=True)
class Revision:
    """A revision that identifies some code (a runtime, PTO-ISA); `value` None: unknown, and why."""

    value: str | None
    why_unknown: str = ""


@dataclass(frozen=True)
class BinaryContext:
    """What binaries of one sub-build are built under: platform, runtime and the revisions of the runtime
    and PTO-ISA. Its digest is an input of every unit; unknown (`unknown`): nothing is trusted."""

    platform: str
    runtime_name: str
    runtime_revision: Revision
    pto_isa_revision: Revision

    @property
    def unknown(self) -> str | None:
        """Why this context cannot be trusted, or None when it is known."""
        for what, rev in (("runtime", self.runtime_revision), ("PTO-ISA", self.pto_isa_revision)):
            if rev.value is None:
                return f"{what} identity unknown ({rev.why_unknown})"
        return None

    def stamp_fields(self) -> dict:
        """The dict PyPTO stores in cache/binary_context.json (schema 1)."""
        return {"platform": self.platform, "pto_isa_revision": self.pto_isa_revision.value,
                "runtime_name": self.runtime_name, "runtime_revision": self.runtime_revision.value,
                "schema": 1}

    @property
    def digest(self) -> str | None:
        if self.unknown:
            return None
        s = self.stamp_fields()
        return text_digest(*(f"{k}={s[k]}" for k in sorted(s)))


def clean_git_revision(root: Path) -> Revision:
    """HEAD of a clean git checkout (no modified, staged or untracked files)."""
    if not (root / ".git").exists():
        return Revision(None, f"{root} is not a git checkout")
    try:
        head = run(["git", "rev-parse", "HEAD"], cwd=root, timeout=GIT_TIMEOUT_S)
        status = run(["git", "status", "--porcelain=v1", "--untracked-files=normal"], cwd=root,
                     timeout=GIT_TIMEOUT_S)
    except OSError as exc:
        return Revision(None, f"git failed in {root}: {exc}")
    if head.timed_out or status.timed_out:
        return Revision(None, f"git did not answer within {GIT_TIMEOUT_S:g} s in {root}")
    if head.returncode or status.returncode or not head.stdout.strip():
        return Revision(None, f"git cannot read {root}")
    if status.stdout.strip():
        return Revision(None, f"{root} has uncommitted or untracked changes")
    hidden = _hidden_from_status(str(root))
    if hidden:
        return Revision(None, f"{root} has files git status does not check ({hidden}: assume-unchanged or "
                              "skip-worktree); clear the bit with git update-index --no-assume-unchanged / "
                              "--no-skip-worktree")
    return Revision(head.stdout.strip())


def host_runtime_revision() -> Revision:
    """Our own runtime: the package version plus a digest of the headers it ships."""
    files = sorted(p for p in HOST_RUNTIME_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    parts = [f"{p.relative_to(HOST_RUNTIME_DIR).as_posix()}:{file_digest(str(p))}" for p in files]
    return Revision(f"pypto_build-{__version__}+{text_digest(*parts)[:16]}")


def identity_covers(real: str, roots: tuple[str, ...]) -> bool:
    """Whether an identity vouches for the content of the header at resolved path `real`.

    `roots` are the resolved directories of `platforms.Facts.covered_roots`.

    Under the package's host runtime: yes (its revision digests every file there).
    Under a git checkout (`PTO_ISA_ROOT`): only for a file git tracks and may
    report as modified — its revision is HEAD of a clean checkout, and `git status`
    never shows ignored files (nor assume-unchanged / skip-worktree ones). Other
    headers are tracked per unit.
    """
    for top in roots:
        if not inside(real, top):
            continue
        if top == str(HOST_RUNTIME_DIR):
            return True
        return (_index_tags(top) or {}).get(os.path.relpath(real, top)) == "H"
    return False


def _hidden_from_status(top: str) -> str | None:
    """The first file whose edits `git status` would not report: assume-unchanged (a lower-case tag), or
    skip-worktree (`S`) and present on disk (a sparse checkout's absent files are fine)."""
    tags = _index_tags(top)
    if tags is None:
        return "git ls-files failed"
    for path, tag in tags.items():
        if tag.islower() or (tag == "S" and os.path.lexists(os.path.join(top, path))):
            return path
    return None


_tags: dict[tuple, dict[str, str]] = {}


def _index_tags(top: str) -> dict[str, str] | None:
    """`git ls-files -v` of the checkout at `top`: path -> tag (`H`: tracked, nothing hidden); None on failure.

    Memoised per process on the stat of the checkout's index, which every add, rm,
    commit, checkout and update-index rewrites.
    """
    index = _index_file(top)
    try:
        st = os.stat(index) if index else None
    except OSError:
        st = None
    key = (top, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) if st else None
    if key is not None and key in _tags:
        return _tags[key]
    try:
        out = run(["git", "ls-files", "-z", "-v"], cwd=top, timeout=30, head=_LISTING_BYTES, tail=0)
    except OSError:
        return None
    if out.returncode:          # failed, or timed out (None)
        return None
    tags = {entry[2:]: entry[:1] for entry in out.stdout.split("\0") if len(entry) > 2}
    if key is not None:
        _tags[key] = tags
    return tags


def _index_file(top: str) -> str | None:
    """`.git/index`, or the index of a linked worktree / submodule (`.git` is then a `gitdir:` file)."""
    dot = os.path.join(top, ".git")
    if os.path.isdir(dot):
        return os.path.join(dot, "index")
    try:
        with open(dot, encoding="utf-8") as handle:
            line = handle.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(top, line[len("gitdir:"):].strip(), "index")
