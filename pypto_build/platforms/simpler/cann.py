"""CANN, the Ascend toolkit a2a3/a5 device builds compile with: found as PyPTO's runtime (simpler) finds it.

simpler reads `$ASCEND_HOME_PATH` (unset or empty: an error) and, for a device
platform, requires four files under it, whichever runtime is used:
`bin/ccec` (kernels), `bin/ld.lld` (the kernel link),
`tools/hcc/bin/aarch64-target-linux-gnu-gcc` and `...-g++` (the orchestration
of `tensormap_and_ringbuffer`, which runs on the AICPU). It reads no version
file: a tool's identity is what `--version` says. We check the same files, in
the same order, and also that each can run (`--version`), so a broken install
is one line at planning time instead of a failed compile later.

Tool paths are `$ASCEND_HOME_PATH/<relative path>` as the variable says (a
`latest` symlink is kept, as simpler keeps it in its argv); `identity` digests
each tool's resolved path, content and `--version` text, so switching `latest`
to another CANN, or replacing a tool, changes it. A relative `$ASCEND_HOME_PATH`
is taken from our working directory (simpler would check it from its caller's
and run it from its own checkout).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import ToolchainError
from ...core.hashing import file_digest, text_digest
from ...core.procs import run
from ...toolchain.compiler import VERSION_TIMEOUT_S

ENV_VAR = "ASCEND_HOME_PATH"
CCEC = "bin/ccec"
LINKER = "bin/ld.lld"
CROSS_GCC = "tools/hcc/bin/aarch64-target-linux-gnu-gcc"
CROSS_GXX = "tools/hcc/bin/aarch64-target-linux-gnu-g++"
TOOLS = (CCEC, LINKER, CROSS_GCC, CROSS_GXX)      # simpler's order of checks
_FIX = (f"set {ENV_VAR} to the CANN toolkit install (source its set_env.sh), "
        "or build for a simulator or the CPU (--platform a2a3sim, a5sim or host)")


@dataclass(frozen=True)
class Cann:
    """A CANN install: the tools a device build runs, the install's identity and ccec's version line."""

    home: Path
    ccec: Path
    linker: Path
    cross_gxx: Path
    cross_gcc: Path
    identity: str       # digest of each tool's resolved path, content and --version text
    version: str        # first line of `ccec --version`


def locate_cann(env: Mapping[str, str] | None = None) -> Cann:
    """The CANN install `$ASCEND_HOME_PATH` names (in `env`, default os.environ); ToolchainError if unusable."""
    env = os.environ if env is None else env
    raw = env.get(ENV_VAR, "")
    if not raw:
        raise ToolchainError(f"{ENV_VAR} is not set, and a2a3/a5 device builds need CANN's ccec; {_FIX}")
    home = os.path.abspath(raw)
    if not os.path.isdir(home):
        raise ToolchainError(f"{ENV_VAR}={raw}: no such directory; {_FIX}")
    paths = {rel: os.path.join(home, *rel.split("/")) for rel in TOOLS}
    for rel, path in paths.items():
        problem = _tool_problem(path)
        if problem:
            raise ToolchainError(f"{ENV_VAR}={raw}: {rel} {problem} ({path}); {_FIX}")
    parts: list[str] = []
    versions: dict[str, str] = {}
    for rel, path in paths.items():
        versions[rel] = _version_text(path, raw)
        real = os.path.realpath(path)
        parts += [rel, real, file_digest(real), versions[rel]]
    lines = versions[CCEC].splitlines()
    return Cann(home=Path(home), ccec=Path(paths[CCEC]), linker=Path(paths[LINKER]),
                cross_gxx=Path(paths[CROSS_GXX]), cross_gcc=Path(paths[CROSS_GCC]),
                identity=text_digest(*parts), version=lines[0] if lines else "")


def _tool_problem(path: str) -> str | None:
    """Why the tool at `path` cannot be run, or None."""
    if not os.path.lexists(path):
        return "not found"
    if not os.path.exists(path):
        return "is a dangling symlink"
    if not os.path.isfile(path):
        return "is not a file"
    if not os.access(path, os.X_OK):
        return "is not executable"
    return None


def _version_text(path: str, raw_home: str) -> str:
    """What `<tool> --version` prints (stdout, else stderr), stripped; ToolchainError if it fails."""
    where = f"{ENV_VAR}={raw_home}: {path}"
    try:
        out = run([path, "--version"], timeout=VERSION_TIMEOUT_S)
    except OSError as exc:
        raise ToolchainError(f"{where}: cannot run '--version' ({exc.strerror or exc}); {_FIX}") from None
    if out.timed_out:
        raise ToolchainError(f"{where}: '--version' did not finish within {VERSION_TIMEOUT_S:g} s (killed); "
                             f"{_FIX}")
    if out.returncode != 0:
        said = out.output.splitlines()[0][:200] if out.output else "no output"
        raise ToolchainError(f"{where}: '--version' failed ({out.how}: {said}); {_FIX}")
    return (out.stdout or out.stderr).strip()
