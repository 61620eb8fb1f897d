"""The arguments a program is called with, against the parameters its sidecar declares.

`check_arguments(params, args)` is pure: None when every argument fits its parameter, else the first
`Misfit` (the parameter, what the sidecar declares, what was given, the fix). Every way of running a
program on a caller's arguments asks it before any kernel runs — `replay()` before its child starts,
`CompiledProgram`, `benchmark()`, `DistributedCompiledProgram` (`require_fit`: an `ArgumentError`) —
and golden.py's inputs are held to it too. A kernel reads and writes its tensors' memory by the
declared dtype and shape, so an argument that does not fit would run on the wrong bytes or past the
end of the caller's buffer (a corrupted heap).

Checked: the count; a tensor for each tensor parameter and a number for each scalar one; each
tensor's dtype (where torch has the declared type: not fp4, int4/uint4, hf4/hf8, task_id), rank and
static dims (a negative declared dim takes any size); contiguity; and a CPU device — the host runtime
runs the kernels on the tensors' own memory, and simpler's Worker (simulators and NPUs) copies CPU
tensors in and out, as PyPTO's runtime does. Then aliasing: an `Out` or `InOut` tensor may share no
byte with any other tensor argument (the same tensor, or overlapping views of one buffer; a contiguous
tensor occupies [data_ptr, data_ptr + numel * element_size)). A program is compiled for distinct
buffers: given one tensor twice it would read what it already overwrote (and the entry points would
not even agree: replay()'s child gets the tensors by pickle, which keeps one tensor given twice shared
but splits views of one buffer). In tensors may alias each other (read-only); `InOut` is how a program
updates a tensor in place. torch is never imported here: while it is not
loaded, no argument can be a tensor (the objects are inspected duck-typed).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

from ..errors import ArgumentError
from ..builddir.sidecars import ParamMeta, ProgramMeta, known_torch_dtype

__all__ = ["Misfit", "check_arguments", "require_fit"]

_NOTHING_RAN = "nothing ran"
_WRITTEN = ("Out", "InOut")


@dataclass(frozen=True)
class Misfit:
    """Why the arguments do not fit: one parameter (`index`), their number (`param` None), or a written
    parameter's tensor sharing memory with another's (`other`: that one's index; `problem` then says it
    of both: "are the same tensor")."""

    index: int
    param: ParamMeta | None
    problem: str            # what was given, as a phrase: "is float16 [16]", "has shape [8]", "is on cuda:0"
    fix: str
    other: int | None = None

    @property
    def declared(self) -> str:
        """The parameter as the sidecar declares it: `fp32 [16]`, `a scalar (int32)` ("" for the count)."""
        p = self.param
        return "" if p is None else _declared(p)


def check_arguments(params: Sequence[ParamMeta], args: Sequence, *,
                    outputs_optional: bool = False) -> Misfit | None:
    """The first argument that does not fit `params` (in order), or None when all do.

    `outputs_optional`: the caller may also leave out the `Out` parameters (a count misfit says so).
    """
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        short = len(params) - sum(1 for p in params if p.direction == "Out")
        also = short if outputs_optional and short != len(params) else None
        return Misfit(len(args), None, f"expected {len(params)} arguments ({names})"
                      + (f" or {also} without the outputs" if also is not None else "") + f", got {len(args)}",
                      "pass them in that order")
    torch = sys.modules.get("torch")
    tensor_type = torch.Tensor if torch is not None else ()
    for i, (p, value) in enumerate(zip(params, args)):
        problem = (_scalar_problem(value, tensor_type) if p.shape is None else
                   _tensor_problem(p, value, tensor_type, torch))
        if problem is not None:
            return Misfit(i, p, *problem)
    return _aliasing(params, args, tensor_type)


def require_fit(meta: ProgramMeta | None, args: Sequence, *, outputs_optional: bool = False) -> None:
    """Raise one ArgumentError when `args` do not fit `meta`'s parameters (no sidecar: nothing to check)."""
    if meta is None:
        return
    misfit = check_arguments(meta.params, args, outputs_optional=outputs_optional)
    if misfit is None:
        return
    if misfit.param is None:
        raise ArgumentError(f"{meta.path}: {misfit.problem}; {misfit.fix} ({_NOTHING_RAN})")
    p = misfit.param
    if misfit.other is not None:
        q, n = meta.params[misfit.other], len(meta.params)
        raise ArgumentError(f"{meta.path} declares argument {p.name!r} ({misfit.index + 1} of {n}) as "
                            f"{p.direction} {misfit.declared} and {q.name!r} ({misfit.other + 1} of {n}) as "
                            f"{q.direction} {_declared(q)}, but the tensors given for them "
                            f"{misfit.problem}; {misfit.fix} ({_NOTHING_RAN})")
    raise ArgumentError(f"{meta.path} declares argument {p.name!r} ({misfit.index + 1} of {len(meta.params)}) as "
                        f"{p.direction} {misfit.declared}, but the one given {misfit.problem}; {misfit.fix} "
                        f"({_NOTHING_RAN})")


def _declared(p: ParamMeta) -> str:
    return f"a scalar ({p.dtype})" if p.shape is None else f"{p.dtype} {list(p.shape)}"


def _tensor_problem(p: ParamMeta, value, tensor_type, torch) -> tuple[str, str] | None:
    want = known_torch_dtype(p.dtype)
    dims = ", ".join(str(d) if d >= 0 else "any" for d in p.shape)
    fix = f"pass a contiguous CPU {want or p.dtype} tensor of shape [{dims}]"
    if not isinstance(value, tensor_type):
        return f"is {_kind(value)}, not a tensor", fix
    shape = [int(d) for d in value.shape]
    dtype = str(value.dtype).removeprefix("torch.")
    if want is not None and value.dtype != getattr(torch, want):
        return f"is {dtype} {shape}", fix
    if len(shape) != len(p.shape) or any(d >= 0 and d != s for d, s in zip(p.shape, shape)):
        return f"has shape {shape}", fix
    if value.device.type != "cpu":
        return (f"is on {value.device}", "pass it on the CPU (.cpu()): the host runtime works in the tensors' "
                "own memory and simpler copies CPU tensors to the simulator or NPU")
    if not value.is_contiguous():
        return (f"is not contiguous (strides {tuple(value.stride())})", "pass .contiguous() (outputs are "
                "written in place: copy them back into your view afterwards)")
    return None


def _aliasing(params: Sequence[ParamMeta], args: Sequence, tensor_type) -> Misfit | None:
    """The first pair of tensor arguments sharing memory where one of them is written (`Out`/`InOut`), as a
    Misfit of the written one (the earlier, when both are), or None. Every tensor is contiguous by now."""
    spans = [(i, _span(value)) for i, (p, value) in enumerate(zip(params, args))
             if p.shape is not None and isinstance(value, tensor_type)]
    for k, (i, (start, end)) in enumerate(spans):
        for j, (other_start, other_end) in spans[k + 1:]:
            if start >= end or other_start >= other_end or start >= other_end or other_start >= end:
                continue            # empty, or disjoint: adjacent slices of one buffer are fine
            if params[i].direction not in _WRITTEN and params[j].direction not in _WRITTEN:
                continue            # two inputs: both only read
            writer, other = (i, j) if params[i].direction in _WRITTEN else (j, i)
            a, b = args[writer], args[other]
            storage = _storage(a)
            same = "are the same tensor" if a is b else ("are overlapping views of one buffer"
                                                         if storage is not None and storage == _storage(b)
                                                         else "overlap in memory")
            return Misfit(writer, params[writer], same,
                          "the program was compiled for distinct buffers (it would read what it already "
                          f"overwrote): pass distinct tensors (e.g. clone the one for {params[other].name!r}); "
                          "a program updates a tensor in place through one InOut parameter, given it once",
                          other)
    return None


def _span(t) -> tuple[int, int]:
    """The bytes a contiguous tensor occupies: [data_ptr, data_ptr + numel * element_size)."""
    start = int(t.data_ptr())
    return start, start + int(t.numel()) * int(t.element_size())


def _storage(t) -> int | None:
    """The address of the tensor's whole storage (views of one buffer share it)."""
    storage = getattr(t, "untyped_storage", None)
    return int(storage().data_ptr()) if storage is not None else None


def _scalar_problem(value, tensor_type) -> tuple[str, str] | None:
    fix = "pass a scalar (int, float, bool or a ctypes value)"
    if isinstance(value, tensor_type):
        return "is a tensor", fix
    if isinstance(value, (bool, int, float)) or isinstance(getattr(value, "value", None), (bool, int, float)):
        return None
    return f"is {_kind(value)}", fix


def _kind(value) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
