"""Run a built L3 (distributed) directory on the host runtime.

`run_distributed(root, args, ...)` does what PyPTO's one-shot distributed run
does, on CPU processes instead of NPU cards: it loads the generated
`orchestration/host_orch.py` (with the stand-in modules of `l3_shims`
installed only while it loads and runs), finds the one function marked
`_pypto_distributed_entry = True`, calls `_alloc_intermediates` if present and
runs the entry with an `orch` whose `submit_next_level` (reached through
`_submit_chip`) sends "run chip program <name> on rank r with these task args"
to a worker. There is one worker process per device id (spawned); each keeps a
`HostExecutor` per `next_levels/<name>/` it runs. Tensors travel through torch
shared memory, so outputs land in the caller's tensors. A rank runs its
dispatches in submission order; a dispatch whose tensors overlap a pending
dispatch on another rank (and either writes) waits for it first. Host-side
tensor writes inside host_orch (e.g. assemble) run at once in the driver and
are not ordered against pending dispatches.

Ranks are the positions 0..world_size-1 of `device_ids` (PyPTO's `rank<r>`
naming); the ids themselves mean nothing on a CPU. With swimlane / args-dump
enabled, dispatch k of rank r writes `dfx_outputs/rank<r>/d<k>/` with
`dispatch_program.json`, `merged_swimlane_<time>.json` and
`args_dump/args_dump.json`; stale `rank*/d[0-9]*` dirs go first.
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import queue
import shutil
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import atomic
from ..errors import one_line
from ..sidecars import load_distributed_meta
from ..pyexec import exec_file
from ..runconfig import LOG_LEVELS, RunConfig
from . import l3_shims, rank_channel
from .executor import ExecutorError

__all__ = ["run_distributed", "ENTRY_MARKER", "DISPATCH_PROGRAM"]

ENTRY_MARKER = "_pypto_distributed_entry"
DISPATCH_PROGRAM = "dispatch_program.json"
_POLL_S = 0.2
_module_ids = itertools.count()


def run_distributed(root: Path, args: Sequence[Any], *, config: RunConfig, device_ids: Sequence[int],
                    say: Callable[[str], None] = print) -> list[str]:
    """Run the built L3 directory `root` once on `args` (host torch tensors in `distributed_meta.json`
    parameter order; outputs written in place). Returns the diagnostic files written."""
    import torch

    root = Path(root).resolve()
    orch_path = root / "orchestration" / "host_orch.py"
    if not orch_path.is_file():
        raise ExecutorError(f"{root}: no orchestration/host_orch.py; not an L3 build directory")
    try:
        meta = load_distributed_meta(root / "distributed_meta.json", validate_config=False)
    except Exception as exc:  # MetaError / OSError: the sidecar names the problem
        raise ExecutorError(f"{root / 'distributed_meta.json'}: {exc}") from None
    names = [p.name for p in meta.params]
    args = list(args)
    if len(args) != len(names):
        raise ExecutorError(f"{root.name}: the host orchestrator takes {len(names)} arguments ({', '.join(names)}), "
                            f"got {len(args)}")
    device_ids = [int(d) for d in device_ids]
    if not device_ids or len(set(device_ids)) != len(device_ids):
        raise ExecutorError(f"device_ids must be non-empty and distinct, got {device_ids}")
    chips = _chip_programs(root)

    # Caller tensors already in shared memory are used as they are; others run on a shared copy that is
    # copied back afterwards, so every caller tensor keeps its storage (and data_ptr).
    tensors: dict[str, Any] = {}
    staged: list[tuple[Any, Any]] = []
    for name, arg in zip(names, args):
        if not isinstance(arg, torch.Tensor):
            raise ExecutorError(f"argument {name!r}: the host runtime takes torch tensors for distributed "
                                f"programs, got {type(arg).__name__}")
        if arg.device.type != "cpu":
            raise ExecutorError(f"argument {name!r}: expected a CPU tensor, got one on {arg.device}")
        if arg.is_shared():
            tensors[name] = arg
        else:
            shared = arg.detach().clone().share_memory_()
            staged.append((arg, shared))
            tensors[name] = shared

    for line in config.unsupported():
        say(line)
    world = len(device_ids)
    say(f"[execute] running {root.name} on the host runtime: {world} rank(s) (device ids "
        f"{', '.join(map(str, device_ids))}), chip programs {', '.join(chips)}")
    swim, dump = bool(config.enable_chip_swimlane), bool(config.enable_dump_args)
    dfx_base = root / "dfx_outputs"
    if swim or dump:
        _clear_dispatch_dirs(dfx_base)
    pool = _RankPool(chips, device_ids, dfx_base if (swim or dump) else None, swim, dump,
                     LOG_LEVELS.index(config.effective_log_level), say)
    try:
        pool.start()
        _run_host_orch(orch_path, pool, tensors, world)
        pool.wait_all()
    finally:
        pool.close()
        for original, shared in staged:
            with torch.no_grad():
                original.copy_(shared)
    say(f"[execute] {pool.count} dispatch(es) finished on {world} rank(s)")
    return sorted(pool.files)


# ---------------------------------------------------------------------------
# host_orch.py
# ---------------------------------------------------------------------------


def _chip_programs(root: Path) -> dict[str, Path]:
    level = root / "next_levels"
    chips = {d.name: d for d in sorted(level.iterdir()) if (d / "kernel_config.py").is_file()} \
        if level.is_dir() else {}
    if not chips:
        raise ExecutorError(f"{level}: no chip programs (expected next_levels/<name>/ sub-builds with "
                            "a kernel_config.py)")
    return chips


def _run_host_orch(path: Path, pool: "_RankPool", tensors: dict[str, Any], world: int) -> None:
    """Load `path` under the stand-in modules, find its entry and run it; failures become one ExecutorError."""
    modname = f"_pypto_build_host_orch_{next(_module_ids)}"
    with l3_shims.stand_in_modules():
        try:
            spec = importlib.util.spec_from_file_location(modname, str(path))
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module
            try:
                exec_file(module, path)
                entry = _find_entry(module, path)
                alloc = getattr(module, "_alloc_intermediates", None)
                if alloc is not None:
                    _call_alloc(alloc, tensors, world)
                orch = l3_shims.HostOrch(pool, world)
                pool.tensors = tensors
                entry(orch, None, l3_shims.CallConfig(), tensors=tensors, callables=l3_shims.Callables(pool.chips),
                      sub_ids=l3_shims.SubIds(), _keep=orch.keep, world_size=world)
            finally:
                sys.modules.pop(modname, None)
        except ExecutorError:
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised as one message naming what failed
            raise ExecutorError(_describe_failure(exc, path)) from None


def _find_entry(module: types.ModuleType, path: Path) -> Callable[..., Any]:
    found = sorted(
        (obj for obj in vars(module).values()
         if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__
         and getattr(obj, ENTRY_MARKER, False) is True),
        key=lambda fn: fn.__name__)
    if len(found) != 1:
        raise ExecutorError(f"{path}: expected exactly one function marked `{ENTRY_MARKER} = True`, found "
                            f"{len(found)}{': ' + ', '.join(fn.__name__ for fn in found) if found else ''}; "
                            "the host driver is malformed (regenerate it)")
    return found[0]


def _call_alloc(alloc: Callable[..., Any], tensors: dict[str, Any], world: int) -> None:
    """`_alloc_intermediates(tensors[, world_size])`, then every new tensor goes to shared memory."""
    try:
        inspect.signature(alloc).bind(tensors, world)
        takes_world = True
    except (TypeError, ValueError):
        takes_world = False
    alloc(tensors, world) if takes_world else alloc(tensors)
    for value in tensors.values():
        for t in (value if isinstance(value, (list, tuple)) else [value]):
            if hasattr(t, "is_shared") and not t.is_shared():
                t.share_memory_()


def _describe_failure(exc: BaseException, path: Path) -> str:
    hunt: BaseException | None = exc
    while hunt is not None:
        if isinstance(hunt, l3_shims.HostUnimplemented):
            return _unimplemented_message(hunt.feature, path)
        hunt = hunt.__cause__ or hunt.__context__
    missing = l3_shims.last_missing()
    if isinstance(exc, ImportError) and missing is not None:
        return _unimplemented_message(missing, path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    where = f"{path}:{frames[-1].lineno}" if frames else str(path)
    return (f"{where}: {type(exc).__name__}: {one_line(exc)}; fix {path.name} or recompile via "
            "ir.compile() to regenerate it")


def _unimplemented_message(feature: str, path: Path) -> str:
    return (f"host runtime: {feature} is not implemented for distributed programs (the host runs "
            f"comm-free programs that dispatch chip programs to ranks); used by {path}")


# ---------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------


def _clear_dispatch_dirs(base: Path) -> None:
    if base.is_dir():
        for rank_dir in base.glob("rank*"):
            for disp in rank_dir.glob("d[0-9]*"):
                if disp.is_dir():
                    shutil.rmtree(disp, ignore_errors=True)


def _byte_range(t: Any) -> tuple[int, int]:
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    extent = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
    return (t.data_ptr(), t.data_ptr() + extent * t.element_size())


@dataclass
class _Pending:
    rank: int
    k: int
    chip: str
    ranges: list[tuple[int, int, bool]] = field(default_factory=list)  # (start, end, writes)

    def conflicts(self, other: list[tuple[int, int, bool]]) -> bool:
        return any((w1 or w2) and s1 < e2 and s2 < e1 for s1, e1, w1 in self.ranges for s2, e2, w2 in other)


class _RankPool:
    """One spawned worker process per rank; dispatch, completion and failure bookkeeping."""

    def __init__(self, chips: dict[str, Path], device_ids: list[int], dfx_base: Path | None, swim: bool,
                 dump: bool, threshold: int, say: Callable[[str], None]) -> None:
        self.chips, self.device_ids, self.dfx_base = chips, device_ids, dfx_base
        self.swim_name = f"merged_swimlane_{time.strftime('%Y%m%d_%H%M%S')}.json" if swim else None
        self.dump, self.threshold, self.say = dump, threshold, say
        self.files: list[str] = []
        self.count = 0
        self._pending: dict[int, _Pending] = {}
        self._per_rank = [0] * len(device_ids)
        self._seq = itertools.count()
        self._procs: list[Any] = []
        self._requests: list[Any] = []
        self._results: Any = None
        self.tensors: dict[str, Any] = {}  # host_orch's tensor dict: names arguments in diagnostics

    def start(self) -> None:
        import torch.multiprocessing as tmp

        rank_channel.socket_dir_that_fits()
        ctx = tmp.get_context("spawn")
        self._results = ctx.Queue()
        # The worker function lives in this module, so a worker needs nothing from the caller's __main__:
        # hide it while starting, so a script without an `if __name__ == "__main__"` guard is not re-run.
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            for rank, device in enumerate(self.device_ids):
                req = ctx.Queue()
                proc = ctx.Process(target=_worker_main, name=f"pypto-host-rank{rank}", daemon=True,
                                   args=(rank, device, self.swim_name, self.dump, self.threshold, req,
                                         self._results))
                proc.start()
                self._requests.append(req)
                self._procs.append(proc)
        finally:
            if main is not None:
                sys.modules["__main__"] = main

    def dispatch(self, rank: int, chip: str, task_args: l3_shims.TaskArgs) -> None:
        self._drain(block=False)
        views = [arg.tensor for arg, _kind in task_args.tensors]
        for view in views:
            if not view.is_shared():  # created inside host_orch: share now, before its address is recorded
                view.share_memory_()
        ranges = [(*_byte_range(v), task_args.is_write(i)) for i, v in enumerate(views)]
        while any(p.rank != rank and p.conflicts(ranges) for p in self._pending.values()):
            self._drain(block=True)
        k = self._per_rank[rank]
        self._per_rank[rank] += 1
        out_dir = None
        if self.dfx_base is not None:
            out_dir = self.dfx_base / f"rank{rank}" / f"d{k}"
            marker = out_dir / DISPATCH_PROGRAM
            atomic.write_text(marker, json.dumps({"program": chip}) + "\n")
            self.files.append(str(marker))
        seq = next(self._seq)
        by_id = {id(v): key for key, v in self.tensors.items()}
        names = [by_id.get(id(v), f"arg{i}") for i, v in enumerate(views)] + \
                [f"scalar{i}" for i in range(len(task_args.scalars))]
        msg = ("run", seq, chip, str(self.chips[chip]), views, list(task_args.scalars), names,
               None if out_dir is None else str(out_dir))
        packed = rank_channel.pack(msg, f"rank {rank} (device {self.device_ids[rank]}), dispatch d{k} ({chip})")
        self._pending[seq] = _Pending(rank, k, chip, ranges)       # sent from here on: its answer is awaited
        self._requests[rank].put(packed)
        self.count += 1

    def wait_all(self) -> None:
        while self._pending:
            self._drain(block=True)

    def _drain(self, block: bool) -> None:
        """Handle finished dispatches (at least one if `block`); raise on a failure or a dead worker."""
        while True:
            try:
                msg = self._results.get(timeout=_POLL_S) if block else self._results.get_nowait()
            except queue.Empty:
                if not block:
                    return
                self._check_alive()
                continue
            kind, seq, payload, logs = msg
            p = self._pending.pop(seq)
            for level, text in logs:
                self.say(f"[rank{p.rank} d{p.k}] [{level}] {text}")
            if kind == "error":
                raise ExecutorError(f"rank {p.rank} (device {self.device_ids[p.rank]}), dispatch d{p.k} "
                                    f"({p.chip}): {payload}")
            self.files.extend(payload)
            if block:
                return

    def _check_alive(self) -> None:
        for p in self._pending.values():
            proc = self._procs[p.rank]
            if not proc.is_alive():
                raise ExecutorError(f"rank {p.rank} (device {self.device_ids[p.rank]}): the worker process died "
                                    f"(exit code {proc.exitcode}) while running dispatch d{p.k} ({p.chip}); "
                                    "a kernel probably crashed")

    def close(self) -> None:
        for req, proc in zip(self._requests, self._procs):
            if proc.is_alive():
                try:
                    req.put(("stop",))
                except (OSError, ValueError):
                    pass
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for q in [*self._requests, self._results]:  # workers are gone: nothing left to deliver
            if q is not None:
                q.cancel_join_thread()
                q.close()


def _worker_main(rank: int, device_id: int, swim_name: str | None, dump: bool, threshold: int,
                 requests: Any, results: Any) -> None:
    """Worker process of one rank: run chip programs in the order they arrive until told to stop."""
    from .dfx import write_args_dump, write_swimlane
    from .executor import HostExecutor

    del device_id  # only named in the driver's messages
    executors: dict[str, HostExecutor] = {}
    logs: list[tuple[str, str]] = []

    def log(level: str, text: str) -> None:
        if level == "always" or (level in LOG_LEVELS and level != "null" and LOG_LEVELS.index(level) >= threshold):
            logs.append((level, text))

    try:
        while True:
            msg = requests.get()
            if msg[0] == "stop":
                return
            msg = rank_channel.unpack(msg)
            _kind, seq, chip, sub_dir, views, scalars, names, out_dir = msg
            logs = []
            try:
                executor = executors.get(chip)
                if executor is None:
                    executor = executors[chip] = HostExecutor(Path(sub_dir), log=lambda lv, tx: log(lv, tx))
                trace = executor.run([*views, *scalars], param_names=names,
                                     trace=out_dir is not None)
                written: list[str] = []
                if out_dir is not None:
                    if swim_name:
                        write_swimlane(trace, Path(out_dir) / swim_name)
                        written.append(str(Path(out_dir) / swim_name))
                    if dump:
                        written.append(str(write_args_dump(trace, Path(out_dir) / "args_dump")))
                results.put(("done", seq, written, logs))
            except ExecutorError as exc:
                results.put(("error", seq, str(exc), logs))
            except Exception as exc:  # noqa: BLE001 - reported to the driver, which raises it
                results.put(("error", seq, f"{type(exc).__name__}: {exc}", logs))
            del views
    finally:
        for executor in executors.values():
            executor.close()
