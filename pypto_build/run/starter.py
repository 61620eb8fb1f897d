"""How a run's process starts: cold (`spawn`, a new interpreter) or warm (`WarmStarter`, forked).

`child.in_child` by default starts `python -m pypto_build.run.child` for every run,
which pays the interpreter's start and torch's import (about 1.3 s) each time.
`WarmStarter` starts one server process (`warm_server`, `python -m
pypto_build.run.warm_server`) that imports them once; every run is a new process
forked from it. The server never runs a program and never loads a kernel, so each
run starts from a clean address space: a kernel rebuilt since the last run is
loaded afresh (reloading a changed shared object in one process is exactly what
this avoids), and a crash, an `exit()` or a hang kills only that run's process.

The forked process takes its own session (so a stop kills its L3 rank workers
with it) and dies with the server (PR_SET_PDEATHSIG), which dies with us: started
by `start_server` from the thread that outlives the runs, so even a `kill -9` of
ours leaves nothing behind.
"""
from __future__ import annotations

import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from ..core import procs
from ..errors import ProgramFailed
from .warm_server import STATUS

# Imported once by the server: what every run of the host runtime needs (an ImportError is skipped).
PRELOAD = ("torch", "pypto_build.run.child", "pypto_build.run.golden", "pypto_build.run.execution",
           "pypto_build.builddir.sidecars", "pypto_build.platforms.host.run", "pypto_build.platforms.host.runtime.executor",
           "pypto_build.platforms.l3_driver")
SIMPLER_PRELOAD = ("pypto_build.platforms.simpler.runner", "pypto_build.platforms.simpler.run",
                   "pypto_build.platforms.simpler.l3", "simpler._log",
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


class WarmStarter:
    """Starts each run by forking a server that has torch and the runtime imported (`start()`)."""

    def __init__(self, platform: str = "host") -> None:
        self.preload = list(PRELOAD + (SIMPLER_PRELOAD if platform != "host" else ()))
        self._lock = threading.Lock()
        self._server: subprocess.Popen | None = None
        self._socket: socket.socket | None = None

    def start_server(self) -> None:
        """Start the server now, from this thread: it dies when this thread ends (or the process is killed),
        so call it from the thread that outlives the runs — the main thread. The first run would start it
        from whichever thread runs first (a warm-up thread's death would kill it)."""
        with self._lock:
            self._ensure_server()

    def _ensure_server(self) -> socket.socket:
        if self._server is not None and self._server.poll() is None and self._socket is not None:
            return self._socket
        if self._socket is not None:
            self._socket.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._server = subprocess.Popen(
                [sys.executable, "-P", "-m", "pypto_build.run.warm_server", str(os.getpid()), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.sendall(pickle.dumps((list(sys.path), self.preload)))
        self._socket = ours
        return ours

    def close(self) -> None:
        """Stop the server (it leaves when its socket closes; its runs die with it)."""
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None
            if self._server is not None:
                try:
                    self._server.wait(procs.REAP_S)
                except subprocess.TimeoutExpired:
                    self._server.kill()
                    self._server.wait()
                self._server = None

    def warm_up(self) -> float:
        """Start the server and wait until it has imported torch (one empty run); the seconds that took."""
        start = time.perf_counter()
        started = self.start(Path.cwd(), _nothing)
        started.inbox.close()
        started.outbox.close()
        started.process.join(None)
        return time.perf_counter() - start

    def start(self, sub_dir: Path, entry: Callable[[Connection, Connection], None]) -> Started:
        """A new process forked from the server, running `entry` (the child side of `child.in_child`) in `sub_dir`."""
        request = pickle.dumps((entry, str(sub_dir)))
        child_in, to_child = os.pipe()
        from_child, child_out = os.pipe()
        status, reply = os.pipe()
        try:
            with self._lock:
                for attempt in (1, 2):          # a server that died since the last run is started again
                    try:
                        socket.send_fds(self._ensure_server(), [request], [child_in, child_out, reply])
                        break
                    except OSError:
                        if attempt == 2:
                            raise
                        self._server = None
        except BaseException:
            for fd in (to_child, from_child, status):
                os.close(fd)
            raise
        finally:
            for fd in (child_in, child_out, reply):
                os.close(fd)
        return Started(WarmRun(status), Connection(from_child, writable=False), Connection(to_child, readable=False))

class WarmRun:
    """A run forked by the server: its pid, and its exit status as the server (its parent) reports it."""

    def __init__(self, status: int) -> None:
        self._status = status
        self._code: int | None = None
        pid = _read_status(status)
        if pid is None:                         # the server died before forking it
            os.close(status)
            raise ProgramFailed("the warm run server died before it could start the run; run again")
        self.pid = pid

    @property
    def exitcode(self) -> int | None:
        """Its exit status (-N: killed by signal N); None while it runs."""
        self.join(0)
        return self._code

    def join(self, timeout: float | None = None) -> None:
        """Wait up to `timeout` s (None: until it ends) for its exit status."""
        if self._status < 0:
            return
        with selectors.DefaultSelector() as selector:
            selector.register(self._status, selectors.EVENT_READ)
            if not selector.select(timeout):
                return
        code = _read_status(self._status)
        os.close(self._status)
        self._status = -1
        self._code = code if code is not None else -signal.SIGKILL     # the server died first: so did the run

    def kill(self) -> None:
        if self.exitcode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _read_status(fd: int) -> int | None:
    """One number from a status pipe (None: it closed first)."""
    data = b""
    while len(data) < STATUS.size:
        chunk = os.read(fd, STATUS.size - len(data))
        if not chunk:
            return None
        data += chunk
    return STATUS.unpack(data)[0]


def _nothing(inbox: Connection, outbox: Connection) -> None:
    """The warm-up run: the server's imports are done once it has forked this."""


def spawn(sub_dir: Path, entry: Callable | None = None) -> "Spawned":
    """The cold way (`child.in_child`'s default): a new interpreter runs `python -P -m pypto_build.run.child`
    (whose `__main__` is the entry)."""
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
