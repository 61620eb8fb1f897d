"""Replay and validate on the host runtime: API, CLI, `doit replay`, cached verdicts."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_dir, edit
from pypto_build.testing import synth
from pypto_build.api import validate
from pypto_build.errors import PyptoBuildError
from pypto_build.run.golden import load_golden
from pypto_build.compat.pypto_replay import replay
from pypto_build.builddir.runconfig import RunConfig

torch = pytest.importorskip("torch")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def golden_args(root: Path) -> tuple[list[str], list]:
    pairs = load_golden(root).inputs()
    return [n for n, _ in pairs], [v for _, v in pairs]


@pytest.mark.slow
def test_replay_computes_the_golden_result_in_place(g, capsys):
    names, args = golden_args(g)
    out = args[names.index("out")]
    ptr = out.data_ptr()
    result = replay(g, *args, validate=True)
    assert result.validated == ["out"]
    assert out.data_ptr() == ptr and out.abs().sum() > 0
    printed = capsys.readouterr().out
    assert "Golden validation: PASSED" in printed and "[execute] running on the host runtime" in printed
    assert (g / ".pypto_build/replay/out.pt").exists()
    assert torch.equal(torch.load(g / ".pypto_build/replay/out.pt"), out)


@pytest.mark.slow
def test_wrong_kernel_fails_validation_naming_the_output(g):
    k = synth.kernel_path(g, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    names, args = golden_args(g)
    with pytest.raises(AssertionError, match="Output 'out' does not match golden"):
        replay(g, *args, validate=True, progress=None)


@pytest.mark.slow
def test_edit_changes_result_and_recompiles_only_that_kernel(g):
    names, args = golden_args(g)
    replay(g, *args, progress=None)
    before = args[names.index("out")].clone()
    k = synth.kernel_path(g, 2)
    k.write_text(k.read_text().replace("0.5f", "0.25f"))
    names, args = golden_args(g)
    result = replay(g, *args, progress=None)
    assert result.build.compiled == ["compile:aic/main_incore_2_aic"]
    assert not torch.equal(args[names.index("out")], before)


@pytest.mark.slow
def test_validate_reuses_the_verdict_until_something_changes(g):
    first = validate(g)
    assert first.names("ran", "validate:") == ["validate:."]
    second = validate(g)
    assert second.names("up-to-date", "validate:") == ["validate:."] and second.names("ran") == []
    gp = g / "golden.py"
    gp.write_text(gp.read_text().replace("RTOL = ", "RTOL = 2 * "))
    assert validate(g).names("ran", "validate:") == ["validate:."]       # golden.py changed
    assert validate(g, config=RunConfig(enable_dump_args=1)).names("ran", "validate:") == ["validate:."]
    edit(synth.kernel_path(g, 0))
    assert validate(g).names("ran", "validate:") == ["validate:."]       # a binary changed


@pytest.mark.slow
def test_validate_after_replay_with_validate_reuses_its_verdict(g, capsys):
    """Issue 34 item 1: `replay(dir, validate=True)` on golden.py's inputs records its verdict the way the
    `validate:` task records every verdict, so `validate` after it reuses it (it ran the program again before);
    a run on the caller's own tensors is no verdict about golden.py's inputs: nothing is recorded."""
    result = replay(g, validate=True)
    assert result.validated == ["out"]
    assert "Golden validation: PASSED" in capsys.readouterr().out      # the run's lines: to `progress`
    again = validate(g)
    assert again.names("up-to-date", "validate:") == ["validate:."] and again.names("ran") == []
    fresh = replay(g, validate=True, progress=None)                    # replay always runs (as --validate does)
    assert fresh.build.names("ran", "validate:") == ["validate:."] and capsys.readouterr().out == ""


@pytest.mark.slow
def test_a_replay_on_the_callers_tensors_records_no_verdict(g):
    names, args = golden_args(g)
    assert replay(g, *args, validate=True, progress=None).validated == ["out"]
    assert validate(g).names("ran", "validate:") == ["validate:."]      # about those tensors: no verdict kept


@pytest.mark.slow
def test_a_mismatch_on_golden_inputs_raises_as_on_the_callers_tensors(g):
    k = synth.kernel_path(g, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    with pytest.raises(AssertionError, match="Output 'out' does not match golden"):
        replay(g, validate=True, progress=None)


@pytest.mark.slow
def test_failed_validation_is_not_cached(g):
    k = synth.kernel_path(g, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    for _ in range(2):
        result = validate(g, check=False)
        assert result.names("failed") == ["validate:."]
        assert "Output 'out' does not match golden" in result.failures[0].message


@pytest.mark.slow
def test_cli_validate_prints_cached_verdict(g):
    first = run("pypto-build", "validate", str(g))
    assert first.returncode == 0, first.stderr
    assert "Golden validation: PASSED" in first.stdout
    second = run("pypto-build", "validate", str(g))
    assert "Golden validation: PASSED (cached" in second.stdout
    assert "[execute]" not in second.stdout


@pytest.mark.slow
def test_cli_replay_with_diagnostics(g):
    out = run(sys.executable, "-m", "pypto_build", "replay", str(g), "--validate", "--swimlane", "--dump-args", "2",
              "--pmu", "2")
    assert out.returncode == 0, out.stderr
    assert "Golden validation: PASSED" in out.stdout
    assert "enable_pmu (--pmu) is not available on the host runtime" in out.stdout
    lanes = list((g / "dfx_outputs").glob("merged_swimlane_*.json"))
    assert len(lanes) == 1
    events = [e for e in json.loads(lanes[0].read_text())["traceEvents"] if e.get("ph") == "X"]
    assert len(events) >= 3
    dump = json.loads((g / "dfx_outputs/args_dump/args_dump.json").read_text())
    assert dump["dump_args_level"] == 2 and dump["args"]
    assert (g / "dfx_outputs/args_dump/args.bin").stat().st_size == sum(r["bin_size"] for r in dump["args"]) > 0


def test_cli_replay_without_golden_is_one_line(g):
    (g / "golden.py").unlink()
    out = run("pypto-build", "replay", str(g))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "golden.py not found" in out.stderr and "pypto_build.replay(dir, *tensors)" in out.stderr


@pytest.mark.slow
def test_doit_replay_inside_the_build_dir(g):
    edit(synth.kernel_path(g, 1))
    out = run("doit", "replay", "--validate", cwd=g)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "compile:aiv/main_incore_1_aiv" in out.stdout and "Golden validation: PASSED" in out.stdout


def test_multi_orch_parent_says_which_sub_builds_to_replay(tmp_path):
    root = synth.write_multi_orch(tmp_path / "m")
    with pytest.raises(PyptoBuildError, match="multi-orchestration parent") as info:
        replay(root)
    assert str(root / "next_levels" / "orch_a") in str(info.value)


@pytest.mark.slow
def test_replay_checks_argument_count_against_golden(g):
    # the sidecar's count, checked before anything is built (a ValueError, as PyPTO raises)
    with pytest.raises(ValueError, match=r"compiled_meta\.json: expected 2 arguments \(a, out\), got 1"):
        replay(g, torch.zeros(16), validate=True, progress=None)


def test_no_torch_on_a_build_noop(g):
    code = ("import sys; from pypto_build.cli.main import main; rc = main(['build', '-q', %r]); "
            "print('torch' in sys.modules); sys.exit(rc)" % str(g))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
