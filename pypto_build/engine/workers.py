"""doit's `-j` worker processes: never left running, never waited for forever.

doit's multiprocessing runner can hang or leak a run in several ways, each
found by the crash harness (tests/test_crash.py):

* a worker killed outright leaves the compiler it runs (in a session of its
  own) running: a stopped run asks its workers to leave with SIGTERM first,
  and a worker leaving on a signal kills that compiler's group (procs.py);
* a worker inherits the directory lock's fd: after `kill -9` of the leader
  alone, orphan workers kept the lock and the next run waited forever
  (fork hooks: the worker closes it and dies with its parent);
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
  (the watcher stops the run with `WorkerDied`).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable

from . import lock
from .. import procs
from ..errors import WorkerDied
from .doit_core import deferred

POLL_S = 0.2
GRACE_S = 1.0           # the main thread normally reacts to the user's signal well within this
_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_QUIET_EXITS = (128 + signal.SIGINT, 128 + signal.SIGTERM)     # a worker leaving on the user's Ctrl-C / kill
_watching = threading.Event()   # a _Watcher runs: it resends the signals a fork hook took (_taken)
_taken: list[int] = []


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
    """Drop the lock, do not outlive the run, leave Ctrl-C / SIGTERM to the leader."""
    owner = lock.release_inherited()
    if owner is None:
        return
    for signum in _SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:      # nohup'ed / background: stay ignored
            signal.signal(signum, _exit_quietly)
    procs.die_with_parent(owner)            # killed when the leader dies; gone already: leave
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


# --- supervising a run ---------------------------------------------------------------------------------


def supervise(run: Callable[[], int], *, watch: bool, where: str) -> int:
    """`run()` (a doit run) with its new worker processes killed when it stops early.

    `watch` (a `-j` run in the main thread, with SIGTERM raising KeyboardInterrupt):
    a worker that dies while the run goes on interrupts it, and `WorkerDied` is raised.
    """
    before = _children()
    watcher = _Watcher(before) if watch and threading.current_thread() is threading.main_thread() else None
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


def _multiprocessing():
    """multiprocessing when it is loaded, else None: no process can have been started through it (a build
    without -j never loads it, `doit_core`)."""
    module = sys.modules.get("multiprocessing")
    return None if module is None or deferred(module) else module


def _children() -> set:
    """This process's live multiprocessing children."""
    mp = _multiprocessing()
    return set(mp.active_children()) if mp is not None else set()


def _started_children() -> set:
    """Children started and not yet reaped, dead ones included (`active_children()` reaps a dead one
    before we could see it: a worker killed within the first poll would go unnoticed)."""
    mp = _multiprocessing()
    if mp is None:
        return set()
    children = getattr(mp.process, "_children", None)
    return set(children) if children is not None else set(mp.active_children())


class _Watcher:
    """A thread that interrupts the main thread when a worker started after `known` dies, or when the
    workers left on the user's signal but the main thread did not get it."""

    def __init__(self, known: set) -> None:
        self.known = known
        self.dead: tuple[int, int] | None = None
        self._main = threading.main_thread().ident
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pypto-build worker watch", daemon=True)
        self._thread.start()
        _watching.set()

    def _watch(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)      # never take the user's signal ourselves
        seen: set = set()
        quiet_since: float | None = None
        while not self._stopped.wait(POLL_S):
            if _taken:
                signal.pthread_kill(self._main, _taken.pop())      # -> KeyboardInterrupt in the run
                _taken.clear()
                continue
            seen |= _started_children() - self.known
            codes = {child.pid: child.exitcode for child in seen}
            dead = next(((pid, c) for pid, c in codes.items() if c not in (None, 0, *_QUIET_EXITS)), None)
            if dead is not None:
                self.dead = dead
            elif any(c in _QUIET_EXITS for c in codes.values()):
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since < GRACE_S:
                    continue
            else:
                continue
            if not self._stopped.is_set():
                signal.pthread_kill(self._main, signal.SIGTERM)     # -> KeyboardInterrupt in the run
            return

    def stop(self) -> None:
        _watching.clear()
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
