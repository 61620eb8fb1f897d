"""What one host run did (`HostExecutor.run(..., trace=True)`): the records the dfx writers turn into files."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ArgRecord", "TaskRecord", "RunTrace"]


@dataclass
class ArgRecord:
    """One argument of a task, as simpler's argument dump describes it.

    `role` is simpler's (input / output / inout; scalars are inputs), `dtype` simpler's DataType name (FLOAT32,
    ...; a scalar is UINT64: the host runtime sees only its 64-bit pattern, `value`), `name` the parameter or
    intermediate the buffer belongs to. `before` / `after`: the logical view's bytes copied before the kernel
    ran (inputs, inouts) and after it returned (outputs, inouts), kept only by `run(payloads=True)`."""

    kind: str
    name: str
    role: str
    dtype: str
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    start_offset: int = 0
    is_contiguous: bool = True
    value: int = 0
    before: bytes | None = None
    after: bytes | None = None


@dataclass
class TaskRecord:
    """One submitted task. `args`: its tensors, then its scalars (filled only by `run(trace=True)`); times are
    `time.perf_counter_ns()` values."""

    index: int
    func_id: int
    kernel: str
    core_type: str
    args: list[ArgRecord]
    start_ns: int
    end_ns: int


@dataclass
class RunTrace:
    """What one run did: its tasks in submission order and the orchestration's (start_ns, end_ns)."""

    tasks: list[TaskRecord]
    orchestration_ns: tuple[int, int]
