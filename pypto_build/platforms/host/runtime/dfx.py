"""Diagnostics files: a host run's swimlane (Chrome trace / Perfetto JSON) and argument dump (which files a run
wrote under dfx_outputs, of any runtime: `platforms/dfx_outputs.py`).

The writers take the `RunTrace` that `HostExecutor.run(..., trace=True)` returns and write atomically.
Timings are those of a sequential CPU run (a functional reference), not of the NPU.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ....core import atomic

if TYPE_CHECKING:
    from .trace import RunTrace

__all__ = ["write_swimlane", "write_args_dump", "swimlane_events", "args_dump", "ARGS_DUMP"]

ARGS_DUMP = "args_dump.json"
_TIDS = {"aic": 0, "aiv": 1}
_ORCH_TID = 2


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


def args_dump(trace: "RunTrace") -> dict:
    """Per task: index, kernel, func_id, core_type and its arguments (tensors: name, role, dtype, shape;
    scalars: the raw 64-bit pattern as an int)."""
    tasks = []
    for task in trace.tasks:
        args = []
        for arg in task.args:
            if arg[0] == "tensor":
                _kind, name, dtype, shape, role = arg
                args.append({"kind": "tensor", "name": name, "role": role, "dtype": dtype, "shape": list(shape)})
            else:
                args.append({"kind": "scalar", "value": int(arg[1])})
        tasks.append({"index": task.index, "kernel": task.kernel, "func_id": task.func_id,
                      "core_type": task.core_type, "args": args})
    return {"tasks": tasks}


def write_args_dump(trace: "RunTrace", directory: Path) -> Path:
    """Write `<directory>/args_dump.json` (see `args_dump`); returns its path."""
    path = Path(directory) / ARGS_DUMP
    atomic.write_text(path, json.dumps(args_dump(trace), indent=1) + "\n")
    return path
