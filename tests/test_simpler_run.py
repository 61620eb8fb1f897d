"""`platforms/simpler_run.py`: a built directory's binaries run on simpler's Worker (a2a3sim here).

The binaries are made by the test itself with simpler's own `KernelCompiler`, called with the arguments
PyPTO passes (`device_runner.compile_single_kernel` / `compile_single_orchestration`), so these tests do not
depend on pypto_build's own simpler build path. The mapping tests (`call_settings`) need no simpler.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import pypto_build
from pypto_build.errors import PyptoBuildError, ToolchainError
from pypto_build.builddir.manifest import read_kernel_config
from pypto_build.platforms.simpler.run import call_settings, run_on_simpler
from pypto_build.run.golden import load_golden
from pypto_build.builddir.runconfig import RunConfig

EXAMPLE = Path(pypto_build.__file__).resolve().parent / "examples" / "matmul_relu"
PLATFORM = "a2a3sim"


# --- the mapping (no simpler needed) -----------------------------------------------------------------------


def test_defaults_take_the_thread_count_from_runtime_config_and_set_no_prefix(tmp_path, monkeypatch):
    monkeypatch.delenv("PYPTO_RUNTIME_LOG", raising=False)
    s = call_settings(RunConfig(platform=PLATFORM), {"runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0},
                      tmp_path)
    assert (s.aicpu_thread_num, s.enable_chip_swimlane, s.enable_dump_args, s.enable_pmu) == (0, 0, 0, 0)
    assert not s.enable_dep_gen and not s.enable_scope_stats and not s.enable_sdma and not s.any_dfx
    assert s.output_prefix is None and s.log_level is None
    assert (s.ring_task_window, s.ring_heap, s.ring_dep_pool) == (None, None, None)
    assert call_settings(RunConfig(), {}, tmp_path).aicpu_thread_num is None     # simpler's own default


def test_dfx_flags_set_the_prefix_and_a_bare_swimlane_is_the_full_level(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_RUNTIME_LOG", "debug")
    s = call_settings(RunConfig(enable_chip_swimlane=True, enable_dump_args=2, enable_pmu=4, enable_dep_gen=True,
                                enable_scope_stats=True), {"enable_sdma": True}, tmp_path)
    assert (s.enable_chip_swimlane, s.enable_dump_args, s.enable_pmu) == (4, 2, 4)
    assert s.enable_dep_gen and s.enable_scope_stats and s.enable_sdma
    assert s.output_prefix == str(tmp_path.absolute() / "dfx_outputs")
    assert s.log_level == "debug"                                            # PyPTO reads PYPTO_RUNTIME_LOG
    assert call_settings(RunConfig(log_level="error"), {}, tmp_path).log_level == "error"   # the option wins
    for flag in ("enable_pmu", "enable_dep_gen", "enable_scope_stats", "enable_dump_args"):
        assert call_settings(RunConfig(**{flag: 1}), {}, tmp_path).output_prefix   # each one alone needs it


def test_a_swimlane_level_out_of_range_is_one_line(tmp_path):
    with pytest.raises(PyptoBuildError) as info:
        call_settings(RunConfig(enable_chip_swimlane=7), {}, tmp_path)
    assert "\n" not in str(info.value) and "enable_chip_swimlane = 7" in str(info.value)


# --- real runs on a2a3sim ----------------------------------------------------------------------------------


@dataclass
class Built:
    """A copy of the example with its binaries, as a build leaves them (sim payload = the whole .so)."""

    root: Path
    payloads: dict[int, Path]
    orchestration: Path


def _compile(root: Path, platform: str = PLATFORM) -> Built:
    """Kernels and orchestration through simpler's KernelCompiler, with PyPTO's include dirs: the runtime's
    aicore include dirs (its build_config.py) + src/common + src/common/task_interface."""
    from simpler_setup.environment import PROJECT_ROOT
    from simpler_setup.kernel_compiler import KernelCompiler
    from simpler_setup.platform_info import load_build_config
    from simpler_setup.pto_isa import ensure_pto_isa_root

    manifest = read_kernel_config(root / "kernel_config.py")
    runtime = manifest.runtime_name
    runtime_dir = PROJECT_ROOT / "src" / platform.removesuffix("sim") / "runtime" / runtime
    aicore = load_build_config(runtime_dir / "build_config.py")["aicore"]["include_dirs"]
    includes = [str(runtime_dir / d) for d in aicore]
    includes += [str(PROJECT_ROOT / "src" / "common"), str(PROJECT_ROOT / "src" / "common" / "task_interface")]
    compiler = KernelCompiler(platform)
    pto_isa = ensure_pto_isa_root()
    payloads = {}
    for kernel in manifest.kernels:
        source = root / kernel.source
        binary = compiler.compile_incore(str(source), core_type=kernel.core_type, pto_isa_root=pto_isa,
                                         extra_include_dirs=includes)
        payloads[kernel.func_id] = source.with_suffix(".so")
        payloads[kernel.func_id].write_bytes(binary)
    orch = root / manifest.orchestration.source
    orch.with_suffix(".so").write_bytes(compiler.compile_orchestration(runtime, str(orch)))
    return Built(root, payloads, orch.with_suffix(".so"))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Built:
    return _compile(Path(shutil.copytree(EXAMPLE, tmp_path_factory.mktemp("simpler") / "matmul_relu")))


@pytest.fixture
def built(compiled, tmp_path) -> Built:
    """A private copy of the compiled example."""
    root = Path(shutil.copytree(compiled.root, tmp_path / "matmul_relu"))
    return Built(root, {f: root / p.relative_to(compiled.root) for f, p in compiled.payloads.items()},
                 root / compiled.orchestration.relative_to(compiled.root))


def _run(built: Built, config: RunConfig | None = None, *, args=None, payloads=None,
         platform: str = PLATFORM) -> tuple[dict, dict, list, list]:
    """Run on golden.py's inputs: (the tensors after the run, expected outputs, files returned, say lines)."""
    golden = load_golden(built.root)
    pairs = golden.inputs()
    named = dict(pairs)
    expected = golden.expected(named)
    lines: list[str] = []
    files = run_on_simpler(built.root, platform, built.payloads if payloads is None else payloads,
                           built.orchestration, [v for _, v in pairs] if args is None else args,
                           config or RunConfig(platform=platform), names=[n for n, _ in pairs], say=lines.append)
    return named, expected, files, lines


@pytest.mark.simpler
def test_the_example_runs_on_a2a3sim_and_matches_golden(built):
    import torch

    golden = load_golden(built.root)
    named, expected, files, lines = _run(built)
    assert golden.outputs == ["out"]
    assert torch.allclose(named["out"], expected["out"], rtol=golden.rtol, atol=golden.atol)
    assert (named["out"] == 0).any() and (named["out"] > 0).any()       # the ReLU clipped, and not everything
    assert files == [] and not (built.root / "dfx_outputs").exists()      # no DFX flag: no prefix, no folder
    assert lines == ["[execute] running on simpler's a2a3sim runtime (tensormap_and_ringbuffer)..."]


@pytest.mark.simpler
def test_a_swimlane_run_writes_its_files_under_dfx_outputs(built):
    import torch

    named, expected, files, _lines = _run(built, RunConfig(platform=PLATFORM, enable_chip_swimlane=4))
    dfx = built.root / "dfx_outputs"
    assert files == [str(dfx.absolute() / "chip_swimlane_records.json")]
    assert Path(files[0]).stat().st_size > 0
    assert torch.allclose(named["out"], expected["out"])
    # a second run rewrites the file: it is reported again
    assert _run(built, RunConfig(platform=PLATFORM, enable_chip_swimlane=4))[2] == files


@pytest.mark.simpler
def test_the_other_dfx_flags_write_their_files_and_pmu_on_a_simulator_is_said(built):
    config = RunConfig(platform=PLATFORM, enable_pmu=2, enable_dep_gen=True, enable_scope_stats=True,
                       enable_dump_args=2)
    _named, _expected, files, lines = _run(built, config)
    dfx = built.root.absolute() / "dfx_outputs"
    assert {Path(f).relative_to(dfx).as_posix() for f in files} >= {
        "pmu.csv", "deps.json", "scope_stats/scope_stats.jsonl", "args_dump/args_dump.json"}
    assert any(line.startswith("[execute] enable_pmu (--pmu) on a2a3sim") for line in lines)


@pytest.mark.simpler
def test_a_missing_payload_file_is_one_line_naming_it(built):
    gone = built.payloads[1]
    gone.unlink()
    with pytest.raises(PyptoBuildError) as info:
        _run(built)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{gone}: the payload of kernel func_id 1 (matmul_relu_incore_1_aiv) cannot be read")
    assert "pypto-build build" in message


@pytest.mark.simpler
def test_a_kernel_without_a_payload_is_one_line(built):
    with pytest.raises(PyptoBuildError) as info:
        _run(built, payloads={0: built.payloads[0]})
    assert "\n" not in str(info.value) and "no payload given for kernel func_id 1" in str(info.value)


@pytest.mark.simpler
def test_a_non_contiguous_tensor_is_one_line_naming_it(built):
    pairs = load_golden(built.root).inputs()
    args = [v.t().contiguous().t() if n == "b" else v for n, v in pairs]   # same shape, column-major
    with pytest.raises(PyptoBuildError) as info:
        _run(built, args=args)
    assert str(info.value) == "argument 'b' is not contiguous; pass tensor.contiguous()"


@pytest.mark.simpler
def test_missing_runtime_libraries_are_one_toolchain_line(built, tmp_path, monkeypatch):
    # Points simpler's own lookup (RuntimeBuilder._lookup_binaries, really run) at an empty folder: the state
    # of a checkout whose runtimes were never built.
    from simpler_setup.runtime_builder import RuntimeBuilder

    monkeypatch.setattr(RuntimeBuilder, "_LIB_DIR", tmp_path / "no-lib")
    with pytest.raises(ToolchainError) as info:
        _run(built)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("simpler's a2a3sim runtime 'tensormap_and_ringbuffer' is not built: ")
    assert str(tmp_path / "no-lib" / "a2a3" / "sim" / "tensormap_and_ringbuffer") in message
    assert "build_runtimes.py --platforms a2a3sim" in message


@pytest.mark.simpler
def test_the_log_level_reaches_simpler_and_is_restored(built, capfd):
    from simpler._log import get_logger

    before = get_logger().level
    _run(built, RunConfig(platform=PLATFORM, log_level="warn"))
    assert "[STRACE]" not in capfd.readouterr().err                     # timing markers are below warn
    assert get_logger().level == before
    _run(built, RunConfig(platform=PLATFORM, log_level="timing"))
    assert "[STRACE]" in capfd.readouterr().err


@pytest.mark.simpler
def test_the_same_code_runs_the_example_on_a5sim(tmp_path):
    import torch

    built = _compile(Path(shutil.copytree(EXAMPLE, tmp_path / "matmul_relu")), "a5sim")
    named, expected, files, lines = _run(built, platform="a5sim")
    assert torch.allclose(named["out"], expected["out"]) and files == []
    assert lines == ["[execute] running on simpler's a5sim runtime (tensormap_and_ringbuffer)..."]


@pytest.mark.simpler
def test_a_dfx_outputs_link_leaving_the_directory_is_refused_before_the_run(built, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (built.root / "dfx_outputs").symlink_to(outside)
    with pytest.raises(PyptoBuildError) as info:
        _run(built, RunConfig(platform=PLATFORM, enable_chip_swimlane=1))
    assert "resolves outside the build directory" in str(info.value) and "\n" not in str(info.value)
    assert list(outside.iterdir()) == []
