"""A drop-in for the seed's benchmarking recipe (issue 22 item 9): `rebuild_kernel_cpp_from_pto` runs the `.pto`
stage only; `invalidate_binary_cache` makes the next build, whatever front end starts it, rebuild every binary
without deleting anything. With the stand-in ptoas (pypto_build.testing.fake_ptoas) and real g++."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import age_tree, copy_dir
from pypto_build.api import build
from pypto_build.errors import LayoutError
from pypto_build.platforms.host.places import host_binary
from pypto_build.testing import synth

torch = pytest.importorskip("torch")

UNITS = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic", "compile:aiv/main_incore_1_aiv",
         "orch:main"]
K1, K2 = "kernels/aiv/main_incore_1_aiv.cpp", "kernels/aic/main_incore_2_aic.cpp"
MARK = ".pypto_build/invalidated.json"
FORCED = "forced by invalidate_binary_cache()"


@pytest.fixture(scope="session")
def built_pto_golden(tmp_path_factory) -> Path:
    root = synth.write_l2(tmp_path_factory.mktemp("pristine-recipe") / "d", kernels=3, pto=True, golden=True)
    build(root)
    return root


@pytest.fixture
def d(built_pto_golden, tmp_path) -> Path:
    return copy_dir(built_pto_golden, tmp_path / "d")


def binaries(root: Path) -> dict[str, tuple[int, bytes]]:
    """Each host binary: (inode, bytes)."""
    found = {}
    for source in [K1, K2, "kernels/aic/main_incore_0_aic.cpp", "orchestration/main.cpp"]:
        path = root / host_binary(source)
        found[source] = (path.stat().st_ino, path.read_bytes())
    return found


def tree(root: Path) -> dict[str, bytes]:
    """Every file of the directory but the mark and doit's state (which a build rewrites)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).as_posix() != MARK}


def edit_pto(root: Path, coeff: str) -> None:
    pto = synth.pto_path(root, "main_incore_2_aic")
    text = pto.read_text()
    assert "synth_scale(a[i], 3.0f)" in text
    pto.write_text(text.replace("synth_scale(a[i], 3.0f)", f"synth_scale(a[i], {coeff})"))


def edit_cpp(root: Path, coeff: str) -> None:
    kernel = root / K1
    text = kernel.read_text()
    old = "out[i] * 0.5f + a[i] * 2.0f" if "a[i] * 2.0f" in text else "out[i] * 0.5f + synth_scale(a[i], 2.0f)"
    assert old in text
    kernel.write_text(text.replace(old, old.replace("2.0f", coeff)))


def test_the_recipe_as_the_seed_writes_it_picks_up_a_pto_edit_and_a_cpp_edit(d, ptoas_env):
    # out = ((a * 0.5 + a * c1) * 0.5 + a * c2): c1 = 2 (kernel 1) and c2 = 3 (kernel 2) as compiled
    edit_pto(d, "5.0f")          # c2 = 5, in ptoas/main_incore_2_aic.pto
    edit_cpp(d, "6.0f")          # c1 = 6, in kernels/aiv/main_incore_1_aiv.cpp
    a = torch.randn(16)
    out = torch.zeros(16)
    before = binaries(d)

    from pypto_build import CompiledProgram, benchmark
    from pypto_build import invalidate_binary_cache, rebuild_kernel_cpp_from_pto

    work_dir = str(d)
    rebuild_kernel_cpp_from_pto(work_dir)  # only if you edited ptoas/*.pto
    invalidate_binary_cache(work_dir)      # drop cached .o/.so so the edit is compiled

    compiled = CompiledProgram.from_dir(work_dir, platform="host")
    compiled(a, out)                                     # correctness re-check
    expected = (a * 0.5 + a * 6.0) * 0.5 + a * 5.0
    torch.testing.assert_close(out, expected)
    out.zero_()
    stats = benchmark(compiled, [a, out], rounds=3)       # and timing
    torch.testing.assert_close(out, expected)
    assert stats.samples == 3

    after = binaries(d)
    assert after[K1][1] != before[K1][1] and after[K2][1] != before[K2][1]
    # Every unit was forced until it rebuilt: none is left to build, and the mark was taken.
    assert not (d / MARK).exists() and build(d).compiled == []


def test_rebuild_kernel_cpp_from_pto_runs_the_pto_stage_only(d, ptoas_env):
    from pypto_build import rebuild_kernel_cpp_from_pto

    edit_pto(d, "5.0f")
    before = binaries(d)
    result = rebuild_kernel_cpp_from_pto(d, progress=None)
    assert result.spliced == (K2,) and "synth_scale(a[i], 5.0f)" in (d / K2).read_text()
    assert result.names("ran") == ["ptoas:main_incore_2_aic", "splice:main_incore_2_aic"]
    assert all(u.task.startswith(("ptoas:", "splice:")) for u in result.units)
    assert binaries(d) == before                              # nothing compiled
    assert [Path(line.split()[0]).name for line in ptoas_env.read_text().splitlines()] == ["main_incore_2_aic.pto"]
    assert rebuild_kernel_cpp_from_pto(d, progress=None).names("ran") == []   # applied once
    later = build(d)
    assert later.compiled == ["compile:aic/main_incore_2_aic"]
    assert later.units[[u.task for u in later.units].index("compile:aic/main_incore_2_aic")].reason == \
        f"changed: {K2}"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.parametrize("front_end", [("pypto-build", "build", "{dir}"), ("doit", "pypto-build"),
                                       ("pypto-build", "doit", "run", "{dir}")])
def test_invalidate_deletes_nothing_and_the_next_build_of_any_front_end_rebuilds_every_binary(l2, front_end):
    from pypto_build import invalidate_binary_cache

    age_tree(l2, 3600)
    build(l2)
    assert all(u.reason == "no-op record" for u in build(l2).units)     # the no-op record would answer
    files = tree(l2)
    assert invalidate_binary_cache(l2) == [l2.resolve()]
    assert tree(l2) == files and (l2 / MARK).is_file()        # nothing deleted or rewritten, one mark added
    explained = cli("pypto-build", "explain", str(l2))
    assert explained.returncode == 0 and explained.stdout.count(FORCED) == 4, explained.stdout
    assert (l2 / MARK).is_file()                               # explaining takes nothing

    done = cli(*(a.replace("{dir}", str(l2)) for a in front_end), cwd=l2)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(line.split()[0] for line in done.stdout.splitlines() if FORCED in line) == UNITS
    assert not (l2 / MARK).exists()
    assert build(l2).compiled == []                            # once: the units are current again
    assert {k: v for k, v in tree(l2).items() if ".pypto_build" not in k and "cache/" not in k} == \
        {k: v for k, v in files.items() if ".pypto_build" not in k and "cache/" not in k}     # sources as they were


def test_a_build_that_stops_early_leaves_the_rest_forced(l2):
    from pypto_build import invalidate_binary_cache

    invalidate_binary_cache(l2)
    first = build(l2, tasks=["compile:aic/main_incore_0_aic"])
    assert first.compiled == ["compile:aic/main_incore_0_aic"] and not (l2 / MARK).exists()
    rest = build(l2)
    assert rest.compiled == [u for u in UNITS if u != "compile:aic/main_incore_0_aic"]
    assert {u.reason for u in rest.units if u.task in rest.compiled} == {FORCED}
    assert build(l2).compiled == []


def test_invalidate_refuses_what_is_not_a_build_directory(tmp_path):
    from pypto_build import invalidate_binary_cache

    with pytest.raises(LayoutError, match="not a build_output directory"):
        invalidate_binary_cache(tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_multi_orch_parent_marks_every_sub_build(tmp_path):
    from pypto_build import invalidate_binary_cache

    root = synth.write_multi_orch(tmp_path / "m")
    marked = invalidate_binary_cache(root)
    assert marked == [root.resolve(), *sorted((root / "next_levels").iterdir())]
    assert all((m / MARK).is_file() for m in marked)
