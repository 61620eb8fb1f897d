"""Output to a pipe the reader closes early (`pypto-build build DIR | head -1`) never breaks a run (issue 33).

Each verb runs with its stdout on a real pipe whose read end is closed after one line (or before any, for
the verbs that say all at once): the run goes on quietly to its end and exits with its own status, no line
blames a file, no traceback, and every finished unit is kept (the next build finds them all up to date).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import copy_dir, edit
from pypto_build.testing.synth import kernel_path

pytestmark = pytest.mark.slow

UP_TO_DATE = "pypto-build: 0 compiled, 4 up to date"      # the synthetic L2: 3 kernels and an orchestration
WAIT_S = 180.0


def pypto_build(*args: str) -> list[str]:
    return [sys.executable, "-m", "pypto_build", *args]


def start(argv: list[str], err: Path, *, both: bool = False, cwd: Path | None = None) -> subprocess.Popen:
    """`argv` with stdout on a pipe (with `both`, stderr too; else stderr into the file `err`)."""
    with open(err, "wb") as errors:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if both else errors,
                                cwd=cwd, start_new_session=True)


def closed_early(argv: list[str], err: Path, *, lines: int = 1, both: bool = False) -> int:
    """Run `argv`, read `lines` lines of its stdout, close the read end, and wait: its exit status."""
    proc = start(argv, err, both=both)
    try:
        for _ in range(lines):
            assert proc.stdout.readline(), "it said less than expected before the pipe was closed"
        proc.stdout.close()
        return proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def assert_quiet(err: Path) -> None:
    """No line blames a file or the pipe, and no traceback."""
    said = err.read_text(errors="replace")
    assert "broken pipe" not in said.lower() and "check the file" not in said, said
    assert "Traceback" not in said and "error" not in said.lower(), said


def assert_kept(root: Path) -> None:
    """What finished was kept: the next build has nothing to compile."""
    built = subprocess.run(pypto_build("build", str(root)), capture_output=True, text=True, timeout=WAIT_S)
    assert built.returncode == 0, built.stderr
    assert built.stdout.splitlines()[-1] == UP_TO_DATE, built.stdout


@pytest.fixture
def golden(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def test_build_goes_on_to_the_end(l2, tmp_path):
    """`build --recompile DIR | head -1`: every unit is compiled, status 0."""
    err = tmp_path / "err"
    assert closed_early(pypto_build("build", "--recompile", str(l2)), err) == 0
    assert_quiet(err)
    assert_kept(l2)


def test_build_with_both_streams_on_the_pipe(l2, tmp_path):
    """`build --recompile DIR 2>&1 | head -1`: stderr closed too, the same."""
    err = tmp_path / "err"
    assert closed_early(pypto_build("build", "--recompile", str(l2)), err, both=True) == 0
    assert_kept(l2)


def test_replay_validate_goes_on_to_the_verdict(golden, tmp_path):
    """`replay --validate DIR | grep -m1 ...`: the build, the program and the verdict, status 0."""
    err = tmp_path / "err"
    edit(kernel_path(golden, 0))
    assert closed_early(pypto_build("replay", "--validate", str(golden)), err) == 0
    assert_quiet(err)
    assert_kept(golden)


def test_ci_goes_on_to_the_end(golden, tmp_path):
    err = tmp_path / "err"
    edit(kernel_path(golden, 1))
    assert closed_early(pypto_build("ci", str(golden)), err) == 0
    assert_quiet(err)
    assert_kept(golden)


@pytest.mark.parametrize("verb", ["explain", "history"])
def test_a_verb_that_only_says_is_quiet(verb, l2, tmp_path):
    """The pipe closed before anything is said (these say everything at once): status 0, nothing blamed."""
    err = tmp_path / "err"
    argv = pypto_build("explain", "--recompile", str(l2)) if verb == "explain" else pypto_build("history", str(l2))
    assert closed_early(argv, err, lines=0) == 0
    assert_quiet(err)
    assert_kept(l2)


def test_watch_goes_on_until_interrupted(golden, tmp_path):
    """A watch whose reader leaves during its first round finishes it (the variant recorded), keeps watching,
    and ends on Ctrl-C as always: 130, `interrupted`, nothing blamed."""
    err = tmp_path / "err"
    edit(kernel_path(golden, 2))
    proc = start(pypto_build("watch", "--validate", "--runs", "1", "."), err, cwd=golden)
    try:
        assert proc.stdout.readline()
        proc.stdout.close()
        history = golden / ".pypto_build" / "history.json"
        deadline = time.monotonic() + WAIT_S
        while not history.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)             # what the round says after it records the variant, and the watcher's line
        assert proc.poll() is None, err.read_text(errors="replace")
        assert history.is_file()
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    said = err.read_text(errors="replace")
    assert "interrupted" in said and "broken pipe" not in said.lower() and "Traceback" not in said, said
    assert_kept(golden)
