"""The `.pto` stage (issue 23 item 9): its plan and its checks, fast (nothing runs ptoas), then the stage end
to end (.pto -> ptoas -> splice -> compile) with the stand-in ptoas.

The plan through the public door (`graph.load_graph(..., pto=pto_options(...))`, which calls
`pto.plan_pto`); the checks (`pto/checks.py`: PtoasCheck, SpliceCheck) called as doit calls them,
on values and files written here; a failed unit whose failure writes nothing through the doit state
(`engine.open_state`). End to end, `pypto_build/testing/fake_ptoas.py` is a test stand-in with ptoas's
command line (no real ptoas exists here); its `.pto` subset is documented in that file.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doit.task import Task

from conftest import FAKE_PTOAS, age_tree, copy_dir, edit
from pypto_build.api import build
from pypto_build.errors import BuildError, ToolchainError
from pypto_build.engine import open_state
from pypto_build.core.filestate import FileState, make_state
from pypto_build.plan.graph import load_graph
from pypto_build.platforms.host.places import host_binary
from pypto_build.pto import PtoasCheck, SpliceCheck, pto_options
from pypto_build.testing import FakePlatform, synth
from pypto_build.testing.fake_ptoas import make_fake_ptoas
from test_synth import call_kernel

FAKE = FakePlatform()


@pytest.fixture
def pto_dir(tmp_path) -> Path:
    """An L2 directory with the ptoas/ stage: the group unit main_group (kernels 0, 1) and main_incore_2_aic."""
    return synth.write_l2(tmp_path / "d", kernels=3, pto=True)


def pto_plan(root: Path, **options):
    return load_graph(root, platform=FAKE, pto=pto_options(**options)).pto


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------


def test_one_unit_per_pto_file_with_its_raw_output_and_record(pto_dir, tmp_path, monkeypatch):
    ptoas = make_fake_ptoas(tmp_path / "tools")
    monkeypatch.setenv("PTOAS_ROOT", str(ptoas.parent))
    plan = pto_plan(pto_dir)
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


def test_the_ptoas_key_is_the_tools_content(pto_dir, tmp_path):
    one = make_fake_ptoas(tmp_path / "one")
    same = make_fake_ptoas(tmp_path / "same")
    other = make_fake_ptoas(tmp_path / "other", version="ptoas 9.9")
    key = pto_plan(pto_dir, ptoas=str(one)).units[0].ptoas_key
    assert pto_plan(pto_dir, ptoas=str(one)).units[0].ptoas_key == key
    assert pto_plan(pto_dir, ptoas=str(same)).units[0].ptoas_key != key          # its path is part of it
    assert pto_plan(pto_dir, ptoas=str(other)).units[0].ptoas_key != key


def test_without_ptoas_the_units_are_planned_and_say_where_it_was_looked_for(pto_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "none"))
    plan = pto_plan(pto_dir)
    missing = (f"ptoas not found under PTOAS_ROOT={tmp_path / 'none'} (looked for {tmp_path / 'none' / 'ptoas'}, "
               f"{tmp_path / 'none' / 'ptoas.sh'}, {tmp_path / 'none' / 'bin' / 'ptoas'})")
    assert [(u.ptoas, u.ptoas_key, u.missing) for u in plan.units] == [(None, None, missing)] * 2
    assert plan.skipped_line == f"[pto->cpp] skipped: {missing}"
    monkeypatch.delenv("PTOAS_ROOT")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    missing = pto_plan(pto_dir).units[0].missing
    assert missing == "ptoas not found on PATH (set PTOAS_ROOT or PATH, or pass ptoas=)"      # the API's words


def test_a_ptoas_option_that_is_not_a_tool_is_refused(pto_dir, tmp_path):
    with pytest.raises(ToolchainError, match=r"--ptoas .*nope: not an executable file"):
        pto_plan(pto_dir, ptoas=str(tmp_path / "nope"))


@pytest.mark.parametrize("env, flag, line", [
    ("0", None, "[pto->cpp] skipped (PYPTO_REBUILD_FROM_PTO=0)"),
    (None, False, "[pto->cpp] skipped (rebuild_from_pto=False)"),
])
def test_the_stage_can_be_turned_off(pto_dir, monkeypatch, env, flag, line):
    if env is not None:
        monkeypatch.setenv("PYPTO_REBUILD_FROM_PTO", env)
    plan = pto_plan(pto_dir, rebuild_from_pto=flag)
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

# ---------------------------------------------------------------------------
# the stage end to end, with the stand-in ptoas
# ---------------------------------------------------------------------------


K2 = "kernels/aic/main_incore_2_aic.cpp"
OLD_LINE = "synth_scale(a[i], 3.0f)"


def ptoas_runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="session")
def built_pto(tmp_path_factory) -> Path:
    root = synth.write_l2(tmp_path_factory.mktemp("pristine-pto") / "d", kernels=3, pto=True)
    build(root)          # no ptoas needed: the ir.compile() outputs are adopted on first sight
    return root


@pytest.fixture
def d(built_pto, tmp_path) -> Path:
    return copy_dir(built_pto, tmp_path / "d")


def run_k2(root: Path, tmp_path: Path) -> list[float]:
    so = tmp_path / f"k2-{os.urandom(4).hex()}.so"      # fresh name: dlopen caches by path
    shutil.copy(root / host_binary(K2), so)
    return call_kernel(so, [1.0, 2.0], [10.0, 20.0])


@pytest.mark.slow
def test_first_build_checks_each_pto_once_by_content_and_rewrites_nothing(tmp_path, ptoas_env):
    root = synth.write_l2(tmp_path / "fresh", kernels=3, pto=True)
    for raw in (root / "ptoas").glob("*.cpp"):
        os.utime(raw, (1, 1))                     # raw outputs far OLDER than their .pto: mtimes must not matter
    texts = {p: p.read_bytes() for p in root.rglob("*.cpp")}
    stats = {p: p.stat().st_mtime_ns for p in root.rglob("*.cpp")}
    result = build(root)
    assert sorted(Path(r.split()[0]).name for r in ptoas_runs(ptoas_env)) == ["main_group.pto",
                                                                             "main_incore_2_aic.pto"]
    assert result.names("ran", "ptoas:") == ["ptoas:main_group", "ptoas:main_incore_2_aic"]
    assert result.names("up-to-date", "splice:") == ["splice:main_group", "splice:main_incore_2_aic"]
    assert result.spliced == () and len(result.compiled) == 4
    assert {p: p.read_bytes() for p in root.rglob("*.cpp")} == texts
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.cpp")} == stats       # not even rewritten
    assert build(root).compiled == [] and len(ptoas_runs(ptoas_env)) == 2


def test_edit_pto_regenerates_splices_and_recompiles_only_its_kernel(d, tmp_path, ptoas_env, capsys):
    before = run_k2(d, tmp_path)
    assert before == [10 * 0.5 + 3.0, 20 * 0.5 + 6.0]
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 5.0f)"))
    head_before = (d / K2).read_text().split("// --- ptoas-generated code ---")[0]
    result = build(d, progress=sys.stdout)
    assert [Path(r.split()[0]).name for r in ptoas_runs(ptoas_env)] == ["main_incore_2_aic.pto"]
    assert result.compiled == ["compile:aic/main_incore_2_aic"]
    assert result.spliced == (K2,)
    text = (d / K2).read_text()
    assert "synth_scale(a[i], 5.0f)" in text and text.startswith(head_before)
    assert run_k2(d, tmp_path) == [10 * 0.5 + 5.0, 20 * 0.5 + 10.0]      # the new numbers
    out = capsys.readouterr().out
    assert "[pto->cpp] regenerating from ptoas/main_incore_2_aic.pto" in out
    assert f"[pto->cpp]   spliced -> {K2}" in out
    assert "[pto->cpp] updated 1 kernel cpp(s)" in out
    assert build(d).compiled == [] and len(ptoas_runs(ptoas_env)) == 1


def test_group_unit_splices_into_every_member(d, ptoas_env):
    pto = synth.pto_path(d, "main_group")
    pto.write_text(pto.read_text().replace("// CPP: {", "// CPP: { /* tuned */", 1))
    result = build(d)
    assert sorted(result.spliced) == ["kernels/aic/main_incore_0_aic.cpp", "kernels/aiv/main_incore_1_aiv.cpp"]
    assert result.compiled == ["compile:aic/main_incore_0_aic", "compile:aiv/main_incore_1_aiv"]


def test_touch_cp_r_and_older_pto_follow_content_not_mtimes(built_pto, tmp_path, ptoas_env):
    moved = tmp_path / "moved"
    subprocess.run(["cp", "-r", str(built_pto), str(moved)], check=True)      # new mtimes everywhere
    for p in moved.rglob("*.pto"):
        p.touch()                                                             # .pto newer than raw
    assert build(moved).compiled == [] and ptoas_runs(ptoas_env) == []
    pto = synth.pto_path(moved, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 4.0f)"))
    age_tree(moved, 7200)                          # the edited .pto is now OLDER than its raw .cpp
    result = build(moved)
    assert len(ptoas_runs(ptoas_env)) == 1 and result.compiled == ["compile:aic/main_incore_2_aic"]


def test_kernel_cpp_edit_only_recompiles(d, ptoas_env):
    edit(d / K2)
    result = build(d)
    assert result.compiled == ["compile:aic/main_incore_2_aic"] and ptoas_runs(ptoas_env) == []
    assert result.spliced == ()


def test_both_edited_pto_wins_body_header_kept_hand_body_backed_up(d, ptoas_env, capsys):
    k2 = d / K2
    text = k2.read_text()
    text = text.replace("#include <cstdint>", "#include <cstdint>\n// my header note", 1)
    text = text.replace("out[i] * 0.5f", "out[i] * 0.25f", 1)            # hand edit of the body
    text = text.replace("// Forward to ptoas-generated function", "// my wrapper note", 1)
    k2.write_text(text)
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 9.0f)"))
    build(d, progress=sys.stdout)
    new = k2.read_text()
    assert "// my header note" in new and "// my wrapper note" in new
    assert "synth_scale(a[i], 9.0f)" in new and "out[i] * 0.25f" not in new
    backups = list((d / ".pypto_build/backup").rglob("*"))
    backup_files = [b for b in backups if b.is_file()]
    assert len(backup_files) == 1 and "out[i] * 0.25f" in backup_files[0].read_text()
    out = capsys.readouterr().out
    assert f"kept your edited body of {K2} in {backup_files[0].relative_to(d).as_posix()}" in out


def test_signature_change_is_refused_and_kernel_untouched(d, ptoas_env):
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace("int64_t n)", "int64_t n, int64_t extra)", 1))
    before = (d / K2).read_bytes()
    with pytest.raises(BuildError) as info:
        build(d)
    msg = info.value.failures[0].message
    assert "main_incore_2_aic" in msg and "signature" in msg and "ir.compile()" in msg
    assert (d / K2).read_bytes() == before


def test_missing_sentinels_are_refused_and_file_untouched(d, ptoas_env):
    k2 = d / K2
    k2.write_text(k2.read_text().replace("// --- Kernel entry point ---", "// entry"))
    before = k2.read_bytes()
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 5.0f)"))
    with pytest.raises(BuildError) as info:
        build(d)
    assert (f"{K2}: the sentinel line '// --- Kernel entry point ---' is missing from this kernel"
            in info.value.failures[0].message)
    assert k2.read_bytes() == before


@pytest.mark.parametrize("knob", ["FAKE_PTOAS_FAIL", pytest.param("FAKE_PTOAS_HANG", marks=pytest.mark.slow)])
def test_ptoas_failure_or_timeout_fails_leaves_kernels_and_retries(d, ptoas_env, monkeypatch, knob):
    monkeypatch.setenv("PYPTO_PTOAS_TIMEOUT", "2")
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text() + f"// {knob}\n")
    kernels = {p: p.read_bytes() for p in (d / "kernels").rglob("*.cpp")}
    raw = (d / "ptoas/main_incore_2_aic.cpp").read_bytes()
    with pytest.raises(BuildError) as info:
        build(d)
    msg = info.value.failures[0].message
    assert "ptoas rebuild failed for ptoas/main_incore_2_aic.pto" in msg
    assert ("timed out" in msg) if knob.endswith("HANG") else ("FAKE_PTOAS_FAIL requested" in msg)
    assert {p: p.read_bytes() for p in (d / "kernels").rglob("*.cpp")} == kernels
    assert (d / "ptoas/main_incore_2_aic.cpp").read_bytes() == raw
    with pytest.raises(BuildError):
        build(d)
    assert len(ptoas_runs(ptoas_env)) == 2                   # retried


def test_ptoas_not_found_fails_the_edit_unless_accepted_and_lists_it(d, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "no-ptoas"
    empty.mkdir()
    monkeypatch.setenv("PTOAS_ROOT", str(empty))             # PATH is not consulted
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 5.0f)"))
    result = build(d, progress=sys.stdout, check=False)
    out = capsys.readouterr()
    assert f"[pto->cpp] skipped: ptoas not found under PTOAS_ROOT={empty}" in out.out
    assert result.names("failed") == ["ptoas:main_incore_2_aic"] and result.compiled == []
    assert "FAILED ptoas:main_incore_2_aic: ptoas/main_incore_2_aic.pto: edited, but ptoas not found" in out.err
    assert build(d, check=False).names("failed") == ["ptoas:main_incore_2_aic"]        # said again next run
    accepted = build(d, progress=sys.stdout, allow_unapplied_pto=True)
    assert accepted.not_applied == ("ptoas/main_incore_2_aic.pto",) and accepted.ok
    assert "edits NOT applied (ptoas not found; accepted by --allow-unapplied-pto): ptoas/main_incore_2_aic.pto" \
        in capsys.readouterr().out
    assert build(d, allow_unapplied_pto=True).not_applied == ("ptoas/main_incore_2_aic.pto",)    # still said
    # once ptoas is there, the edit lands
    shutil.copy(FAKE_PTOAS, empty / "ptoas")
    assert build(d).compiled == ["compile:aic/main_incore_2_aic"]


@pytest.mark.parametrize("how", ["env", "api"])
def test_stage_can_be_disabled(d, ptoas_env, monkeypatch, capsys, how):
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 5.0f)"))
    if how == "env":
        monkeypatch.setenv("PYPTO_REBUILD_FROM_PTO", "No")
        build(d, progress=sys.stdout)
        assert "[pto->cpp] skipped (PYPTO_REBUILD_FROM_PTO=0)" in capsys.readouterr().out
    else:
        build(d, progress=sys.stdout, rebuild_from_pto=False)
        assert "[pto->cpp] skipped (rebuild_from_pto=False)" in capsys.readouterr().out
    assert ptoas_runs(ptoas_env) == []


def test_hand_edited_raw_output_is_respliced(d, ptoas_env):
    raw = d / "ptoas/main_incore_2_aic.cpp"
    raw.write_text(raw.read_text().replace(OLD_LINE, "synth_scale(a[i], 7.0f)"))
    result = build(d)
    assert ptoas_runs(ptoas_env) == [] and result.spliced == (K2,)
    assert "synth_scale(a[i], 7.0f)" in (d / K2).read_text()


def test_cli_flags(d, ptoas_env):
    pto = synth.pto_path(d, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 5.0f)"))
    out = subprocess.run(["pypto-build", "build", "--no-rebuild-from-pto", str(d)], capture_output=True, text=True)
    assert "[pto->cpp] skipped (rebuild_from_pto=False)" in out.stdout
    env = {**os.environ, "PTOAS_ROOT": ""}
    out = subprocess.run(["pypto-build", "build", "--ptoas", str(FAKE_PTOAS), str(d)], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "[pto->cpp]   spliced -> kernels/aic/main_incore_2_aic.cpp" in out.stdout
