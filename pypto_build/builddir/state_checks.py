"""What a run refuses in `.pypto_build/` before it reads its state there, in one place.

Each check is the one judgement both a run and the no-op record's answer (`noop.refuse`) make: a state
folder, or a symbolic link in it, that resolves outside the build directory (`confine_state`, asked while
planning); a directory `lock` that is no regular file (`check_lock`, asked as the lock is taken); a state
database or one of sqlite's companion files that is no regular file (`check_state_files`, asked before
sqlite opens it: a FIFO would block its first read forever). Each refusal is one line that says what to do.
"""
from __future__ import annotations

import os
import stat

from ..errors import UserError, one_line
from ..core.safeio import refusal
from .state_dir import STATE_DIR

LOCK = "lock"
LOCK_FIX = "remove it (pypto_build creates it again)"
SIDE_FILES = ("-journal", "-wal", "-shm")     # sqlite's companions of the database file


def confine_state(root: os.PathLike[str]) -> None:
    """Refuse `root`'s state folder when it, or a symbolic link anywhere in it, resolves outside `root`
    (`confine.confine_tree`: a run writes only inside the build directory)."""
    from pathlib import Path
    from ..core.confine import confine_tree
    confine_tree(Path(root), Path(root) / STATE_DIR, "state folder")


def check_lock(path: str | os.PathLike[str], mode: int | None = None) -> None:
    """Refuse the directory's lock file `path` when it is there and no regular file (a FIFO, a socket, a
    device, a directory): never opened for writing nor locked. `mode`: the type of the descriptor a run
    opened (else the path's stat is asked; absent, a run creates it)."""
    if mode is None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return          # absent (a run creates it) or not reachable (opening it says why)
    if not stat.S_ISREG(mode):
        raise UserError(refusal(path, mode, LOCK_FIX))


def check_state_files(dep_file: str | os.PathLike[str]) -> None:
    """Refuse a state database (or companion) that is a FIFO, socket, device or directory: sqlite would block or
    worse. Absent ones are fine (sqlite creates them)."""
    dep = os.fspath(dep_file)
    for path in (dep, *(f"{dep}{side}" for side in SIDE_FILES)):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UserError(f"{path}: the build state cannot be read ({one_line(exc.strerror)}); "
                            f"{start_afresh(path)}") from None
        if not stat.S_ISREG(mode):
            after = ("the build state starts afresh: sources and binaries are kept, every unit rebuilds once"
                     if path == dep else "sqlite creates it again when it needs one")
            raise UserError(refusal(path, mode, f"remove it ({after})"))


def start_afresh(path: str | os.PathLike[str]) -> str:
    """The fix for a damaged state database (or companion file): remove that file only — the rest of the state
    folder holds the host binaries, the backups of hand-edited kernels and the kept golden results."""
    return (f"remove {os.fspath(path)} (only that file: keep the rest of {STATE_DIR}/, which holds the host "
            "binaries and the backups of hand-edited kernels) to start afresh; every unit then compiles once")
