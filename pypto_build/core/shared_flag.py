"""One flag shared by every process of a run, raised once: "the remote cache failed", "distcc fell back".

The run's leader makes it before any worker starts; doit's `-j` workers inherit it
across fork, and `pypto-build ci -j N` hands it to its spawned processes when they
start (such a flag can cross spawn only at process start: `for_spawn`). The first
process to raise it learns so (it prints the run's one line); the rest see it raised.
"""
from __future__ import annotations

LOCK_S = 1.0


class SharedFlag:
    """A byte in shared memory; `raise_once` is True for the one caller that raised it first."""

    def __init__(self, for_spawn: bool = False) -> None:
        import multiprocessing
        mp_context = multiprocessing.get_context("spawn") if for_spawn else multiprocessing.get_context()
        self._flag = mp_context.Value("b", 0)

    @property
    def raised(self) -> bool:
        return bool(self._flag.get_obj().value)         # one byte: read without the lock

    def raise_once(self) -> bool:
        """Raise the flag; True for the one caller in the run that raised it first (it tells the user)."""
        lock = self._flag.get_lock()
        held = lock.acquire(timeout=LOCK_S)     # a worker killed inside this section must not block the rest
        try:
            first = held and not self._flag.get_obj().value
            self._flag.get_obj().value = 1
        finally:
            if held:
                lock.release()
        return first
