"""What a traced host run records of a task's arguments (`HostExecutor.run(trace=True, payloads=...)`): an
`ArgRecord` per tensor, with simpler's role, dtype name and view geometry, and the bytes of its logical view
(simpler's `logical_contiguous` payload) when payloads are asked for: inputs before the kernel runs, outputs after
it returns. Nothing here runs unless a trace is asked for."""
from __future__ import annotations

import ctypes
import math

from . import abi
from .trace import ArgRecord

__all__ = ["describe_tensor", "row_major", "view_bytes"]

# A tensor's role in the dump: its kernel's signature direction (as simpler's dump takes it), else how it was
# submitted (submit_task arg_types; an add_no_dep tensor is read).
_SIGNATURE_ROLES = {"IN": "input", "OUT": "output", "INOUT": "inout"}
_SUBMIT_ROLES = {0: "input", 1: "output", 2: "inout", 3: "output", 4: "input"}


def describe_tensor(rec: abi.ChipTensor, i: int, name: str, signature: tuple[str, ...], arg_type: int,
                    payloads: bool) -> ArgRecord:
    """Tensor argument `i` of a task as the dump records it; with `payloads`, an input's bytes now (call it
    before the kernel runs)."""
    role = _SIGNATURE_ROLES[signature[i]] if i < len(signature) else _SUBMIT_ROLES.get(arg_type, "input")
    shape, strides = abi.shape_of(rec), abi.strides_of(rec)
    arg = ArgRecord("tensor", name, role, abi.dump_dtype(rec.dtype), shape, strides, int(rec.start_offset),
                    row_major(shape, strides))
    if payloads and role != "output":
        arg.before = view_bytes(rec)
    return arg


def row_major(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """simpler's `dump_arg_is_contiguous`: strides[d] == prod(shape[d+1:]) for every d."""
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if stride != expected:
            return False
        expected *= extent
    return True


def view_bytes(rec: abi.ChipTensor) -> bytes:
    """The bytes of the record's logical view, gathered row-major when it is strided (what simpler puts in
    args.bin): valid only while the buffer is alive, i.e. inside the run."""
    shape, strides = abi.shape_of(rec), abi.strides_of(rec)
    size = abi.element_size(rec.dtype)
    numel = math.prod(shape)
    if numel == 0 or rec.addr == 0:
        return b""
    start = int(rec.addr) + int(rec.start_offset) * size
    if row_major(shape, strides):
        return ctypes.string_at(start, numel * size)
    import torch

    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    raw = (ctypes.c_uint8 * (extent * size)).from_address(start)
    flat = torch.frombuffer(raw, dtype=torch.uint8)
    gathered = flat.as_strided((*shape, size), (*(s * size for s in strides), 1))
    return gathered.contiguous().numpy().tobytes()
