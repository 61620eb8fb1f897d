"""Diagnostics files: a host run's swimlane (Chrome trace / Perfetto JSON) and argument dump (which files a run
wrote under dfx_outputs, of any runtime: `platforms/dfx_outputs.py`).

The writers take the `RunTrace` that `HostExecutor.run(..., trace=True)` returns and write atomically.
Timings are those of a sequential CPU run (a functional reference), not of the NPU. The argument dump is
simpler's format (`args_dump/args_dump.json` + `args.bin`, simpler's docs/dfx/args-dump.md), so one reader
(`culprits.dump`) reads both runtimes' dumps.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ....builddir.markers import ARGS_DUMP_BIN, ARGS_DUMP_DIR, ARGS_DUMP_MANIFEST
from ....core import atomic

if TYPE_CHECKING:
    from .trace import RunTrace

__all__ = ["write_swimlane", "write_args_dump", "swimlane_events", "args_dump", "ARGS_DUMP", "ARGS_BIN",
           "payloads_wanted"]

ARGS_DUMP, ARGS_BIN = ARGS_DUMP_MANIFEST, ARGS_DUMP_BIN
_STAGES = ("before_dispatch", "after_completion")
_TIDS = {"aic": 0, "aiv": 1}
_ORCH_TID = 2


def payloads_wanted(level: int) -> bool:
    """Whether a dump at `level` needs the tensors' bytes (`HostExecutor.run(payloads=...)`): level 2 only."""
    return level == 2


def _us(ns: int) -> float:
    return ns / 1000.0


def swimlane_events(trace: "RunTrace") -> list[dict]:
    """Chrome-trace events: thread names, one "X" event for the orchestration and one per task.

    ts/dur are microseconds relative to the orchestration start; pid 0; tid 0 =
    aic, 1 = aiv, 2 = the orchestration.
    """
    origin, orch_end = trace.orchestration_ns
    events: list[dict] = [
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": label}}
        for label, tid in (("aic", 0), ("aiv", 1), ("orchestration", _ORCH_TID))
    ]
    events.append({"name": "orchestration", "cat": "orchestration", "ph": "X", "pid": 0, "tid": _ORCH_TID,
                   "ts": 0.0, "dur": _us(orch_end - origin)})
    for task in trace.tasks:
        events.append({
            "name": task.kernel, "cat": task.core_type, "ph": "X", "pid": 0, "tid": _TIDS.get(task.core_type, 1),
            "ts": _us(task.start_ns - origin), "dur": _us(task.end_ns - task.start_ns),
            "args": {"index": task.index, "func_id": task.func_id},
        })
    return events


def write_swimlane(trace: "RunTrace", path: Path) -> None:
    """Write `{"traceEvents": [...], "displayTimeUnit": "ns"}` to `path` (open it in Perfetto or chrome://tracing)."""
    doc = {"traceEvents": swimlane_events(trace), "displayTimeUnit": "ns"}
    atomic.write_text(Path(path), json.dumps(doc, indent=1) + "\n")


def args_dump(trace: "RunTrace", level: int) -> tuple[dict, bytes | None]:
    """simpler's `args_dump.json` manifest of a host run at dump `level`, and the `args.bin` payload it points at
    (None: no args.bin, as simpler at level 3 without marks).

    Level 2: every task's tensors (inputs before the kernel ran, outputs after it returned, inouts at both
    stages; the trace must hold payloads) and its scalars (value inline, UINT64: the host sees only the bits).
    Level 3 (or more): the same records without payload: `bin_file` null, every `bin_size` 0. Records follow
    simpler's order (task_id, stage, arg_index); the host's `task_id` is the submission index (ring 0), so that
    order is the submission order. Each record also carries `name`, the parameter or intermediate it is."""
    level = min(level, 3)                       # simpler's levels stop at 3: it uses 3
    payloads = payloads_wanted(level)
    records: list[dict] = []
    chunks: list[bytes] = []
    offset = 0
    for task in trace.tasks:
        staged = [(0, i, a) for i, a in enumerate(task.args) if a.kind == "scalar" or a.role != "output"]
        staged += [(1, i, a) for i, a in enumerate(task.args) if a.kind == "tensor" and a.role != "input"]
        for stage, i, arg in sorted(staged, key=lambda r: (r[0], r[1])):
            record = {"task_id": f"0x{task.index:016x}", "func_id": [task.func_id], "arg_index": i,
                      "role": arg.role, "stage": _STAGES[stage], "kind": arg.kind, "dtype": arg.dtype}
            data = b""
            if arg.kind == "scalar":
                record["value"] = arg.value
            elif payloads:
                data = arg.before if stage == 0 else arg.after
                if data is None:
                    raise ValueError(f"task {task.index} argument {i}: the trace holds no payload; "
                                     "run with payloads=True for a level-2 dump")
            numel = 1
            for extent in arg.shape:
                numel *= extent
            record.update({"is_contiguous": arg.is_contiguous, "shape": list(arg.shape),
                           "strides": list(arg.strides), "start_offset": arg.start_offset, "numel": numel,
                           "name": arg.name,
                           "bin_offset": offset if data else 0, "bin_size": len(data),
                           "truncated": False, "overwritten": False})
            chunks.append(data)
            offset += len(data)
            records.append(record)
    count = {key: sum(1 for r in records if r[field] == key) for field, key in
             (("stage", "before_dispatch"), ("stage", "after_completion"), ("role", "input"), ("role", "output"),
              ("role", "inout"))}
    manifest = {
        "run_dir": ARGS_DUMP_DIR, "bin_format": {"type": "logical_contiguous", "byte_order": "little_endian"},
        "dump_args_level": level, "total_args": len(records), "before_dispatch": count["before_dispatch"],
        "after_completion": count["after_completion"], "input_args": count["input"],
        "output_args": count["output"], "inout_args": count["inout"], "truncated_args": 0, "dropped_records": 0,
        "dropped_overwrite": 0, "bin_file": ARGS_BIN if payloads else None, "args": records,
    }
    return manifest, (b"".join(chunks) if payloads else None)


def write_args_dump(trace: "RunTrace", directory: Path, level: int) -> Path | None:
    """Write `<directory>/args_dump.json` (and `args.bin` at level 2; see `args_dump`) as simpler does at `level`;
    returns the manifest's path. None, nothing written: level 1 (only arguments marked with `dump(...)`, and the
    host runtime has no marks: simpler then exports nothing either) or a run that submitted no task."""
    if level <= 1 or not trace.tasks:
        return None
    manifest, payload = args_dump(trace, level)
    directory = Path(directory)
    if payload is not None:         # the payload first: a manifest never points at a missing args.bin
        atomic.write_bytes(directory / ARGS_BIN, payload)
    else:
        (directory / ARGS_BIN).unlink(missing_ok=True)
    path = directory / ARGS_DUMP
    atomic.write_text(path, json.dumps(manifest, indent=1) + "\n")
    return path
