"""The one L3 driver with simpler's backend (`platforms/simpler_l3.SimplerL3`): a built L3 directory (the two_chips
example) run on simpler's Worker(level=3).

The example is built once for a2a3sim by pypto_build itself (`api.build(platform="a2a3sim")`, simpler's
compilers), then each test runs a private copy: its host driver `orchestration/host_orch.py` with both
chip programs on two forked a2a3sim chips, checked against the example's golden.py.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import pypto_build
from pypto_build.api import build
from pypto_build.errors import PyptoBuildError
from pypto_build.platforms.simpler.l3 import SimplerL3
from pypto_build.run.golden import load_golden
from pypto_build.builddir.runconfig import RunConfig
from pypto_build.platforms.l3_driver import run_l3

EXAMPLE = Path(pypto_build.__file__).resolve().parent / "examples" / "two_chips"
PLATFORM = "a2a3sim"
DRIVER = "orchestration/host_orch.py"


@pytest.fixture(scope="module")
def built_once(tmp_path_factory) -> Path:
    root = Path(shutil.copytree(EXAMPLE, tmp_path_factory.mktemp("simpler-l3") / "two_chips"))
    build(root, platform=PLATFORM)
    return root


@pytest.fixture
def built(built_once, tmp_path) -> Path:
    """A private copy of the built example."""
    return Path(shutil.copytree(built_once, tmp_path / "two_chips"))


def _run(root: Path, config: RunConfig | None = None, *, args=None, device_ids=None):
    """Run on golden.py's inputs: (the tensors after the run, expected outputs, files returned, say lines)."""
    golden = load_golden(root)
    pairs = golden.inputs()
    named = dict(pairs)
    expected = golden.expected(named)
    lines: list[str] = []
    files = run_l3(root, [v for _, v in pairs] if args is None else args,
                   SimplerL3(PLATFORM, config or RunConfig(platform=PLATFORM)), names=[n for n, _ in pairs],
                   say=lines.append, device_ids=device_ids)
    return named, expected, files, lines


@pytest.mark.simpler
def test_the_built_binaries_are_where_the_run_reads_them(built):
    for chip in ("chip_a", "chip_b"):
        sub = built / "next_levels" / chip
        assert (sub / "orchestration" / f"{chip}.so").stat().st_size > 0
        assert sorted(p.name for p in (sub / "cache").glob("incore_*.bin")) == [
            f"incore_0_aic_{chip}_incore_0_aic_{PLATFORM}.bin", f"incore_1_aiv_{chip}_incore_1_aiv_{PLATFORM}.bin"]


@pytest.mark.simpler
def test_two_chips_run_on_a2a3sim_and_match_golden(built):
    import torch

    golden = load_golden(built)
    pairs = golden.inputs()
    out = dict(pairs)["out"]
    storage = out.data_ptr()
    _ignored, expected, files, lines = _run(built, args=[v for _, v in pairs])
    named = dict(pairs)                                                 # the tensors this test passed
    assert torch.allclose(named["out"], expected["out"], rtol=golden.rtol, atol=golden.atol)
    assert not torch.equal(named["out"], named["a"])                   # both chips changed every row
    assert out.data_ptr() == storage and not out.is_shared()           # the caller's tensor, written in place
    assert files == [] and not (built / "dfx_outputs").exists()
    assert lines == [
        "[execute] running two_chips on simpler's a2a3sim runtime (tensormap_and_ringbuffer): 2 chip(s) "
        "(device ids 0, 1), chip programs chip_a, chip_b",
        "[execute] 4 dispatch(es) finished on 2 chip(s)"]


@pytest.mark.simpler
def test_a_swimlane_run_on_given_ids_writes_one_folder_per_dispatch_and_clears_stale_ones(built):
    import torch

    meta = built / "distributed_meta.json"     # the caller's ids replace a config block that is broken
    meta.write_text(meta.read_text().replace('"num_sub_workers": 0', '"num_sub_workers": "none"'))
    stale = built / "dfx_outputs" / "rank7" / "d3"
    stale.mkdir(parents=True)
    (stale / "chip_swimlane_records.json").write_text("{}")
    named, expected, files, _lines = _run(built, RunConfig(platform=PLATFORM, enable_chip_swimlane=4),
                                          device_ids=[4, 6])                # any ids on the simulator
    assert torch.allclose(named["out"], expected["out"])
    assert not stale.exists()
    dfx = (built / "dfx_outputs").absolute()
    assert sorted(Path(f).relative_to(dfx).as_posix() for f in files) == sorted(
        f"rank{r}/d{k}/{name}" for r in (0, 1) for k in (0, 1)
        for name in ("chip_swimlane_records.json", "deps.json", "dispatch_program.json"))
    for rank in (0, 1):        # each rank ran chip_a, then chip_b: PyPTO's rank<r>/d<k>, with the program named
        assert json.loads((dfx / f"rank{rank}" / "d0" / "dispatch_program.json").read_text()) == {"program": "chip_a"}
        assert json.loads((dfx / f"rank{rank}" / "d1" / "dispatch_program.json").read_text()) == {"program": "chip_b"}


@pytest.mark.simpler
def test_a_driver_naming_an_unknown_chip_program_is_one_line_at_its_line(built):
    driver = built / DRIVER
    text = driver.read_text()
    line = text.splitlines().index('        _submit_chip(orch, callables["chip_b"], _ta_1, config, rank__idx_v0)') + 1
    driver.write_text(text.replace('callables["chip_b"]', 'callables["chip_c"]'))
    with pytest.raises(PyptoBuildError) as info:
        _run(built)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{driver}:{line}: dispatches chip program 'chip_c', but next_levels/chip_c/ has no "
                              "kernel_config.py (chip programs: chip_a, chip_b)")


@pytest.mark.simpler
def test_a_driver_importing_what_is_not_provided_is_one_line(built):
    driver = built / DRIVER
    driver.write_text(driver.read_text().replace("import _submit_chip", "import _submit_chip, _submit_chip_group"))
    with pytest.raises(PyptoBuildError) as info:
        _run(built)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{driver}:4: cannot import name '_submit_chip_group'")
    assert "provides make_tensor_arg (pypto.runtime.tensor_arg) and _submit_chip" in message


@pytest.mark.simpler
def test_a_missing_chip_binary_is_one_line_before_any_chip_starts(built):
    gone = built / "next_levels" / "chip_b" / "orchestration" / "chip_b.so"
    gone.unlink()
    with pytest.raises(PyptoBuildError) as info:
        _run(built)
    assert str(info.value).startswith(f"{gone.absolute()}: the orchestration binary cannot be read")


@pytest.mark.simpler
def test_arguments_are_checked_against_the_sidecar(built):
    import torch

    with pytest.raises(PyptoBuildError) as info:
        _run(built, args=[torch.zeros(2, 16)])
    assert "the host driver takes 2 argument(s) (a, out), got 1" in str(info.value)
    with pytest.raises(PyptoBuildError) as info:
        _run(built, args=[torch.zeros(2, 16), 3])
    assert str(info.value) == "argument 'out': an L3 run takes CPU torch tensors, got int"


@pytest.mark.simpler
def test_a_broken_config_block_without_given_ids_is_one_line(built):
    meta = built / "distributed_meta.json"
    meta.write_text(meta.read_text().replace('"num_sub_workers": 0', '"num_sub_workers": "none"'))
    with pytest.raises(PyptoBuildError) as info:
        _run(built)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{meta.absolute()}: ") and "num_sub_workers" in message


@pytest.mark.simpler
@pytest.mark.slow
def test_the_recorded_platform_runs_l3_through_simpler_from_the_cli_and_the_library(built):
    import os
    import subprocess
    import sys
    import torch
    from pypto_build import DistributedCompiledProgram
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_PLATFORM"}
    done = subprocess.run([sys.executable, "-m", "pypto_build", "replay", "--validate", str(built)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("pypto-build: platform a2a3sim (recorded in distributed_meta.json) · runtime: simpler")
    assert "Golden validation: PASSED" in done.stdout
    program = DistributedCompiledProgram.from_dir(built)
    golden = load_golden(built)
    pairs = golden.inputs()
    expected = golden.expected(dict(pairs))
    program(*[v for _, v in pairs])
    assert program.platform == PLATFORM
    named = dict(pairs)
    assert all(torch.allclose(named[k], v, rtol=golden.rtol, atol=golden.atol) for k, v in expected.items())


@pytest.mark.simpler
@pytest.mark.slow
def test_the_l3_debug_run_py_runs_through_simpler(built):
    """Issue 33 item 4: PyPTO's `python <dir>/debug/run.py` flow works unchanged for L3: the emitted script runs
    the recorded a2a3sim through simpler's Worker(level=3) and validates with golden.py."""
    import os
    import subprocess
    import sys
    from pypto_build.cli.main import main

    assert main(["emit-runner", str(built)]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("PYPTO_BUILD_PLATFORM", "PYPTO_EMIT_DEBUG_RUNNER")}
    env["PYTHONPATH"] = str(Path(pypto_build.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, str(built / "debug" / "run.py")], capture_output=True, text=True,
                          cwd="/", env=env, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "platform a2a3sim" in done.stdout and "simpler" in done.stdout
    assert "Golden validation: PASSED" in done.stdout
