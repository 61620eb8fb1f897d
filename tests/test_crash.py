"""kill -9 in the middle of a build: finished units are kept, nothing torn or left over, the lock does not block."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from pypto_build import synth
from pypto_build.api import build


def test_sigkill_mid_build_keeps_finished_units_and_leaves_no_debris(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=24)
    proc = subprocess.Popen(["pypto-build", "build", "-q", "-j", "2", str(root)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(root.rglob("*.so"))) < 6:     # some units finished
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(root.rglob("*.so")))
    result = build(root)                                     # the lock does not block; the run completes
    assert result.ok
    assert len(result.compiled) < 25, "finished units were kept across kill -9"
    assert len(result.compiled) + len(result.names("up-to-date", "compile:")) \
        + len(result.names("up-to-date", "orch:")) == 25
    assert done_before >= 6
    assert not [p for p in root.rglob("*") if ".tmp" in p.name], "no temp files left behind"
    assert build(root).compiled == []
