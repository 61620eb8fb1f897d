"""What one host run did (`HostExecutor.run(..., trace=True)`): the records the dfx writers turn into files."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TaskRecord", "RunTrace"]


@dataclass
class TaskRecord:
    """One submitted task. `args`: ("tensor", name, dtype, shape, role) or ("scalar", bits) per argument
    (filled only by `run(trace=True)`); times are `time.perf_counter_ns()` values."""

    index: int
    func_id: int
    kernel: str
    core_type: str
    args: list
    start_ns: int
    end_ns: int


@dataclass
class RunTrace:
    """What one run did: its tasks in submission order and the orchestration's (start_ns, end_ns)."""

    tasks: list[TaskRecord]
    orchestration_ns: tuple[int, int]
