"""The incremental graph: what compiles after each kind of change (real g++, real doit)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import age_tree, copy_dir, edit
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.errors import BuildError
from pypto_build.platforms.host.places import HOST_OUTPUTS, HOST_STAMP, host_binary

ALL_L2 = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic",
          "compile:aiv/main_incore_1_aiv", "orch:main"]


def binaries(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / HOST_OUTPUTS).rglob("*.so"))}


def test_cold_build_compiles_everything_and_writes_stamp(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=3)
    result = build(root)
    assert result.compiled == ALL_L2
    assert result.names("ran", "stamp:") == ["stamp:."]
    assert sorted(binaries(root)) == [host_binary(s) for s in ("kernels/aic/main_incore_0_aic.cpp",
                                                               "kernels/aic/main_incore_2_aic.cpp",
                                                               "kernels/aiv/main_incore_1_aiv.cpp",
                                                               "orchestration/main.cpp")]
    assert not [p for p in root.rglob("*.so") if HOST_OUTPUTS not in p.relative_to(root).as_posix()], \
        "nothing written where PyPTO keeps its binaries"
    assert not (root / "cache").exists()
    stamp = json.loads((root / HOST_STAMP).read_text())
    assert stamp["platform"] == "host" and stamp["schema"] == 1
    assert stamp["runtime_name"] == "tensormap_and_ringbuffer"
    assert stamp["runtime_revision"].startswith("pypto_build-")
    assert not list(root.rglob("*.tmp")), "no temp files left behind"


def test_rerun_compiles_nothing(l2):
    result = build(l2)
    assert result.compiled == []
    assert len(result.names("up-to-date")) == 5


def test_touch_every_file_compiles_nothing_and_state_is_refreshed(l2):
    before = binaries(l2)
    age_tree(l2, 3600)          # a "touch" to an old time: every stat differs, content does not
    assert build(l2).compiled == []
    assert binaries(l2) == before
    # The refreshed states now match the files' stat: a second run hashes nothing.
    from pypto_build.core import hashing
    hashing.forget()
    assert build(l2).compiled == []
    sources = [str(p) for p in l2.rglob("*.cpp")]
    hashed = {k[0] for k in hashing._memo}
    assert not hashed & {os.path.relpath(s, l2) for s in sources}, hashed


def test_cp_r_to_new_path_compiles_nothing(built_l2, tmp_path):
    dst = tmp_path / "moved"
    subprocess.run(["cp", "-r", str(built_l2), str(dst)], check=True)   # new mtimes, new path
    assert build(dst).compiled == []


def test_edit_one_kernel_compiles_exactly_it(l2):
    edit(synth.kernel_path(l2, 1))
    result = build(l2)
    assert result.compiled == ["compile:aiv/main_incore_1_aiv"]
    assert "changed" in next(u.reason for u in result.units if u.task == "compile:aiv/main_incore_1_aiv")
    assert build(l2).compiled == []


def test_edit_header_compiles_exactly_its_includers(l2):
    edit(l2 / "kernels" / "common.h")
    result = build(l2)
    assert result.compiled == ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic"]
    reasons = {u.task: u.reason for u in result.units}
    assert reasons["compile:aic/main_incore_0_aic"] == "header kernels/common.h changed"


def test_deleted_header_rebuilds_includers_then_reports_compiler_error(l2):
    (l2 / "kernels" / "common.h").unlink()
    with pytest.raises(BuildError) as info:
        build(l2)
    assert "common.h" in str(info.value)
    assert {f.task for f in info.value.failures} == {"compile:aic/main_incore_0_aic",
                                                     "compile:aic/main_incore_2_aic"} or \
        len(info.value.failures) == 1   # serial run stops at the first failure


@pytest.mark.slow
def test_changing_cxxflags_compiles_all(l2, monkeypatch):
    monkeypatch.setenv("CXXFLAGS", "-DEXTRA_FLAG=1")
    result = build(l2)
    assert result.compiled == ALL_L2
    assert {u.reason for u in result.units if u.task in ALL_L2} == {"command line changed"}
    assert build(l2).compiled == []


@pytest.mark.slow
def test_changing_cxx_compiles_all(l2, tmp_path, monkeypatch):
    wrapper = tmp_path / "my-g++"
    wrapper.write_text('#!/bin/sh\nexec g++ "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    result = build(l2)
    assert result.compiled == ALL_L2


def test_tampered_and_deleted_binaries_are_rebuilt(l2):
    k0 = l2 / host_binary("kernels/aic/main_incore_0_aic.cpp")
    good = k0.read_bytes()
    data = bytearray(good)
    data[100] ^= 0xFF
    k0.write_bytes(bytes(data))
    (l2 / host_binary("orchestration/main.cpp")).unlink()
    result = build(l2)
    assert result.compiled == ["compile:aic/main_incore_0_aic", "orch:main"]
    assert k0.read_bytes() == good, "rebuilt byte for byte (reproducible build)"
    assert "modified" in {u.task: u.reason for u in result.units}["compile:aic/main_incore_0_aic"]


def test_compile_error_names_unit_command_and_message_and_keeps_others(l2):
    before = binaries(l2)
    edit(synth.kernel_path(l2, 1), "\nthis is not C++;\n")
    edit(synth.kernel_path(l2, 2))
    with pytest.raises(BuildError) as info:
        build(l2, keep_going=True)
    failure, = info.value.failures
    assert failure.task == "compile:aiv/main_incore_1_aiv"
    assert "g++" in failure.message and "-D__DAV_VEC__" in failure.message      # the command
    assert "error:" in failure.message and "this is not C++" in failure.message  # the compiler's message
    assert info.value.result.names("ran", "compile:") == ["compile:aic/main_incore_2_aic"]
    after = binaries(l2)
    k0 = host_binary("kernels/aic/main_incore_0_aic.cpp")
    assert after[k0] == before[k0]
    assert not (l2 / HOST_STAMP).exists(), "no stamp while a unit is broken"
    # the failing unit is retried next time; the others stay up to date
    result = build(l2, check=False)
    assert result.names("failed") == ["compile:aiv/main_incore_1_aiv"]
    assert result.compiled == []


@pytest.mark.slow
def test_recompile_compiles_all_once_and_deletes_no_source(l2):
    sources = {p: p.read_bytes() for p in l2.rglob("*.cpp")}
    result = build(l2, recompile=True)
    assert result.compiled == ALL_L2
    assert {u.reason for u in result.units if u.task in ALL_L2} == {"forced by --recompile"}
    assert {p: p.read_bytes() for p in l2.rglob("*.cpp")} == sources
    assert build(l2).compiled == []


@pytest.mark.slow
def test_input_edited_during_compile_is_rebuilt_next_run(l2, tmp_path, monkeypatch):
    """doit issue #119: the state saved is the one checked, not the one after the action."""
    src = synth.kernel_path(l2, 1)
    flag = tmp_path / "edited-once"
    wrapper = tmp_path / "editing-g++"
    wrapper.write_text(
        '#!/bin/sh\ng++ "$@"; rc=$?\n'
        f'case "$*" in *{src.name}*) [ -e {flag} ] || {{ touch {flag}; echo "// edited" >> {src}; }};; esac\n'
        'exit $rc\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    assert build(l2).compiled == ALL_L2      # new compiler: all; kernel 1's source changes mid-compile
    assert flag.exists()
    result = build(l2)
    assert result.compiled == ["compile:aiv/main_incore_1_aiv"]
    assert build(l2).compiled == []


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_parallel_build_under_fork_and_spawn(tmp_path, method):
    root = synth.write_l2(tmp_path / "d", kernels=4)
    script = tmp_path / "run.py"
    script.write_text(
        "import multiprocessing, sys\n"
        "from pypto_build.api import build\n"
        "if __name__ == '__main__':\n"
        f"    multiprocessing.set_start_method({method!r})\n"
        f"    r = build({str(root)!r}, jobs=2)\n"
        "    print(len(r.compiled))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5"
    assert (root / HOST_STAMP).exists()
    assert build(root).compiled == []


@pytest.mark.slow
def test_l3_builds_every_sub_build_with_prefixed_names(l3):
    for chip in ("chip_a", "chip_b"):
        assert (l3 / "next_levels" / chip / HOST_STAMP).exists()
        assert (l3 / "next_levels" / chip / host_binary(f"orchestration/{chip}.cpp")).exists()
    assert not (l3 / "cache").exists()
    edit(next((l3 / "next_levels/chip_b/kernels").rglob("*.cpp")))
    result = build(l3)
    assert len(result.compiled) == 1 and result.compiled[0].startswith("compile:chip_b/")
    assert result.names("ran", "stamp:") == ["stamp:chip_b"]


@pytest.mark.slow
def test_a_runtime_the_host_platform_lacks_is_refused_while_planning(l3):
    """host_build_graph runs its orchestration on the host with ops our host runtime lacks: one line naming
    RUNTIME_CONFIG, exit 2, nothing compiled or unstamped (a runtime-name change that a platform can build
    rebuilds its sub-build: test_staleness.py)."""
    cfg = l3 / "next_levels/chip_a/kernel_config.py"
    stamp = l3 / "next_levels/chip_a" / HOST_STAMP
    before = stamp.read_bytes()
    cfg.write_text(cfg.read_text().replace('"tensormap_and_ringbuffer"', '"host_build_graph"'))
    line = next(i for i, text in enumerate(cfg.read_text().splitlines(), 1) if text.startswith("RUNTIME_CONFIG"))
    out = subprocess.run(["pypto-build", "build", str(l3)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f'pypto-build: error: {cfg}:{line}: RUNTIME_CONFIG["runtime"] is "host_build_graph", which the host '
        'platform cannot build or run; expected "tensormap_and_ringbuffer". Build it for a platform that has this '
        "runtime (PyPTO with simpler), or recompile via ir.compile() with the runtime this platform has"]
    assert stamp.read_bytes() == before


@pytest.mark.slow
def test_multi_orch_parent_builds_all_sub_builds(tmp_path):
    root = synth.write_multi_orch(tmp_path / "m")
    result = build(root)
    assert {n.split(":")[1].split("/")[0] for n in result.compiled} == {"orch_a", "orch_b"}
    assert build(root).compiled == []


def test_copy_keeps_state_between_copies(built_l2, tmp_path):
    a = copy_dir(built_l2, tmp_path / "a")
    edit(synth.kernel_path(a, 0))
    assert build(a).compiled == ["compile:aic/main_incore_0_aic"]
    assert build(built_l2).compiled == [], "the original is untouched by the copy's build"
