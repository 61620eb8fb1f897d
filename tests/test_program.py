"""CompiledProgram.from_dir, benchmark, debug/run.py and replay_main: PyPTO's API, as PyPTO has it."""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_build.testing import synth
from pypto_build.errors import PyptoBuildError
from pypto_build.run.golden import load_golden
from pypto_build.compat.program import BenchmarkStats, CompiledProgram, benchmark
from pypto_build.compat.runner_main import main as replay_main
from pypto_build.compat.runner import emit_runner_command, write_run_script

from conftest import copy_dir

torch = pytest.importorskip("torch")

KERNEL2 = Path("kernels/aic/main_incore_2_aic.cpp")
MISSING_TAIL = (" not found — cannot reconstruct a compiled program from this directory. It predates the single-chip "
                "replay feature, is a distributed (L3+) build (use DistributedCompiledProgram.from_dir), or is the "
                "parent of a multi-orch build (each next_levels/<name>/ sub-build has its own sidecar — reload one "
                "of those). Recompile via ir.compile() to refresh.")


@pytest.fixture
def g2(built_golden, tmp_path) -> Path:
    """A private, built copy of an L2 directory with golden.py."""
    return copy_dir(built_golden, tmp_path / "g2")


def golden_pair(root: Path) -> tuple[list, torch.Tensor]:
    """golden.py's inputs and the expected `out`."""
    golden = load_golden(root)
    pairs = golden.inputs()
    return [v for _, v in pairs], golden.expected(dict(pairs))["out"]


def run_script(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_EMIT_DEBUG_RUNNER"}
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, cwd="/",
                          env=env, timeout=600)


# -- from_dir ------------------------------------------------------------------
def test_from_dir_reads_the_sidecar(g2):
    prog = CompiledProgram.from_dir(g2)
    assert prog.output_indices == (1,)
    assert [(p.name, p.direction, p.shape, p.dtype) for p in prog.params] == [
        ("a", "In", (16,), "fp32"), ("out", "Out", (16,), "fp32")]
    assert prog.num_return_types == 1
    assert prog.persisted_platform == "a2a3sim" and prog.platform is None       # the directory's: the build decides
    assert prog.backend_type == "Ascend910B" and prog.program is None
    assert prog.output_dir == g2.resolve()

    over = CompiledProgram.from_dir(str(g2), platform="host", backend_type="Ascend950")
    assert (over.platform, over.backend_type, over.persisted_platform) == ("host", "Ascend950", "a2a3sim")

    device = CompiledProgram.from_dir(g2, platform="a2a3")
    assert device.platform == "a2a3"
    with pytest.raises(PyptoBuildError, match="ASCEND_HOME_PATH is not set"):      # asked for: never a fallback
        device(*golden_pair(g2)[0])


def test_from_dir_missing_sidecar_is_pyptos_message(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        CompiledProgram.from_dir(tmp_path)
    assert str(info.value) == f"{(tmp_path / 'compiled_meta.json').resolve()}{MISSING_TAIL}"


def test_from_dir_malformed_sidecar_names_the_field(g2):
    meta = json.loads((g2 / "compiled_meta.json").read_text())
    meta["params"][1]["dtype"] = "fp33"
    (g2 / "compiled_meta.json").write_text(json.dumps(meta, indent=2))
    with pytest.raises(ValueError, match=r"params\[1\]\.dtype"):
        CompiledProgram.from_dir(g2)
    (g2 / "compiled_meta.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        CompiledProgram.from_dir(g2)


# -- calling -------------------------------------------------------------------
def test_call_writes_the_golden_result_in_place(g2):
    prog = CompiledProgram.from_dir(g2)
    (a, out), expected = golden_pair(g2)
    assert prog(a, out) is None
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    executor = prog._executor
    returned = prog(a)                       # return-style: `out` allocated and returned
    torch.testing.assert_close(returned, expected, rtol=1e-5, atol=1e-5)
    assert prog._executor is executor, "nothing changed: the loaded binaries are reused"
    with pytest.raises(TypeError, match="expected 2 arguments"):
        prog(a, out, out)
    prog.close()


def test_edited_kernel_is_picked_up_on_the_next_call(g2):
    prog = CompiledProgram.from_dir(g2)
    (a, out), expected = golden_pair(g2)
    prog(a, out)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    src = g2 / KERNEL2
    text = src.read_text()
    old = "out[i] * 0.5f + synth_scale(a[i], 3.0f)"
    assert old in text
    src.write_text(text.replace(old, old + " + 100.0f"))
    out2 = torch.zeros_like(out)
    prog(a, out2)  # PyPTO's from_dir would serve the stale binary here
    torch.testing.assert_close(out2, expected + 100.0, rtol=1e-5, atol=1e-4)


def test_benchmark(g2):
    prog = CompiledProgram.from_dir(g2)
    (a, out), expected = golden_pair(g2)
    stats = benchmark(prog, [a, out], rounds=5, warmup=2)
    assert isinstance(stats, BenchmarkStats)
    assert (stats.rounds, stats.warmup, stats.samples) == (5, 2, 5)
    assert len(stats.host_wall_us) == 5 and all(t > 0 for t in stats.host_wall_us)
    assert stats.host_us_min <= stats.host_us_median <= stats.host_us_max
    assert stats.host_us_min <= stats.host_us_mean <= stats.host_us_max and stats.host_us_stdev >= 0
    assert stats.device_wall_us == stats.host_wall_us and stats.all_zero_device is False
    assert "not NPU" in str(stats)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert len(benchmark(g2, [a, out], rounds=1, warmup=0).host_wall_us) == 1
    with pytest.raises(ValueError, match="rounds"):
        benchmark(prog, [a, out], rounds=0)
    with pytest.raises(ValueError, match="warmup"):
        benchmark(prog, [a, out], rounds=1, warmup=-1)


# -- debug/run.py ----------------------------------------------------------------
@pytest.mark.slow
def test_run_script_validates_with_golden(g2):
    path = write_run_script(g2)
    assert path == g2.resolve() / "debug" / "run.py"
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    text = path.read_text()
    assert "_WORK_DIR = Path(__file__).resolve().parent.parent" in text
    assert "a = torch.randn((16,), dtype=torch.float32)" in text
    assert "out = torch.zeros((16,), dtype=torch.float32)" in text
    assert "def _user_compare(a, out):" in text and "--no-rebuild-from-pto" in text
    proc = run_script(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Golden validation: PASSED" in proc.stdout


@pytest.mark.slow
def test_run_script_without_golden_uses_inline_inputs(g2):
    (g2 / "golden.py").unlink()
    path = write_run_script(g2)
    text = path.read_text()
    stub = "    return  # TODO: add your comparison here"
    assert stub in text
    path.write_text(text.replace(stub, "    print('USER_COMPARE', tuple(out.shape), bool(out.abs().sum() > 0))"))
    proc = run_script(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "USER_COMPARE (16,) True" in proc.stdout
    assert "Golden validation" not in proc.stdout


@pytest.mark.slow
def test_run_script_no_validate_with_golden_calls_user_compare(g2):
    path = write_run_script(g2)
    text = path.read_text().replace("    return  # TODO: add your comparison here", "    print('HOOK')")
    path.write_text(text)
    proc = run_script(path, "--no-validate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "HOOK" in proc.stdout and "Golden validation" not in proc.stdout


@pytest.mark.parametrize("value", ["0", " False ", "NO"])
def test_env_disables_the_run_script(g2, monkeypatch, value):
    monkeypatch.setenv("PYPTO_EMIT_DEBUG_RUNNER", value)
    reasons: list[str] = []
    assert write_run_script(g2, on_skip=reasons.append) is None
    assert not (g2 / "debug").exists()
    assert reasons and "PYPTO_EMIT_DEBUG_RUNNER" in reasons[0]


def test_no_run_script_for_multi_orch(tmp_path, capsys):
    """(An L3 directory gets one: tests/test_debug_runner.py.)"""
    multi = synth.write_multi_orch(tmp_path / "multi")
    from pypto_build.cli.main import main
    assert main(["emit-runner", str(multi)]) == 2                                 # a UserError: one line, exit 2
    err = capsys.readouterr().err                                                # an error: on stderr
    assert err.startswith("pypto-build: error: no debug/run.py written: ") and "multi-orchestration parent" in err
    assert not (multi / "debug").exists()


def test_emit_runner_command_prints_the_path(g2, capsys):
    assert emit_runner_command(argparse.Namespace(dir=g2)) == 0
    assert str(g2.resolve() / "debug" / "run.py") in capsys.readouterr().out


def test_inline_statements_follow_the_table(tmp_path):
    root = tmp_path / "jit"
    root.mkdir()
    (root / "kernel_config.py").write_text("KERNELS = []\n")
    params = [
        {"name": "x", "direction": "In", "shape": [4, -1], "dtype": "fp16"},
        {"name": "idx", "direction": "InOut", "shape": [8], "dtype": "int32"},
        {"name": "n", "direction": "In", "shape": None, "dtype": "int32"},
        {"name": "mask", "direction": "In", "shape": [3], "dtype": "bool"},
        {"name": "pos", "direction": "In", "shape": [2], "dtype": "index"},
        {"name": "q", "direction": "In", "shape": [2], "dtype": "fp8e4m3fn"},
        {"name": "y", "direction": "Out", "shape": [-1, 4], "dtype": "bfloat16"},
    ]
    meta = {"schema": 1, "params": params, "num_return_types": 1, "platform": "a5sim", "backend_type": "Ascend950"}
    (root / "compiled_meta.json").write_text(json.dumps(meta, indent=2))
    path = write_run_script(root)
    text = path.read_text()
    note = "  # NOTE: dynamic dim(s) filled with 1 — edit as needed"
    for line in (
        f"    x = torch.randn((4, 1), dtype=torch.float16){note}",
        "    idx = torch.randint(0, 8, (8,), dtype=torch.int32)",
        "    n = None  # TODO: scalar param — set a ctypes value",
        "    mask = torch.randint(0, 2, (3,), dtype=torch.bool)",
        "    pos = torch.randint(0, 8, (2,), dtype=torch.int64)",
        "    q = torch.randn((2,), dtype=torch.float32)",
        f"    y = torch.zeros((1, 4), dtype=torch.bfloat16){note}",
        "    return [x, idx, n, mask, pos, q, y]",
        "def _user_compare(x, idx, n, mask, pos, q, y):",
        "sys.exit(main([str(_WORK_DIR), *sys.argv[1:]], inline_inputs=_inline_inputs, user_compare=_user_compare))",
    ):
        assert line + "\n" in text, line
    compile(text, "run.py", "exec")
    namespace: dict = {"__file__": str(path), "__name__": "run_under_test"}
    exec(compile(text, str(path), "exec"), namespace)
    assert namespace["_WORK_DIR"] == root.resolve()
    values = namespace["_inline_inputs"]()
    assert values[2] is None and values[6].shape == (1, 4) and values[4].dtype == torch.int64


# -- replay_main -----------------------------------------------------------------
@pytest.mark.slow
def test_replay_main_standalone(g2, capsys):
    assert replay_main([str(g2), "--validate"]) == 0
    assert "Golden validation: PASSED" in capsys.readouterr().out
    assert replay_main([str(g2), "--platform", "a2a3"]) == 2
    assert "ASCEND_HOME_PATH is not set" in capsys.readouterr().err
    golden = g2 / "golden.py"
    golden.write_text(golden.read_text().replace('tensors["out"][:] = out', 'tensors["out"][:] = out + 1'))
    assert replay_main([str(g2), "--validate"]) == 1
    assert "Output 'out' does not match golden" in capsys.readouterr().err
    golden.unlink()
    assert replay_main([str(g2)]) == 2
    assert "golden.py not found" in capsys.readouterr().err


def test_replay_main_scalar_inline_input_is_a_clear_error(g2, capsys):
    (g2 / "golden.py").unlink()
    assert replay_main([str(g2)], inline_inputs=lambda: [None, None]) == 2
    assert "_inline_inputs()" in capsys.readouterr().err
