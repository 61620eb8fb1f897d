"""Run a built L2 directory's binaries on simpler's `Worker` (PyPTO's runtime), never compiling anything.

`run_on_simpler` is what a simpler platform's runner (`runner.SimplerRunner.run_l2`) calls in the
replay child: it wraps the kernel payloads and the orchestration `.so` the build left
behind into simpler's callables, runs them once on `a2a3sim`/`a5sim` (or
`a2a3`/`a5` on an NPU machine: the same code) and returns the DFX files the run
wrote. The steps and the `RunConfig` -> `CallConfig` mapping follow PyPTO's
replay path (`execute_compiled` -> `execute_on_device` in PyPTO's
`pypto.runtime`). `call_settings` is the mapping as plain data, so it is
testable without simpler; torch and simpler are imported only inside functions,
because this module is imported on planning paths too.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...core.confine import confine_tree
from ...errors import ToolchainError, UserError, one_line
from ...builddir.manifest import KernelConfig, read_kernel_config
from ...builddir.markers import DFX_OUTPUTS, KERNEL_CONFIG
from ...builddir.runconfig import RunConfig
from .argv import simpler_platforms, simulated
from ..dfx_outputs import changed_files, dfx_snapshot
from ..installed import GET_SIMPLER, choose_host

__all__ = ["CallSettings", "call_settings", "require_simpler", "unsupported_lines", "run_on_simpler"]

LOG_ENV = "PYPTO_RUNTIME_LOG"           # PyPTO applies it to simpler's logger when pypto.runtime is imported
_SWIMLANE_MAX = 4                       # levels 0..4; a bare True means the full level (PyPTO, simpler)
_RING_FIELDS = ("ring_task_window", "ring_heap", "ring_dep_pool")
_FULL_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class CallSettings:
    """Everything one run passes to simpler besides the callable and the arguments.

    Fields named like `CallConfig`'s are copied onto it; None leaves simpler's default
    (`aicpu_thread_num`, the ring sizes, `output_prefix`). `enable_sdma` goes to the
    `Worker`, `log_level` to simpler's Python logger before `init` (None: untouched).
    """

    aicpu_thread_num: int | None
    enable_chip_swimlane: int
    enable_dump_args: int
    enable_pmu: int
    enable_dep_gen: bool
    enable_scope_stats: bool
    ring_task_window: Any
    ring_heap: Any
    ring_dep_pool: Any
    output_prefix: str | None
    enable_sdma: bool
    log_level: str | None

    @property
    def any_dfx(self) -> bool:
        return bool(self.enable_chip_swimlane > 0 or self.enable_dump_args > 0 or self.enable_pmu > 0
                    or self.enable_dep_gen or self.enable_scope_stats)


def call_settings(config: RunConfig, runtime_config: Mapping[str, Any], sub_dir: Path) -> CallSettings:
    """PyPTO's mapping (`runner._build_call_config`, `execute_compiled`) of a RunConfig and the sub-build's
    RUNTIME_CONFIG; `output_prefix` = `<sub_dir>/dfx_outputs` only when a DFX flag is on."""
    swimlane = config.enable_chip_swimlane
    if isinstance(swimlane, bool):
        swimlane = _SWIMLANE_MAX if swimlane else 0
    if not isinstance(swimlane, int) or not 0 <= swimlane <= _SWIMLANE_MAX:
        raise UserError(f"enable_chip_swimlane = {swimlane!r} is not a swimlane level; use 0 (off) to "
                        f"{_SWIMLANE_MAX} (full), e.g. --swimlane-level {_SWIMLANE_MAX}")
    # RunConfig's own value (PyPTO's RunConfig has one) wins over RUNTIME_CONFIG; ours has none yet
    threads = getattr(config, "aicpu_thread_num", None)
    if threads is None:
        threads = runtime_config.get("aicpu_thread_num")
    # ring sizes come only from a RunConfig that carries them (PyPTO's replay passes none)
    rings = {name: getattr(config, name, None) for name in _RING_FIELDS}
    env_level = os.environ.get(LOG_ENV)
    settings = CallSettings(
        aicpu_thread_num=threads, enable_chip_swimlane=swimlane, enable_dump_args=int(config.enable_dump_args),
        enable_pmu=int(config.enable_pmu), enable_dep_gen=bool(config.enable_dep_gen),
        enable_scope_stats=bool(config.enable_scope_stats), output_prefix=None,
        enable_sdma=bool(runtime_config.get("enable_sdma", False)),
        log_level=config.log_level if config.log_level is not None else (env_level or None), **rings)
    if settings.any_dfx:
        return replace(settings, output_prefix=str(Path(sub_dir).absolute() / DFX_OUTPUTS))
    return settings


def require_simpler(platform: str) -> None:
    """`platform` is one simpler runs (a ToolchainError naming those it runs, if not)."""
    if platform not in simpler_platforms():
        raise ToolchainError(f"platform {platform!r} does not run on simpler; choose one of "
                             f"{', '.join(simpler_platforms())}")


def unsupported_lines(settings: CallSettings, platform: str) -> list[str]:
    """One line per request simpler cannot honour here (the run goes on, as on the host runtime)."""
    lines = []
    if settings.enable_pmu and simulated(platform):
        lines.append(f"[execute] enable_pmu (--pmu) on {platform}: the simulator counts nothing; pmu.csv will "
                     "hold zeros")
    if settings.enable_chip_swimlane and not simulated(platform):
        lines.append(f"[execute] chip swimlane on {platform}: one run only; PyPTO's extra dep-gen run and its "
                     "merged_swimlane_*.json conversion are not done here (chip_swimlane_records.json is kept)")
    if settings.enable_dump_args > 3:
        lines.append(f"[execute] enable_dump_args {settings.enable_dump_args}: simpler's levels stop at 3; "
                     "it uses 3")
    return lines


def run_on_simpler(sub_dir: Path, platform: str, payloads: Mapping[int, Path], orchestration: Path,
                   args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
                   say: Callable[[str], None] = print, device_id: int = 0) -> list[str]:
    """Run the sub-build `sub_dir` once on simpler's `platform` runtime; outputs land in `args`' tensors.

    `payloads`: func_id -> file holding that kernel's payload (on a simulator the whole `.so`, on a device
    the `.text` bytes); `orchestration`: the orchestration `.so`. `args` are the orchestration's parameters
    in call order (CPU contiguous torch tensors; ctypes, int, float or bool scalars). Returns the files the
    run wrote or rewrote under `<sub_dir>/dfx_outputs`. One-line UserError/ToolchainError for what
    the user can fix; failures inside the runtime propagate as simpler raises them.
    """
    sub_dir = Path(sub_dir)
    require_simpler(platform)
    manifest = read_kernel_config(sub_dir / KERNEL_CONFIG)
    blobs = read_binaries(manifest, payloads, Path(orchestration))
    settings = call_settings(config, manifest.runtime_config, sub_dir)
    simpler = import_simpler()
    labels = _labels(len(args), names)
    _check_args(args, labels, simpler)
    for line in unsupported_lines(settings, platform):
        say(line)
    dfx = Path(settings.output_prefix) if settings.output_prefix else None
    if dfx is not None:
        confine_tree(sub_dir.absolute(), dfx, "dfx_outputs folder")     # before anything is written through it
        dfx.mkdir(parents=True, exist_ok=True)
    before = dfx_snapshot(dfx)
    say(f"[execute] running on simpler's {platform} runtime ({manifest.runtime_name})...")
    chip = chip_callable(manifest, blobs, simpler)
    cfg = call_config(settings, simpler)
    with LogLevel(settings.log_level, simpler):
        _run(simpler, chip, cfg, settings, args, platform, manifest.runtime_name, device_id)
    return changed_files(dfx, before)


# --- inputs ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binaries:
    kernels: dict[int, bytes]
    orchestration: bytes


def read_binaries(manifest: KernelConfig, payloads: Mapping[int, Path], orchestration: Path) -> Binaries:
    """Every kernel's payload and the orchestration, read; one line for a missing, extra or unreadable one."""
    where = manifest.path
    wanted = {k.func_id: k for k in manifest.kernels}
    extra = sorted(set(payloads) - set(wanted))
    if extra:
        raise UserError(f"{where}: payloads given for func_id {', '.join(map(str, extra))}, which "
                        "KERNELS does not declare; pass exactly the kernels of this kernel_config.py")
    kernels = {}
    for func_id, spec in wanted.items():
        what = f"kernel func_id {func_id} ({spec.name or Path(spec.source).stem})"
        if func_id not in payloads:
            raise UserError(f"{where}: no payload given for {what}; build the directory first")
        kernels[func_id] = _read(Path(payloads[func_id]), f"the payload of {what}")
    return Binaries(kernels, _read(orchestration, "the orchestration binary"))


def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: {what} cannot be read ({one_line(exc.strerror or exc, 120)}); build the "
                        "directory (pypto-build build DIR) before running it") from None
    if not data:
        raise UserError(f"{path}: {what} is empty; rebuild the directory (pypto-build build DIR)")
    return data


def _labels(count: int, names: Sequence[str] | None) -> list[str]:
    if names is not None and len(names) == count:
        return [repr(str(n)) for n in names]
    return [f"#{i}" for i in range(count)]


def _check_args(args: Sequence, labels: list[str], simpler: Any) -> None:
    """Each argument, before the Worker starts: a CPU contiguous tensor of a dtype simpler knows, or a
    64-bit scalar (PyPTO's `_coerced_to_orch_args` rules, plus the int/float/bool our host runtime takes)."""
    import ctypes

    import torch

    for label, arg in zip(labels, args):
        if isinstance(arg, torch.Tensor):
            problem = None
            if arg.device.type != "cpu":
                problem = f"is on {arg.device}; pass a CPU tensor (.cpu())"
            elif not arg.is_contiguous():
                problem = "is not contiguous; pass tensor.contiguous()"
            else:
                try:
                    simpler.torch_dtype_to_datatype(arg.dtype)
                except KeyError:
                    problem = f"has dtype {arg.dtype}, which simpler's runtime does not take"
        elif isinstance(arg, ctypes._SimpleCData):
            problem = None if isinstance(arg.value, (int, float)) else "is a non-numeric ctypes value"
        elif isinstance(arg, float):
            problem = None if _fits_float32(arg) else "is out of float32 range; pass ctypes.c_double(value)"
        elif isinstance(arg, bool):
            problem = None
        elif isinstance(arg, int):
            problem = None if -(1 << 63) <= arg <= _FULL_MASK else "does not fit in 64 bits"
        else:
            problem = f"is a {type(arg).__name__}; pass a torch tensor or a scalar (int, float, ctypes)"
        if problem:
            raise UserError(f"argument {label} {problem}")


def _fits_float32(value: float) -> bool:
    """A Python float goes to the runtime as float32 bits (simpler's `scalar_to_uint64`)."""
    import struct

    try:
        struct.pack("<f", value)
    except OverflowError:
        return False
    return True


# --- simpler -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimplerApi:
    """The few simpler names a run uses, imported once."""

    ArgDirection: Any
    CallConfig: Any
    ChipCallable: Any
    CoreCallable: Any
    TaskArgs: Any
    Worker: Any
    scalar_to_uint64: Callable[[Any], int]
    make_tensor_arg: Callable[[Any, Any], Any]
    torch_dtype_to_datatype: Callable[[Any], Any]
    logger: Any
    parse_level: Callable[[Any], int]


def import_simpler() -> SimplerApi:
    import sys

    try:
        from simpler._log import get_logger
        from simpler.task_interface import (ArgDirection, CallConfig, ChipCallable, CoreCallable, TaskArgs,
                                            scalar_to_uint64)
        from simpler.worker import Worker
        from simpler_setup.log_config import parse_level
        from simpler_setup.torch_interop import make_tensor_arg, torch_dtype_to_datatype
    except ImportError as exc:
        raise ToolchainError(f"PyPTO's runtime simpler cannot be imported by {sys.executable} "
                             f"({one_line(exc, 200)}); install simpler into this Python ({GET_SIMPLER}), or "
                             + choose_host()) from None
    return SimplerApi(ArgDirection, CallConfig, ChipCallable, CoreCallable, TaskArgs, Worker, scalar_to_uint64,
                    make_tensor_arg, torch_dtype_to_datatype, get_logger(), parse_level)


def chip_callable(manifest: KernelConfig, blobs: Binaries, simpler: SimplerApi) -> Any:
    """CoreCallable per kernel (its signature maps payload slots for the args dump), then the ChipCallable."""
    def directions(signature: tuple[str, ...]) -> list:
        return [simpler.ArgDirection.__members__[d] for d in signature]

    children = [(k.func_id, simpler.CoreCallable.build(signature=directions(k.signature),
                                                       binary=blobs.kernels[k.func_id]))
                for k in manifest.kernels]
    orch = manifest.orchestration
    return simpler.ChipCallable.build(signature=directions(orch.signature), func_name=orch.function_name,
                                      binary=blobs.orchestration, children=children)


def call_config(settings: CallSettings, simpler: SimplerApi) -> Any:
    """`CallSettings` onto a fresh CallConfig, validated; one line for what simpler refuses."""
    cfg = simpler.CallConfig()
    try:
        if settings.aicpu_thread_num is not None:
            cfg.aicpu_thread_num = settings.aicpu_thread_num
        cfg.enable_chip_swimlane = settings.enable_chip_swimlane
        cfg.enable_dump_args = settings.enable_dump_args
        cfg.enable_pmu = settings.enable_pmu
        cfg.enable_dep_gen = settings.enable_dep_gen
        cfg.enable_scope_stats = settings.enable_scope_stats
        for name in _RING_FIELDS:
            if getattr(settings, name) is not None:
                setattr(cfg.runtime_env, name, getattr(settings, name))
        if settings.output_prefix:
            cfg.output_prefix = settings.output_prefix
        cfg.validate()
    except (ValueError, TypeError) as exc:
        raise UserError(f"simpler refuses this run's settings: {one_line(exc, 300)}; fix the run options "
                        "(or RUNTIME_CONFIG in kernel_config.py)") from None
    return cfg


class LogLevel:
    """PyPTO's `configure_log(level)`: the level on simpler's Python logger, which `Worker.init` hands to
    the C++ side. None leaves simpler's own default; the previous level is restored afterwards."""

    def __init__(self, level: str | None, simpler: SimplerApi):
        self.level, self.simpler, self.previous = level, simpler, None

    def __enter__(self) -> None:
        if self.level is not None:
            self.previous = self.simpler.logger.level
            self.simpler.logger.setLevel(self.simpler.parse_level(self.level))

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            self.simpler.logger.setLevel(self.previous)


def _run(simpler: SimplerApi, chip: Any, cfg: Any, settings: CallSettings, args: Sequence, platform: str,
         runtime: str, device_id: int) -> None:
    """Worker(level=2) -> init(prewarm) -> register -> TaskArgs (tensors, then scalars) -> run; close always."""
    import torch

    worker = simpler.Worker(level=2, device_id=device_id, platform=platform, runtime=runtime,
                            enable_sdma=settings.enable_sdma)
    try:
        try:
            worker.init(prewarm_config=cfg)
        except FileNotFoundError as exc:
            raise ToolchainError(missing_runtime(exc, platform, runtime)) from None
        except ValueError as exc:
            if "not available for platform" not in str(exc):
                raise
            known = [line for line in str(exc).splitlines() if line.startswith("Available runtimes")]
            raise ToolchainError(f"simpler has no runtime {runtime!r} for {platform} "
                                 f"({one_line(known[0] if known else exc, 200)}); RUNTIME_CONFIG[\"runtime\"] in "
                                 "kernel_config.py must name one of them") from None
        task_args = simpler.TaskArgs()
        for arg in args:
            if isinstance(arg, torch.Tensor):
                task_args.add_tensor(simpler.make_tensor_arg(worker, arg))
        for arg in args:
            if not isinstance(arg, torch.Tensor):
                task_args.add_scalar(simpler.scalar_to_uint64(int(arg) if isinstance(arg, bool) else arg))
        worker.run(worker.register(chip), task_args, cfg)
    finally:
        worker.close()


def missing_runtime(exc: FileNotFoundError, platform: str, runtime: str) -> str:
    """One line for simpler's 'Pre-built runtime binaries not found' (a multi-line message)."""
    from simpler_setup.environment import PROJECT_ROOT

    paths = [line.strip() for line in str(exc).splitlines() if line.startswith((" ", "\t"))]
    first = paths[0] if paths else (exc.filename or one_line(exc, 200))
    more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
    return (f"simpler's {platform} runtime {runtime!r} is not built: {first}{more} is missing; build it in "
            f"{PROJECT_ROOT} (pip install --no-build-isolation -e . there, or python "
            f"simpler_setup/build_runtimes.py --platforms {platform})")
