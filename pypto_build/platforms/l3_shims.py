"""The stand-in modules the L3 driver's host_orch.py imports: the one place that replaces `sys.modules` entries.

PyPTO's distributed codegen emits a host driver that starts with

    import torch
    from simpler.task_interface import CallConfig, CommBufferSpec, DataType, TaskArgs, TensorArgType
    from pypto.runtime.tensor_arg import make_tensor_arg
    from pypto.runtime.distributed_runner import _submit_chip

`installed()` puts modules providing exactly that in `sys.modules` while the driver runs (`with`), and
restores whatever was there (or nothing) on the way out: `pypto.runtime.tensor_arg` and
`pypto.runtime.distributed_runner` on every backend (the backend's `make_tensor_arg`, the driver's
`_submit_chip`); `simpler` and `simpler.task_interface` only for a backend without simpler (the host runtime),
whose names are defined here: a comm-free program builds one `TaskArgs` per chip dispatch
(`add_tensor(make_tensor_arg(orch._worker, view), TensorArgType.X)`, `add_scalar(v)`), and `HostOrch` is the
`orch` its entry gets. Anything else of simpler's (communication domains, window buffers, device tensors,
SubWorkers, unknown names) raises `HostUnimplemented`, which the driver turns into one line
(`unimplemented_message`). `hidden_main()` is the other replacement: the caller's `__main__` hidden while the
host runtime starts its rank workers.
"""
from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import ExecutorError, UserError

__all__ = ["HostUnimplemented", "HostOrch", "ChipProgram", "TensorArg", "TaskArgs", "CallConfig", "TensorArgType",
           "DataType", "make_tensor_arg", "installed", "hidden_main", "unimplemented", "unimplemented_message",
           "TASK_INTERFACE", "TENSOR_ARG", "RUNNER"]

TASK_INTERFACE = "simpler.task_interface"
TENSOR_ARG = "pypto.runtime.tensor_arg"
RUNNER = "pypto.runtime.distributed_runner"

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

    def __reduce__(self):
        return (type(self), (self.feature,))       # crosses the run's pipe as itself (run/child.py)


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


@dataclass(frozen=True)
class ChipProgram:
    name: str


class HostOrch(_Strict):
    """The `orch` the entry gets on the host runtime: `submit_next_level` hands (rank, chip program, TaskArgs,
    dispatch folder) to the rank pool; anything else (domains, SubWorkers, device memory) is a missing feature."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._worker = object()   # what `make_tensor_arg(orch._worker, t)` is given; unused on the host

    def submit_next_level(self, callable_id: Any, task_args: Any, config: Any = None, *, worker: int) -> None:
        """simpler's call: an exact rank (the driver's `_submit_chip` places rank-less dispatches); the dispatch
        folder is `config.output_prefix` when the driver set one."""
        if not isinstance(callable_id, ChipProgram):
            raise ExecutorError(f"submit: {callable_id!r} is not a chip program from `callables`")
        if not isinstance(task_args, TaskArgs):
            raise ExecutorError(f"submit {callable_id.name}: task args must be TaskArgs, got "
                                f"{type(task_args).__name__}")
        folder = getattr(config, "output_prefix", "") if config is not None else ""
        self._pool.dispatch(worker, callable_id.name, task_args, Path(folder) if folder else None)


def _comm_buffer_spec(*_args: Any, **_kwargs: Any) -> Any:
    raise unimplemented("CommBufferSpec")


def _module(name: str, attrs: dict[str, Any], strict: bool) -> types.ModuleType:
    """A package module holding `attrs`; `strict`: any other name is a missing feature (simpler's, on the host)."""
    mod = types.ModuleType(name, f"pypto_build stand-in for {name} (the L3 driver's host_orch.py imports it)")
    mod.__dict__.update(attrs)
    mod.__path__ = []  # type: ignore[attr-defined]  # a package: its submodules can be imported

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise unimplemented(f"{name}.{attr}")

    if strict:
        mod.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return mod


def host_task_interface() -> dict[str, Any]:
    """The host runtime's `simpler.task_interface`: what a comm-free host driver uses of it."""
    return {"TaskArgs": TaskArgs, "TensorArgType": TensorArgType, "CallConfig": CallConfig, "DataType": DataType,
            "CommBufferSpec": _comm_buffer_spec}


def _modules(names: dict[str, dict[str, Any]], submit_chip: Callable[..., Any]) -> dict[str, types.ModuleType]:
    """The modules to install: the pypto ones always, simpler's when `names` stands in for its task_interface."""
    tensor_arg = _module(TENSOR_ARG, names[TENSOR_ARG], strict=False)
    runner = _module(RUNNER, {"_submit_chip": submit_chip}, strict=False)
    runtime = _module("pypto.runtime", {"tensor_arg": tensor_arg, "distributed_runner": runner}, strict=False)
    found = {"pypto": _module("pypto", {"runtime": runtime}, strict=False), "pypto.runtime": runtime,
             TENSOR_ARG: tensor_arg, RUNNER: runner}
    if TASK_INTERFACE in names:
        task_interface = _module(TASK_INTERFACE, names[TASK_INTERFACE], strict=True)
        found.update({"simpler": _module("simpler", {"task_interface": task_interface}, strict=True),
                      TASK_INTERFACE: task_interface})
    return found


@contextlib.contextmanager
def installed(names: dict[str, dict[str, Any]], submit_chip: Callable[..., Any]) -> Iterator[None]:
    """The stand-in modules in `sys.modules` while the block runs (`names`: a backend's, by module; the driver's
    `_submit_chip`); whatever was there before (or nothing) is back afterwards."""
    modules = _modules(names, submit_chip)
    saved = {name: sys.modules.get(name) for name in modules}
    _missing.clear()
    sys.modules.update(modules)
    try:
        yield
    finally:
        _restore(saved)


@contextlib.contextmanager
def hidden_main() -> Iterator[None]:
    """The caller's `__main__` hidden while the host runtime starts its rank workers: a worker started from the
    forkserver imports the parent's main script again, and one without an `if __name__ == "__main__"` guard would run again. The
    workers need nothing from it (their function lives in `host/runtime/l3.py`)."""
    saved = {"__main__": sys.modules.get("__main__")}
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        _restore(saved)


def _restore(saved: dict[str, types.ModuleType | None]) -> None:
    for name, previous in saved.items():
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous


def unimplemented_message(exc: BaseException, path: Path) -> str | None:
    """One line for a host driver that used what the host runtime does not have (a `HostUnimplemented` in
    `exc`'s chain, or an import of such a name), or None."""
    hunt: BaseException | None = exc
    while hunt is not None:
        if isinstance(hunt, HostUnimplemented):
            return _message(hunt.feature, path)
        hunt = hunt.__cause__ or hunt.__context__
    missing = last_missing()
    if isinstance(exc, ImportError) and missing is not None:
        return _message(missing, path)
    return None


def _message(feature: str, path: Path) -> str:
    return (f"host runtime: {feature} is not implemented for distributed programs (the host runs "
            f"comm-free programs that dispatch chip programs to ranks); used by {path}")
