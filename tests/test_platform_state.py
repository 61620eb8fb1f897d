"""Each platform keeps its build state as it keeps its binaries (issue 25 item 10): switching a directory to
another platform and back compiles nothing, and the one state of before is taken over once, saying so.

Host (real g++, outputs under .pypto_build/host/) against the stand-in platform of `testing.FakePlatform`
(outputs in PyPTO's places): two platforms whose binaries never overlap, as host and a2a3sim. The host units
read system headers (kept as a shared set in the platform's state folder); the fake ones read none, so a fake
build that pruned the host's sets would show here as host units rebuilding.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pypto_build.compile import header_sets
from pypto_build.api import build
from pypto_build.pipeline import run
from pypto_build.options import Request
from pypto_build.engine.explanation import explain
from pypto_build.plan.graph import load_graph
from pypto_build.builddir.state_dir import STATE_DB, STATE_DIR, state_folder
from pypto_build.testing import FakePlatform, synth

UNITS = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic", "compile:aiv/main_incore_1_aiv",
         "orch:main"]


def on_host(root: Path) -> list[str]:
    """The compile units a host build ran."""
    return build(root, platform="host").compiled


def on_fake(root: Path) -> list[str]:
    return run(root, Request(), graph=load_graph(root, platform=FakePlatform())).compiled


def stale(root: Path, platform) -> list[str]:
    return [e.task for e in explain(load_graph(root, platform=platform)) if e.status != "up-to-date"]


def test_switching_to_another_platform_and_back_compiles_nothing(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=3)
    assert on_host(root) == UNITS and on_fake(root) == UNITS        # each platform's first build
    host_sets = sorted(p.name for p in (root / header_sets.sets_dir(state_folder("host"))).iterdir())
    assert host_sets, "the host units read system headers: their set is kept in the host's state folder"
    for _ in range(2):
        assert stale(root, "host") == [] and on_host(root) == []
        assert stale(root, FakePlatform()) == [] and on_fake(root) == []
    assert sorted(p.name for p in (root / header_sets.sets_dir(state_folder("host"))).iterdir()) == host_sets

    # Each platform's state still sees its own edits: one kernel edited, each platform compiles it once.
    kernel = root / "kernels/aiv/main_incore_1_aiv.cpp"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    assert on_fake(root) == ["compile:aiv/main_incore_1_aiv"] and on_fake(root) == []
    assert on_host(root) == ["compile:aiv/main_incore_1_aiv"] and on_host(root) == []


def test_the_state_of_before_is_taken_over_once_saying_so(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=3)
    on_host(root)
    # The layout a pypto_build without per-platform state left: one database and its header sets in .pypto_build/.
    own, legacy = root / state_folder("host"), root / STATE_DIR
    os.replace(own / STATE_DB, legacy / STATE_DB)
    os.replace(own / "headers", legacy / "headers")
    shutil.rmtree(root / STATE_DIR / "state")

    assert stale(root, "host") == []                    # explain reads what a build would take over ...
    assert not (root / STATE_DIR / "state").exists()    # ... and moves nothing
    cli = [sys.executable, "-m", "pypto_build", "build", "--platform", "host", str(root)]
    first = subprocess.run(cli, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert ("pypto-build: the build state is now kept per platform; .pypto_build/state.sqlite3 moved to "
            ".pypto_build/state/host/ (units built last for another platform rebuild once)") in first.stdout
    assert first.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 4 up to date"
    assert (own / STATE_DB).is_file() and not (legacy / STATE_DB).exists()
    assert any((own / "headers").iterdir()) and not (legacy / "headers").exists()
    os.utime(root / "kernels/aiv/main_incore_1_aiv.cpp")        # past the no-op record: doit decides again
    again = subprocess.run(cli, capture_output=True, text=True, timeout=300)
    assert "kept per platform" not in again.stdout and again.stdout.splitlines()[-1].startswith("pypto-build: 0 "
                                                                                                "compiled")
    assert on_fake(root) == UNITS                     # the state of before was the host's alone


def test_the_take_over_is_said_on_the_callers_progress_stream(tmp_path, capsys):
    """Issue 34 item 5: the line saying the state of before moved goes to `build(progress=stream)`, as every
    other line of the run, not past it on sys.stdout."""
    import io

    root = synth.write_l2(tmp_path / "d", kernels=1)
    on_host(root)
    os.replace(root / state_folder("host") / STATE_DB, root / STATE_DIR / STATE_DB)
    stream = io.StringIO()
    build(root, platform="host", progress=stream)
    assert "the build state is now kept per platform" in stream.getvalue()
    assert capsys.readouterr().out == ""
