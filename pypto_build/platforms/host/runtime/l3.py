"""The host runtime under the one L3 driver: `HostL3`, one worker process per rank.

The driver (`l3_driver.run_l3`) does what every runtime shares; this backend runs the chips on CPU processes
instead of NPU cards. There is one spawned worker process per device id; each keeps a `HostExecutor` per
`next_levels/<name>/` it runs. Tensors travel through torch shared memory, so outputs land in the caller's
tensors. A rank runs its dispatches in submission order; a dispatch whose tensors overlap a pending dispatch
on another rank (and either writes) waits for it first. Host-side tensor writes inside host_orch (e.g.
assemble) run at once in the driver and are not ordered against pending dispatches. host_orch.py sees the
host's stand-ins for simpler's modules (`l3_shims`).

Workers are forked from one server process (multiprocessing's forkserver, `start_rank_server`) that imported
torch and this module once and never runs a kernel: a worker starts in milliseconds, not the second a new
interpreter takes to import torch, and still loads every kernel afresh. The run's child starts the server as its
first step, so its imports overlap the child's own; a program called again in one process reuses it. A worker
takes the caller's environment as it is at the call (the server's is that of its start), and dies with the server,
which leaves when the process that started it ends.

Ranks are the positions 0..world_size-1 of the device ids (PyPTO's `rank<r>` naming); the ids themselves
mean nothing on a CPU. With swimlane / args-dump enabled, dispatch k of rank r writes
`merged_swimlane_<time>.json` and `args_dump/` (simpler's format, `dfx.args_dump`: at level 2 `args.bin` too)
into its folder `dfx_outputs/rank<r>/d<k>/`.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ....builddir.markers import ARGS_DUMP_DIR, DFX_OUTPUTS, SWIMLANE_PREFIX
from ....builddir.runconfig import LOG_LEVELS, RunConfig
from ... import l3_shims
from . import rank_channel
from .executor import ExecutorError
from ...l3_driver import L3Backend, Prepared, check_rank

if TYPE_CHECKING:
    from ....builddir.sidecars import ProgramMeta

__all__ = ["HostL3"]

_POLL_S = 0.2
# What a worker needs, imported once by the server the workers are forked from (an ImportError is skipped).
_SERVER_PRELOAD = ["torch", __name__, f"{__package__}.executor", f"{__package__}.dfx"]


def start_rank_server() -> None:
    """Start the process rank workers are forked from, if it is not running yet; returns at once (its imports
    go on beside the caller's). Idempotent within a process."""
    import multiprocessing
    from multiprocessing import forkserver

    rank_channel.socket_dir_that_fits()     # the server listens on a socket in multiprocessing's temp folder
    multiprocessing.get_context("forkserver").set_forkserver_preload(_SERVER_PRELOAD)
    forkserver.ensure_running()


class HostL3(L3Backend):
    """The host runtime's ranks: spawned worker processes, each running chip programs on a HostExecutor."""

    unit = "rank"

    def __init__(self, config: RunConfig, say: Callable[[str], None]) -> None:
        self.config, self.say = config, say
        self.chips: dict[str, Path] = {}
        self.dfx: Path | None = None
        self.pool: _RankPool | None = None

    def prepare(self, root: Path, chips: dict[str, Path], meta: ProgramMeta) -> Prepared:
        swim, dump = bool(self.config.enable_chip_swimlane), bool(self.config.enable_dump_args)
        self.chips, self.dfx = chips, (root / DFX_OUTPUTS if swim or dump else None)
        return Prepared("the host runtime", self.dfx, tuple(self.config.unsupported()))

    def stand_ins(self) -> dict[str, dict[str, Any]]:
        return {l3_shims.TASK_INTERFACE: l3_shims.host_task_interface(),
                l3_shims.TENSOR_ARG: {"make_tensor_arg": l3_shims.make_tensor_arg}}

    @contextlib.contextmanager
    def started(self, device_ids: list[int]) -> Iterator[dict[str, Any]]:
        config = self.config
        self.pool = _RankPool(self.chips, device_ids, bool(config.enable_chip_swimlane),
                              int(config.enable_dump_args), LOG_LEVELS.index(config.effective_log_level), self.say)
        try:
            self.pool.start()
            yield {name: l3_shims.ChipProgram(name) for name in self.chips}
        finally:
            self.pool.close()

    def run(self, orchestrate: Callable[[Any, Any], None], tensors: dict[str, Any]) -> None:
        assert self.pool is not None
        self.pool.tensors = tensors
        orchestrate(l3_shims.HostOrch(self.pool), l3_shims.CallConfig(output_prefix=str(self.dfx or "")))
        self.pool.wait_all()


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

    def __init__(self, chips: dict[str, Path], device_ids: list[int], swim: bool, dump: int, threshold: int,
                 say: Callable[[str], None]) -> None:
        self.chips, self.device_ids = chips, device_ids
        self.swim_name = f"{SWIMLANE_PREFIX}{time.strftime('%Y%m%d_%H%M%S')}.json" if swim else None
        self.dump, self.threshold, self.say = dump, threshold, say
        self._pending: dict[int, _Pending] = {}
        self._per_rank = [0] * len(device_ids)
        self._seq = itertools.count()
        self._procs: list[Any] = []
        self._requests: list[Any] = []
        self._results: Any = None
        self.tensors: dict[str, Any] = {}  # host_orch's tensor dict: names arguments in diagnostics

    def start(self) -> None:
        import torch.multiprocessing as tmp

        start_rank_server()
        ctx = tmp.get_context("forkserver")
        self._results = ctx.Queue()
        environ = dict(os.environ)
        with l3_shims.hidden_main():        # a worker needs nothing of the caller's main script
            for rank, device in enumerate(self.device_ids):
                req = ctx.Queue()
                proc = ctx.Process(target=_worker_main, name=f"pypto-host-rank{rank}", daemon=True,
                                   args=(rank, device, self.swim_name, self.dump, self.threshold, req,
                                         self._results, environ))
                proc.start()
                self._requests.append(req)
                self._procs.append(proc)

    def dispatch(self, rank: int, chip: str, task_args: l3_shims.TaskArgs, out_dir: Path | None) -> None:
        """Send one chip program run to rank `rank` (its diagnostics into `out_dir`, when given)."""
        check_rank(rank, len(self.device_ids), f"submit {chip}")
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
        seq = next(self._seq)
        by_id = {id(v): key for key, v in self.tensors.items()}
        names = [by_id.get(id(v), f"arg{i}") for i, v in enumerate(views)] + \
                [f"scalar{i}" for i in range(len(task_args.scalars))]
        msg = ("run", seq, chip, str(self.chips[chip]), views, list(task_args.scalars), names,
               None if out_dir is None else str(out_dir))
        packed = rank_channel.pack(msg, f"rank {rank} (device {self.device_ids[rank]}), dispatch d{k} ({chip})")
        self._pending[seq] = _Pending(rank, k, chip, ranges)       # sent from here on: its answer is awaited
        self._requests[rank].put(packed)

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


def _worker_main(rank: int, device_id: int, swim_name: str | None, dump: int, threshold: int,
                 requests: Any, results: Any, environ: dict[str, str]) -> None:
    """Worker process of one rank: run chip programs in the order they arrive until told to stop."""
    from ....core import procs
    from .dfx import payloads_wanted, write_args_dump, write_swimlane
    from .executor import HostExecutor

    del device_id  # only named in the driver's messages
    procs.die_with_parent(None)     # the server: it leaves when the driver's process ends
    os.environ.clear()
    os.environ.update(environ)      # the caller's, as at this call (kernels may read it)
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
                trace = executor.run([*views, *scalars], param_names=names, trace=out_dir is not None,
                                     payloads=out_dir is not None and payloads_wanted(dump))
                if out_dir is not None:        # what the run wrote is found by the driver (changed_files)
                    if swim_name:
                        write_swimlane(trace, Path(out_dir) / swim_name)
                    if dump:
                        write_args_dump(trace, Path(out_dir) / ARGS_DUMP_DIR, dump)
                results.put(("done", seq, None, logs))
            except ExecutorError as exc:
                results.put(("error", seq, str(exc), logs))
            except Exception as exc:  # noqa: BLE001 - reported to the driver, which raises it
                results.put(("error", seq, f"{type(exc).__name__}: {exc}", logs))
            del views
    finally:
        for executor in executors.values():
            executor.close()
