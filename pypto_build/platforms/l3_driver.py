"""The one L3 driver: a built L3 directory's `orchestration/host_orch.py` run over its chip programs.

What PyPTO's one-shot distributed run does (`distributed_runner.execute_distributed`), whatever runs the
chips. `run_l3` checks the directory and the arguments against `distributed_meta.json`, lists the chip
programs (`next_levels/<name>/` with a kernel_config.py), puts the arguments in shared memory (a shared
tensor as it is, any other through a copy whose contents go back afterwards, so the caller's storage is
kept), loads host_orch.py from its source with the stand-in modules of `l3_shims` importable, finds the one
function marked `_pypto_distributed_entry = True`, calls `_alloc_intermediates` before any chip starts (a
forked chip must inherit what it makes) and runs the entry with PyPTO's `_submit_chip`: a rank-less
dispatch is placed round-robin, and with diagnostics on, dispatch k of rank r gets `rank<r>/d<k>/` under
dfx_outputs/ with a `dispatch_program.json` naming its chip program. Stale such folders go first; a
symbolic link among them is refused before anything is deleted.

What differs between runtimes is an `L3Backend`: the host runtime (`l3.HostL3`, one worker process per
rank) or simpler's Worker(level=3) (`simpler/l3.SimplerL3`). Errors: what is wrong with the
directory, the arguments or the driver's text is one PyptoBuildError line; a failure of the program once it
runs is an ExecutorError naming host_orch.py's line; a runtime's own failures propagate as it raises them.
torch is imported only inside functions.
"""
from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import traceback
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, ContextManager, Iterator, Sequence

from ..core import atomic
from ..core.confine import confine_tree
from ..errors import ExecutorError, PyptoBuildError, ToolchainError, UserError, one_line
from ..builddir.markers import DISPATCH_PROGRAM, DISTRIBUTED_META, HOST_ORCH, KERNEL_CONFIG, NEXT_LEVELS
from ..core.pyexec import exec_file
from ..builddir.sidecars import load_distributed_meta
from . import l3_shims
from .dfx_outputs import changed_files, clear_dispatch_dirs, dfx_snapshot

if TYPE_CHECKING:
    from ..builddir.sidecars import ProgramMeta

__all__ = ["run_l3", "L3Backend", "Prepared", "ENTRY_MARKER", "call_alloc", "check_rank"]

ENTRY_MARKER = "_pypto_distributed_entry"       # PyPTO finds the driver's entry by this mark, not by its name
_PROVIDED = "make_tensor_arg (pypto.runtime.tensor_arg) and _submit_chip (pypto.runtime.distributed_runner)"
_module_ids = itertools.count()


@dataclass(frozen=True)
class Prepared:
    """What a backend read before anything starts: the runtime as the driver's lines name it, the folder the
    run's diagnostics go to (None: none asked) and lines to say first (requests it cannot honour)."""

    label: str
    dfx: Path | None
    notes: tuple[str, ...] = ()


class L3Backend(ABC):
    """What runs the chips under the one driver: the handful of things the runtimes do differently."""

    unit: ClassVar[str]                 # what one device is called in the driver's lines: "rank" | "chip"

    @abstractmethod
    def prepare(self, root: Path, chips: dict[str, Path], meta: ProgramMeta) -> Prepared:
        """Read what the run needs (one line for a missing binary), before any chip starts."""

    @abstractmethod
    def stand_ins(self) -> dict[str, dict[str, Any]]:
        """What host_orch.py's imports resolve to, by module, besides the driver's `_submit_chip`: at least
        `pypto.runtime.tensor_arg`'s `make_tensor_arg` (`l3_shims.installed` makes the modules)."""

    @abstractmethod
    def started(self, device_ids: list[int]) -> ContextManager[dict[str, Any]]:
        """The runtime up with every chip program registered; yields the handles by chip name; stops it."""

    @abstractmethod
    def run(self, orchestrate: Callable[[Any, Any], None], tensors: dict[str, Any]) -> None:
        """Run `orchestrate(orch, config)` once as the runtime's orchestration; return when every dispatch is done
        (`tensors`: host_orch's tensor dict, which names arguments in the runtime's messages)."""


def run_l3(root: Path, args: Sequence, backend: L3Backend, *, names: Sequence[str] | None = None,
           say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None) -> list[str]:
    """Run the built L3 directory `root` once on `args` (CPU torch tensors in `distributed_meta.json` parameter
    order; outputs written in place) with one chip per device id (None: the sidecar's). Returns the files the
    run wrote or rewrote under its diagnostics folder."""
    root = Path(root).absolute()
    meta, ids = _checked(root, args, names, device_ids)
    driver = root / HOST_ORCH
    chips = chip_dirs(root)
    prepared = backend.prepare(root, chips, meta)
    for line in prepared.notes:
        say(line)
    dfx = prepared.dfx
    if dfx is not None:
        confine_tree(root, dfx, "dfx_outputs folder")
        clear_dispatch_dirs(dfx)
        dfx.mkdir(parents=True, exist_ok=True)
    before = dfx_snapshot(dfx)
    dispatcher = _Dispatcher(len(ids), dfx)
    with _shared(args) as staged, l3_shims.installed(backend.stand_ins(), dispatcher.submit):
        tensors = dict(zip((p.name for p in meta.params), staged))
        entry, alloc = _load_driver(driver)
        if alloc is not None:
            call_alloc(alloc, tensors, len(ids), driver)
        say(f"[execute] running {root.name} on {prepared.label}: {len(ids)} {backend.unit}(s) (device ids "
            f"{', '.join(map(str, ids))}), chip programs {', '.join(chips)}")
        with backend.started(ids) as handles:
            callables = _Callables(handles)
            keep: list[Any] = []

            def orchestrate(orch: Any, config: Any) -> None:
                dispatcher.reset(handles)
                entry(orch, None, config, tensors=tensors, callables=callables, sub_ids=_SubIds(), _keep=keep,
                      world_size=len(ids))

            _running(driver, lambda: backend.run(orchestrate, tensors))
    say(f"[execute] {dispatcher.count} dispatch(es) finished on {len(ids)} {backend.unit}(s)")
    return changed_files(dfx, before)


def _checked(root: Path, args: Sequence, names: Sequence[str] | None,
             device_ids: Sequence[int] | None) -> tuple[ProgramMeta, list[int]]:
    """The sidecar and the device ids, once the directory and the arguments are found fit to run (one line
    for the first thing that is not)."""
    meta_path = root / DISTRIBUTED_META
    meta = _load_meta(meta_path, given_ids=device_ids is not None)
    dc = meta.distributed_config
    ids = [int(d) for d in (device_ids if device_ids is not None else (dc.device_ids if dc else ()))]
    if not ids or len(set(ids)) != len(ids):
        raise UserError(f"{meta_path}: device ids {ids} must be non-empty and distinct; fix "
                              "distributed_config.device_ids (or pass other device ids to the run)")
    params = [p.name for p in meta.params]
    if len(args) != len(params):
        raise UserError(f"{meta_path}: the host driver takes {len(params)} argument(s) "
                              f"({', '.join(params)}), got {len(args)}")
    _check_tensors(args, list(names) if names is not None and len(names) == len(args) else params)
    if not (root / HOST_ORCH).is_file():
        raise UserError(f"{root / HOST_ORCH}: missing; {root} is not a built L3 directory (PyPTO writes "
                              f"{HOST_ORCH} beside {DISTRIBUTED_META})")
    if sorted((root / "sub_workers").glob("*.py")):
        raise UserError(f"{root / 'sub_workers'}: SubWorkers are not run by pypto_build's L3 driver yet; "
                              "replay this directory with PyPTO (DistributedCompiledProgram.from_dir)")
    return meta, ids


def chip_dirs(root: Path) -> dict[str, Path]:
    """`next_levels/<name>/` with a kernel_config.py, by name (sorted); one line when there is none."""
    level = Path(root) / NEXT_LEVELS
    chips = {d.name: d for d in sorted(level.iterdir()) if (d / KERNEL_CONFIG).is_file()} if level.is_dir() else {}
    if not chips:
        raise UserError(f"{level}: no chip programs (expected next_levels/<name>/ sub-builds with a "
                              f"{KERNEL_CONFIG})")
    return chips


def _load_meta(path: Path, *, given_ids: bool) -> ProgramMeta:
    """The sidecar with its `distributed_config` (aicpu_thread_num, num_sub_workers, device ids); when the caller
    brings its own device ids, a broken config block is left out (PyPTO's `from_dir` override)."""
    for validate in (True, False) if given_ids else (True,):
        try:
            return load_distributed_meta(path, validate_config=validate)
        except Exception as exc:  # noqa: BLE001 - MetaError / OSError: the sidecar names the problem
            problem = exc
    raise UserError(f"{path}: {one_line(problem, 300)}; recompile via ir.compile() to rewrite it") from None


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
    """The arguments in shared memory (the chips write into them): a shared tensor as it is, any other through
    a shared copy whose contents go back afterwards, so the caller's storage (and data_ptr) is kept."""
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


# --- host_orch.py ------------------------------------------------------------------------------------------


def _load_driver(path: Path) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """Execute host_orch.py (the stand-ins installed by the caller): its marked entry and its
    `_alloc_intermediates` (None when absent). One line for what is missing or malformed."""
    module = types.ModuleType(f"_pypto_build_host_orch_{next(_module_ids)}")
    module.__file__ = str(path)
    try:
        exec_file(module, path)
    except Exception as exc:  # noqa: BLE001 - the driver's own error, named by file and line
        missing = l3_shims.unimplemented_message(exc, path)
        if missing is not None:
            raise ExecutorError(missing) from None
        if isinstance(exc, ImportError):
            raise UserError(f"{_where(exc, path)}: {one_line(exc, 200)}; pypto_build's L3 driver provides "
                                  f"{_PROVIDED} (what PyPTO's codegen imports); regenerate it or replay with "
                                  "PyPTO") from None
        raise UserError(f"{_where(exc, path)}: {type(exc).__name__}: {one_line(exc, 200)}; fix {path.name} "
                              "or recompile via ir.compile() to regenerate it") from None
    entries = sorted((fn for fn in vars(module).values() if isinstance(fn, types.FunctionType)
                      and fn.__module__ == module.__name__ and getattr(fn, ENTRY_MARKER, False) is True),
                     key=lambda fn: fn.__name__)
    if len(entries) != 1:
        found = f": {', '.join(fn.__name__ for fn in entries)}" if entries else ""
        raise UserError(f"{path}: expected exactly one function marked `{ENTRY_MARKER} = True`, found "
                              f"{len(entries)}{found}; the host driver is malformed (regenerate it)")
    alloc = vars(module).get("_alloc_intermediates")
    return entries[0], alloc if callable(alloc) else None


def call_alloc(alloc: Callable[..., Any], tensors: dict[str, Any], world: int, path: Path) -> None:
    """PyPTO's call: `_alloc_intermediates(tensors, world_size=world)` when it takes `world_size` (by name, or
    through `**kwargs`), else `_alloc_intermediates(tensors)`; the signature is asked, so a TypeError raised
    inside is the program's failure, never a retry. Then every tensor it made goes to shared memory, so the
    chips see and write them."""
    try:
        params = inspect.signature(alloc).parameters
    except (TypeError, ValueError):             # a builtin without an introspectable signature
        params = {}
    takes_world = "world_size" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    try:
        alloc(tensors, world_size=world) if takes_world else alloc(tensors)
    except Exception as exc:  # noqa: BLE001 - the program's own failure
        raise ExecutorError(f"{_where(exc, path)}: _alloc_intermediates failed: {type(exc).__name__}: "
                            f"{one_line(exc, 200)}") from None
    for value in tensors.values():
        for t in (value if isinstance(value, (list, tuple)) else [value]):
            if hasattr(t, "is_shared") and not t.is_shared():
                t.share_memory_()


def _running(driver: Path, run: Callable[[], None]) -> None:
    """Run the entry through the backend; a failure of the driver's code is one line at its line."""
    try:
        run()
    except (ExecutorError, ToolchainError):
        raise                                   # the runtime's own failure, already one line
    except Exception as exc:  # noqa: BLE001 - re-raised as one line when the driver's code raised it
        missing = l3_shims.unimplemented_message(exc, driver)
        if missing is not None:
            raise ExecutorError(missing) from None
        if isinstance(exc, PyptoBuildError):
            raise type(exc)(f"{_where(exc, driver)}: {exc}") from None
        where = _where(exc, driver)
        if where == str(driver):
            raise                               # not the driver's: the runtime's own failure, as it raised it
        raise ExecutorError(f"{where}: {type(exc).__name__}: {one_line(exc, 300)}; fix {driver.name} or "
                            "recompile via ir.compile() to regenerate it") from exc


def _where(exc: BaseException, path: Path) -> str:
    """`path:line` of the innermost frame of `path` in `exc`'s traceback (or a SyntaxError's line)."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{path}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


class _Callables(dict):
    """The entry's `callables`: chip program name -> its handle; an unknown name is one line."""

    def __missing__(self, name: str) -> Any:
        raise UserError(f"dispatches chip program {name!r}, but next_levels/{name}/ has no "
                              f"{KERNEL_CONFIG} (chip programs: {', '.join(sorted(self))}); recompile via "
                              "ir.compile() to regenerate the directory")


class _SubIds(dict):
    """The entry's `sub_ids`: no SubWorker runs here (a directory with some is refused before the run)."""

    def __missing__(self, name: str) -> Any:
        raise UserError(f"uses SubWorker {name!r} (sub_ids), which pypto_build's L3 driver does not run; "
                              "replay this directory with PyPTO (DistributedCompiledProgram.from_dir)")


# --- dispatches --------------------------------------------------------------------------------------------


def check_rank(worker: Any, world: int, what: str) -> int:
    """`worker` as a rank of the world, or a ValueError naming `what` (the host_orch line it came from is added
    by the driver)."""
    if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < world:
        raise ValueError(f"{what}: rank {worker!r} is outside 0..{world - 1} (world size {world})")
    return worker


@dataclass
class _Dispatcher:
    """PyPTO's `_submit_chip`, per run: the placement of rank-less dispatches and the per-rank dispatch folders."""

    world: int
    dfx: Path | None
    names: dict[int, str] = field(default_factory=dict)       # id(handle) -> next_levels/<name>
    count: int = 0
    _unplaced: int = 0
    _per_rank: dict[int, int] = field(default_factory=dict)

    def reset(self, handles: dict[str, Any]) -> None:
        self.names = {id(h): name for name, h in handles.items()}
        self.count, self._unplaced, self._per_rank = 0, 0, {}

    def submit(self, orch: Any, handle: Any, task_args: Any, config: Any, worker: int | None) -> Any:
        if worker is None:                      # no rank named: round-robin in submission order
            worker, self._unplaced = self._unplaced % self.world, self._unplaced + 1
        check_rank(worker, self.world, f"_submit_chip({self.names.get(id(handle), handle)!r})")
        self.count += 1
        if self.dfx is None:
            return orch.submit_next_level(handle, task_args, config, worker=worker)
        k = self._per_rank.get(worker, 0)
        self._per_rank[worker] = k + 1
        folder = self.dfx / f"rank{worker}" / f"d{k}"
        name = self.names.get(id(handle))
        if name is not None:
            atomic.write_text(folder / DISPATCH_PROGRAM, json.dumps({"program": name}))
        base = config.output_prefix
        config.output_prefix = str(folder)      # the runtime copies the config at submit: restoring is safe
        try:
            return orch.submit_next_level(handle, task_args, config, worker=worker)
        finally:
            config.output_prefix = base
