"""The `.pto` stage, its plan and its checks (issue 23 item 9), fast: nothing runs ptoas.

The plan through the public door (`graph.load_graph(..., pto=pto_options(...))`, which calls
`pto.plan_pto`); the checks (`pto/uptodate.py`: PtoasCheck, SpliceCheck) called as doit calls them,
on values and files written here; a failed unit whose failure writes nothing through the doit state
(`engine.open_state`). The stage end to end (ptoas, splice, compile) is tests/test_pto_stage.py.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from doit.task import Task

from pypto_build.errors import ToolchainError
from pypto_build.engine import open_state
from pypto_build.core.filestate import FileState, make_state
from pypto_build.plan.graph import load_graph
from pypto_build.pto import PtoasCheck, SpliceCheck, pto_options
from pypto_build.testing import FakePlatform, synth
from pypto_build.testing.fake_ptoas import make_fake_ptoas

FAKE = FakePlatform()


@pytest.fixture
def d(tmp_path) -> Path:
    """An L2 directory with the ptoas/ stage: the group unit main_group (kernels 0, 1) and main_incore_2_aic."""
    return synth.write_l2(tmp_path / "d", kernels=3, pto=True)


def pto_plan(root: Path, **options):
    return load_graph(root, platform=FAKE, pto=pto_options(**options)).pto


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------


def test_one_unit_per_pto_file_with_its_raw_output_and_record(d, tmp_path, monkeypatch):
    ptoas = make_fake_ptoas(tmp_path / "tools")
    monkeypatch.setenv("PTOAS_ROOT", str(ptoas.parent))
    plan = pto_plan(d)
    assert [u.name for u in plan.units] == ["main_group", "main_incore_2_aic"]
    group = plan.units[0]
    assert (group.sub_rel, group.pto, group.raw) == (".", "ptoas/main_group.pto", "ptoas/main_group.cpp")
    assert (group.record, group.backup_dir) == (".pypto_build/splice/main_group.json", ".pypto_build/backup")
    assert group.ptoas == str(ptoas.resolve()) and group.ptoas_key and group.missing == ""
    assert (plan.lookup.source, plan.skipped_line) == ("PTOAS_ROOT", None)


def test_units_of_sub_builds_are_named_after_them(tmp_path):
    root = synth.write_multi_orch(tmp_path / "m", orchs=("orch_a", "orch_b"), kernels=1, pto=True)
    plan = pto_plan(root, ptoas=str(make_fake_ptoas(tmp_path / "tools")))
    assert [(u.name, u.pto, u.record) for u in plan.units] == [
        ("orch_a/orch_a_incore_0_aic", "next_levels/orch_a/ptoas/orch_a_incore_0_aic.pto",
         ".pypto_build/splice/orch_a/orch_a_incore_0_aic.json"),
        ("orch_b/orch_b_incore_0_aic", "next_levels/orch_b/ptoas/orch_b_incore_0_aic.pto",
         ".pypto_build/splice/orch_b/orch_b_incore_0_aic.json")]


def test_the_ptoas_key_is_the_tools_content(d, tmp_path):
    one = make_fake_ptoas(tmp_path / "one")
    same = make_fake_ptoas(tmp_path / "same")
    other = make_fake_ptoas(tmp_path / "other", version="ptoas 9.9")
    key = pto_plan(d, ptoas=str(one)).units[0].ptoas_key
    assert pto_plan(d, ptoas=str(one)).units[0].ptoas_key == key
    assert pto_plan(d, ptoas=str(same)).units[0].ptoas_key != key          # its path is part of it
    assert pto_plan(d, ptoas=str(other)).units[0].ptoas_key != key


def test_without_ptoas_the_units_are_planned_and_say_where_it_was_looked_for(d, tmp_path, monkeypatch):
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "none"))
    plan = pto_plan(d)
    missing = (f"ptoas not found under PTOAS_ROOT={tmp_path / 'none'} (looked for {tmp_path / 'none' / 'ptoas'}, "
               f"{tmp_path / 'none' / 'ptoas.sh'}, {tmp_path / 'none' / 'bin' / 'ptoas'})")
    assert [(u.ptoas, u.ptoas_key, u.missing) for u in plan.units] == [(None, None, missing)] * 2
    assert plan.skipped_line == f"[pto->cpp] skipped: {missing}"
    monkeypatch.delenv("PTOAS_ROOT")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert pto_plan(d).units[0].missing == "ptoas not found on PATH (set PTOAS_ROOT or PATH, or pass ptoas=)"  # the API's words


def test_a_ptoas_option_that_is_not_a_tool_is_refused(d, tmp_path):
    with pytest.raises(ToolchainError, match=r"--ptoas .*nope: not an executable file"):
        pto_plan(d, ptoas=str(tmp_path / "nope"))


@pytest.mark.parametrize("env, flag, line", [
    ("0", None, "[pto->cpp] skipped (PYPTO_REBUILD_FROM_PTO=0)"),
    (None, False, "[pto->cpp] skipped (rebuild_from_pto=False)"),
])
def test_the_stage_can_be_turned_off(d, monkeypatch, env, flag, line):
    if env is not None:
        monkeypatch.setenv("PYPTO_REBUILD_FROM_PTO", env)
    plan = pto_plan(d, rebuild_from_pto=flag)
    assert (plan.units, plan.lookup, plan.skipped_line) == ((), None, line)


def test_a_directory_without_ptoas_files_looks_for_no_ptoas(tmp_path, monkeypatch):
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "none"))
    plan = pto_plan(synth.write_l2(tmp_path / "plain", kernels=1))
    assert (plan.units, plan.lookup, plan.skipped_line) == ((), None, None)


# ---------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("key, values, fresh, why", [
    ("k1", {"ptoas": "k1"}, True, ""),
    ("k1", {"ptoas": "adopted"}, True, ""),               # taken as found without ptoas: not rerun for a new one
    ("k1", {}, False, "never run"),
    ("k1", None, False, "never run"),
    ("k1", {"ptoas": "k0"}, False, "ptoas changed"),
    (None, {}, True, ""),                                  # no ptoas: only the .pto's content (file_dep) matters
])
def test_ptoas_check(key, values, fresh, why):
    check = PtoasCheck("ptoas/u.pto", "ptoas/u.cpp", key)
    assert check(None, values) is fresh and check.reason == why
    assert repr(check) == (why or "ptoas unchanged")
    assert check.failure_writes_nothing is (key is None)


def test_first_sight_without_ptoas_takes_the_raw_output_as_found(tmp_path):
    raw = tmp_path / "u.cpp"
    recorded = []
    without = PtoasCheck("u.pto", str(raw), None, lambda: recorded.append(1))
    assert without.adopt() is None                                   # no raw output: it must be made
    raw.write_text("// raw\n")
    assert without.adopt() == {"ptoas": "adopted", "rewrote": False}
    without.adopted({})
    assert recorded == [1]
    assert PtoasCheck("u.pto", str(raw), "k1").adopt() is None        # with ptoas: it checks the unit once


def test_splice_check_follows_the_raw_outputs_content(tmp_path):
    raw = tmp_path / "u.cpp"
    check = SpliceCheck(str(raw), "ptoas:u", adopt_fn=None, record_fn=None)
    assert check(None, {}) is True and check.reason == ""               # nothing to splice from yet
    raw.write_text("// body 1\n")
    values = {"raw": make_state(str(raw))}
    assert check(None, values) is True and repr(check) == "raw ptoas output unchanged"
    os.utime(raw, ns=(10**9, 10**9))
    assert check(None, values) is True                                  # a touch is no change
    assert FileState(*check.refresh(values)["raw"]).mtime_ns == 10**9
    raw.write_text("// body 2\n")
    assert check(None, values) is False and check.reason == f"{raw} changed"
    assert check(None, {}) is False                                    # first sight of a raw output: splice


def test_splice_adopts_the_kernels_only_when_ptoas_did_not_rewrite_the_raw_output(tmp_path):
    adopted = {"bodies": "as found"}
    check = SpliceCheck(str(tmp_path / "u.cpp"), "ptoas:u", adopt_fn=lambda: adopted, record_fn=None)
    assert check.adopt(lambda task: {"ptoas": "k1", "rewrote": False}) == adopted
    assert check.adopt(lambda task: {"ptoas": "k1", "rewrote": True}) is None
    assert check.adopt(lambda task: {}) is None                        # ptoas has not run: nothing to compare


def test_a_ptoas_failure_without_ptoas_is_up_to_date_again_once_the_pto_is_back(tmp_path, monkeypatch):
    """Without ptoas the task writes nothing when it fails (it only reports the edit it cannot apply), so a
    reverted `.pto` is up to date again; with ptoas a failed unit runs until it succeeds."""
    monkeypatch.chdir(tmp_path)
    Path("u.pto").write_text("// pto 1\n")
    Path("u.cpp").write_text("// raw\n")
    dep = open_state(tmp_path / "state.sqlite3", adopt=False)

    def status(key, name):
        task = Task(name, [(lambda: None, [])], file_dep=["u.pto"], uptodate=[PtoasCheck("u.pto", "u.cpp", key)])
        return task, dep.get_status(task, {name: task}).status

    try:
        for key, name, after in ((None, "ptoas:without", "up-to-date"), ("k1", "ptoas:with", "run")):
            Path("u.pto").write_text("// pto 1\n")
            task, _ = status(key, name)
            task.values = {"ptoas": key or "adopted"}
            dep.save_success(task)
            Path("u.pto").write_text("// pto 2, an edit\n")
            task, now = status(key, name)
            assert now == "run"
            dep.remove_success(task)
            Path("u.pto").write_text("// pto 1\n")
            assert status(key, name)[1] == after, name
    finally:
        dep.close()
