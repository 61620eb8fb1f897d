"""One run per build directory at a time: an flock on `.pypto_build/lock`.

The lock file is never deleted (waiters would lock different inodes); the
kernel releases the lock when the holder exits, even after kill -9, so a
crashed run never blocks the next one. Worker processes forked during a run
(doit -j) close their inherited copy (`release_inherited`, called by workers.py):
otherwise `kill -9` of the leader alone leaves orphans holding the lock.

A reader (explain, --dry-run) takes the shared lock on a read-only descriptor
and creates nothing, so it works on a read-only directory; a run there is
answered read-only when nothing needs to run, else stops with one line
(`NotWritable`) before anything is written. A FIFO, device or directory named
`lock` is refused (`state_checks.check_lock`: never read or locked; opened without
blocking, its type checked again on the descriptor).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import Iterator

from ..errors import UserError
from ..builddir.state_checks import LOCK, check_lock

_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)

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


class NotWritable(UserError):
    """A run cannot take the lock: the build directory is not writable (`root`, what is wrong in `what`).
    A run with nothing to do is still answered, read-only (`commands.run_build`)."""

    def __init__(self, root: Path, what: str, needs: str = ""):
        self.root, self.what = root, what
        super().__init__(f"{root}: {what}{needs}; a build writes binaries and its state there — copy it somewhere "
                         f"writable (cp -a {root} NEWDIR) and build there, or use explain / build --dry-run, "
                         "which write nothing")

    def needing(self, task: str, reason: str) -> NotWritable:
        """The same line, saying which task would have to run and why."""
        return NotWritable(self.root, self.what, f", and {task} needs to run ({reason})")


def not_writable(root: Path, exc: OSError) -> NotWritable:
    """The one line for a build directory a run cannot write into."""
    what = ("is on a read-only filesystem" if exc.errno == errno.EROFS else
            f"is not writable by you ({exc.strerror}: {exc.filename})")
    return NotWritable(root, what)


def _open(state_dir: Path, shared: bool) -> int | None:
    """The lock file's descriptor (None: a reader on a directory with no lock file, so nothing to wait for)."""
    path = state_dir / LOCK
    flags = os.O_NONBLOCK | os.O_CLOEXEC         # a FIFO swapped in after the check opens at once (refused below)
    check_lock(path)                             # here too a directory, which would not open for writing
    try:
        if shared:
            fd = os.open(path, os.O_RDONLY | flags)
        else:
            state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o644)
    except FileNotFoundError:
        if shared:
            return None
        raise
    except OSError as exc:
        if exc.errno in _NOT_WRITABLE and not shared:
            raise not_writable(state_dir.parent, exc) from None
        raise
    try:
        check_lock(path, os.fstat(fd).st_mode)   # swapped since: the descriptor is what counts
    except UserError:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def dir_lock(state_dir: Path, *, quiet: bool = False, shared: bool = False) -> Iterator[None]:
    """Hold the directory's lock: exclusive for runs, shared (and writing nothing) for readers."""
    fd = _open(state_dir, shared)
    if fd is None:
        yield
        return
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
            with contextlib.suppress(OSError):      # only for the waiting message: a full disk is no reason to stop
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
        _held[fd] = os.getpid()
        yield
    finally:
        _held.pop(fd, None)
        os.close(fd)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so doit saves the work already finished.

    A signal that lands while a finalizer runs (a multiprocessing queue closing) has its
    KeyboardInterrupt swallowed there, and Python prints it as "Exception ignored";
    `sys.unraisablehook` delivers it again instead, outside the finalizer.
    """
    def handler(signum, frame):
        if not sys.is_finalizing():
            raise KeyboardInterrupt

    def unraisable(info) -> None:
        if info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt):
            # sent from another thread once this hook has returned: a handler run inside the hook would raise
            # there, and Python would print that as a traceback of the hook
            import threading
            again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM))
            again.daemon = True         # never keeps an exiting process alive
            again.start()
            return
        hook(info)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:          # not the main thread: leave signals alone
        yield
        return
    hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, previous)

