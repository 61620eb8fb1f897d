"""The compiler's include search directories are asked once and kept while nothing they depend on changed.

Real g++ behind a logging wrapper (`$CXX`), real `pypto-build` processes (each its own memory), real
directories: a directory the compiler ignored as nonexistent that appears later is asked about
again, and a record that did not come from this machine's answer never widens the include roots.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import edit, settle_ctimes, which
from pypto_build.toolchain.compiler import search_dirs
from pypto_build.builddir.state_dir import STATE_DIR

K1_SRC = "kernels/aiv/main_incore_1_aiv.cpp"
ESCAPE = "resolves outside the build directory"


@pytest.fixture
def logged_cxx(tmp_path, monkeypatch) -> Path:
    """$CXX: g++ behind a script that logs every command line; returns the log."""
    log = tmp_path / "cxx.log"
    cxx = tmp_path / "logged-g++"
    cxx.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {which("g++")} "$@"\n')
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    return log


def pypto_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, env=os.environ, timeout=300)


def asked(log: Path) -> int:
    """How many times the compiler was asked for its search directories."""
    return sum(1 for line in log.read_text().splitlines() if "-E -v" in line) if log.exists() else 0


def record(root: Path) -> Path:
    return root / STATE_DIR / search_dirs.RECORD


def include(root: Path, line: str) -> None:
    src = root / K1_SRC
    src.write_text(src.read_text().replace('#include "tensor.h"', f'#include "tensor.h"\n{line}', 1))


def test_asked_once_then_kept_across_runs(l2, logged_cxx):
    out = pypto_build("build", str(l2))
    assert out.returncode == 0, out.stderr
    assert asked(logged_cxx) == 1 and record(l2).is_file()
    settle_ctimes()
    edit(l2 / K1_SRC)
    out = pypto_build("build", str(l2))
    assert out.returncode == 0, out.stderr
    assert "1 compiled" in out.stdout
    assert asked(logged_cxx) == 1, "the kept answer was used"


def test_a_search_dir_the_compiler_ignored_is_asked_about_again_once_it_exists(l2, logged_cxx, tmp_path,
                                                                                monkeypatch):
    """$CPLUS_INCLUDE_PATH names a directory that does not exist yet: g++ ignores it. Once it exists,
    a header found there is the compiler's own search path, not an escape."""
    (tmp_path / "inc").mkdir()
    later = tmp_path / "inc" / "later"
    monkeypatch.setenv("CPLUS_INCLUDE_PATH", str(later))
    settle_ctimes()                     # inc/ settled: the answer is kept (a fresh change is never trusted)
    out = pypto_build("build", str(l2))
    assert out.returncode == 0, out.stderr
    assert asked(logged_cxx) == 1
    watched = [w for e in json.loads(record(l2).read_text())["entries"].values() for w in e["watch"]]
    assert str(later) in watched and str(tmp_path / "inc") in watched
    settle_ctimes()
    later.mkdir()
    (later / "late.h").write_text("#define LATE 1\n")
    include(l2, "#include <late.h>")
    out = pypto_build("build", str(l2))
    assert out.returncode == 0, out.stdout + out.stderr
    assert ESCAPE not in out.stdout + out.stderr
    assert asked(logged_cxx) == 2, "asked again: a directory it had ignored now exists"


def test_a_record_that_widens_the_include_roots_is_not_trusted(l2, logged_cxx, tmp_path):
    """The record is data in the build directory: an answer naming a directory it does not watch (as a
    copy from elsewhere or a hand edit could) is asked again, and a header there stays an escape."""
    out = pypto_build("build", str(l2))
    assert out.returncode == 0, out.stderr
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.h").write_text("#define SECRET 1\n")
    data = json.loads(record(l2).read_text())
    for entry in data["entries"].values():
        entry["dirs"].append(str(outside))
    record(l2).write_text(json.dumps(data))
    settle_ctimes()
    include(l2, f'#include "{outside}/secret.h"')
    out = pypto_build("build", str(l2))
    assert out.returncode == 1
    assert ESCAPE in out.stderr
    assert asked(logged_cxx) == 2


def test_explain_reads_the_record_and_never_writes_it(l2, logged_cxx):
    record(l2).unlink(missing_ok=True)
    out = pypto_build("explain", str(l2))
    assert out.returncode == 0, out.stderr
    assert not record(l2).exists()
    assert asked(logged_cxx) == 1
