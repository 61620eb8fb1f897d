"""The stamp stage (issue 23 item 9): cache/binary_context.json, what it holds, how it is written and checked.

The plan's part is the binary context (`BinaryContext.stamp_fields`, from the platform); the action is
`compile_actions.run_stamp` under PyPTO's lock (`stamp.binary_context_lock`); the check is
`uptodate.StampCheck`, called as doit calls it. Files in tmp_path; no compiler, no doit run.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
from pathlib import Path

import pytest

from pypto_build.builddir import markers, stamp
from pypto_build.compile.actions import run_stamp
from pypto_build.plan.graph import load_graph
from pypto_build.toolchain.identity import Revision
from pypto_build.testing import FakePlatform, synth
from pypto_build.compile.checks import StampCheck

STAMP = {"platform": "fake", "pto_isa_revision": "none", "runtime_name": "tensormap_and_ringbuffer",
         "runtime_revision": "fake-runtime-1", "schema": 1}
# PyPTO's own writing of the file: json.dump(indent=2, sort_keys=True) and a newline
PYPTO_TEXT = ('{\n  "platform": "fake",\n  "pto_isa_revision": "none",\n  "runtime_name": "tensormap_and_ringbuffer",'
              '\n  "runtime_revision": "fake-runtime-1",\n  "schema": 1\n}\n')


@pytest.fixture
def path(tmp_path) -> Path:
    return tmp_path / "sub" / markers.STAMP_FILE


def test_the_plan_stamps_each_sub_build_with_its_platforms_context(tmp_path):
    root = synth.write_l3(tmp_path / "l3", chips=("chip_a", "chip_b"), kernels=1)
    plans = load_graph(root, platform=FakePlatform()).plans
    assert [(p.stamp_path, p.context.stamp_fields()) for p in plans] == [
        ("next_levels/chip_a/cache/binary_context.json", STAMP), ("next_levels/chip_b/cache/binary_context.json", STAMP)]
    other = load_graph(root, platform=FakePlatform(runtime_revision=Revision("fake-runtime-2"))).plans[0]
    assert other.context.stamp_fields() == {**STAMP, "runtime_revision": "fake-runtime-2"}


def test_the_stamp_is_written_as_pypto_writes_it(path):
    assert stamp.stamp_text(STAMP) == PYPTO_TEXT
    assert run_stamp(str(path), STAMP, None) == {"stamp": STAMP}
    assert path.read_text() == PYPTO_TEXT and json.loads(path.read_text()) == STAMP
    assert (path.parent / markers.STAMP_LOCK).is_file()                  # PyPTO's lock, kept beside it


def test_writing_the_stamp_sweeps_a_killed_writers_temp_file(path):
    path.parent.mkdir(parents=True)
    leftover = path.parent / ".binary_context.json.0123abcd.tmp"
    leftover.write_text("torn")
    stamp.write_stamp(path, STAMP)
    assert sorted(p.name for p in path.parent.iterdir()) == ["binary_context.json"]


def test_an_unknown_identity_removes_the_stamp_and_says_why(path):
    run_stamp(str(path), STAMP, None)
    assert run_stamp(str(path), None, "runtime identity unknown (no git)") == {
        "stamp": None, "why": "runtime identity unknown (no git)"}
    assert not path.exists()
    assert run_stamp(str(path), None, "still unknown")["stamp"] is None     # nothing to remove: no error


def test_the_stamp_waits_for_pyptos_lock_and_names_it(path):
    path.parent.mkdir(parents=True)
    held = os.open(path.parent / markers.STAMP_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)                                   # a PyPTO replay compiling this sub-build
    try:
        with pytest.raises(OSError, match=rf"{path.parent / markers.STAMP_LOCK} is held by another process"):
            with stamp.binary_context_lock(path, wait_s=0.2):
                pytest.fail("entered a held lock")
    finally:
        os.close(held)
    with stamp.binary_context_lock(path, wait_s=0.2):
        pass                                                            # free again


@pytest.mark.parametrize("text, matches", [
    (PYPTO_TEXT, True),
    (PYPTO_TEXT.rstrip("\n"), False),                                  # same JSON, not PyPTO's bytes
    (json.dumps(STAMP), False),
    (PYPTO_TEXT.replace("fake-runtime-1", "fake-runtime-2"), False),
    (None, False),                                                      # missing
])
def test_stamp_check(path, text, matches):
    if text is not None:
        path.parent.mkdir(parents=True)
        path.write_text(text)
    check = StampCheck(str(path), STAMP, None)
    assert check(None, {}) is matches
    assert repr(check) == ("stamp current" if matches else f"{path} missing or outdated")


def test_stamp_check_with_an_unknown_identity_always_runs(path):
    run_stamp(str(path), STAMP, None)
    check = StampCheck(str(path), None, "runtime identity unknown (no git)")
    assert check(None, {}) is False and check.reason == "no stamp: runtime identity unknown (no git)"


def test_a_stamp_that_is_not_text_or_not_a_file_is_outdated(path):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe not utf-8")
    assert stamp.stamp_matches(path, STAMP) is False
    path.unlink()
    os.mkfifo(path)
    old = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on a FIFO"))
    signal.alarm(5)
    try:
        assert stamp.stamp_matches(path, STAMP) is False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
