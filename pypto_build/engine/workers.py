"""doit's `-j` worker processes: never left running, never waited for forever.

doit's multiprocessing runner can hang or leak a run in several ways, each
found by the crash harness (tests/test_crash.py):

* a worker killed outright leaves the compiler it runs (in a session of its
  own) running: a stopped run asks its workers to leave with SIGTERM first,
  and a worker leaving on a signal kills that compiler's group (procs.py);
* a worker inherits the directory lock's fd: after `kill -9` of the leader
  alone, orphan workers kept the lock and the next run waited forever
  (fork hooks: the worker closes it and dies with its parent; registered by
  `install_fork_hooks` when a run first takes the lock, never on import);
* Ctrl-C printed a traceback per worker (fork hooks: workers exit quietly);
* a worker forked at the instant of an interrupt never sees it, and
  multiprocessing joins it at exit, forever (`supervise` kills the workers a
  stopped run started; `exits.exit_now` skips the exit-time joins);
* the user's signal can land on a helper thread instead of the main one, which
  then waits for results from workers that already left (the watcher delivers
  it to the main thread), or during the fork of a worker, where its
  KeyboardInterrupt would be raised in a fork hook and dropped by os.fork (the
  hook takes the pending signal and the watcher delivers it again);
* a worker that dies on its own (OOM killer, crash) never sends its result
  (the watcher stops the run with `WorkerDied`). Each worker tells the watcher
  its pid from its fork hook, and the watcher looks at its exit status without
  reaping it (`os.waitid` with `WNOWAIT`): a worker that died at once is seen
  too, and multiprocessing still reaps its own children.
"""
from __future__ import annotations

import os
import signal
import struct
import threading
import time
from typing import Callable

from . import lock
from ..core import procs
from ..errors import WorkerDied

POLL_S = 0.2
GRACE_S = 1.0           # the main thread normally reacts to the user's signal well within this
_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_QUIET_EXITS = (128 + signal.SIGINT, 128 + signal.SIGTERM)     # a worker leaving on the user's Ctrl-C / kill
_watching = threading.Event()   # a _Watcher runs: it resends the signals a fork hook took (_taken)
_taken: list[int] = []
_PID = struct.Struct("=i")
_pids: tuple[int, int] | None = None    # the pipe a watched run's workers send their pid on (read, write end)
_hooks = threading.Lock()
_hooked = False


# --- fork hooks: every process forked while a run holds the lock is a worker ---------------------------


def _exit_quietly(signum: int, frame: object) -> None:
    procs.kill_running()        # a compiler or ptoas this worker waits for goes too (its own session)
    os._exit(128 + signum)


def _before_fork() -> None:
    """Hold Ctrl-C / SIGTERM across a fork during a run: the child installs its handlers first."""
    if lock.held():
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)


def _after_fork_in_parent() -> None:
    if lock.held():
        if _watching.is_set():
            # A signal that came during the fork would have its handler run inside the fork hooks (ours or
            # another module's), where os.fork drops the KeyboardInterrupt: take it, the watcher resends it.
            while (info := signal.sigtimedwait(_SIGNALS, 0)) is not None:
                _taken.append(info.si_signo)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def _after_fork_in_child() -> None:
    """Drop the lock, tell the watcher this pid, do not outlive the run, leave Ctrl-C / SIGTERM to the leader."""
    global _pids
    owner = lock.release_inherited()
    if owner is None:
        return
    pipe, _pids = _pids, None
    if pipe is not None:
        try:
            os.write(pipe[1], _PID.pack(os.getpid()))
        except OSError:
            pass                            # the watcher stopped: the run is over
        for fd in pipe:
            os.close(fd)
    for signum in _SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:      # nohup'ed / background: stay ignored
            signal.signal(signum, _exit_quietly)
    procs.die_with_parent(owner)            # killed when the leader dies; gone already: leave
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def install_fork_hooks() -> None:
    """Treat every process forked while this process holds a directory lock as a doit worker (the hooks
    above; they do nothing while no lock is held). Once per process, before its first run takes the lock."""
    global _hooked
    with _hooks:
        if not _hooked:
            os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                                after_in_child=_after_fork_in_child)
            _hooked = True


# --- supervising a run ---------------------------------------------------------------------------------


def supervise(run: Callable[[], int], *, watch: bool, where: str) -> int:
    """`run()` (a doit run) with its new worker processes killed when it stops early.

    `watch` (a `-j` run in the main thread, with SIGTERM raising KeyboardInterrupt):
    a worker that dies while the run goes on interrupts it, and `WorkerDied` is raised.
    """
    before = _children()
    watcher = _Watcher() if watch and threading.current_thread() is threading.main_thread() else None
    try:
        rc = run()
    except BaseException:
        if watcher is not None:
            watcher.stop()                  # before the workers are stopped below
        _taken.clear()                      # the run stops anyway
        _stop(_children() - before)     # ours only, not a library caller's
        if watcher is not None and watcher.dead is not None:
            pid, code = watcher.dead
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            raise WorkerDied(f"{where}: build worker process {pid} died ({how}; out of memory?); the run was "
                             "stopped and finished units are kept — run the build again, with a smaller -j if "
                             "memory is short") from None
        raise
    finally:
        if watcher is not None:
            watcher.stop()
    if _taken:                              # the user's signal came during a fork at the very end
        signum = _taken.pop()
        _taken.clear()
        signal.raise_signal(signum)
    return rc


def _stop(workers: set) -> None:
    """SIGTERM, so each worker kills the compiler it runs (procs.kill_running), then SIGKILL whatever
    is left after GRACE_S. The user's signals wait meanwhile: a second Ctrl-C must not cut it short."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        for child in workers:
            child.terminate()
        deadline = time.monotonic() + GRACE_S
        for child in workers:
            child.join(max(0.0, deadline - time.monotonic()))
    finally:
        for child in workers:
            if child.exitcode is None:
                child.kill()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _children() -> set:
    """This process's live multiprocessing children."""
    import multiprocessing

    return set(multiprocessing.active_children())


def _exit_code(pid: int) -> int | None:
    """A worker's exit status (-N: killed by signal N) once it has ended, without reaping it (multiprocessing
    does); None while it runs, or once multiprocessing reaped it (at the end of the run)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


class _Watcher:
    """A thread that interrupts the main thread when a worker the run forked dies, or when the
    workers left on the user's signal but the main thread did not get it."""

    def __init__(self) -> None:
        global _pids
        self.dead: tuple[int, int] | None = None
        self._main = threading.main_thread().ident
        self._stopped = threading.Event()
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[0], False)
        _pids = self._pipe
        self._thread = threading.Thread(target=self._watch, name="pypto-build worker watch", daemon=True)
        self._thread.start()
        _watching.set()

    def _reported(self) -> set[int]:
        """The pids of the workers forked since the last look (each sends its own: `_after_fork_in_child`)."""
        try:
            data = os.read(self._pipe[0], 4096)
        except (BlockingIOError, OSError):
            return set()
        return {pid for (pid,) in _PID.iter_unpack(data[: len(data) - len(data) % _PID.size])}

    def _watch(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)      # never take the user's signal ourselves
        running: set[int] = set()
        ended: dict[int, int] = {}          # pid -> exit status, kept once seen (multiprocessing may reap it)
        quiet_since: float | None = None
        while not self._stopped.wait(POLL_S):
            if _taken:
                signal.pthread_kill(self._main, _taken.pop())      # -> KeyboardInterrupt in the run
                _taken.clear()
                continue
            running |= self._reported()
            for pid in list(running):
                code = _exit_code(pid)
                if code is not None:
                    running.discard(pid)
                    ended[pid] = code
            dead = next(((pid, c) for pid, c in ended.items() if c not in (0, *_QUIET_EXITS)), None)
            if dead is not None:
                self.dead = dead
            elif any(c in _QUIET_EXITS for c in ended.values()):
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since < GRACE_S:
                    continue
            else:
                continue
            if not self._stopped.is_set():
                signal.pthread_kill(self._main, signal.SIGTERM)     # -> KeyboardInterrupt in the run
            return

    def stop(self) -> None:
        global _pids
        _watching.clear()
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        if _pids is self._pipe:
            _pids = None
            for fd in self._pipe:
                os.close(fd)
