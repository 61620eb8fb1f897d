"""Compare two argument dumps of one program: the first task whose outputs differ (`compare`).

The tasks of the two dumps are aligned by their place in submission order and their func_id (task ids are
runtime identities: never compared). Each aligned task's outputs (tensor outputs and inouts as they were after
it completed) are compared with torch.allclose's rule, |current - good| <= atol + rtol * |good|, NaN equal only
to NaN, a shape or dtype change always a difference. The first aligned task with a differing output is where to
look: later tasks mostly differ because they read it, so they are counted, not blamed. Where the sequences part
(a count or a func_id differs), alignment stops there: `Parting` says where. A record marked truncated or
overwritten (or without payload) cannot be compared: it is listed in `uncompared`, never blamed nor cleared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from .dump import Arg, Dump, Task
from .kernels import KernelInfo

__all__ = ["Divergence", "Parting", "Uncompared", "TraceResult", "compare", "inputs_differ"]


@dataclass(frozen=True)
class Divergence:
    """A task whose output differs: the task (`index` in submission order, `func_id`, its kernel's `kernel`
    name and `source` when the kernel map knows it), the output (`arg_index`; `output`: the buffer's name in the
    dump, else `arg<i>`; `param`: the kernel's name for that parameter, when its source says), the figures
    (`max_abs`, `max_rel`; inf for a shape or dtype change, which `reason` then says), the first differing
    element (`first_index` in the output's shape, `good_value`, `current_value`; None for a shape or dtype
    change), how many elements differ of how many, how many of the task's outputs differ (`outputs`), and
    `later`: how many later aligned tasks differ too (set on `TraceResult.first`)."""

    index: int
    func_id: tuple[int, ...]
    kernel: str | None
    source: Path | None
    arg_index: int
    output: str
    max_abs: float
    max_rel: float
    first_index: tuple[int, ...] | None
    good_value: Any
    current_value: Any
    differing: int
    numel: int
    outputs: int = 1
    reason: str | None = None
    param: str | None = None
    later: int = 0


@dataclass(frozen=True)
class Parting:
    """Where the two task sequences part: the first `index` whose func_id differs or where one side has ended
    (its `*_func_id` is None there), each side's kernel name there, and each side's task count."""

    index: int
    good_func_id: tuple[int, ...] | None
    current_func_id: tuple[int, ...] | None
    good_kernel: str | None
    current_kernel: str | None
    good_tasks: int
    current_tasks: int

    def describe(self) -> str:
        """`task 4: good runs func_id 3 (k3), current has ended (5 vs 4 tasks)`."""
        def side(func_id, kernel):
            if func_id is None:
                return "has ended"
            ids = ",".join(str(f) for f in func_id)
            return f"runs func_id {ids}" + (f" ({kernel})" if kernel else "")
        return (f"task {self.index}: good {side(self.good_func_id, self.good_kernel)}, current "
                f"{side(self.current_func_id, self.current_kernel)} ({self.good_tasks} vs {self.current_tasks} "
                "tasks)")


@dataclass(frozen=True)
class Uncompared:
    """An output that could not be compared: task `index`, `func_id`, `kernel`, `arg_index`, `output` name and
    `why` (truncated / overwritten / no payload / missing, and on which side)."""

    index: int
    func_id: tuple[int, ...]
    kernel: str | None
    arg_index: int
    output: str
    why: str


@dataclass(frozen=True)
class TraceResult:
    """The comparison: `first` divergent task (None: every aligned task agrees), every divergent aligned task
    (`divergent`, in order), where the sequences part (`parting`, None: they do not), how many tasks were
    aligned, the outputs not compared, the tolerance used, and whether either dump lost records (`lossy`)."""

    first: Divergence | None
    divergent: tuple[Divergence, ...]
    parting: Parting | None
    aligned: int
    uncompared: tuple[Uncompared, ...]
    rtol: float
    atol: float
    lossy: bool = False

    @property
    def certain(self) -> bool:
        """No output before the first divergent task went uncompared (nor did anything, when none diverged):
        an earlier task cannot be the true first."""
        bound = self.first.index if self.first is not None else math.inf
        return not any(u.index <= bound for u in self.uncompared) and not self.lossy


def compare(good: Dump, current: Dump, rtol: float, atol: float,
            kernels: Mapping[int, KernelInfo] | None = None) -> TraceResult:
    """Compare `current` against `good` (module docstring). `kernels` (func_id -> KernelInfo, `kernel_map`)
    names the kernels and their sources; without it they are None."""
    kernels = kernels or {}
    parting = _parting(good.tasks, current.tasks, kernels)
    aligned = parting.index if parting is not None else len(good.tasks)
    divergent: list[Divergence] = []
    uncompared: list[Uncompared] = []
    for g, c in zip(good.tasks[:aligned], current.tasks[:aligned]):
        found = _compare_task(g, c, rtol, atol, kernels, uncompared)
        if found is not None:
            divergent.append(found)
    first = None
    if divergent:
        first = divergent[0] = replace(divergent[0], later=len(divergent) - 1)
    return TraceResult(first, tuple(divergent), parting, aligned, tuple(uncompared), rtol, atol,
                       good.lossy or current.lossy)


def inputs_differ(good: Task, current: Task, rtol: float, atol: float) -> str | None:
    """What differs in what two aligned tasks were given (their scalars, exactly; their tensor inputs before
    dispatch, within the tolerance), or None: a task whose inputs differ is not to blame for its outputs."""
    given = {a.arg_index: a for a in good.args if a.stage == "before_dispatch"}
    for arg in current.args:
        if arg.stage != "before_dispatch":
            continue
        want = given.get(arg.arg_index)
        if want is None or want.kind != arg.kind:
            return f"argument {arg.arg_index} is not given alike"
        if arg.kind == "scalar":
            if arg.value != want.value:
                return f"scalar argument {arg.arg_index} is {arg.value!r}, was {want.value!r}"
        elif arg.trusted and want.trusted and _differs(arg.tensor(), want.tensor(), rtol, atol) is not None:
            return f"input {arg.name} (argument {arg.arg_index}) differs"
    return None


def _kernel(func_id: tuple[int, ...] | None, kernels: Mapping[int, KernelInfo]) -> str | None:
    if func_id is None:
        return None
    names = [kernels[f].name for f in func_id if f in kernels]
    return "+".join(names) if len(names) == len(func_id) else None


def _parting(good: tuple[Task, ...], current: tuple[Task, ...], kernels: Mapping[int, KernelInfo]) -> Parting | None:
    for i in range(max(len(good), len(current))):
        g = good[i].func_id if i < len(good) else None
        c = current[i].func_id if i < len(current) else None
        if g != c:
            return Parting(i, g, c, _kernel(g, kernels), _kernel(c, kernels), len(good), len(current))
    return None


def _compare_task(g: Task, c: Task, rtol: float, atol: float, kernels: Mapping[int, KernelInfo],
                  uncompared: list[Uncompared]) -> Divergence | None:
    kernel = _kernel(g.func_id, kernels)
    source = kernels[g.func_id[0]].source if kernel is not None and len(g.func_id) == 1 else None
    ours, theirs = {a.arg_index: a for a in g.outputs}, {a.arg_index: a for a in c.outputs}
    found: list[Divergence] = []
    for arg_index in sorted(set(ours) | set(theirs)):
        want, got = ours.get(arg_index), theirs.get(arg_index)
        why = _why_not(want, got)
        if why is not None:
            name = (want or got).name
            uncompared.append(Uncompared(g.index, g.func_id, kernel, arg_index, name, why))
            continue
        differs = _differs(got.tensor(), want.tensor(), rtol, atol)
        if differs is not None:
            found.append(Divergence(g.index, g.func_id, kernel, source, arg_index, want.name,
                                    param=_param(g.func_id, arg_index, kernels), **differs))
    return replace(found[0], outputs=len(found)) if found else None


def _param(func_id: tuple[int, ...], arg_index: int, kernels: Mapping[int, KernelInfo]) -> str | None:
    info = kernels.get(func_id[0]) if len(func_id) == 1 else None
    return info.params[arg_index] if info is not None and arg_index < len(info.params) else None


def _why_not(want: Arg | None, got: Arg | None) -> str | None:
    for side, arg in (("good", want), ("current", got)):
        if arg is None:
            return f"missing from the {side} dump"
        if arg.truncated:
            return f"truncated in the {side} dump"
        if arg.overwritten:
            return f"overwritten in the {side} dump"
        if arg.bin_size == 0:
            return f"no payload in the {side} dump"
    return None


def _differs(current: Any, good: Any, rtol: float, atol: float) -> dict | None:
    """The figures of how `current` differs from `good`, or None when they agree."""
    import torch

    numel = good.numel()
    if current.shape != good.shape or current.dtype != good.dtype:
        what = (f"shape {list(good.shape)} -> {list(current.shape)}" if current.shape != good.shape else
                f"dtype {str(good.dtype).removeprefix('torch.')} -> {str(current.dtype).removeprefix('torch.')}")
        return {"max_abs": math.inf, "max_rel": math.inf, "first_index": None, "good_value": None,
                "current_value": None, "differing": max(numel, current.numel()), "numel": numel, "reason": what}
    if torch.equal(current, good):
        return None
    a, b = current.to(torch.float64), good.to(torch.float64)
    close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    bad = ~close
    count = int(bad.sum())
    if count == 0:
        return None
    diff = (a - b).abs().nan_to_num(nan=math.inf, posinf=math.inf).masked_fill(close, 0)
    rel = (diff / b.abs()).nan_to_num(nan=math.inf, posinf=math.inf).masked_fill(close, 0)
    flat = int(bad.reshape(-1).nonzero()[0])
    index = tuple(int(i) for i in _unravel(flat, tuple(good.shape)))
    return {"max_abs": float(diff.max()), "max_rel": float(rel.max()), "first_index": index,
            "good_value": good.reshape(-1)[flat].item(), "current_value": current.reshape(-1)[flat].item(),
            "differing": count, "numel": numel}


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for extent in reversed(shape):
        index.append(flat % extent if extent else 0)
        flat //= extent if extent else 1
    return list(reversed(index))
