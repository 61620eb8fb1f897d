"""ctypes mirror of the host runtime ABI (platforms/host/headers/include/*.h).

`ChipTensor` (128 bytes, tensor.h), `DataType` and its torch mapping,
`PTO2RuntimeOps` / `ChipTaskArgs` / `PTO2OrchestrationConfig`
(pto_orchestration_api.h) and the callback types of the ops table. Every
offset is asserted at import time against the documented layout. torch is
imported lazily (only the dtype helpers need it), so importing this module is cheap.
"""
from __future__ import annotations

import ctypes
import enum
import math
import struct
from typing import Any

from ....errors import UserError

__all__ = [
    "ABI_VERSION", "MAX_TENSOR_DIMS", "EXTERNAL_TASK_ID", "ChipTensor", "DataType", "PTO2RuntimeOps",
    "ChipTaskArgs", "PTO2OrchestrationConfig", "SUBMIT_FN", "SCOPE_FN", "ALLOC_FN", "IS_FATAL_FN",
    "REPORT_FATAL_FN", "LOG_FN", "ARG_ROLES", "LOG_LEVEL_NAMES", "CORE_TYPES", "UnsupportedDType",
    "aligned_tensors", "fill_from_torch", "dtype_label", "torch_dtype", "dtype_of_torch", "shape_of", "describe",
    "scalar_bits", "dump_dtype", "element_size", "strides_of",
]

ABI_VERSION = 1            # PTO_HOST_RUNTIME_ABI_VERSION
MAX_TENSOR_DIMS = 5
EXTERNAL_TASK_ID = 2**64 - 1  # PTO2_EXTERNAL_TASK_ID
ADDRESS_SPACE_DEVICE = 1
CORE_TYPES = {0: "aic", 1: "aiv"}  # submit_task core_type
# submit_task arg_types -> role (add_no_dep tensors carry no direction).
ARG_ROLES = {0: "in", 1: "out", 2: "inout", 3: "out", 4: "no_dep"}
# The runtime's log level number -> its name, as PyPTO spells log levels (ALWAYS: shown whatever the threshold);
# the names a user may pass are runconfig.LOG_LEVELS.
LOG_LEVEL_NAMES = {0: "debug", 1: "info", 2: "warn", 3: "error", 4: "always"}


class UnsupportedDType(UserError, TypeError):
    """A dtype the host runtime cannot represent as a torch tensor (FP8/FP4) or has no DataType for."""


class DataType(enum.IntEnum):
    """tensor.h `DataType` (u8, values are ABI)."""

    FLOAT32 = 0
    FLOAT16 = 1
    INT32 = 2
    INT16 = 3
    INT8 = 4
    UINT8 = 5
    BFLOAT16 = 6
    INT64 = 7
    UINT64 = 8
    UINT16 = 9
    UINT32 = 10
    BOOL = 11
    FP8E4M3FN = 12
    FP8E8M0 = 13
    FP4E2M1 = 14

    @property
    def label(self) -> str:
        """Lower-case name used in traces and messages ("float32", "fp8e4m3fn", ...)."""
        return self.name.lower()


_TORCH_NAMES = {
    DataType.FLOAT32: "float32", DataType.FLOAT16: "float16", DataType.INT32: "int32", DataType.INT16: "int16",
    DataType.INT8: "int8", DataType.UINT8: "uint8", DataType.BFLOAT16: "bfloat16", DataType.INT64: "int64",
    DataType.UINT64: "uint64", DataType.UINT16: "uint16", DataType.UINT32: "uint32", DataType.BOOL: "bool",
}


_ELEMENT_SIZES = {DataType.FLOAT32: 4, DataType.FLOAT16: 2, DataType.INT32: 4, DataType.INT16: 2, DataType.INT8: 1,
                  DataType.UINT8: 1, DataType.BFLOAT16: 2, DataType.INT64: 8, DataType.UINT64: 8, DataType.UINT16: 2,
                  DataType.UINT32: 4, DataType.BOOL: 1, DataType.FP8E4M3FN: 1, DataType.FP8E8M0: 1,
                  DataType.FP4E2M1: 1}


def dump_dtype(code: int) -> str:
    """The name simpler's argument dump gives a dtype byte (`get_dtype_name`: FLOAT32, ...; UNKNOWN else)."""
    try:
        return DataType(code).name
    except ValueError:
        return "UNKNOWN"


def element_size(code: int) -> int:
    """Bytes per element of DataType `code` (1 for an unknown value, as simpler's table would not say)."""
    try:
        return _ELEMENT_SIZES[DataType(code)]
    except ValueError:
        return 1


def dtype_label(code: int) -> str:
    """Human name of a raw dtype byte (unknown values are shown as such)."""
    try:
        return DataType(code).label
    except ValueError:
        return f"dtype#{code}"


def torch_dtype(code: int) -> Any:
    """The torch dtype of DataType `code`; UnsupportedDType for FP8/FP4 and unknown values."""
    import torch

    try:
        dt = DataType(code)
    except ValueError:
        raise UnsupportedDType(f"unknown DataType value {code} (valid: 0..{len(DataType) - 1})") from None
    if dt not in _TORCH_NAMES:
        raise UnsupportedDType(f"DataType {dt.name} is not supported on the host runtime "
                               f"(FP8/FP4 tensors need the NPU or the PTO-ISA CPU simulation)")
    return getattr(torch, _TORCH_NAMES[dt])


def dtype_of_torch(dtype: Any) -> DataType:
    """The DataType of a torch dtype; UnsupportedDType if the host runtime has none."""
    name = str(dtype).removeprefix("torch.")
    for dt, torch_name in _TORCH_NAMES.items():
        if torch_name == name:
            return dt
    raise UnsupportedDType(f"torch dtype {name} is not supported on the host runtime "
                           f"(supported: {', '.join(_TORCH_NAMES.values())})")


class ChipTensor(ctypes.Structure):
    """tensor.h `ChipTensor` (buffer.addr/buffer.size flattened to addr/size)."""

    _pack_ = 1
    _fields_ = [
        ("addr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("owner_task_id", ctypes.c_uint64),
        ("start_offset", ctypes.c_uint64), ("version", ctypes.c_int32), ("ndims", ctypes.c_uint32),
        ("dtype", ctypes.c_uint8), ("manual_dep", ctypes.c_uint8), ("is_contiguous", ctypes.c_uint8),
        ("address_space", ctypes.c_uint8), ("shapes", ctypes.c_uint32 * MAX_TENSOR_DIMS),
        ("extent_elem_cache", ctypes.c_uint64), ("strides", ctypes.c_uint32 * MAX_TENSOR_DIMS),
        ("padding", ctypes.c_uint8 * 36),
    ]


_LAYOUT = {"addr": 0, "size": 8, "owner_task_id": 16, "start_offset": 24, "version": 32, "ndims": 36, "dtype": 40,
           "manual_dep": 41, "is_contiguous": 42, "address_space": 43, "shapes": 44, "extent_elem_cache": 64,
           "strides": 72, "padding": 92}
assert ctypes.sizeof(ChipTensor) == 128, "ChipTensor must be 128 bytes"
for _name, _offset in _LAYOUT.items():
    assert getattr(ChipTensor, _name).offset == _offset, f"ChipTensor.{_name} must be at offset {_offset}"

# Callback types of PTO2RuntimeOps (ctx is always the first argument).
SUBMIT_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                             ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32,
                             ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint32)
SCOPE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ChipTensor), ctypes.c_uint32)
IS_FATAL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
REPORT_FATAL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p)


class PTO2RuntimeOps(ctypes.Structure):
    """The ops table handed to `pto_host_bind_runtime`."""

    _fields_ = [
        ("abi_version", ctypes.c_uint32), ("struct_size", ctypes.c_uint32), ("ctx", ctypes.c_void_p),
        ("submit_task", SUBMIT_FN), ("scope_begin", SCOPE_FN), ("scope_end", SCOPE_FN),
        ("alloc_tensors", ALLOC_FN), ("is_fatal", IS_FATAL_FN), ("report_fatal", REPORT_FATAL_FN),
        ("log", LOG_FN),
    ]


assert ctypes.sizeof(PTO2RuntimeOps) == 16 + 7 * ctypes.sizeof(ctypes.c_void_p)


class ChipTaskArgs(ctypes.Structure):
    """What `aicpu_orchestration_entry` / `aicpu_orchestration_config` receive (24 bytes)."""

    _fields_ = [("tensors", ctypes.c_void_p), ("scalars", ctypes.c_void_p),
                ("tensor_count", ctypes.c_uint32), ("scalar_count", ctypes.c_uint32)]


assert ctypes.sizeof(ChipTaskArgs) == 24 and ChipTaskArgs.tensor_count.offset == 16


class PTO2OrchestrationConfig(ctypes.Structure):
    """Return value of `aicpu_orchestration_config`."""

    _fields_ = [("expected_arg_count", ctypes.c_int)]


def aligned_tensors(count: int) -> tuple[ctypes.Array, ctypes.Array]:
    """`count` zeroed ChipTensor records at a 64-byte aligned address, plus the buffer that owns them
    (keep both alive while the records are in use)."""
    raw = ctypes.create_string_buffer(128 * max(count, 1) + 64)
    base = (ctypes.addressof(raw) + 63) // 64 * 64
    return (ChipTensor * max(count, 1)).from_address(base), raw


def shape_of(rec: ChipTensor) -> tuple[int, ...]:
    """The view shape of a record (its first `ndims` extents)."""
    return tuple(int(rec.shapes[d]) for d in range(min(int(rec.ndims), MAX_TENSOR_DIMS)))


def describe(rec: ChipTensor) -> str:
    """A record for humans: `float32[4, 16]`."""
    return f"{dtype_label(rec.dtype)}[{', '.join(str(s) for s in shape_of(rec))}]"


def fill_from_torch(rec: ChipTensor, tensor: Any) -> None:
    """Describe a contiguous CPU torch tensor in `rec` (an external tensor, start_offset 0).

    Raises ValueError for a non-CPU, non-contiguous or more than 5-D tensor and
    UnsupportedDType for a dtype the host runtime has no DataType for.
    """
    shape = tuple(int(s) for s in tensor.shape)
    desc = f"{str(tensor.dtype).removeprefix('torch.')}{list(shape)}"
    if tensor.device.type != "cpu":
        raise ValueError(f"tensor {desc} is on {tensor.device}; the host runtime needs CPU tensors (.cpu())")
    if not tensor.is_contiguous():
        raise ValueError(f"tensor {desc} is not contiguous (strides {tuple(tensor.stride())}); "
                         "pass .contiguous() and copy results back, outputs are written in place")
    if len(shape) > MAX_TENSOR_DIMS:
        raise ValueError(f"tensor {desc} has {len(shape)} dimensions; ChipTensor holds at most {MAX_TENSOR_DIMS}")
    dt = dtype_of_torch(tensor.dtype)
    if not shape:
        shape = (1,)  # a 0-d tensor is passed as one element
    ctypes.memset(ctypes.addressof(rec), 0, ctypes.sizeof(ChipTensor))
    numel = math.prod(shape)
    rec.addr = int(tensor.data_ptr())
    rec.size = numel * tensor.element_size()
    rec.owner_task_id = EXTERNAL_TASK_ID
    rec.start_offset = 0
    rec.ndims = len(shape)
    rec.dtype = int(dt)
    rec.is_contiguous = 1
    rec.address_space = ADDRESS_SPACE_DEVICE  # what the orchestration sees on a device run; host memory here
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        rec.shapes[d] = shape[d]
        rec.strides[d] = max(stride, 1)  # row-major, in elements, always > 0
        stride *= shape[d]
    rec.extent_elem_cache = numel


_U64 = 2**64


def scalar_bits(value: Any) -> int:
    """Raw 64-bit pattern of a scalar argument, as the runtime packs it.

    bool -> 0/1; int -> two's complement (must fit in 64 bits); Python float ->
    IEEE single precision bits, zero-extended (use ctypes.c_double for a double);
    ctypes c_float / c_double -> their IEEE bits; other ctypes integers -> their
    value, signed ones sign-extended (like `add_scalar` in pto_orchestration_api.h).
    """
    if isinstance(value, ctypes._SimpleCData):
        if isinstance(value, ctypes.c_float):
            return struct.unpack("<I", struct.pack("<f", value.value))[0]
        if isinstance(value, ctypes.c_double):
            return struct.unpack("<Q", struct.pack("<d", value.value))[0]
        if isinstance(value, ctypes.c_bool):
            return int(bool(value.value))
        inner = value.value
        if not isinstance(inner, int):
            raise TypeError(f"ctypes scalar {type(value).__name__} is not a number")
        return inner % _U64
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if not -(2**63) <= value < _U64:
            raise ValueError(f"integer scalar {value} does not fit in 64 bits")
        return value % _U64
    if isinstance(value, float):
        try:
            return struct.unpack("<I", struct.pack("<f", value))[0]
        except OverflowError:
            raise ValueError(f"float scalar {value!r} is out of float32 range; "
                             f"pass ctypes.c_double({value!r})") from None
    raise TypeError(f"unsupported scalar type {type(value).__name__} (int, float, bool or a ctypes scalar)")


def strides_of(rec: ChipTensor) -> tuple[int, ...]:
    """The view strides of a record, in elements (its first `ndims`)."""
    return tuple(int(rec.strides[d]) for d in range(min(int(rec.ndims), MAX_TENSOR_DIMS)))

