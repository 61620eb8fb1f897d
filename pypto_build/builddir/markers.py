"""The file names that make a directory a PyPTO build directory, and finding the one a path is in.

Reads names only (no file content), so the no-op path can find the build root cheaply.
"""
from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from . import STATE_DIR
from ..errors import LayoutError
from ..core.safeio import refusal

KERNEL_CONFIG = "kernel_config.py"
COMPILED_META = "compiled_meta.json"
DISTRIBUTED_META = "distributed_meta.json"
HOST_ORCH = "orchestration/host_orch.py"
MARKERS = (COMPILED_META, DISTRIBUTED_META, KERNEL_CONFIG, HOST_ORCH)
# The host platform's binaries and stamp, per sub-build: apart from the places PyPTO reads for the platform
# the directory records, so neither tool throws away the other's work.
HOST_OUTPUTS = f"{STATE_DIR}/host"
HOST_STAMP = f"{HOST_OUTPUTS}/cache/binary_context.json"
# Each platform's build state (its doit database and header-set records) in a folder of its own, as its binaries
# are kept apart: switching platforms and back finds each one's state as it left it. Before, one database sat in
# STATE_DIR itself (the legacy place, taken over by the first run that keeps state per platform).
STATE_DB = "state.sqlite3"
PLATFORM_STATES = f"{STATE_DIR}/state"


def state_folder(platform: str) -> str:
    """The folder of `platform`'s build state, relative to the build root."""
    return f"{PLATFORM_STATES}/{platform}"


def current_state_folder(root: Path, platform: str) -> str:
    """Where `platform`'s build state is read from (relative to `root`): its own folder, unless only the one
    state of before is there (a reader sees what a build would take over)."""
    own = state_folder(platform)
    if not os.path.lexists(root / own / STATE_DB) and os.path.lexists(root / STATE_DIR / STATE_DB):
        return STATE_DIR
    return own


def host_binary(source: str) -> str:
    """Where the host platform puts the binary built from `source` (both relative to the sub-build; a `..`
    step becomes `__`, so the binary stays under HOST_OUTPUTS)."""
    parts = ["__" if part == ".." else part for part in posixpath.normpath(source).split("/")]
    return f"{HOST_OUTPUTS}/{posixpath.splitext('/'.join(parts))[0]}.so"


def host_external_binary(func_id: int, core_type: str, stem: str) -> str:
    """Where the host platform puts an external kernel's binary (relative to the sub-build)."""
    return f"{HOST_OUTPUTS}/cache/external/{func_id}_{core_type}_{stem}.so"


def present_markers(root: Path) -> tuple[str, ...]:
    """The marker files of `root`; a FIFO, socket or device under a marker's name is refused (never read)."""
    found = []
    for m in MARKERS:
        try:
            st = os.stat(root / m)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append(m)
        elif not stat.S_ISDIR(st.st_mode):
            raise LayoutError(refusal(root / m, st.st_mode, "replace it with the file ir.compile() wrote (or "
                                                            "recompile via ir.compile())"))
    return tuple(found)


def next_level_names(root: Path) -> list[str]:
    """`next_levels/<name>` entries with a kernel_config.py, sorted."""
    base = root / "next_levels"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / KERNEL_CONFIG).is_file())


def is_build_dir(path: Path) -> bool:
    """Whether `path` holds a marker file or next_levels/*/kernel_config.py."""
    return bool(present_markers(path)) or bool(next_level_names(path))


def find_root(start: Path) -> Path:
    """The build directory `start` is in, found as git finds its top level.

    `start` itself when it is one; else the nearest parent that is one — and when that
    is a `next_levels/<name>/` sub-build, the L3 or multi-orch root around it. A
    directory inside no build directory is returned as it is (`layout.classify` says why).
    """
    start = Path(os.path.abspath(start))
    if not start.is_dir() or is_build_dir(start):
        return start
    for parent in start.parents:
        if is_build_dir(parent):
            top = parent.parent.parent
            return top if parent.parent.name == "next_levels" and is_build_dir(top) else parent
    return start
