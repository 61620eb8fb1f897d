"""The staleness decisions, fast: what is stale and why, with a stand-in compiler (issue 12, item 5).

Every build here plans with `FakePlatform` (pypto_build.testing: `python
fake_compiler.py`, no g++, no torch) and runs through the one pipeline (`pipeline.run` on its graph); `explain`
must say the same reason a build then shows. Reasons are compared as exact
strings, so a change of wording or of logic in uptodate.py / depstate.py /
explanation.py fails here. The end-to-end tests with g++ (test_explain.py,
test_headers.py, ...) stay; these pin the decisions themselves.

L2 directory of `synth.write_l2(kernels=3)`: kernels 0 and 2 (aic) include
"../common.h", kernel 1 (aiv) includes nothing of the build directory.

The racy window (`filestate.RACY_NS`): a state recorded within it is re-hashed
next run. That only costs reads; nothing here asserts on timing. `rebuilds` waits
(`settle_ctimes`) before it builds: a header the test wrote in the file system
clock tick a compile starts in is rightly read as possibly changed during the
compile, recorded without a digest, and rebuilt once more (seen 1 run in 5).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import settle_ctimes
from pypto_build.pipeline import BuildResult, run
from pypto_build.options import Request
from pypto_build.compile.depfile import parse_depfile
from pypto_build.engine.explanation import explain
from pypto_build.plan.graph import load_graph
from pypto_build.toolchain.identity import Revision
from pypto_build.testing import FakePlatform, fake_compiler, synth

K0 = "compile:aic/main_incore_0_aic"       # includes ../common.h
K1 = "compile:aiv/main_incore_1_aiv"       # includes no header of the build directory
K2 = "compile:aic/main_incore_2_aic"       # includes ../common.h
ORCH = "orch:main"
STAMP = "stamp:."
UNITS = (ORCH, K0, K1, K2)                 # dispatch order: the orchestration first
K1_SRC = "kernels/aiv/main_incore_1_aiv.cpp"
K1_BIN = "kernels/aiv/main_incore_1_aiv.so"
FAKE = FakePlatform()
STAMP_REBUILT = "cache/binary_context.json missing or outdated"   # every compile removes the stamp


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def build(root: Path, platform: FakePlatform = FAKE, **kwargs) -> BuildResult:
    return run(root, Request(**kwargs), graph=load_graph(root, platform=platform), check=False)


def stale(root: Path, platform: FakePlatform = FAKE) -> dict[str, str]:
    """What `pypto-build explain` would list: task -> reason, for every task that would run."""
    return {e.task: e.reason for e in explain(load_graph(root, platform=platform)) if e.status != "up-to-date"}


def ran(result: BuildResult) -> dict[str, str]:
    """task -> reason of every task the build ran (compiles and the stamp)."""
    return {u.task: u.reason for u in result.units if u.status == "ran"}


def after(units: dict[str, str]) -> dict[str, str]:
    """What explain says for the stamp once `units` (in dispatch order) would run."""
    first = next(t for t in UNITS if t in units)
    return {**units, STAMP: f"after {first}"}


def rebuilds(root: Path, units: dict[str, str], platform: FakePlatform = FAKE, *, stamp: str = "") -> BuildResult:
    """explain names exactly `units` with their reasons, a build runs exactly those (and the stamp) with
    the same reasons, and then nothing is stale. `stamp`: the stamp's own reason, when it has one
    before any compile runs (else explain says it runs after the first unit)."""
    assert stale(root, platform) == ({**units, STAMP: stamp} if stamp else after(units))
    settle_ctimes()     # a header the test just wrote, read in the clock tick the compile starts in: rebuilt again
    result = build(root, platform)
    assert result.ok and ran(result) == {**units, STAMP: STAMP_REBUILT}
    assert stale(root, platform) == {}          # explain, not another build: each build costs ~0.1 s
    return result


def stamp_of(root: Path) -> dict:
    return json.loads((root / "cache/binary_context.json").read_text())


def add_line(path: Path, line: str, after_text: str = '#include "tensor.h"\n') -> None:
    text = path.read_text()
    assert after_text in text
    path.write_text(text.replace(after_text, after_text + line + "\n", 1))


@pytest.fixture(scope="module")
def built_l2(tmp_path_factory) -> Path:
    """A synthetic L2 directory, built once with the fake platform."""
    root = synth.write_l2(tmp_path_factory.mktemp("pristine") / "l2", kernels=3)
    result = build(root)
    assert result.ok and sorted(result.compiled) == sorted(UNITS)
    return root


@pytest.fixture
def l2(built_l2, tmp_path) -> Path:
    """A private copy of the built directory (mtimes kept, new inodes: states are refreshed by content)."""
    root = Path(shutil.copytree(built_l2, tmp_path / "l2", symlinks=True))
    return root


# ---------------------------------------------------------------------------
# first sight, no-op, touch
# ---------------------------------------------------------------------------


def test_first_sight_of_a_never_built_directory_runs_everything(tmp_path):
    """No state yet: every task runs, "never built" (binaries PyPTO left there are not adopted)."""
    root = synth.write_l2(tmp_path / "l2", kernels=3)
    (root / K1_BIN).write_text("a binary PyPTO built\n")
    assert stale(root) == {**dict.fromkeys(UNITS, "never built"), STAMP: "never built"}
    assert not (root / ".pypto_build").exists()                 # explain wrote nothing
    result = build(root)
    assert result.ok and ran(result) == {**dict.fromkeys(UNITS, "never built"), STAMP: STAMP_REBUILT}
    assert (root / K1_BIN).read_text().startswith("fake-object ")
    assert stamp_of(root) == {"platform": "fake", "pto_isa_revision": "none", "runtime_name": "tensormap_and_ringbuffer",
                              "runtime_revision": "fake-runtime-1", "schema": 1}


def test_no_op_runs_nothing(l2):
    assert stale(l2) == {}
    result = build(l2)
    assert result.ok and ran(result) == {} and result.names("up-to-date") == sorted([*UNITS, STAMP])


def test_touch_without_content_change_runs_nothing(l2):
    """Every file's stat moves (sources, header, binaries, stamp, kernel_config.py): content decides."""
    for dirpath, dirs, files in os.walk(l2):
        dirs[:] = [d for d in dirs if d != ".pypto_build"]
        for name in files:
            os.utime(os.path.join(dirpath, name), ns=(1, 1))
    assert stale(l2) == {}
    assert ran(build(l2)) == {}


# ---------------------------------------------------------------------------
# sources and headers
# ---------------------------------------------------------------------------


def test_source_edit_rebuilds_only_that_unit(l2):
    add_line(l2 / K1_SRC, "// edited")
    rebuilds(l2, {K1: f"changed: {K1_SRC}"})


def test_source_edit_reverted_before_building_runs_nothing(l2):
    text = (l2 / K1_SRC).read_text()
    (l2 / K1_SRC).write_text(text + "// edited\n")
    (l2 / K1_SRC).write_text(text)
    assert stale(l2) == {}
    assert ran(build(l2)) == {}


def test_header_edit_rebuilds_only_its_includers(l2):
    (l2 / "kernels/common.h").write_text((l2 / "kernels/common.h").read_text() + "// edited\n")
    before = (l2 / "kernels/aic/main_incore_0_aic.so").read_text()
    rebuilds(l2, {K0: "header kernels/common.h changed", K2: "header kernels/common.h changed"})
    assert (l2 / "kernels/aic/main_incore_0_aic.so").read_text() != before    # the new header was read


def test_new_header_shadowing_nothing_runs_nothing(l2):
    """A header nobody includes, next to the sources and the one in use, changes no unit."""
    (l2 / "kernels/aic/unused.h").write_text("#define UNUSED 1\n")
    (l2 / "kernels/common2.h").write_text("#define UNUSED 2\n")
    assert stale(l2) == {}
    assert ran(build(l2)) == {}


def test_header_deleted_reruns_its_includers_which_fail_and_stay_stale(l2):
    (l2 / "kernels/common.h").unlink()
    removed = "header kernels/common.h removed"
    assert stale(l2) == after({K0: removed, K2: removed})
    result = build(l2, keep_going=True)
    assert not result.ok and result.names("failed") == [K0, K2]
    assert result.names("up-to-date") == [K1, ORCH]
    assert "fatal error: ../common.h: No such file or directory" in result.failures[0].headline
    assert not (l2 / "cache/binary_context.json").exists()      # a half-built sub-build carries no stamp
    # The failed units still differ from their last success: the same reason again.
    assert stale(l2) == {K0: removed, K2: removed, STAMP: STAMP_REBUILT}


def include_dir(root: Path) -> None:
    """Give kernel 1 the extra include dir `inc/` and make it include "cfg.h" from there."""
    config = root / "kernel_config.py"
    config.write_text(config.read_text().replace(
        '"core_type": "aiv",', '"core_type": "aiv", "extra_include_dirs": [str(_ROOT_DIR / "inc")],', 1))
    (root / "inc").mkdir()
    (root / "inc/cfg.h").write_text("#define CFG 1\n")
    add_line(root / K1_SRC, '#include "cfg.h"')


def test_header_from_an_include_dir_is_tracked(l2):
    include_dir(l2)
    result = rebuilds(l2, {K1: "command line changed"})     # -I./inc joined its argv
    (l2 / "inc/other.h").write_text("#define OTHER 1\n")      # new on the include path, shadows nothing
    assert stale(l2) == {} and result.ok
    (l2 / "inc/cfg.h").write_text("#define CFG 2\n")
    rebuilds(l2, {K1: "header inc/cfg.h changed"})


def test_new_header_shadowing_the_one_in_use_is_not_seen_known_limit(l2):
    """docs/architecture.md, "Known limit": a header created earlier on the search path is not seen
    until something else rebuilds the unit; then the depfile names it and it is tracked."""
    include_dir(l2)
    build(l2)
    (l2 / "kernels/aiv/cfg.h").write_text("#define CFG 3\n")   # the includer's own dir is searched first
    assert stale(l2) == {}
    add_line(l2 / K1_SRC, "// edited")
    rebuilds(l2, {K1: f"changed: {K1_SRC}"})
    (l2 / "inc/cfg.h").write_text("#define CFG 4\n")            # no longer read
    assert stale(l2) == {}
    (l2 / "kernels/aiv/cfg.h").write_text("#define CFG 5\n")
    assert stale(l2) == after({K1: "header kernels/aiv/cfg.h changed"})


# ---------------------------------------------------------------------------
# command line, compiler, identity
# ---------------------------------------------------------------------------


def test_argv_change_rebuilds_every_unit_and_back_again(l2):
    flag2 = FakePlatform(defines=("-DFAKE_FLAG=2",))
    before = (l2 / K1_BIN).read_text()
    rebuilds(l2, dict.fromkeys(UNITS, "command line changed"), flag2)
    assert (l2 / K1_BIN).read_text() != before
    rebuilds(l2, dict.fromkeys(UNITS, "command line changed"))     # only the last build is remembered
    assert (l2 / K1_BIN).read_text() == before                       # the stand-in is deterministic


def test_compiler_identity_change_rebuilds_every_unit(l2):
    rebuilds(l2, dict.fromkeys(UNITS, "compiler changed"), FakePlatform(version="2"))


def test_runtime_revision_change_rebuilds_every_unit_and_restamps(l2):
    rebuilds(l2, dict.fromkeys(UNITS, "runtime/PTO-ISA identity changed"),
             FakePlatform(runtime_revision=Revision("fake-runtime-2")), stamp=STAMP_REBUILT)
    assert stamp_of(l2)["runtime_revision"] == "fake-runtime-2"


def test_runtime_name_change_rebuilds_every_unit_and_restamps(l2):
    cfg = l2 / "kernel_config.py"
    cfg.write_text(cfg.read_text().replace('"tensormap_and_ringbuffer"', '"host_build_graph"'))
    rebuilds(l2, dict.fromkeys(UNITS, "runtime/PTO-ISA identity changed"), stamp=STAMP_REBUILT)
    assert stamp_of(l2)["runtime_name"] == "host_build_graph"


UNKNOWN = FakePlatform(runtime_revision=Revision(None, "no revision in this test"))
WHY_UNKNOWN = "runtime identity unknown (no revision in this test)"


def test_unknown_identity_rebuilds_every_unit_every_run_and_writes_no_stamp(l2):
    for _ in range(2):
        assert stale(l2, UNKNOWN) == {**dict.fromkeys(UNITS, WHY_UNKNOWN), STAMP: f"no stamp: {WHY_UNKNOWN}"}
        result = build(l2, UNKNOWN)
        assert result.ok and ran(result) == {**dict.fromkeys(UNITS, WHY_UNKNOWN), STAMP: f"no stamp: {WHY_UNKNOWN}"}
        assert not (l2 / "cache/binary_context.json").exists()
        assert result.warnings == (f"pypto-build: {WHY_UNKNOWN}: binaries are not trusted, every unit rebuilds "
                                   "and no binary_context.json is written",)


def test_identity_known_again_after_unknown_rebuilds_and_stamps(l2):
    assert build(l2, UNKNOWN).ok
    rebuilds(l2, dict.fromkeys(UNITS, "runtime/PTO-ISA identity changed"), stamp=STAMP_REBUILT)
    assert stamp_of(l2)["runtime_revision"] == "fake-runtime-1"


# ---------------------------------------------------------------------------
# outputs and the stamp
# ---------------------------------------------------------------------------


def test_output_tampered_with_rebuilds_only_that_unit(l2):
    good = (l2 / K1_BIN).read_text()
    (l2 / K1_BIN).write_text(good.upper())                      # same size: content decides
    rebuilds(l2, {K1: f"output {K1_BIN} modified since it was built"})
    assert (l2 / K1_BIN).read_text() == good


def test_output_deleted_rebuilds_only_that_unit(l2):
    (l2 / "orchestration/main.so").unlink()
    rebuilds(l2, {ORCH: "output orchestration/main.so missing"})
    assert (l2 / "orchestration/main.so").is_file()


def test_stamp_tampered_with_rewrites_only_the_stamp(l2):
    (l2 / "cache/binary_context.json").write_text("{}\n")
    assert stale(l2) == {STAMP: STAMP_REBUILT}
    assert ran(build(l2)) == {STAMP: STAMP_REBUILT}
    assert stamp_of(l2)["runtime_revision"] == "fake-runtime-1"


# ---------------------------------------------------------------------------
# failures
# ---------------------------------------------------------------------------


def test_compile_error_fails_the_unit_keeps_the_others_and_reruns_until_it_succeeds(l2):
    src = l2 / K1_SRC
    good = src.read_text()
    binary = (l2 / K1_BIN).read_text()
    add_line(src, "#error broken on purpose")
    add_line(l2 / "kernels/aic/main_incore_2_aic.cpp", "// edited")
    changed = f"changed: {K1_SRC}"
    assert stale(l2) == after({K1: changed, K2: "changed: kernels/aic/main_incore_2_aic.cpp"})
    result = build(l2, keep_going=True)
    assert not result.ok and result.names("failed") == [K1]
    assert ran(result) == {K2: "changed: kernels/aic/main_incore_2_aic.cpp"}     # the other edit is built
    assert result.failures[0].headline == (f"{K1_SRC}: compiling failed: ./{K1_SRC}:20:2: error: #error broken on "
                                           f"purpose — fix it and rebuild ({K1})")
    assert not (l2 / "cache/binary_context.json").exists()
    # Decided against the last success: the source still differs from it.
    assert stale(l2) == {K1: changed, STAMP: STAMP_REBUILT}
    # Back to exactly what the kept binary was built from: it is still not trusted, the unit runs.
    src.write_text(good)
    assert (l2 / K1_BIN).read_text() == binary
    assert stale(l2) == {K1: "its last run failed", STAMP: STAMP_REBUILT}
    result = build(l2)
    assert result.ok and ran(result) == {K1: "its last run failed", STAMP: STAMP_REBUILT}
    assert ran(build(l2)) == {}


def test_unit_that_never_succeeded_says_so(tmp_path):
    root = synth.write_l2(tmp_path / "l2", kernels=3)
    add_line(root / K1_SRC, "#error broken on purpose")
    result = build(root, keep_going=True)
    assert result.names("failed") == [K1] and sorted(result.compiled) == [K0, K2, ORCH]
    assert {u.task: (u.status, u.reason) for u in result.units}[STAMP] == ("skipped", "a unit it depends on failed")
    # doit marks the skipped stamp failed as well, so explain says the same of it as of the unit.
    never = "its last run failed (it never succeeded)"
    assert stale(root) == {K1: never, STAMP: never}


# ---------------------------------------------------------------------------
# the stand-in itself
# ---------------------------------------------------------------------------


def test_fake_compiler_depfile_is_exact(tmp_path):
    (tmp_path / "inc dir").mkdir()
    (tmp_path / "inc dir" / "a #1.h").write_text('#include "b$.h"\n')
    (tmp_path / "inc dir" / "b$.h").write_text("// b\n")
    (tmp_path / "src.cpp").write_text('#include <vector>\n#include "a #1.h"\n#include "tensor.h"\n')
    argv = [sys.executable, "-S", fake_compiler.__file__, "-DX=1", "-Iinc dir", "-MD", "-MF", "d.tmp", "-MT",
            "./out.so", "-ffile-prefix-map=/x=.", "-o", "out.tmp", "./src.cpp"]
    subprocess.run(argv, cwd=tmp_path, check=True)
    assert parse_depfile((tmp_path / "d.tmp").read_text(), "./out.so") == ["./src.cpp", "inc dir/a #1.h",
                                                                            "inc dir/b$.h"]
    first = (tmp_path / "out.tmp").read_text()
    argv[argv.index("out.tmp")] = "other.tmp"                   # paths do not enter the "binary"
    subprocess.run(argv, cwd=tmp_path, check=True)
    assert (tmp_path / "other.tmp").read_text() == first
    (tmp_path / "src.cpp").write_text('#include "missing.h"\n')
    failed = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert failed.returncode == 1 and "./src.cpp:1:10: fatal error: missing.h: No such file or directory" in failed.stderr
