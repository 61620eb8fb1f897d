"""One run per build directory at a time: an flock on `.pypto_build/lock`.

The lock file is never deleted (waiters would lock different inodes); the
kernel releases the lock when the holder exits, even after kill -9, so a
crashed run never blocks the next one. Worker processes forked during a run
(doit -j) close their inherited copy (`release_inherited`, called by workers.py):
otherwise `kill -9` of the leader alone leaves orphans holding the lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import Iterator

_held: dict[int, int] = {}      # lock fd -> pid of the process that took it


def release_inherited() -> int | None:
    """In a process forked during a run: close the inherited lock fds (only the leader holds the lock).

    Returns the pid of the leader that took them, None when no lock was held.
    """
    if not _held:
        return None
    owner = next(iter(_held.values()))
    for fd in _held:
        os.close(fd)
    _held.clear()
    return owner


def held() -> bool:
    """Whether this process holds a directory lock now (a run is in progress)."""
    return bool(_held)


@contextlib.contextmanager
def dir_lock(state_dir: Path, *, quiet: bool = False, shared: bool = False) -> Iterator[None]:
    """Hold the directory's lock: exclusive for runs, shared (and writing nothing) for readers."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
                print(f"pypto-build: waiting for another run on {state_dir.parent} (pid {holder})",
                      file=sys.stderr, flush=True)
            fcntl.flock(fd, mode)
        if not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        _held[fd] = os.getpid()
        yield
    finally:
        _held.pop(fd, None)
        os.close(fd)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so doit saves the work already finished."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:          # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

