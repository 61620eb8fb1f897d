"""Stand-ins for the runtime names a generated `orchestration/host_orch.py` imports.

PyPTO's distributed codegen emits a host driver that starts with

    import torch
    from simpler.task_interface import CallConfig, CommBufferSpec, DataType, TaskArgs, TensorArgType
    from pypto.runtime.tensor_arg import make_tensor_arg
    from pypto.runtime.distributed_runner import _submit_chip

and, for a comm-free program, builds one `TaskArgs` per chip dispatch
(`add_tensor(make_tensor_arg(orch._worker, view), TensorArgType.X)`,
`add_scalar(v)`) and hands it to `_submit_chip(orch, callables[name], ta,
config, rank_or_None)`. `stand_in_modules()` installs modules providing exactly
that subset in `sys.modules` for the duration of a `with` block; `HostOrch`,
`Callables` and `SubIds` are the `orch`, `callables` and `sub_ids` the entry
is called with. Anything else
(communication domains, window buffers, device tensors, SubWorkers, unknown
names) raises `HostUnimplemented`, which the driver turns into one message.
"""
from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import UserError
from .executor import ExecutorError

__all__ = ["HostUnimplemented", "HostOrch", "Callables", "SubIds", "ChipProgram", "TensorArg", "TaskArgs", "CallConfig", "TensorArgType", "DataType",
           "make_tensor_arg", "submit_chip", "submit_chip_group", "stand_in_modules", "unimplemented",
           "STAND_IN_MODULES"]

STAND_IN_MODULES = ("simpler", "simpler.task_interface", "pypto", "pypto.runtime", "pypto.runtime.tensor_arg",
                    "pypto.runtime.distributed_runner")

# Names whose use means a feature the host runtime does not have, with a readable label.
_FEATURES = {
    "allocate_domain": "communication domains (orch.allocate_domain)",
    "CommBufferSpec": "communication-domain window buffers (CommBufferSpec)",
    "submit_sub": "SubWorkers (orch.submit_sub)",
    "DeviceTensor": "worker-resident device tensors (DeviceTensor)",
}

_missing: list[str] = []  # features touched through a stand-in since the last install (see `last_missing`)


class HostUnimplemented(UserError, AttributeError):
    """A generated host driver used something the host runtime does not implement; `feature` names it."""

    def __init__(self, feature: str) -> None:
        super().__init__(f"{feature} is not implemented by the host runtime")
        self.feature = feature


def unimplemented(name: str) -> HostUnimplemented:
    """Record `name` as used-but-missing and return the exception to raise."""
    feature = _FEATURES.get(name.rsplit(".", 1)[-1], name)
    _missing.append(feature)
    return HostUnimplemented(feature)


def last_missing() -> str | None:
    """The most recent missing feature (an import of a missing name loses the AttributeError; this keeps it)."""
    return _missing[-1] if _missing else None


class _Names:
    """A fixed set of enum-like names; any other attribute is a missing feature."""

    def __init__(self, label: str, names: tuple[str, ...]) -> None:
        self._label = label
        for name in names:
            object.__setattr__(self, name, _Member(label, name))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise unimplemented(f"{self._label}.{name}")


class _Member:
    def __init__(self, owner: str, name: str) -> None:
        self.owner, self.name = owner, name

    def __repr__(self) -> str:
        return f"{self.owner}.{self.name}"


TensorArgType = _Names("TensorArgType", ("INPUT", "OUTPUT", "INOUT", "OUTPUT_EXISTING", "NO_DEP"))
DataType = _Names("DataType", ("FLOAT32", "FLOAT16", "BFLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8"))
_WRITES = {"OUTPUT_EXISTING", "INOUT", "NO_DEP"}  # NO_DEP: no ordering promised, treated as a write (safe)


class _Strict:
    """Base for stand-in objects: reading an attribute they do not define is a missing feature."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise unimplemented(f"{type(self).__name__}.{name}")


class CallConfig(_Strict):
    """The per-dispatch config object `host_orch` threads through (fields are informational on the host)."""

    def __init__(self, **fields: Any) -> None:
        self.block_dim: int | None = None
        self.aicpu_thread_num = 0
        self.output_prefix = ""
        self.__dict__.update(fields)


class TensorArg(_Strict):
    """`make_tensor_arg(...)` result: a CPU torch tensor (usually a view) headed for a chip program."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor


class TaskArgs(_Strict):
    """Arguments of one chip dispatch: tensors (with their `TensorArgType`), then scalars."""

    def __init__(self) -> None:
        self.tensors: list[tuple[TensorArg, str]] = []
        self.scalars: list[Any] = []

    def add_tensor(self, arg: Any, arg_type: Any = None) -> None:
        if not isinstance(arg, TensorArg):
            raise unimplemented(f"TaskArgs.add_tensor({type(arg).__name__})")
        kind = arg_type.name if isinstance(arg_type, _Member) and arg_type.owner == "TensorArgType" else None
        if kind is None:
            raise TypeError(f"TaskArgs.add_tensor: expected a TensorArgType, got {arg_type!r}")
        if kind == "OUTPUT":
            raise unimplemented("runtime-allocated outputs (TensorArgType.OUTPUT)")
        self.tensors.append((arg, kind))

    def add_scalar(self, value: Any) -> None:
        self.scalars.append(value)

    def tensor_count(self) -> int:
        return len(self.tensors)

    def scalar_count(self) -> int:
        return len(self.scalars)

    def is_write(self, i: int) -> bool:
        return self.tensors[i][1] in _WRITES


def make_tensor_arg(*args: Any) -> TensorArg:
    """`make_tensor_arg(tensor)` or `make_tensor_arg(orch._worker, tensor)`; host torch tensors only."""
    import torch

    if len(args) not in (1, 2):
        raise TypeError(f"make_tensor_arg() takes 1 or 2 arguments ({len(args)} given)")
    value = args[-1]
    if isinstance(value, TensorArg):
        return value
    if not isinstance(value, torch.Tensor):
        raise unimplemented(type(value).__name__ if type(value).__name__ == "DeviceTensor"
                            else f"make_tensor_arg({type(value).__name__})")
    if value.device.type != "cpu":
        raise TypeError(f"make_tensor_arg: the host runtime takes CPU tensors, got one on {value.device}")
    return TensorArg(value)


def submit_chip(orch: Any, callable_id: Any, task_args: Any, config: Any, worker: int | None) -> Any:
    """`_submit_chip`: a rank-pinned dispatch keeps its rank; `None` is placed round-robin over the ranks."""
    return orch.submit_next_level(callable_id, task_args, config, worker=worker)


def submit_chip_group(orch: Any, callable_id: Any, args_list: Any, config: Any, workers: Any) -> None:
    """`_submit_chip_group`: one dispatch of the same program per (task args, rank) pair, in order."""
    args_list, workers = list(args_list), list(workers)
    if len(args_list) != len(workers):
        raise ValueError(f"_submit_chip_group: {len(args_list)} task args for {len(workers)} workers")
    for task_args, worker in zip(args_list, workers):
        orch.submit_next_level(callable_id, task_args, config, worker=worker)


class Callables(dict):
    """`callables[name]` -> the chip program handle; an unknown name is a clear error."""

    def __init__(self, chips: dict[str, Path]) -> None:
        super().__init__({name: ChipProgram(name) for name in chips})

    def __missing__(self, name: str) -> Any:
        raise ExecutorError(f"host_orch.py dispatches chip program {name!r}, but next_levels/{name}/ has no "
                            f"kernel_config.py (chip programs: {', '.join(sorted(self))})")


class SubIds(dict):
    def __missing__(self, name: str) -> Any:
        raise unimplemented(f"SubWorkers (sub_ids[{name!r}])")


@dataclass(frozen=True)
class ChipProgram:
    name: str


class HostOrch(_Strict):
    """The `orch` handed to the entry: `submit_next_level` hands (rank, program name, TaskArgs) to
    `pool.dispatch`; anything else (domains, SubWorkers, device memory) is a missing feature."""

    def __init__(self, pool: Any, world: int) -> None:
        self._pool = pool
        self._world = world
        self._worker = object()   # what `make_tensor_arg(orch._worker, t)` is given; unused on the host
        self._next_unplaced = 0
        self.keep: list[Any] = []

    def submit_next_level(self, callable_id: Any, task_args: Any, config: Any = None, *,
                          worker: int | None = None) -> None:
        if not isinstance(callable_id, ChipProgram):
            raise ExecutorError(f"submit: {callable_id!r} is not a chip program from `callables`")
        if not isinstance(task_args, TaskArgs):
            raise ExecutorError(f"submit {callable_id.name}: task args must be TaskArgs, got "
                                f"{type(task_args).__name__}")
        if worker is None:  # comm-less dispatch: round-robin over the ranks in submission order
            worker, self._next_unplaced = self._next_unplaced % self._world, self._next_unplaced + 1
        if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < self._world:
            raise ExecutorError(f"submit {callable_id.name}: rank {worker!r} is outside 0..{self._world - 1} "
                                f"(world size {self._world})")
        self._pool.dispatch(worker, callable_id.name, task_args)


def _comm_buffer_spec(*_args: Any, **_kwargs: Any) -> Any:
    raise unimplemented("CommBufferSpec")


def _module(name: str, attrs: dict[str, Any], package: bool = False) -> types.ModuleType:
    mod = types.ModuleType(name, f"pypto_build host-runtime stand-in for {name}")
    mod.__dict__.update(attrs)
    if package:
        mod.__path__ = []  # type: ignore[attr-defined]

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise unimplemented(f"{name}.{attr}")

    mod.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return mod


def _build_modules() -> dict[str, types.ModuleType]:
    task_interface = _module("simpler.task_interface", {
        "TaskArgs": TaskArgs, "TensorArgType": TensorArgType, "CallConfig": CallConfig, "DataType": DataType,
        "CommBufferSpec": _comm_buffer_spec})
    tensor_arg = _module("pypto.runtime.tensor_arg", {"make_tensor_arg": make_tensor_arg})
    runner = _module("pypto.runtime.distributed_runner",
                     {"_submit_chip": submit_chip, "_submit_chip_group": submit_chip_group})
    runtime = _module("pypto.runtime", {"tensor_arg": tensor_arg, "distributed_runner": runner}, package=True)
    return {
        "simpler": _module("simpler", {"task_interface": task_interface}, package=True),
        "simpler.task_interface": task_interface,
        "pypto": _module("pypto", {"runtime": runtime}, package=True),
        "pypto.runtime": runtime,
        "pypto.runtime.tensor_arg": tensor_arg,
        "pypto.runtime.distributed_runner": runner,
    }


@contextlib.contextmanager
def stand_in_modules() -> Iterator[None]:
    """Install the stand-in modules in `sys.modules`; restore whatever was there (or nothing) on exit."""
    saved = {name: sys.modules.get(name) for name in STAND_IN_MODULES}
    _missing.clear()
    sys.modules.update(_build_modules())
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
