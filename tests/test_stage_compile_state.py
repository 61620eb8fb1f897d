"""Compile stage, the state kept between runs (issue 23 item 9): doit's dependency manager with our fixes.

`engine/depstate.ContentDependency`, opened as a build opens it (`engine.open_state`), is driven the way
doit's runner drives it — `get_status` when a task is checked, then `save_success` or `remove_success`
— on a compile-like task (its source as file_dep, a `UnitCheck`), without running doit or a compiler.
Each test pins one of the module's fixes: the snapshot taken at check time, the refresh of an
up-to-date task's states, the reason kept per task, and a failure that keeps the last good state.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from doit.task import Task

from pypto_build.core import filestate, racy
from pypto_build.compile.depfile import TRACKING
from pypto_build.engine import open_state
from pypto_build.core.filestate import FileState, make_state
from pypto_build.compile.header_sets import SetChecker
from pypto_build.compile.checks import UnitCheck

NAME = "compile:aiv/k"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("k.cpp").write_text("int k;\n")
    Path("k.h").write_text("#define K 1\n")
    Path("k.so").write_text("fake-object 1\n")
    return tmp_path


@pytest.fixture
def dep(here):
    state = open_state(here / "state.sqlite3", adopt=True)
    yield state
    state.close()


def values() -> dict:
    """What run_compile returns for k.cpp, which read k.h."""
    return {"argv": "a", "compiler": "c", "context": "x", "tracking": TRACKING, "headers": {"k.h": make_state("k.h")},
            "outside": None, "output": make_state("k.so")}


def task(name: str = NAME) -> Task:
    """The task as the next run plans it (doit builds its tasks afresh every run)."""
    return Task(name, [(lambda: None, [])], file_dep=["k.cpp"],
                uptodate=[UnitCheck("a", "c", "x", None, "k.so", SetChecker(".state"))])


def check(dep, name: str = NAME) -> tuple[str, str]:
    t = task(name)
    result = dep.get_status(t, {t.name: t})
    return result.status, dep.reasons.get(t.name, "") if result.status == "run" else ""


def succeed(dep, name: str = NAME) -> None:
    t = task(name)
    dep.get_status(t, {t.name: t})
    t.values = values()
    dep.save_success(t)


def test_a_source_edit_is_the_reason_the_unit_runs(dep):
    succeed(dep)
    assert check(dep) == ("up-to-date", "")
    Path("k.cpp").write_text("int k2;\n")
    assert check(dep) == ("run", "changed: k.cpp")


def test_the_state_saved_is_the_one_the_check_saw_fix_1(dep):
    """An edit made while the unit compiled (after its check) was not compiled: it must run again. doit alone
    records the file as it is after the action (pydoit/doit#119), and the edit would be lost."""
    t = task()
    assert dep.get_status(t, {t.name: t}).status == "run"
    Path("k.cpp").write_text("int edited_during_the_compile;\n")
    t.values = values()
    dep.save_success(t)
    assert check(dep) == ("run", "changed: k.cpp")


def test_an_up_to_date_tasks_touched_files_are_refreshed_fix_2(dep, monkeypatch):
    """After a touch the states take the new stat, so the next check reads nothing (stat only)."""
    later = time.time_ns() + 2 * racy.RACY_NS                   # the racy window has passed: states are trusted
    monkeypatch.setattr(filestate.time, "time_ns", lambda: later)
    succeed(dep)
    for path in ("k.cpp", "k.h", "k.so"):
        os.utime(path, ns=(10**9, 10**9))
    assert check(dep) == ("up-to-date", "")                     # content decides: hashed once, refreshed
    assert FileState(*dep.get_values(NAME)["headers"]["k.h"]).mtime_ns == 10**9
    assert FileState(*dep.get_values(NAME)["output"]).mtime_ns == 10**9
    reads = []
    real = filestate.file_digest
    monkeypatch.setattr(filestate, "file_digest", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    assert check(dep) == ("up-to-date", "") and reads == []


def test_the_reason_is_kept_per_task_fix_3(dep):
    succeed(dep, "compile:aiv/a")
    succeed(dep, "compile:aiv/b")
    Path("k.h").write_text("#define K 2\n")
    assert check(dep, "compile:aiv/a") == ("run", "header k.h changed")
    assert check(dep, "compile:aiv/c") == ("run", "never built")
    assert dep.reasons["compile:aiv/a"] == "header k.h changed" and dep.reasons["compile:aiv/c"] == "never built"


def test_a_failure_keeps_the_last_good_state_fix_4(dep):
    succeed(dep)
    good = dep.get_values(NAME)
    Path("k.cpp").write_text("int broken;\n")
    t = task()
    assert dep.get_status(t, {t.name: t}).status == "run"
    dep.remove_success(t)                                       # the compile failed
    assert dep.failed(NAME) and dep.get_values(NAME) == good    # doit would have erased it
    assert check(dep) == ("run", "changed: k.cpp")              # decided against the last success
    Path("k.cpp").write_text("int k;\n")                        # back to what the kept binary was built from
    assert check(dep) == ("run", "its last run failed")        # still not trusted: it runs until it succeeds
    succeed(dep)
    assert not dep.failed(NAME) and check(dep) == ("up-to-date", "")


def test_a_unit_that_never_succeeded_says_so(dep):
    t = task()
    dep.get_status(t, {t.name: t})
    dep.remove_success(t)
    assert check(dep) == ("run", "its last run failed (it never succeeded)")
