"""Local work slots: how much of a distributed build's local work runs at once on this machine.

With a launcher, `-j` counts compiles that may run elsewhere, so it can be larger
than this machine's CPUs; what stays here (linking, `.pto` work, device steps,
program runs) takes a slot first, at most `limit` at a time across every process
of this user (every `-j` worker, every directory of `pypto-build ci -j N`). A
slot is an exclusive `flock` on one of `limit` files, so the kernel frees it when
its holder exits or is killed: no slot is ever lost. Without a limit (no launcher,
or `-j` within the CPUs), `slot()` does nothing.
"""
from __future__ import annotations

import fcntl
import functools
import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

_limit = 0                  # set by the run's leader before its workers fork (engine.session)
WAIT_S = (0.002, 0.05)      # first and longest pause between tries
F = TypeVar("F", bound=Callable)


def configure(limit: int) -> int:
    """Allow `limit` local jobs at once from now on (0: no limit); the previous value."""
    global _limit
    previous, _limit = _limit, max(0, limit)
    return previous


def slots_dir() -> Path:
    """Where the slot files are: one folder per user, shared by all their runs."""
    import tempfile                     # (imports shutil: only a distributed run gets here)

    return Path(tempfile.gettempdir()) / f"pypto-build-{os.getuid()}" / "local-slots"


@contextmanager
def slot() -> Iterator[int | None]:
    """Hold one local slot (its number) for the block; None when there is no limit."""
    if _limit <= 0:
        yield None
        return
    where = slots_dir()
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not _ours(where):
        yield None                              # another user's folder: their locks must not hold our builds
        return
    handles: list[int] = []
    try:
        handles += (os.open(where / str(i), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                    for i in range(_limit))
        held, pause = None, WAIT_S[0]
        start = os.getpid() % _limit            # processes start their search at different slots
        while held is None:
            for k in range(_limit):
                i = (start + k) % _limit
                try:
                    fcntl.flock(handles[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                held = i
                break
            else:
                time.sleep(pause)
                pause = min(pause * 2, WAIT_S[1])
        yield held
    finally:
        for fd in handles:
            os.close(fd)                        # closing the locked one releases the slot


def _ours(where: Path) -> bool:
    """Whether `where` is a real folder of this user that nobody else may write to."""
    st = os.lstat(where)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def local_work(action: F) -> F:
    """A doit action that runs on this machine: it holds a local slot while it runs."""
    @functools.wraps(action)
    def held(*args, **kwargs):
        with slot():
            return action(*args, **kwargs)
    return held  # type: ignore[return-value]
