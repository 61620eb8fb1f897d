"""The warm run server: a process that imports torch and the runtime once; every run is forked from it.

`starter.WarmStarter` starts it as `python -P -m pypto_build.run.warm_server STARTER FD`.
`main` first makes the server die with its starter (PR_SET_PDEATHSIG), so a `kill -9`
of the watch kills it too, and with it every run forked from it (each dies with the
server); then it reads `(sys.path, modules)` from the socket FD, imports the modules
(an ImportError is skipped) and serves. Ctrl-C in the terminal is the starter's to
handle: the server ignores it.

The protocol, one message per request on the socket (AF_UNIX, SOCK_SEQPACKET): a
pickled `(entry, sub_dir)` with three descriptors — the run's inbox, its outbox and a
status pipe. The server forks; the run takes its own session, dies with the server,
works in `sub_dir` and calls `entry(inbox, outbox)`; the server writes the run's pid
on the status pipe at once, and its exit status (-N: killed by signal N) once it has
reaped it. The server leaves when the socket closes (the starter closed it, or died).
Not multiprocessing's forkserver: its only hook is a preload import, and a run stuck in a
kernel held the server's "alive" pipe open, so the server never saw the watch go and each
kept the other alive.

A run leaves with `sys.exit`: the exit handlers run (those of the run, the runtime's
clean-ups, and of what the server imported), and the last of them, registered before
anything else, leaves at once (`os._exit`) — tearing down an interpreter with torch
loaded would cost every run a second or more.
"""
from __future__ import annotations

import atexit
import importlib
import os
import pickle
import selectors
import signal
import socket
import struct
import sys
from multiprocessing.connection import Connection

from ..core import procs

STATUS = struct.Struct("=q")        # a pid, then an exit status, on a run's status pipe
REQUEST_BYTES = 1 << 16
_exit_status = 0                    # what `_leave_now` exits with


def main(argv: list[str]) -> None:
    """The server (`python -m pypto_build.run.warm_server STARTER FD`); in a run forked from it, the run."""
    global _exit_status
    starter, fd = int(argv[0]), int(argv[1])
    atexit.register(_leave_now)             # first registered: runs last
    procs.die_with_parent(starter)          # killed when the starter dies; gone already: leave
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with socket.socket(fileno=fd) as server:
        setup = server.recv(REQUEST_BYTES)
        if not setup:
            return
        path, modules = pickle.loads(setup)
        sys.path[:] = path
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        run = serve(server)
    if run is not None:                     # this process is a run forked from the server
        _exit_status = 1                    # an exception escaping `entry`: printed, status 1
        try:
            run()
            _exit_status = 0
        except SystemExit as exc:
            _exit_status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            raise


def serve(server: socket.socket):
    """Fork a run for each request until the socket closes (None); in a forked run, the run to call."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)      # wakes the selector (set_wakeup_fd)
    status: dict[int, int] = {}             # run pid -> its status pipe
    with selectors.DefaultSelector() as selector:
        selector.register(server, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _events in selector.select():
                if key.fileobj == wake_r:
                    _drain(wake_r)
                    _reap(status)
                    continue
                message, fds, _flags, _address = socket.recv_fds(server, REQUEST_BYTES, 3)
                if not message:
                    return None             # the starter is gone: leave (the runs die with us)
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    continue
                inbox, outbox, reply = fds
                server_pid = os.getpid()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    for fd in (wake_r, wake_w, reply, *status.values()):
                        os.close(fd)
                    selector.close()
                    server.close()
                    return lambda: _run(pickle.loads(message), server_pid, inbox, outbox)
                os.close(inbox)
                os.close(outbox)
                try:
                    os.write(reply, STATUS.pack(pid))
                except OSError:
                    pass                    # the starter gave up on it
                status[pid] = reply


def _run(request: tuple, server: int, inbox: int, outbox: int) -> None:
    """A forked run: dies with the server, its own session, the sub-build as working directory, the entry."""
    entry, sub_dir = request
    procs.die_with_parent(server)
    try:
        os.setsid()
    except OSError:
        pass
    os.chdir(sub_dir)
    sender = Connection(outbox, readable=False)
    try:
        entry(Connection(inbox, writable=False), sender)
    finally:
        sender.close()


def _reap(status: dict[int, int]) -> None:
    """Send each ended run's exit status on its status pipe, and close it."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply = status.pop(pid, None)
        if reply is not None:
            try:
                os.write(reply, STATUS.pack(os.waitstatus_to_exitcode(code)))
            except OSError:
                pass
            os.close(reply)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _leave_now() -> None:
    """The last exit handler: output flushed, leave without the interpreter's teardown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(_exit_status)


if __name__ == "__main__":
    main(sys.argv[1:])
