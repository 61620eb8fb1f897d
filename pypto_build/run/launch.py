"""How a run's process starts: cold (`spawn`, a new interpreter) or warm (`WarmLauncher`, forked).

`run_program` by default starts `python -m pypto_build.run.child` for every run,
which pays the interpreter's start and torch's import (about 1.3 s) each time.
`WarmLauncher` starts one server process (multiprocessing's *forkserver*) that
imports them once; every run is a new process forked from it. The server never
runs a program and never loads a kernel, so each run starts from a clean address
space: a kernel rebuilt since the last run is loaded afresh (reloading a changed
shared object in one process is exactly what this avoids), and a crash, an
`exit()` or a hang kills only that run's process.

The forked process takes its own session (so a stop kills its L3 rank workers
with it) and dies with the server (PR_SET_PDEATHSIG), which dies with us: started by
`start_server` from the thread that outlives the runs, it sets PR_SET_PDEATHSIG itself
(`warm_server`, its first import), so even a `kill -9` of ours leaves nothing behind.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from .. import procs

# Imported once by the server: its guard first, then what every run of the host runtime needs (an ImportError
# is skipped).
PRELOAD = ("pypto_build.run.warm_server", "torch", "pypto_build.run.child", "pypto_build.run.golden",
           "pypto_build.run.execution", "pypto_build.sidecars", "pypto_build.platforms.host_run",
           "pypto_build.runtime.executor", "pypto_build.runtime.l3_driver")
SIMPLER_PRELOAD = ("pypto_build.platforms.simpler_runner", "pypto_build.platforms.simpler_run",
                   "pypto_build.platforms.simpler_l3", "simpler._log",
                   "simpler.task_interface", "simpler.worker", "simpler_setup.log_config",
                   "simpler_setup.torch_interop", "simpler_setup.environment")


class Started:
    """A program's process: the pipes to it, its exit status, and how to stop it (its whole session)."""

    def __init__(self, process, inbox: Connection, outbox: Connection) -> None:
        self.process, self.inbox, self.outbox = process, inbox, outbox
        self.parent = None          # the forked process's parent is the server: it checks nothing

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    def stop(self, grace: float = 0.0) -> None:
        """Let it leave for up to `grace` s, then SIGKILL its session and reap it."""
        self.process.join(grace)
        if self.process.exitcode is None:
            procs.kill_group(self.process.pid)      # its session (setsid): rank workers too
            self.process.kill()                     # in case it died before its setsid
        self.process.join(procs.REAP_S)


class WarmLauncher:
    """Starts each run by forking a server that has torch and the runtime imported (`start()`)."""

    def __init__(self, platform: str = "host") -> None:
        import multiprocessing

        self.context = multiprocessing.get_context("forkserver")
        preload = PRELOAD + (SIMPLER_PRELOAD if platform != "host" else ())
        self.context.set_forkserver_preload(list(preload) + _main_script())

    def start_server(self) -> None:
        """Start the server now, from this thread: it dies when this thread ends (or the process is killed),
        so call it from the thread that outlives the runs — the main thread. The first run would start it
        from whichever thread runs first (a warm-up thread's death would kill it)."""
        from multiprocessing import forkserver

        from .warm_server import PARENT

        os.environ[PARENT] = str(os.getpid())       # for the server only (it reads it at once)
        try:
            forkserver.ensure_running()
        finally:
            os.environ.pop(PARENT, None)

    def warm_up(self) -> float:
        """Start the server and wait until it has imported torch (one empty run); the seconds that took."""
        start = time.perf_counter()
        process = self.context.Process(target=_nothing, daemon=True, name="pypto-build-warm-up")
        process.start()
        process.join()
        return time.perf_counter() - start

    def start(self, sub_dir: Path, entry: Callable[[Connection, Connection], None]) -> Started:
        """A new process forked from the server, running `entry` (the child side of `run_program`) in `sub_dir`."""
        from_child, to_parent = self.context.Pipe(duplex=False)
        from_parent, to_child = self.context.Pipe(duplex=False)
        process = self.context.Process(target=_forked, args=(entry, str(sub_dir), from_parent, to_parent), daemon=True,
                                       name="pypto-build-run")
        process.start()
        from_parent.close()
        to_parent.close()
        return Started(process, from_child, to_child)


def _main_script() -> list[str]:
    """["__main__"] when the main module is a script file (`pypto-build`, `doit`, a user's script).

    A forked run re-imports such a script unless the server imported it first (multiprocessing's rule
    for forkserver children); a module run with -m or -c needs nothing.
    """
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return ["__main__"] if getattr(main, "__spec__", None) is None and path and os.path.isfile(path) else []


def _nothing() -> None:
    """The warm-up run: the server's imports are done once it has forked this."""


def spawn(sub_dir: Path, entry: Callable | None = None) -> "Spawned":
    """The cold way (`run_program`'s default): a new interpreter runs `python -P -m pypto_build.run.child`
    (whose `__main__` is the entry)."""
    import sys

    read_fd, child_w = os.pipe()
    child_r, write_fd = os.pipe()
    proc = procs.start([sys.executable, "-P", "-m", "pypto_build.run.child", str(child_r), str(child_w)],
                       pass_fds=(child_r, child_w), cwd=str(sub_dir), stdin=subprocess.DEVNULL)
    os.close(child_r)
    os.close(child_w)
    return Spawned(proc, Connection(read_fd, writable=False), Connection(write_fd, readable=False))


class Spawned:
    """A child started by `spawn`: its pipes, exit status and stop (its process group)."""

    def __init__(self, proc: subprocess.Popen, inbox: Connection, outbox: Connection) -> None:
        self.proc, self.inbox, self.outbox = proc, inbox, outbox
        self.parent = os.getpid()   # the child leaves at once when this process is already gone

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def stop(self, grace: float = 0.0) -> None:
        procs.stop(self.proc, grace=grace)


def _forked(entry: Callable[[Connection, Connection], None], sub_dir: str, inbox: Connection,
            outbox: Connection) -> None:
    """The forked process: dies with the server, own session, the sub-build as working directory, then the
    child's protocol."""
    from .warm_server import SERVER

    procs.die_with_parent(SERVER)
    try:
        os.setsid()
    except OSError:
        pass
    os.chdir(sub_dir)
    try:
        entry(inbox, outbox)
    finally:
        outbox.close()
        atexit._run_exitfuncs()     # what a run registered (the runtime's clean-ups); multiprocessing skips them
