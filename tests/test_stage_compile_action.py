"""Compile stage, the action (issue 23 item 9): `compile_actions.run_compile` called as doit calls it.

One unit at a time, in the build root, with the stand-in compiler (`FakePlatform`): what a compile
records for the next check, and what it refuses to install. No doit run, no g++.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from doit.exceptions import TaskFailed

from pypto_build.compile import header_sets
from pypto_build.compile.actions import run_compile
from pypto_build.compile.depfile import TRACKING
from pypto_build.core.filestate import FileState
from pypto_build.plan.graph import load_graph
from pypto_build.core.hashing import file_digest
from pypto_build.builddir.state_dir import current_state_folder
from pypto_build.testing import FakePlatform, synth

FAKE = FakePlatform()
K0 = "compile:aic/main_incore_0_aic"       # includes ../common.h
K1 = "compile:aiv/main_incore_1_aiv"       # includes no header of the build directory


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    root = synth.write_l2(tmp_path / "d", kernels=2)
    monkeypatch.chdir(root)                   # actions run in the build root
    return root


def compile_unit(root: Path, task: str):
    """Run the unit's action as the engine wires it; (its result, the unit, the plan)."""
    graph = load_graph(root, platform=FAKE)
    plan = next(p for p in graph.plans if any(u.task == task for u in p.units))
    unit = next(u for u in plan.units if u.task == task)
    compiler = FAKE.compiler_for(unit.kind, plan.context.runtime_name)
    folder = current_state_folder(root, FAKE.name)
    return run_compile(unit, compiler.identity, plan.context.digest, folder), unit, plan


def test_a_compile_records_what_the_next_check_compares(root):
    values, unit, plan = compile_unit(root, K0)
    assert values.keys() == {"argv", "compiler", "context", "tracking", "headers", "outside", "output"}
    assert (values["argv"], values["context"], values["tracking"]) == (unit.argv_key, plan.context.digest, TRACKING)
    assert values["compiler"] == FAKE.compiler.identity
    assert list(values["headers"]) == ["kernels/common.h"]             # relative to the build root; not the source
    assert FileState(*values["headers"]["kernels/common.h"]).digest == file_digest("kernels/common.h")
    assert values["outside"] is None
    assert FileState(*values["output"]).digest == file_digest(unit.output)
    assert Path(unit.output).read_text().startswith("fake-object ")
    assert sorted(os.listdir(Path(unit.output).parent)) == ["main_incore_0_aic.cpp", "main_incore_0_aic.so"]


def test_every_compile_removes_the_stamp_first(root):
    stamp = root / "cache/binary_context.json"
    stamp.parent.mkdir()
    stamp.write_text("{}\n")
    compile_unit(root, K1)
    assert not stamp.exists()                 # the sub-build is in flux until its stamp task runs


def test_headers_outside_the_build_directory_go_to_a_shared_set(root, tmp_path):
    """An external kernel may include headers from its own directory: they are inputs, kept as a set."""
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "mine.h").write_text("#define MINE 1\n")
    (ext / "mine.cpp").write_text('#include "mine.h"\nint kernel_entry;\n')
    config = root / "kernel_config.py"
    config.write_text(config.read_text().replace(
        'str(_ROOT_DIR / "kernels" / "aiv" / "main_incore_1_aiv.cpp"), "core_type": "aiv",',
        f'"{ext / "mine.cpp"}", "core_type": "aiv", "external": True,'))
    values, unit, _ = compile_unit(root, "compile:aiv/mine")
    assert values["headers"] == {}
    folder = current_state_folder(root, FAKE.name)
    assert list(header_sets.read(values["outside"], folder)) == [str(ext / "mine.h")]
    assert unit.output == "cache/external/1_aiv_mine.so" and Path(unit.output).is_file()


def test_a_header_resolving_outside_the_directory_is_refused_and_nothing_installed(root, tmp_path):
    (tmp_path / "evil.h").write_text("#define EVIL 1\n")
    src = root / "kernels/aiv/main_incore_1_aiv.cpp"
    src.write_text(f'#include "{tmp_path / "evil.h"}"\n' + src.read_text())
    Path("kernels/aiv/main_incore_1_aiv.so").write_text("an old binary\n")
    failed, unit, _ = compile_unit(root, K1)
    assert isinstance(failed, TaskFailed)
    assert failed.message.splitlines()[0].endswith(
        f"{unit.task}: {unit.source} includes {tmp_path / 'evil.h'}, which resolves outside the build directory "
        f"(to {tmp_path / 'evil.h'}); keep headers inside the build directory (an external kernel may also use its "
        "own directory and its extra_include_dirs) — binary not installed")
    assert not Path(unit.output).exists()
    assert os.listdir(Path(unit.output).parent) == ["main_incore_1_aiv.cpp"]      # no temp files left


def test_a_compile_error_fails_the_unit_and_keeps_the_binary_it_had(root):
    _, unit, _ = compile_unit(root, K1)
    good = Path(unit.output).read_text()
    src = root / "kernels/aiv/main_incore_1_aiv.cpp"
    src.write_text(src.read_text() + "#error broken on purpose\n")
    failed, _, _ = compile_unit(root, K1)
    assert isinstance(failed, TaskFailed)
    assert failed.message.splitlines()[0].startswith(
        "kernels/aiv/main_incore_1_aiv.cpp: compiling failed: ./kernels/aiv/main_incore_1_aiv.cpp:")
    assert "error: #error broken on purpose — fix it and rebuild (compile:aiv/main_incore_1_aiv)" in failed.message
    assert Path(unit.output).read_text() == good
    assert sorted(os.listdir(Path(unit.output).parent)) == ["main_incore_1_aiv.cpp", "main_incore_1_aiv.so"]
