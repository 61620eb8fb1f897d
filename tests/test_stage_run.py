"""The run stage (replay / validate), its plan and its verdict check (issue 23 item 9), fast: no program runs.

The plan: `graph.run_targets` (what a directory can run, after which stamps, on which inputs). The check:
`run.checks.VerdictCheck`, called as doit calls it, against a kept golden result written here the way
`run/golden_cache.save` writes one (golden.pt's bytes and its sealed index, `golden_key`), without
torch or golden.py; and `golden_key.stale` / `load`, the one check the child's lookup also makes.
Reasons are exact strings (explain shows them). End to end: tests/test_golden_cache.py, test_golden_trust.py.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pypto_build.run import golden_key
from pypto_build.core.filestate import FileState, make_state
from pypto_build.plan.graph import load_graph, run_targets
from pypto_build.core.hashing import bytes_digest
from pypto_build.testing import FakePlatform, synth
from pypto_build.run.checks import VerdictCheck

FAKE = FakePlatform()
CONFIG = "config-1"
INDEX = f"{golden_key.FOLDER}/{golden_key.INDEX}"


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------


def test_an_l2_directory_runs_as_one_target_on_its_binaries_config_golden_and_data(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2, golden=True)
    (root / "data/nested").mkdir(parents=True)
    (root / "data/nested/b.bin").write_bytes(b"b")
    (root / "data/a.bin").write_bytes(b"a")
    os.mkfifo(root / "data/pipe")                                   # an input too: the run refuses it
    (target,) = run_targets(load_graph(root, platform=FAKE))
    assert (target.name, target.rel, target.stamps) == (".", ".", ("stamp:.",))
    assert target.inputs == ("orchestration/main.so", "kernels/aic/main_incore_0_aic.so",
                             "kernels/aiv/main_incore_1_aiv.so", "kernel_config.py", "golden.py", "data/a.bin",
                             "data/nested/b.bin", "data/pipe")


def test_an_l3_directory_runs_once_after_every_chips_stamp(tmp_path):
    root = synth.write_l3(tmp_path / "l3", chips=("chip_a", "chip_b"), kernels=1)
    (target,) = run_targets(load_graph(root, platform=FAKE))
    assert target.stamps == ("stamp:chip_a", "stamp:chip_b")
    assert target.inputs == ("next_levels/chip_a/orchestration/chip_a.so",
                             "next_levels/chip_a/kernels/aic/chip_a_incore_0_aic.so",
                             "next_levels/chip_b/orchestration/chip_b.so",
                             "next_levels/chip_b/kernels/aic/chip_b_incore_0_aic.so",
                             "next_levels/chip_a/kernel_config.py", "next_levels/chip_b/kernel_config.py",
                             "orchestration/host_orch.py", "distributed_meta.json")


def test_a_multi_orch_parent_runs_each_sub_build_that_has_a_golden_py(tmp_path):
    root = synth.write_multi_orch(tmp_path / "m", orchs=("orch_a", "orch_b"), kernels=1, golden=True)
    (root / "next_levels/orch_b/golden.py").unlink()
    (target,) = run_targets(load_graph(root, platform=FAKE))
    assert (target.name, target.rel, target.stamps) == ("orch_a", "next_levels/orch_a", ("stamp:orch_a",))
    assert target.inputs == ("next_levels/orch_a/orchestration/orch_a.so",
                             "next_levels/orch_a/kernels/aic/orch_a_incore_0_aic.so",
                             "next_levels/orch_a/kernel_config.py", "next_levels/orch_a/golden.py")


# ---------------------------------------------------------------------------
# a kept golden result and the verdict made against it
# ---------------------------------------------------------------------------


@pytest.fixture
def sub(tmp_path) -> Path:
    """A sub-build's own files: golden.py, data, a link to a folder; and our own, which key nothing."""
    sub = tmp_path / "sub"
    (sub / "data").mkdir(parents=True)
    (sub / "golden.py").write_text("ATOL = 1e-5\n")
    (sub / "data/x.bin").write_bytes(b"x" * 8)
    (sub / "kernels").mkdir()
    (sub / "kernels/k.cpp").write_text("// the program reaches the verdict through the binaries\n")
    (sub / "kernel_config.py").write_text("# generated\n")
    (tmp_path / "shared").mkdir()
    os.symlink(tmp_path / "shared", sub / "lnk")
    return sub


def keep(sub: Path, *, read: tuple[str, ...] = (), environ: dict | None = None, **fields) -> dict:
    """Keep a golden result for `sub` as run/golden_cache.save does: golden.pt, then its sealed index."""
    files, links = golden_key.snapshot(sub)
    for path in read:
        files[golden_key.key_of(sub, path)] = make_state(path)
    data = b"the expected tensors"
    index = {"format": golden_key.FORMAT, "computed": 0.0, "params": golden_key.params(),
             "python": golden_key.python_version(), "paths": golden_key.path_signature(), "packages": {},
             "environ": {n: golden_key.environ_digest(v) for n, v in (environ or {}).items()},
             "files": files, "read": [golden_key.key_of(sub, p) for p in read], "links": links, "names": ["a"],
             "outputs": ["out"], "rtol": 1e-5, "atol": 1e-5, "data": bytes_digest(data), **fields}
    index["seal"] = golden_key.seal(index)
    (sub / golden_key.FOLDER).mkdir(parents=True, exist_ok=True)
    (sub / golden_key.DATA_KEY).write_bytes(data)
    (sub / INDEX).write_text(json.dumps(index))
    return index


def verdict(index: dict) -> dict:
    """The values `run_validate` records for a verdict compared against `index`'s result."""
    return {"verdict": "PASSED", "outputs": ["out"], "config": CONFIG, "golden": {"seal": index["seal"], "states": {}}}


def reason(sub: Path, values: dict | None, config: str = CONFIG) -> str:
    check = VerdictCheck(config, str(sub))
    fresh = check(None, values)
    assert fresh == (check.reason == "")
    return check.reason


def test_the_verdict_holds_while_everything_its_result_was_keyed_on_holds(sub):
    values = verdict(keep(sub))
    check = VerdictCheck(CONFIG, str(sub))
    assert check(None, values) is True and repr(check) == "last verdict still valid"
    (sub / "kernels/k.cpp").write_text("// edited: a binary input, not the golden result's\n")
    (sub / "kernel_config.py").write_text("# regenerated\n")
    (sub / ".pypto_build/state.txt").parent.mkdir(exist_ok=True)
    (sub / ".pypto_build/state.txt").write_text("ours\n")
    os.utime(sub / "golden.py", ns=(10**9, 10**9))                  # a touch: content decides
    assert reason(sub, values) == ""


@pytest.mark.parametrize("values, config, why", [
    ({}, CONFIG, "never validated"),
    (None, CONFIG, "never validated"),
    ("kept", "config-2", "run configuration changed"),
    ({"verdict": "PASSED", "config": CONFIG, "golden": {}}, CONFIG, "no golden result was kept for the last verdict"),
    ({"verdict": "PASSED", "config": CONFIG, "golden": {"seal": "another"}}, CONFIG,
     "golden: the kept result is not the one the last verdict used"),
])
def test_verdict_reason_from_the_values(sub, values, config, why):
    kept = verdict(keep(sub))
    assert reason(sub, kept if values == "kept" else values, config) == why


def edit(sub: Path, rel: str, text: str = "changed\n") -> None:
    (sub / rel).write_text(text)


@pytest.mark.parametrize("change, why", [
    (lambda s: edit(s, "golden.py", "ATOL = 1e-3\n"), "golden: golden.py changed"),
    (lambda s: (s / "data/x.bin").unlink(), "golden: data/x.bin was removed"),
    (lambda s: edit(s, "notes.md"), "golden: notes.md is new"),
    (lambda s: edit(s, "data/y.bin"), "golden: data/y.bin is new"),
    (lambda s: (os.unlink(s / "lnk"), os.symlink(s / "data", s / "lnk")), "golden: the link lnk changed"),
    (lambda s: (s / golden_key.DATA_KEY).write_bytes(b"other tensors!!!!!!!"),
     f"golden: {golden_key.DATA_KEY} does not match its index"),
    (lambda s: (s / INDEX).unlink(), "golden: the kept result is gone"),
    (lambda s: edit(s, INDEX, (s / INDEX).read_text().replace('"atol": 1e-05', '"atol": 1.0')),
     "golden: the cached entry was edited"),
    (lambda s: edit(s, INDEX, "{not json"), "golden: the cached entry is unreadable (not JSON)"),
])
def test_a_change_to_what_the_golden_result_is_keyed_on_ends_the_verdict(sub, change, why):
    values = verdict(keep(sub))
    change(sub)
    assert reason(sub, values) == why


def test_a_file_golden_py_read_outside_the_sub_build_keys_it(sub, tmp_path):
    outside = tmp_path / "table.csv"
    outside.write_text("1,2\n")
    values = verdict(keep(sub, read=(str(outside),)))
    assert reason(sub, values) == ""
    outside.write_text("1,3\n")
    assert reason(sub, values) == f"golden: {outside}, which golden.py read, changed"


def test_an_environment_variable_golden_py_read_keys_it(sub, monkeypatch):
    monkeypatch.setenv("PYPTO_TEST_SEED", "1")
    values = verdict(keep(sub, environ={"PYPTO_TEST_SEED": "1", "PYPTO_TEST_UNSET": None}))
    assert reason(sub, values) == ""
    monkeypatch.setenv("PYPTO_TEST_UNSET", "now set")
    assert reason(sub, values) == "golden: environment variable PYPTO_TEST_UNSET changed"


@pytest.mark.parametrize("fields, why", [
    ({"python": "2.7.18"}, f"golden: Python 2.7.18 -> {golden_key.python_version()}"),
    ({"paths": None, "packages": {"torch": "0.0.1"}},
     f"golden: torch 0.0.1 -> {golden_key.versions([])['torch'] or 'none'}"),
    ({"paths": None, "packages": {"no-such-distribution-here": "1.0"}},
     "golden: no-such-distribution-here 1.0 -> none"),
    ({"params": {"inputs": {"name": "Other"}, "golden": {}}}, "golden: the parameters golden.py is called with changed"),
])
def test_the_interpreter_packages_and_parameters_key_it(sub, fields, why):
    assert reason(sub, verdict(keep(sub, **fields))) == why


def test_versions_are_not_looked_up_while_sys_path_has_not_moved(sub, monkeypatch):
    """importlib.metadata costs ~25 ms to import: asked only when sys.path's signature moved."""
    values = verdict(keep(sub, packages={"torch": "0.0.1"}))        # a wrong version, under today's signature
    monkeypatch.setattr(golden_key, "versions", lambda dists: pytest.fail("versions were looked up"))
    assert reason(sub, values) == ""


def test_a_kept_index_of_another_format_is_a_miss(sub):
    keep(sub, format=golden_key.FORMAT + 1)
    assert golden_key.load(sub) == (None, "the cached entry has another format")
    (sub / INDEX).unlink()
    assert golden_key.load(sub) == (None, None)


def test_refresh_keeps_restated_files_for_the_next_check(sub):
    values = verdict(keep(sub))
    check = VerdictCheck(CONFIG, str(sub))
    assert check.refresh(values) is None                            # only after a check that held
    os.utime(sub / "golden.py", ns=(10**9, 10**9))
    assert check(None, values) is True
    states = check.refresh(values)["golden"]["states"]
    assert FileState(*states["golden.py"]).mtime_ns == 10**9
    assert golden_key.DATA_KEY in states and set(states) - {golden_key.DATA_KEY} <= set(golden_key.tree(sub)[0])
    values = {**values, "golden": {**values["golden"], "states": states}}
    assert check(None, values) is True and check.refresh(values) is None     # nothing moved since


def test_the_key_leaves_out_ours_the_generated_and_the_program(sub):
    (sub / "cache").mkdir()
    (sub / "cache/x.bin").write_text("a binary\n")
    (sub / "data/__pycache__").mkdir()
    (sub / "data/__pycache__/m.pyc").write_text("bytecode\n")
    (sub / "data/kernel_config.py").write_text("# not at the top: golden.py's own\n")
    (sub / "compile_commands.json").write_text("[]\n")
    files, links = golden_key.tree(sub)
    assert files == ["data/kernel_config.py", "data/x.bin", "golden.py"]
    assert links == {"lnk": str(sub.parent / "shared")}
