"""One run per build directory at a time: an flock on `.pypto_build/lock`.

The lock file is never deleted (waiters would lock different inodes); the
kernel releases the lock when the holder exits, even after kill -9, so a
crashed run never blocks the next one. Worker processes forked during a run
(doit -j) close their inherited copy of the lock and die with their parent:
otherwise `kill -9` of the leader alone leaves orphans holding the lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import Iterator, NoReturn

_held: dict[int, int] = {}      # lock fd -> pid of the process that took it
_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _exit_quietly(signum: int, frame: object) -> None:
    os._exit(128 + signum)


def _before_fork() -> None:
    """Hold Ctrl-C / SIGTERM across a fork during a run: the child installs its handlers first."""
    if _held:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)


def _after_fork_in_parent() -> None:
    if _held:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def _after_fork_in_child() -> None:
    """A process forked while a run holds the lock (a doit -j worker): drop the lock, do not
    outlive the run, and leave Ctrl-C / SIGTERM to the leader (no worker tracebacks)."""
    if not _held:
        return
    owner = next(iter(_held.values()))
    for fd in _held:
        os.close(fd)
    _held.clear()
    for signum in _SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:      # nohup'ed / background: stay ignored
            signal.signal(signum, _exit_quietly)
    import ctypes
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)      # Linux only
    if prctl is not None:
        prctl(1, signal.SIGKILL)            # PR_SET_PDEATHSIG: killed when the parent dies
    if os.getppid() != owner:               # the parent died before prctl took effect
        os._exit(1)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


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


def exit_now(code: int) -> NoReturn:
    """Leave after an interrupt without multiprocessing's exit handlers: the state is already saved,
    and joining a doit worker or queue thread the interrupt caught mid-handshake can hang forever."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
