"""The L3 driver's messages to rank workers: a failure to send is one error, a long $TMPDIR still binds."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from pypto_build.platforms.host.runtime import rank_channel
from pypto_build.platforms.host.runtime.executor import ExecutorError


def test_a_message_round_trips():
    msg = ("run", 3, "chip_a", "/d", [1.5, 2], ["a", "b"], None)
    assert rank_channel.unpack(rank_channel.pack(msg, "rank 0")) == msg


def test_what_cannot_be_sent_fails_the_dispatch_naming_it():
    with pytest.raises(ExecutorError, match=r"^rank 1 \(device 4\), dispatch d0 \(chip_b\): cannot send the "
                                            r"arguments .*TypeError: cannot pickle '_thread.lock'"):
        rank_channel.pack(("run", threading.Lock()), "rank 1 (device 4), dispatch d0 (chip_b)")


@pytest.mark.parametrize("moved", [False, True])
def test_multiprocessing_sockets_fit_whatever_tmpdir_is(tmp_path, moved):
    tmpdir = tmp_path / ("t" * 100) if moved else Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))
    tmpdir.mkdir(exist_ok=True)
    code = ("from multiprocessing import util; from multiprocessing.connection import Listener\n"
            "from pypto_build.platforms.host.runtime import rank_channel\n"
            "rank_channel.socket_dir_that_fits(); print(util.get_temp_dir())\n"
            "Listener(family='AF_UNIX').close()\n")            # binds a socket where DupFd would
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TMPDIR": str(tmpdir)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(str(tmpdir)) is not moved, out.stdout
    assert list(tmpdir.iterdir()) == []                 # multiprocessing removed its folder at exit
    if not moved:
        tmpdir.rmdir()
