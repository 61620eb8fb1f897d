"""The warm run server (`run/warm_server.py`, started by `starter.WarmStarter`): each run forked in its own
session and its sub-build, its exit handlers run, its exit status reported, and nothing outliving the process
that started the server, even after `kill -9`.

The server preloads nothing here (`starter.preload = []`): what is tested is how it forks and reports, not
torch's import. The runs' entries are this module's functions (the server imports them by name).
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

from pypto_build.run import WarmStarter

WAIT_S = 60.0


def _writes_at_exit(inbox, outbox) -> None:
    import atexit

    target = pickle.loads(inbox.recv_bytes())
    atexit.register(Path(target).write_text, "exit handlers ran")       # as the runtime's clean-ups do
    outbox.send_bytes(pickle.dumps((os.getcwd(), os.getsid(0) == os.getpid())))


def _exits(inbox, outbox) -> None:
    sys.exit(pickle.loads(inbox.recv_bytes()))


def _hangs(inbox, outbox) -> None:
    outbox.send_bytes(pickle.dumps(os.getpid()))
    time.sleep(600)


def quiet_starter() -> WarmStarter:
    starter = WarmStarter()
    starter.preload = []
    starter.start_server()
    return starter


def gone(pid: int) -> bool:
    """Whether `pid` no longer runs (a zombie not reaped yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not all(gone(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if not gone(p)]


def test_a_run_works_in_its_sub_build_and_session_and_its_exit_handlers_run(tmp_path):
    starter = quiet_starter()
    marker = tmp_path / "marker"
    started = starter.start(tmp_path, _writes_at_exit)
    started.outbox.send_bytes(pickle.dumps(str(marker)))
    cwd, own_session = pickle.loads(started.inbox.recv_bytes())
    started.stop(grace=WAIT_S)
    assert (cwd, own_session, started.returncode) == (str(tmp_path), True, 0)
    assert marker.read_text() == "exit handlers ran"


def test_a_run_reports_its_exit_status_and_a_stopped_run_its_signal(tmp_path):
    starter = quiet_starter()
    exits = starter.start(tmp_path, _exits)
    exits.outbox.send_bytes(pickle.dumps(3))
    exits.stop(grace=WAIT_S)
    assert exits.returncode == 3
    hangs = starter.start(tmp_path, _hangs)
    pid = pickle.loads(hangs.inbox.recv_bytes())
    assert hangs.returncode is None and not gone(pid)
    hangs.stop()
    assert hangs.returncode == -signal.SIGKILL and wait_gone([pid]) == []


STARTER = """
import os, pickle, sys, time
from pathlib import Path
from test_warm_server import _hangs, quiet_starter
starter = quiet_starter()
started = starter.start(Path(sys.argv[1]), _hangs)
print(starter._server.pid, pickle.loads(started.inbox.recv_bytes()), flush=True)
time.sleep(600)
"""


def test_kill_9_of_the_starter_leaves_neither_the_server_nor_its_runs(tmp_path):
    """The server dies with the process that started it (PR_SET_PDEATHSIG, and its socket closing), and a run
    stuck in its work dies with the server."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                               env=env)
    try:
        server, run = map(int, starter.stdout.readline().split())
        assert not gone(server) and not gone(run)
        starter.kill()
        starter.wait(WAIT_S)
        assert wait_gone([server, run]) == []
    finally:
        starter.kill()
        starter.wait(WAIT_S)
