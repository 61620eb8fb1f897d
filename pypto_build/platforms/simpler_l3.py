"""Run a built L3 (distributed) directory on simpler's `Worker(level=3)`, never compiling anything.

`run_l3_on_simpler` does what PyPTO's one-shot distributed run does
(`distributed_runner.execute_distributed`): every `next_levels/<chip>/` sub-build
becomes one `ChipCallable` (our prebuilt binaries, assembled as `simpler_run`
does for L2), all are registered on one `Worker(level=3, device_ids=...)`
before `init()` forks its chip processes, and the generated
`orchestration/host_orch.py` runs as the Worker's orchestration function with
the real `orch`, `CallConfig`, `TaskArgs` and `TensorArgType` of simpler. Only
the two PyPTO names the driver imports are stand-ins (installed in `sys.modules`
while it loads): `make_tensor_arg` (host tensors through simpler's own
`torch_interop.make_tensor_arg`) and `_submit_chip` (a rank-less dispatch
placed round-robin; with a DFX flag on, dispatch k of rank r writes under
`dfx_outputs/rank<r>/d<k>/` beside a `dispatch_program.json`, PyPTO's layout).
Argument tensors reach the forked chips through shared memory; outputs land in
the caller's tensors. torch and simpler are imported only inside functions.
"""
from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import shutil
import sys
import traceback
import types
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .. import atomic
from ..confine import confine_tree
from ..errors import PyptoBuildError, ToolchainError, UserError, one_line
from ..manifest import read_kernel_config
from ..pyexec import exec_file
from ..runconfig import RunConfig
from ..sidecars import load_distributed_meta
from .simpler_run import (SIMPLER_PLATFORMS, call_config, changed_files, chip_callable, import_simpler,
                          LogLevel, missing_runtime, read_binaries, dfx_snapshot, call_settings, unsupported_lines)
from .pypto_places import kernel_payload_path, orchestration_path

__all__ = ["run_l3_on_simpler", "chip_programs", "HOST_ORCH", "ENTRY_MARKER", "DISPATCH_PROGRAM"]

HOST_ORCH = "orchestration/host_orch.py"
ENTRY_MARKER = "_pypto_distributed_entry"       # PyPTO finds the driver's entry by this mark, not by its name
DISPATCH_PROGRAM = "dispatch_program.json"      # which chip program a dispatch folder belongs to (PyPTO's file)
_STAND_INS = ("pypto", "pypto.runtime", "pypto.runtime.tensor_arg", "pypto.runtime.distributed_runner")
_PROVIDED = "make_tensor_arg (pypto.runtime.tensor_arg) and _submit_chip (pypto.runtime.distributed_runner)"
_module_ids = itertools.count()


def run_l3_on_simpler(root: Path, platform: str, args: Sequence, config: RunConfig, *,
                      names: Sequence[str] | None = None, say: Callable[[str], None] = print,
                      device_ids: Sequence[int] | None = None) -> list[str]:
    """Run the built L3 directory `root` once on simpler's `platform` with one chip per device id.

    `args`: CPU torch tensors in `distributed_meta.json` parameter order (outputs written in place);
    `device_ids`: None takes the sidecar's. Returns the files the run wrote or rewrote under
    `<root>/dfx_outputs`. One-line UserError/ToolchainError for what the user can fix; failures
    inside the runtime propagate as simpler raises them.
    """
    root = Path(root).absolute()
    if platform not in SIMPLER_PLATFORMS:
        raise ToolchainError(f"platform {platform!r} does not run on simpler; choose one of "
                             f"{', '.join(SIMPLER_PLATFORMS)}")
    meta_path = root / "distributed_meta.json"
    meta = _load_meta(meta_path, given_ids=device_ids is not None)
    dc = meta.distributed_config
    ids = [int(d) for d in (device_ids if device_ids is not None else (dc.device_ids if dc else ()))]
    if not ids or len(set(ids)) != len(ids):
        raise UserError(f"{meta_path}: device ids {ids} must be non-empty and distinct; fix "
                        "distributed_config.device_ids (or pass other device ids to the run)")
    params = [p.name for p in meta.params]
    labels = list(names) if names is not None and len(names) == len(args) else params
    if len(args) != len(params):
        raise UserError(f"{meta_path}: the host driver takes {len(params)} argument(s) "
                        f"({', '.join(params)}), got {len(args)}")
    _check_tensors(args, labels)
    driver = root / HOST_ORCH
    if not driver.is_file():
        raise UserError(f"{driver}: missing; {root} is not a built L3 directory (PyPTO writes "
                        f"{HOST_ORCH} beside distributed_meta.json)")
    if sorted((root / "sub_workers").glob("*.py")):
        raise UserError(f"{root / 'sub_workers'}: SubWorkers are not run by pypto_build's simpler L3 path "
                        "yet; replay this directory with PyPTO (DistributedCompiledProgram.from_dir)")

    simpler = import_simpler()
    chips, runtime, sdma = chip_programs(root, platform, simpler)
    aicpu = {} if dc is None else {"aicpu_thread_num": dc.aicpu_thread_num}
    settings = call_settings(config, {**aicpu, "enable_sdma": sdma}, root)
    # one pass on the simulator: the swimlane brings its task graph along (PyPTO's co-enabled dep-gen)
    settings = replace(settings, enable_dep_gen=settings.enable_dep_gen or settings.enable_chip_swimlane > 0)
    for line in unsupported_lines(settings, platform):
        say(line)
    dfx = Path(settings.output_prefix) if settings.output_prefix else None
    if dfx is not None:
        confine_tree(root, dfx, "dfx_outputs folder")
        _clear_dispatch_dirs(dfx)
        dfx.mkdir(parents=True, exist_ok=True)
    before = dfx_snapshot(dfx)
    cfg = call_config(settings, simpler)
    num_sub = 0 if dc is None else dc.num_sub_workers

    with _shared(args) as tensors_in:
        tensors = dict(zip(params, tensors_in))
        dispatcher = _Dispatcher(len(ids))
        entry, alloc = _load_driver(driver, dispatcher)
        if alloc is not None:
            _call_alloc(alloc, tensors, len(ids), driver)       # before init(): the fork must inherit them
        say(f"[execute] running {root.name} on simpler's {platform} runtime ({runtime}): {len(ids)} chip(s) "
            f"(device ids {', '.join(map(str, ids))}), chip programs {', '.join(chips)}")
        with LogLevel(settings.log_level, simpler):
            _run(simpler, chips, cfg, entry, tensors, dispatcher, driver,
                 _WorkerSpec(platform, runtime, ids, num_sub, sdma))
    say(f"[execute] {dispatcher.count} dispatch(es) finished on {len(ids)} chip(s)")
    return changed_files(dfx, before)


def chip_programs(root: Path, platform: str, simpler: Any) -> tuple[dict[str, Any], str, bool]:
    """`next_levels/<name>/` with a kernel_config.py -> its ChipCallable; the one runtime they share; whether
    any asks for SDMA. One line for none, a missing binary, or runtimes that differ."""
    level = Path(root) / "next_levels"
    dirs = [d for d in sorted(level.iterdir()) if (d / "kernel_config.py").is_file()] if level.is_dir() else []
    if not dirs:
        raise UserError(f"{level}: no chip programs (expected next_levels/<name>/ sub-builds with a "
                        "kernel_config.py)")
    chips: dict[str, Any] = {}
    runtimes: dict[str, str] = {}
    sdma = False
    for sub in dirs:
        manifest = read_kernel_config(sub / "kernel_config.py")
        payloads = {k.func_id: sub / kernel_payload_path(platform, k.func_id, k.core_type, k.source, k.external)
                    for k in manifest.kernels}
        blobs = read_binaries(manifest, payloads, sub / orchestration_path(manifest.orchestration.source))
        chips[sub.name] = chip_callable(manifest, blobs, simpler)
        runtimes[sub.name] = manifest.runtime_name
        sdma = sdma or bool(manifest.runtime_config.get("enable_sdma", False))
    if len(set(runtimes.values())) > 1:
        found = ", ".join(f"{n}: {r}" for n, r in runtimes.items())
        raise UserError(f"{level}: the chip programs name different runtimes ({found}); one Worker runs "
                        "one runtime, so RUNTIME_CONFIG[\"runtime\"] must agree in every kernel_config.py")
    return chips, next(iter(runtimes.values())), sdma


def _load_meta(path: Path, *, given_ids: bool) -> Any:
    """The sidecar with its `distributed_config` (its aicpu_thread_num, num_sub_workers, device ids); when the
    caller brings its own device ids, a broken config block is left out (PyPTO's `from_dir` override)."""
    for validate in (True, False) if given_ids else (True,):
        try:
            return load_distributed_meta(path, validate_config=validate)
        except Exception as exc:  # noqa: BLE001 - MetaError / OSError: the sidecar names the problem
            problem = exc
    raise UserError(f"{path}: {one_line(problem, 300)}; recompile via ir.compile() to rewrite it") from None


# --- arguments ---------------------------------------------------------------------------------------------


def _check_tensors(args: Sequence, labels: Sequence[str]) -> None:
    """Every argument a CPU torch tensor (PyPTO's one-shot L3 run takes host tensors only)."""
    import torch

    for label, arg in zip(labels, args):
        if not isinstance(arg, torch.Tensor):
            raise UserError(f"argument {label!r}: an L3 run takes CPU torch tensors, got "
                            f"{type(arg).__name__}")
        if arg.device.type != "cpu":
            raise UserError(f"argument {label!r} is on {arg.device}; pass a CPU tensor (.cpu())")


@contextlib.contextmanager
def _shared(args: Sequence) -> Iterator[list]:
    """The arguments in shared memory (the forked chips write into them): a shared tensor as it is, any
    other through a shared copy whose contents go back afterwards, so the caller's storage is kept."""
    import torch

    staged, out = [], []
    for arg in args:
        if arg.is_shared():
            out.append(arg)
        else:
            copy = arg.detach().clone().share_memory_()
            staged.append((arg, copy))
            out.append(copy)
    try:
        yield out
    finally:
        with torch.no_grad():
            for original, copy in staged:
                original.copy_(copy)


# --- the host driver ---------------------------------------------------------------------------------------


@dataclass
class _Dispatcher:
    """PyPTO's `_submit_chip`, per run: placement of rank-less dispatches and the per-rank DFX folders."""

    world: int
    chip_names: dict[int, str] = field(default_factory=dict)     # id(handle) -> next_levels/<name>
    count: int = 0
    _unplaced: int = 0
    _per_rank: dict[int, int] = field(default_factory=dict)

    def reset(self, handles: dict[str, Any]) -> None:
        self.chip_names = {id(h): name for name, h in handles.items()}
        self.count, self._unplaced, self._per_rank = 0, 0, {}

    def submit(self, orch: Any, handle: Any, task_args: Any, config: Any, worker: int | None) -> Any:
        if worker is None:                     # no rank named: round-robin in submission order
            worker, self._unplaced = self._unplaced % self.world, self._unplaced + 1
        self.count += 1
        base = config.output_prefix
        if not base:
            return orch.submit_next_level(handle, task_args, config, worker=worker)
        k = self._per_rank.get(worker, 0)
        self._per_rank[worker] = k + 1
        folder = Path(base) / f"rank{worker}" / f"d{k}"
        name = self.chip_names.get(id(handle))
        if name is not None:
            atomic.write_text(folder / DISPATCH_PROGRAM, json.dumps({"program": name}))
        config.output_prefix = str(folder)     # simpler copies the config at submit: restoring is safe
        try:
            return orch.submit_next_level(handle, task_args, config, worker=worker)
        finally:
            config.output_prefix = base


class _Callables(dict):
    """The driver's `callables`: chip program name -> its registered handle; an unknown name is one line."""

    def __missing__(self, name: str) -> Any:
        raise UserError(f"dispatches chip program {name!r}, but next_levels/{name}/ has no "
                        f"kernel_config.py (chip programs: {', '.join(sorted(self))}); recompile via "
                        "ir.compile() to regenerate the directory")


def _make_tensor_arg(worker: Any, arg: Any) -> Any:
    """PyPTO's `make_tensor_arg` for host tensors: simpler's own conversion (a shared view, fork-visible)."""
    import torch
    from simpler.task_interface import Tensor
    from simpler_setup.torch_interop import make_tensor_arg

    if isinstance(arg, Tensor):
        return arg
    if not isinstance(arg, torch.Tensor):
        raise UserError(f"make_tensor_arg: got a {type(arg).__name__}; pypto_build's simpler L3 path takes "
                        "host torch tensors only (device-resident tensors need PyPTO's DistributedWorker)")
    return make_tensor_arg(worker, arg)


def _stand_ins(dispatcher: _Dispatcher) -> dict[str, types.ModuleType]:
    """The PyPTO modules the driver imports from, holding only what PyPTO's codegen emits imports of."""
    def module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
        mod = types.ModuleType(name, f"pypto_build stand-in for {name} (simpler L3 path)")
        mod.__dict__.update(attrs)
        mod.__path__ = []  # type: ignore[attr-defined]  # a package: its submodules can be imported
        return mod

    tensor_arg = module("pypto.runtime.tensor_arg", {"make_tensor_arg": _make_tensor_arg})
    runner = module("pypto.runtime.distributed_runner", {"_submit_chip": dispatcher.submit})
    runtime = module("pypto.runtime", {"tensor_arg": tensor_arg, "distributed_runner": runner})
    return {"pypto": module("pypto", {"runtime": runtime}), "pypto.runtime": runtime,
            "pypto.runtime.tensor_arg": tensor_arg, "pypto.runtime.distributed_runner": runner}


def _load_driver(path: Path, dispatcher: _Dispatcher) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """Execute host_orch.py with the stand-ins importable (and only while it loads); its marked entry and its
    `_alloc_intermediates` (None when absent). One line for what is missing or malformed."""
    saved = {name: sys.modules.get(name) for name in _STAND_INS}
    sys.modules.update(_stand_ins(dispatcher))
    module = types.ModuleType(f"_pypto_build_l3_host_orch_{next(_module_ids)}")
    module.__file__ = str(path)
    try:
        exec_file(module, path)
    except ImportError as exc:
        raise UserError(f"{_where(exc, path)}: {one_line(exc, 200)}; pypto_build's simpler L3 path provides "
                        f"{_PROVIDED} (what PyPTO's codegen imports); regenerate it or replay with PyPTO") \
            from None
    except Exception as exc:  # noqa: BLE001 - the driver's own error, named by file and line
        raise UserError(f"{_where(exc, path)}: {type(exc).__name__}: {one_line(exc, 200)}; fix {path.name} "
                        "or recompile via ir.compile() to regenerate it") from None
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    entries = sorted((fn for fn in vars(module).values() if isinstance(fn, types.FunctionType)
                      and fn.__module__ == module.__name__ and getattr(fn, ENTRY_MARKER, False) is True),
                     key=lambda fn: fn.__name__)
    if len(entries) != 1:
        raise UserError(f"{path}: expected exactly one function marked `{ENTRY_MARKER} = True`, found "
                        f"{len(entries)}; the host driver is malformed (regenerate it)")
    alloc = vars(module).get("_alloc_intermediates")
    return entries[0], alloc if callable(alloc) else None


def _call_alloc(alloc: Callable[..., Any], tensors: dict[str, Any], world: int, path: Path) -> None:
    """`_alloc_intermediates(tensors, world_size=...)` (without it when it takes none), then every tensor it
    made goes to shared memory, so the chips see and write them."""
    try:
        params = inspect.signature(alloc).parameters
    except (TypeError, ValueError):
        params = {}
    takes_world = "world_size" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    try:
        alloc(tensors, world_size=world) if takes_world else alloc(tensors)
    except Exception as exc:  # noqa: BLE001 - the driver's own error
        raise UserError(f"{_where(exc, path)}: _alloc_intermediates failed: {type(exc).__name__}: "
                        f"{one_line(exc, 200)}") from None
    for value in tensors.values():
        for t in (value if isinstance(value, (list, tuple)) else [value]):
            if hasattr(t, "is_shared") and not t.is_shared():
                t.share_memory_()


def _where(exc: BaseException, path: Path) -> str:
    """`path:line` of the innermost frame of `path` in `exc`'s traceback (or a SyntaxError's line)."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{path}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


# --- simpler -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _WorkerSpec:
    platform: str
    runtime: str
    device_ids: list[int]
    num_sub_workers: int
    enable_sdma: bool


def _run(simpler: Any, chips: dict[str, Any], cfg: Any, entry: Callable[..., Any], tensors: dict[str, Any],
         dispatcher: _Dispatcher, driver: Path, spec: _WorkerSpec) -> None:
    """Worker(level=3) -> register every chip -> init (forks the chips) -> run the driver once; close always."""
    worker = simpler.Worker(level=3, device_ids=spec.device_ids, num_sub_workers=spec.num_sub_workers,
                            platform=spec.platform, runtime=spec.runtime, enable_sdma=spec.enable_sdma)
    keep: list[Any] = []
    try:
        handles = _Callables({name: worker.register(chip) for name, chip in chips.items()})
        try:
            worker.init(prewarm_config=cfg)
        except FileNotFoundError as exc:
            raise ToolchainError(missing_runtime(exc, spec.platform, spec.runtime)) from None
        except ValueError as exc:
            if "not available for platform" not in str(exc):
                raise
            raise ToolchainError(f"simpler has no runtime {spec.runtime!r} for {spec.platform}; "
                                 "RUNTIME_CONFIG[\"runtime\"] in the chips' kernel_config.py must name one "
                                 f"({one_line(exc, 200)})") from None

        def orchestration(orch: Any, _args: Any, _config: Any) -> None:
            dispatcher.reset(handles)
            entry(orch, None, cfg, tensors=tensors, callables=handles, sub_ids={}, _keep=keep,
                  world_size=len(spec.device_ids))

        try:
            worker.run(orchestration)
        except PyptoBuildError as exc:
            raise UserError(f"{_where(exc, driver)}: {exc}") from None
        except Exception as exc:
            where = _where(exc, driver)
            if where == str(driver):
                raise                          # not the driver's: simpler's own failure, as it raised it
            raise UserError(f"{where}: {type(exc).__name__}: {one_line(exc, 300)}; fix {driver.name} or "
                            "recompile via ir.compile() to regenerate it") from exc
    finally:
        worker.close()


def _clear_dispatch_dirs(dfx: Path) -> None:
    """Stale `rank*/d<k>` folders of an earlier (maybe larger) DFX run go first, as PyPTO does."""
    if not dfx.is_dir():
        return
    for rank_dir in dfx.glob("rank*"):
        for folder in rank_dir.glob("d[0-9]*") if rank_dir.is_dir() and not rank_dir.is_symlink() else ():
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)

