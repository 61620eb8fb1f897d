"""Run a built sub-build on the CPU: the host runtime executor.

`HostExecutor(dir)` loads the orchestration `.so` and every kernel `.so` of
one sub-build (a directory with `kernel_config.py`, built for the `host`
platform), binds a `PTO2RuntimeOps` table (binding contract at the top of
platforms/host/headers/include/pto_orchestration_api.h) and calls
`aicpu_orchestration_entry`. Each submitted task runs **synchronously inside
`submit_task`**, so tasks run one at a time in submission order: that order is
a valid schedule (a task depends only on tasks submitted before it), the
records the orchestration passes are valid during the call, and a failure is
pinned to the task that caused it before anything else is submitted. It is a
functional reference for checking results on a CPU, not a performance model
of the NPU. torch is imported only here and in `abi`, never on a build path.
"""
from __future__ import annotations

import ctypes
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ....errors import ExecutorError, ManifestError
from ....builddir.manifest import KernelSpec, read_kernel_config
from ....builddir.markers import KERNEL_CONFIG
from ..places import host_binary, host_external_binary
from . import abi, capture
from .trace import ArgRecord, RunTrace, TaskRecord

__all__ = ["HostExecutor", "ExecutorError"]

_LOGGER = logging.getLogger("pypto_build.platforms.host.runtime")
_PY_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.INFO}
_MAX_TENSORS, _MAX_SCALARS = 32, 16  # CORE_MAX_TENSOR_ARGS, CORE_MAX_SCALAR_ARGS
_BUILD_HINT = "build the directory first (pypto_build.build(DIR) or `pypto-build build DIR`)"


@dataclass
class _Kernel:
    func_id: int
    name: str
    core_type: str
    path: Path
    entry: Any  # lib.kernel_entry (keeps the CDLL alive)
    signature: tuple[str, ...] = ()


@dataclass
class _RunState:
    """Per-run bookkeeping shared by the callbacks."""

    trace: bool
    names: dict[int, str]                      # buffer address -> parameter / intermediate name
    payloads: bool = False                     # copy tensor payloads into the trace (an argument dump's)
    tasks: list[TaskRecord] = field(default_factory=list)
    intermediates: list[Any] = field(default_factory=list)  # torch tensors alive until the run ends
    failures: list[str] = field(default_factory=list)
    fatal: bool = False
    interrupt: BaseException | None = None
    cause: BaseException | None = None
    depth: int = 0

    def fail(self, message: str) -> None:
        self.failures.append(message)
        self.fatal = True


class HostExecutor:
    """Loads one built sub-build and runs it on the CPU (see the module docstring)."""

    def __init__(self, sub_build_dir: Path, *, log: Callable[[str, str], None] | None = None,
                 on_task: Callable[[str], None] | None = None) -> None:
        """Load `sub_build_dir`'s binaries. `log(level, text)` receives the orchestration's LOG_* lines
        (level: debug, info, warn, error or always; text: "<function>: <message>") and the runtime's own
        debug lines ("host runtime: staged tensor ...", "host runtime: dispatch task ..."); None = `logging`.
        `on_task(what)` is told what runs next (the orchestration, then each task): a crash is then
        pinned to it by whoever watches this process."""
        self._on_task = on_task
        self.root = Path(sub_build_dir).resolve()
        cfg_path = self.root / KERNEL_CONFIG
        if not cfg_path.is_file():
            raise ExecutorError(f"{self.root}: no kernel_config.py; pass a single-chip build directory or one "
                                "next_levels/<name>/ sub-build")
        try:
            self.config = read_kernel_config(cfg_path)
        except ManifestError as exc:
            raise ExecutorError(str(exc)) from None
        self._log = log
        self._lock = threading.RLock()
        self._state: _RunState | None = None
        self._closed = False
        orch = self.config.orchestration
        self.orchestration_path = self._binary(self._resolve(orch.source, orch.rooted))
        self._kernels: dict[int, _Kernel] = {}
        tmp = tempfile.mkdtemp(prefix="pypto_host_run_")
        try:  # dlopen caches by path: load private copies so a rebuilt .so is really reloaded
            self._orch = self._load(self.orchestration_path, "orchestration", Path(tmp))
            self._bind_orchestration(orch.function_name)
            for spec in self.config.kernels:
                self._kernels[spec.func_id] = self._load_kernel(spec, Path(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # mapped libraries stay valid after unlink
        self._task_recs, self._task_raw = abi.aligned_tensors(_MAX_TENSORS)
        self._callbacks = (
            abi.SUBMIT_FN(self._on_submit), abi.SCOPE_FN(self._on_scope_begin), abi.SCOPE_FN(self._on_scope_end),
            abi.ALLOC_FN(self._on_alloc), abi.IS_FATAL_FN(self._on_is_fatal),
            abi.REPORT_FATAL_FN(self._on_report_fatal), abi.LOG_FN(self._on_log),
        )
        self._ops = abi.PTO2RuntimeOps(abi.ABI_VERSION, ctypes.sizeof(abi.PTO2RuntimeOps), None, *self._callbacks)

    # -- loading ------------------------------------------------------------
    def _resolve(self, source: str, rooted: bool) -> Path:
        p = Path(source)
        return p if p.is_absolute() and not rooted else self.root / p

    def _binary(self, source: Path) -> Path:
        """Where the host platform put the binary of `source` (places.HOST_OUTPUTS, apart from PyPTO's)."""
        return self.root / host_binary(os.path.relpath(source, self.root))

    def _load(self, path: Path, what: str, tmp: Path) -> ctypes.CDLL:
        if not path.is_file():
            raise ExecutorError(f"{what}: {path} does not exist; {_BUILD_HINT}")
        copy = tmp / f"{len(os.listdir(tmp))}_{path.name}"
        shutil.copyfile(path, copy)
        try:
            return ctypes.CDLL(str(copy), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            detail = str(exc).replace(str(copy), str(path))
            raise ExecutorError(f"{what}: cannot load {path}: {detail}") from None

    def _bind_orchestration(self, function_name: str) -> None:
        lib, path = self._orch, self.orchestration_path
        try:
            version_fn, self._bind = lib.pto_host_runtime_abi_version, lib.pto_host_bind_runtime
        except AttributeError:
            raise ExecutorError(f"orchestration: {path} does not export pto_host_bind_runtime; it was not built "
                                "for the host platform (its pto_orchestration_api.h is not pypto_build's)") from None
        version_fn.restype, version_fn.argtypes = ctypes.c_uint32, []
        if version_fn() != abi.ABI_VERSION:
            raise ExecutorError(f"orchestration: {path} was built for host runtime ABI {version_fn()}, this executor "
                                f"speaks ABI {abi.ABI_VERSION}; rebuild it with this pypto_build")
        self._bind.restype, self._bind.argtypes = ctypes.c_int32, [ctypes.c_void_p]
        try:
            self._entry = getattr(lib, function_name)
        except AttributeError:
            raise ExecutorError(f"orchestration: {path} does not export {function_name} "
                                "(ORCHESTRATION[\"function_name\"] in kernel_config.py)") from None
        self._entry.restype, self._entry.argtypes = None, [ctypes.POINTER(abi.ChipTaskArgs)]
        self._config_fn = getattr(lib, "aicpu_orchestration_config", None)
        if self._config_fn is not None:
            self._config_fn.restype = abi.PTO2OrchestrationConfig
            self._config_fn.argtypes = [ctypes.POINTER(abi.ChipTaskArgs)]

    def _load_kernel(self, spec: KernelSpec, tmp: Path) -> _Kernel:
        src = self._resolve(spec.source, spec.rooted)
        if spec.external:
            path = self.root / host_external_binary(spec.func_id, spec.core_type, src.stem)
        else:
            path = self._binary(src)
        name = spec.name or src.stem
        what = f"kernel func_id {spec.func_id} ({name})"
        lib = self._load(path, what, tmp)
        try:
            entry = lib.kernel_entry
        except AttributeError:
            raise ExecutorError(f"{what}: {path} does not export kernel_entry") from None
        entry.restype, entry.argtypes = None, [ctypes.POINTER(ctypes.c_int64)]
        return _Kernel(spec.func_id, name, spec.core_type, path, entry, spec.signature)

    # -- running ------------------------------------------------------------
    def run(self, args: Sequence, *, param_names: Sequence[str] | None = None, trace: bool = False,
            payloads: bool = False) -> RunTrace:
        """Run the program once on `args` (tensors, then scalars, in parameter order).

        Tensors must be contiguous CPU torch tensors; outputs are written into
        them in place. Scalars (int/float/bool or ctypes scalars) are passed as
        raw 64-bit patterns (`abi.scalar_bits`). `param_names` name the
        arguments in the trace (default arg0, arg1, ...); `trace=True` also
        records every task's arguments, `payloads=True` (implies trace) their
        bytes too: inputs copied before the kernel runs, outputs after it
        returns (nothing is copied otherwise). Raises ExecutorError on any failure.
        """
        import torch

        with self._lock:
            if self._closed:
                raise ExecutorError(f"{self.root}: the executor is closed")
            if self._state is not None:
                raise ExecutorError("HostExecutor.run() called from inside a run")
            args = list(args)
            names = [str(n) for n in (param_names if param_names is not None else
                                      (f"arg{i}" for i in range(len(args))))]
            if len(names) != len(args):
                raise ExecutorError(f"{len(names)} param_names for {len(args)} arguments")
            tensors = [(n, a) for n, a in zip(names, args) if isinstance(a, torch.Tensor)]
            recs, recs_raw = abi.aligned_tensors(len(tensors))
            addr_names: dict[int, str] = {}
            staged: list[str] = []
            for i, (name, tensor) in enumerate(tensors):
                try:
                    abi.fill_from_torch(recs[i], tensor)
                except (ValueError, abi.UnsupportedDType) as exc:
                    raise ExecutorError(f"argument {name!r}: {exc}") from None
                addr_names.setdefault(int(recs[i].addr), name)
                staged.append(f"staged tensor {name}: {abi.describe(recs[i])}")
            bits = []
            for name, value in zip(names, args):
                if not isinstance(value, torch.Tensor):
                    try:
                        bits.append(abi.scalar_bits(value))
                    except (TypeError, ValueError) as exc:
                        raise ExecutorError(f"argument {name!r}: {exc}") from None
            scalars = (ctypes.c_uint64 * max(len(bits), 1))(*bits)
            chip_args = abi.ChipTaskArgs(ctypes.addressof(recs) if tensors else None,
                                         ctypes.addressof(scalars) if bits else None, len(tensors), len(bits))
            state = _RunState(trace or payloads, addr_names, payloads)
            self._state = state
            try:
                rc = self._bind(ctypes.addressof(self._ops))
                if rc != 0:
                    raise ExecutorError(f"orchestration: {self.orchestration_path}: pto_host_bind_runtime "
                                        f"returned {rc} (-1 = ABI/struct size mismatch, -2 = missing op)")
                self._check_arg_count(chip_args, len(args), len(tensors), state)
                for line in staged:         # a broken log sink fails the run as a callback's would
                    self._guard("log", lambda _s, line=line: self._debug(line) or 0, 0)
                if self._on_task is not None:
                    self._on_task(f"the orchestration {self.orchestration_path.name}")
                start = time.perf_counter_ns()
                self._entry(ctypes.byref(chip_args))
                end = time.perf_counter_ns()
                if state.depth != 0 and not state.fatal:
                    state.fail(f"scope_begin/scope_end unbalanced (depth {state.depth} at the end)")
                self._raise_if_failed(state, "the run")
                return RunTrace(state.tasks, (start, end))
            finally:
                self._bind(None)
                self._state = None
                state.intermediates.clear()  # recs_raw / scalars (locals) lived until here

    def _check_arg_count(self, chip_args: abi.ChipTaskArgs, given: int, tensors: int, state: _RunState) -> None:
        if self._config_fn is not None:
            expected = self._config_fn(ctypes.byref(chip_args)).expected_arg_count
            self._raise_if_failed(state, "aicpu_orchestration_config")
            if expected != given:
                raise ExecutorError(f"orchestration {self.orchestration_path.name} expects {expected} arguments "
                                    f"(aicpu_orchestration_config), {given} were given")
        signature = self.config.orchestration.signature
        if signature and len(signature) != tensors:
            raise ExecutorError(f"orchestration {self.orchestration_path.name} takes {len(signature)} tensors "
                                f"(ORCHESTRATION signature in kernel_config.py), {tensors} were given")

    def _raise_if_failed(self, state: _RunState, when: str) -> None:
        if state.interrupt is not None:
            raise state.interrupt
        if state.failures:
            detail = "; ".join(state.failures)
            raise ExecutorError(f"{self.root}: {when} failed: {detail}") from state.cause

    # -- callbacks (never let an exception escape into C) ---------------------
    def _guard(self, what: str, fn: Callable[[_RunState], int], failed: int) -> int:
        state = self._state
        if state is None:
            return failed
        try:
            return fn(state)
        except ExecutorError as exc:
            state.fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - recorded, raised after the entry returns
            state.fail(f"{what}: internal error: {type(exc).__name__}: {exc}")
            state.cause = state.cause or exc
        except BaseException as exc:  # KeyboardInterrupt & co: re-raised after the entry returns
            state.interrupt = state.interrupt or exc
            state.fatal = True
        return failed

    def _on_submit(self, _ctx, core, func_id, tensors, types, n, scalars, m) -> int:
        return self._guard("submit_task", lambda s: self._submit(s, core, func_id, tensors, types, n, scalars, m),
                           -1)

    def _submit(self, state: _RunState, core: int, func_id: int, tensors, types, n: int, scalars, m: int) -> int:
        if state.fatal:
            return -1
        index = len(state.tasks)
        kernel = self._kernels.get(func_id)
        if kernel is None:
            known = ", ".join(str(f) for f in sorted(self._kernels)) or "none"
            raise ExecutorError(f"task {index}: the orchestration submitted func_id {func_id}, which "
                                f"kernel_config.py does not list (func_ids: {known}); add its kernel to KERNELS there, "
                                "or submit a listed func_id")
        label = f"task {index} ({kernel.name}, func_id {func_id})"
        core_name = abi.CORE_TYPES.get(core, f"core#{core}")
        if core_name != kernel.core_type:
            raise ExecutorError(f"{label}: submitted to {core_name}, kernel_config.py says {kernel.core_type}")
        if n > _MAX_TENSORS or m > _MAX_SCALARS:
            raise ExecutorError(f"{label}: {n} tensors / {m} scalars (max {_MAX_TENSORS} / {_MAX_SCALARS})")
        kargs = (ctypes.c_int64 * max(n + m, 1))()
        described: list[ArgRecord] = []
        for i in range(n):
            if not tensors[i]:
                raise ExecutorError(f"{label}: tensor argument {i} is a null record")
            rec = self._task_recs[i]
            ctypes.memmove(ctypes.addressof(rec), tensors[i], ctypes.sizeof(abi.ChipTensor))
            if rec.addr == 0 and rec.size != 0:
                raise ExecutorError(f"{label}: tensor argument {i} ({abi.describe(rec)}) has no buffer (addr 0)")
            kargs[i] = ctypes.addressof(rec)
            if state.trace:
                name = state.names.get(int(rec.addr), f"tensor@{int(rec.addr):#x}")
                described.append(capture.describe_tensor(rec, i, name, kernel.signature, types[i], state.payloads))
        for j in range(m):
            raw = int(scalars[j])
            kargs[n + j] = raw - 2**64 if raw >= 2**63 else raw
            if state.trace:
                described.append(ArgRecord("scalar", f"scalar{j}", "input", "UINT64", value=raw))
        if self._on_task is not None:
            self._on_task(f"{label} from {kernel.path.name}")
        self._debug(f"dispatch {label} on {core_name}: {n} tensor(s), {m} scalar(s)")
        start = time.perf_counter_ns()
        kernel.entry(kargs)
        end = time.perf_counter_ns()
        if state.payloads:
            for i, arg in enumerate(described[:n]):
                if arg.role != "input":
                    arg.after = capture.view_bytes(self._task_recs[i])
        state.tasks.append(TaskRecord(index, func_id, kernel.name, kernel.core_type, described, start, end))
        return index

    def _on_alloc(self, _ctx, recs, count) -> int:
        return self._guard("alloc_tensors", lambda s: self._alloc(s, recs, count), 1)

    def _alloc(self, state: _RunState, recs, count: int) -> int:
        import torch

        for i in range(count):
            rec = recs[i]
            shape = abi.shape_of(rec)
            if not 1 <= rec.ndims <= abi.MAX_TENSOR_DIMS:
                raise ExecutorError(f"alloc_tensors: record {i} has ndims {rec.ndims} (1..{abi.MAX_TENSOR_DIMS})")
            try:
                dtype = abi.torch_dtype(rec.dtype)
            except abi.UnsupportedDType as exc:
                raise ExecutorError(f"alloc_tensors: intermediate {abi.describe(rec)}: {exc}") from None
            tensor = torch.zeros(shape, dtype=dtype)
            if rec.size > tensor.numel() * tensor.element_size():
                raise ExecutorError(f"alloc_tensors: record {i} ({abi.describe(rec)}) asks for {rec.size} bytes, "
                                    f"its shape holds {tensor.numel() * tensor.element_size()}")
            rec.addr = tensor.data_ptr()
            state.names.setdefault(int(rec.addr), f"intermediate#{len(state.intermediates)}")
            self._debug(f"staged intermediate#{len(state.intermediates)}: {abi.describe(rec)}")
            state.intermediates.append(tensor)
        return 0

    def _on_scope_begin(self, _ctx) -> None:
        self._guard("scope_begin", lambda s: _scope_step(s, 1), 0)

    def _on_scope_end(self, _ctx) -> None:
        self._guard("scope_end", lambda s: _scope_step(s, -1), 0)

    def _on_is_fatal(self, _ctx) -> int:
        state = self._state
        return 1 if state is None or state.fatal else 0

    def _on_report_fatal(self, _ctx, code, func, msg) -> None:
        def record(state: _RunState) -> int:
            state.fail(f"the orchestration reported a fatal error (code {code}) in {_text(func)}: {_text(msg)}")
            return 0
        self._guard("report_fatal", record, 0)

    def _on_log(self, _ctx, level, func, msg) -> None:
        def emit(_state: _RunState) -> int:
            text = f"{_text(func)}: {_text(msg)}"
            if self._log is not None:
                self._log(abi.LOG_LEVEL_NAMES.get(level, "info"), text)
            else:
                _LOGGER.log(_PY_LEVELS.get(level, logging.INFO), "[orchestration] %s", text)
            return 0
        self._guard("log", emit, 0)

    def _debug(self, text: str) -> None:
        """The runtime's own debug line (a tensor staged, a task dispatched): to `log`, else `logging`."""
        if self._log is not None:
            self._log("debug", f"host runtime: {text}")
        elif _LOGGER.isEnabledFor(logging.DEBUG):
            _LOGGER.debug("[host runtime] %s", text)

    # -- lifetime -----------------------------------------------------------
    def close(self) -> None:
        """Unbind the ops table and drop the libraries (they stay mapped: dlclose is not safe in general)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._bind(None)
            self._kernels = {}
            self._orch = self._entry = self._config_fn = None

    def __enter__(self) -> "HostExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _scope_step(state: _RunState, step: int) -> int:
    state.depth += step
    if state.depth < 0:
        raise ExecutorError("scope_end without a matching scope_begin")
    return 0


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""
