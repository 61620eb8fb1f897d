"""doit's `-j` worker processes: never left running, never waited for forever.

doit's multiprocessing runner has two ways to hang a run: a worker forked at
the instant of an interrupt never sees it (multiprocessing then joins it at
exit, forever), and a worker that dies on its own (the OOM killer, a crash)
never sends its result (the leader waits for it forever). `supervise` runs the
build so that both end: the workers it started are killed when the run stops,
and a worker death interrupts the run with one line saying so.
"""
from __future__ import annotations

import multiprocessing
import signal
import threading
from typing import Callable

from .errors import WorkerDied

POLL_S = 0.2
_QUIET_EXITS = (128 + signal.SIGINT, 128 + signal.SIGTERM)     # a worker leaving on the user's Ctrl-C / kill


def supervise(run: Callable[[], int], *, watch: bool, where: str) -> int:
    """`run()` (a doit run) with its new worker processes killed when it stops early.

    `watch` (a `-j` run in the main thread, with SIGTERM raising KeyboardInterrupt):
    a worker that dies while the run goes on interrupts it, and `WorkerDied` is raised.
    """
    before = set(multiprocessing.active_children())
    watcher = _Watcher(before) if watch and threading.current_thread() is threading.main_thread() else None
    try:
        return run()
    except BaseException:
        if watcher is not None:
            watcher.stop()                  # before the workers are killed below
        # SIGKILL ours only: a library caller's own children are left alone.
        for child in set(multiprocessing.active_children()) - before:
            child.kill()
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


def _started_children() -> set:
    """Children started and not yet reaped, dead ones included (`active_children()` reaps a dead one
    before we could see it: a worker killed within the first poll would go unnoticed)."""
    children = getattr(multiprocessing.process, "_children", None)
    return set(children) if children is not None else set(multiprocessing.active_children())


class _Watcher:
    """A thread that interrupts the main thread when a worker started after `known` dies."""

    def __init__(self, known: set) -> None:
        self.known = known
        self.dead: tuple[int, int] | None = None
        self._main = threading.main_thread().ident
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pypto-build worker watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        seen: set = set()
        while not self._stopped.wait(POLL_S):
            seen |= _started_children() - self.known
            for child in seen:
                code = child.exitcode
                if code not in (None, 0, *_QUIET_EXITS) and not self._stopped.is_set():
                    self.dead = (child.pid, code)
                    signal.pthread_kill(self._main, signal.SIGTERM)     # -> KeyboardInterrupt in the run
                    return

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
