"""`pypto-build bisect` on a real program on simpler's a2a3sim: simpler's `vector_example` with its real golden
(bench/scene_dir.py lays it out as PyPTO does), one kernel made to compute other numbers and one changed harmlessly;
trace and mix each name the broken kernel's unit, and the directory is byte for byte as before. Needs simpler (the
`simpler` marker: skipped with a reason where it is missing)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.simpler, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[1] / "bench"
CULPRIT = "compile:aiv/kernel_add_scalar"


def scene_dir():
    """bench/scene_dir.py (it imports its neighbour real_dir.py as a top-level module)."""
    sys.path.insert(0, str(BENCH))
    try:
        import scene_dir
    finally:
        sys.path.remove(str(BENCH))
    return scene_dir


def cli(*args: str, check: int, cache: Path) -> subprocess.CompletedProcess:
    """A `pypto-build` process on compiled_meta.json's a2a3sim, whose user cache (the kept variants) is `cache`."""
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_PLATFORM"}
    env["XDG_CACHE_HOME"] = str(cache)
    done = subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True, timeout=900,
                          env=env)
    assert done.returncode == check, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def failing(tmp_path_factory) -> Path:
    """vector_example validated (PASSED recorded), two kernels edited, validated again (FAILED recorded)."""
    if shutil.which("g++-15") is None:
        pytest.skip("needs g++-15 on PATH (tools/build-simpler.sh writes a shim into the simpler venv's "
                    "bin/: put that first on PATH; docs/platforms.md)")
    scenes = scene_dir()
    root = tmp_path_factory.mktemp("bisect_sim") / "vector_example"
    cache = root.parent / "user-cache"
    scenes.write_scene_dir(root, scenes.simpler_root(), scenes.EXAMPLES["vector_example"])
    assert "Golden validation: PASSED" in cli("validate", str(root), check=0, cache=cache).stdout
    scenes.edit_kernels(root, scenes.VECTOR_EDITS)
    done = cli("validate", str(root), check=1, cache=cache)
    assert "[execute] running on simpler's a2a3sim" in done.stdout
    return root


@pytest.mark.parametrize("method", ["trace", "mix"])
def test_bisect_names_the_broken_kernel_of_a_real_program_on_a2a3sim(failing, tmp_path, method):
    before = tree(failing)
    out = tmp_path / "report.json"
    done = cli("bisect", str(failing), "--method", method, "--json", str(out), check=0,
               cache=failing.parent / "user-cache")
    report = json.loads(out.read_text())
    assert report["method"] == method
    assert [c["unit"] for c in report["culprits"]] == [CULPRIT], done.stdout
    assert report["culprits"][0]["source"] == "kernels/aiv/kernel_add_scalar.cpp"
    assert any(line.startswith("+") and "scalar + 1.0f" in line for line in report["culprits"][0]["diff"])
    assert sorted(report["suspects"]) == ["compile:aiv/kernel_add", CULPRIT]      # the harmless change is a suspect
    if method == "trace":
        first = report["first_divergence"]
        assert (first["kernel"], first["func_id"], first["source"]) == \
            ("kernel_add_scalar", [1], "kernels/aiv/kernel_add_scalar.cpp"), first
        assert first["max_abs"] > 0 and first["differing"] > 0
        assert len(report["runs"]) == 2             # each variant once, with the arguments dump
    else:
        assert report["first_divergence"] is None
        assert len(report["runs"]) <= 1 + 1 + 1     # ceil(log2 2) + 2: the good variant's recorded verdict holds
        assert any("PASSED verdict on this golden result holds" in n for n in report["notes"]), report["notes"]
    assert tree(failing) == before                  # sources, binaries, stamp, state, history: byte for byte
