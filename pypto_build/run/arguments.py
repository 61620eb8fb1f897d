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
tensors in and out, as PyPTO's runtime does. torch is never imported here: while it is not loaded, no
argument can be a tensor.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

from ..errors import ArgumentError
from ..builddir.sidecars import ParamMeta, ProgramMeta, known_torch_dtype

__all__ = ["Misfit", "check_arguments", "require_fit"]

_NOTHING_RAN = "nothing ran"


@dataclass(frozen=True)
class Misfit:
    """Why the arguments do not fit: one parameter (`index`), or their number (`param` None)."""

    index: int
    param: ParamMeta | None
    problem: str            # what was given, as a phrase: "is float16 [16]", "has shape [8]", "is on cuda:0"
    fix: str

    @property
    def declared(self) -> str:
        """The parameter as the sidecar declares it: `fp32 [16]`, `a scalar (int32)` ("" for the count)."""
        p = self.param
        if p is None:
            return ""
        return f"a scalar ({p.dtype})" if p.shape is None else f"{p.dtype} {list(p.shape)}"


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
    return None


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
    raise ArgumentError(f"{meta.path} declares argument {p.name!r} ({misfit.index + 1} of {len(meta.params)}) as "
                        f"{p.direction} {misfit.declared}, but the one given {misfit.problem}; {misfit.fix} "
                        f"({_NOTHING_RAN})")


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
