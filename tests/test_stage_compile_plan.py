"""Compile stage, the plan (issue 23 item 9): which units a directory gives, their argv, outputs and identities.

Planned through the public door (`graph.load_graph(root, platform=FakePlatform(...))`, which calls
`units.plan`) with the stand-in platform; nothing runs, nothing is compiled. Values are exact: a
change of task names, argv, output places or of what the argv key covers fails here.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pypto_build.errors import PyptoBuildError
from pypto_build.plan.graph import load_graph
from pypto_build.platforms import Facts
from pypto_build.toolchain.identity import BinaryContext, Revision
from pypto_build.testing import FakePlatform, synth
from pypto_build.toolchain.compiler import Compiler

FAKE = FakePlatform()
CXX = FAKE.compiler.command                 # (python, -S, fake_compiler.py)
ORCH, K0, K1, K2 = "orch:main", "compile:aic/main_incore_0_aic", "compile:aiv/main_incore_1_aiv", \
    "compile:aic/main_incore_2_aic"


def units(root: Path, platform: FakePlatform = FAKE, **kwargs) -> dict:
    return {u.task: u for p in load_graph(root, platform=platform, **kwargs).plans for u in p.units}


@pytest.fixture
def l2(tmp_path) -> Path:
    return synth.write_l2(tmp_path / "d", kernels=3)


def edit_config(root: Path, old: str, new: str) -> None:
    config = root / "kernel_config.py"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new, 1))


def test_an_l2_directory_gives_its_orchestration_first_then_one_unit_per_kernel(l2):
    (plan,) = load_graph(l2, platform=FAKE).plans
    assert [u.task for u in plan.units] == [ORCH, K0, K1, K2]
    assert [u.kind for u in plan.units] == ["orchestration", "kernel", "kernel", "kernel"]
    assert {u.sub_rel for u in plan.units} == {"."} and plan.steps == ()
    assert plan.stamp_path == "cache/binary_context.json" and {u.stamp_path for u in plan.units} == {plan.stamp_path}
    assert plan.outputs == ["orchestration/main.so", "kernels/aic/main_incore_0_aic.so",
                            "kernels/aiv/main_incore_1_aiv.so", "kernels/aic/main_incore_2_aic.so"]


def test_a_unit_carries_its_exact_argv_source_output_and_entry(l2):
    found = units(l2)
    k1, orch = found[K1], found[ORCH]
    assert (k1.source, k1.output) == ("kernels/aiv/main_incore_1_aiv.cpp", "kernels/aiv/main_incore_1_aiv.so")
    assert k1.argv == (*CXX, "-DFAKE_FLAG=1", "-o", "./kernels/aiv/main_incore_1_aiv.so",
                       "./kernels/aiv/main_incore_1_aiv.cpp")
    assert (k1.entry, k1.cwd, k1.covered, k1.timeout) == ("kernel_entry", "", (), 900.0)
    assert (orch.source, orch.output) == ("orchestration/main.cpp", "orchestration/main.so")
    assert orch.argv == (*CXX, "-DFAKE_FLAG=1", "-o", "./orchestration/main.so", "./orchestration/main.cpp")
    assert orch.entry == "aicpu_orchestration_entry"


def test_the_compiler_timeout_comes_from_the_environment(l2, monkeypatch):
    monkeypatch.setenv("PYPTO_COMPILER_TIMEOUT", "7.5")
    assert {u.timeout for u in units(l2).values()} == {7.5}


@dataclass(frozen=True)
class CompilerElsewhere(FakePlatform):
    """The same stand-in compiler, started through another path (`python`: a link to the interpreter)."""

    python: str = ""

    @property
    def compiler(self) -> Compiler:
        found = super().compiler
        return replace(found, command=(self.python, *found.command[1:]))


def test_the_argv_key_follows_the_flags_not_the_compiler_nor_the_place(l2, tmp_path):
    """The compiler is an input of its own (its identity), so neither its version nor its path is in the
    key; a flag changes it; a copy of the directory elsewhere keeps argv and key (paths are relative)."""
    keys = {t: u.argv_key for t, u in units(l2).items()}
    assert len(set(keys.values())) == 4                              # each unit its own argv
    assert {t: u.argv_key for t, u in units(l2, FakePlatform(version="2")).items()} == keys
    os.symlink(sys.executable, tmp_path / "python-elsewhere")
    elsewhere = units(l2, CompilerElsewhere(python=str(tmp_path / "python-elsewhere")))
    assert elsewhere[K1].argv[0] == str(tmp_path / "python-elsewhere")
    assert {t: u.argv_key for t, u in elsewhere.items()} == keys
    flagged = {t: u.argv_key for t, u in units(l2, FakePlatform(defines=("-DFAKE_FLAG=2",))).items()}
    assert all(flagged[t] != keys[t] for t in keys)
    copy = Path(shutil.copytree(l2, tmp_path / "elsewhere" / "copy"))
    moved = units(copy)
    assert {t: u.argv_key for t, u in moved.items()} == keys
    assert {t: u.argv for t, u in moved.items()} == {t: u.argv for t, u in units(l2).items()}


def test_an_extra_include_dir_joins_the_argv_and_the_include_roots(l2):
    (l2 / "inc").mkdir()
    edit_config(l2, '"core_type": "aiv",', '"core_type": "aiv", "extra_include_dirs": [str(_ROOT_DIR / "inc")],')
    found = units(l2)
    assert found[K1].argv == (*CXX, "-DFAKE_FLAG=1", "-I./inc", "-o", "./kernels/aiv/main_incore_1_aiv.so",
                              "./kernels/aiv/main_incore_1_aiv.cpp")
    assert str((l2 / "inc").resolve()) in found[K1].include_roots
    assert str((l2 / "inc").resolve()) not in found[K0].include_roots


def test_an_external_kernel_is_compiled_in_place_into_the_sub_build(l2, tmp_path):
    """Its source stays where it is (absolute in the argv), its binary goes into the sub-build, and its own
    directory is an include root (PyPTO's opt-in)."""
    outside = tmp_path / "ext"
    outside.mkdir()
    shutil.copy(l2 / "kernels/aiv/main_incore_1_aiv.cpp", outside / "mine.cpp")
    edit_config(l2, 'str(_ROOT_DIR / "kernels" / "aiv" / "main_incore_1_aiv.cpp"), "core_type": "aiv",',
                f'"{outside / "mine.cpp"}", "core_type": "aiv", "external": True,')
    unit = units(l2)["compile:aiv/mine"]
    assert unit.source == str(outside / "mine.cpp")
    assert unit.output == "cache/external/1_aiv_mine.so"
    assert unit.argv[-3:] == ("-o", "./cache/external/1_aiv_mine.so", str(outside / "mine.cpp"))
    assert str(outside.resolve()) in unit.include_roots


def test_an_l3_directory_plans_each_chip_as_its_own_sub_build(tmp_path):
    root = synth.write_l3(tmp_path / "l3", chips=("chip_a", "chip_b"), kernels=2)
    plans = load_graph(root, platform=FAKE).plans
    assert [p.sub.rel for p in plans] == ["next_levels/chip_a", "next_levels/chip_b"]
    a = plans[0]
    assert [u.task for u in a.units] == ["orch:chip_a/chip_a", "compile:chip_a/aic/chip_a_incore_0_aic",
                                         "compile:chip_a/aiv/chip_a_incore_1_aiv"]
    assert a.stamp_path == "next_levels/chip_a/cache/binary_context.json"
    k0 = a.units[1]
    assert (k0.sub_rel, k0.output) == ("next_levels/chip_a", "next_levels/chip_a/kernels/aic/chip_a_incore_0_aic.so")
    assert k0.argv[-3:] == ("-o", "./kernels/aic/chip_a_incore_0_aic.so", "./kernels/aic/chip_a_incore_0_aic.cpp")


def test_a_sub_build_the_host_driver_never_names_is_planned_only_when_asked(tmp_path):
    root = synth.write_l3(tmp_path / "l3", chips=("chip_a",), kernels=1)
    synth.write_l2(root / "next_levels" / "old", kernels=1, orch_name="old")
    assert [p.sub.rel for p in load_graph(root, platform=FAKE).plans] == ["next_levels/chip_a"]
    assert [p.sub.rel for p in load_graph(root, platform=FAKE, include_stale=True).plans] == [
        "next_levels/chip_a", "next_levels/old"]


def test_the_binary_context_is_the_platforms_and_unknown_when_a_revision_is(l2):
    (plan,) = load_graph(l2, platform=FAKE).plans
    assert plan.context == BinaryContext("fake", "tensormap_and_ringbuffer", Revision("fake-runtime-1"),
                                         Revision("none"))
    assert plan.context.digest and plan.context.unknown is None
    other = load_graph(l2, platform=FakePlatform(runtime_revision=Revision("fake-runtime-2"))).plans[0]
    assert other.context.digest != plan.context.digest
    unknown = load_graph(l2, platform=FakePlatform(runtime_revision=Revision(None, "no git"))).plans[0]
    assert unknown.context.digest is None and unknown.context.unknown == "runtime identity unknown (no git)"


class OnlyHostBuildGraph(FakePlatform):
    @property
    def facts(self) -> Facts:
        return replace(super().facts, runtimes=("host_build_graph",))


@pytest.mark.parametrize("change, platform, words", [
    (('"kernels" / "aiv" / "main_incore_1_aiv.cpp"', '"kernels" / "aiv" / "gone.cpp"'), FAKE,
     ["kernel_config.py:", "kernel main_incore_1_aiv source kernels/aiv/gone.cpp does not exist"]),
    (('"kernels" / "aic" / "main_incore_2_aic.cpp"', '"kernels" / "aic" / "main_incore_0_aic.cpp"'), FAKE,
     ["kernel_config.py: two entries build compile:aic/main_incore_0_aic"]),
    (None, OnlyHostBuildGraph(),
     ['RUNTIME_CONFIG["runtime"] is "tensormap_and_ringbuffer", which the fake platform cannot build or run']),
])
def test_a_directory_the_plan_cannot_build_is_refused_in_one_line(l2, change, platform, words):
    if change:
        edit_config(l2, *change)
    with pytest.raises(PyptoBuildError) as refused:
        load_graph(l2, platform=platform)
    message = str(refused.value)
    assert "\n" not in message and all(w in message for w in words), message
