"""`golden.py` of a build directory: inputs, expected outputs, tolerances (reference §4).

Loading it executes it — replay and validate do that, as PyPTO does; nothing
that only inspects a directory imports this module.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .errors import PyptoBuildError, one_line
from .meta import ProgramMeta, known_torch_dtype
from .pyexec import exec_file
from .safeio import refusal

DEFAULT_TOL = 1e-5


class GoldenError(PyptoBuildError):
    """golden.py is missing or does not follow the contract."""


@dataclass
class Golden:
    path: Path
    module: ModuleType

    @property
    def outputs(self) -> list[str]:
        return list(getattr(self.module, "__outputs__", []) or [])

    @property
    def rtol(self) -> float:
        return float(getattr(self.module, "RTOL", DEFAULT_TOL))

    @property
    def atol(self) -> float:
        return float(getattr(self.module, "ATOL", DEFAULT_TOL))

    def inputs(self) -> list[tuple[str, object]]:
        """`generate_inputs({"name": "Default"})` as (name, value) pairs, checked."""
        try:
            pairs = list(self.module.generate_inputs({"name": "Default"}))
        except Exception as exc:
            raise GoldenError(f"{self.path}: generate_inputs() raised {_raised(exc)}; "
                              "fix golden.py or pass the inputs yourself (replay(dir, *tensors))") from None
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise GoldenError(f"{self.path}: generate_inputs() item {i} is {one_line(repr(pair), 80)}; "
                                  "expected a (name, value) tuple — fix golden.py")
        return pairs

    def check_inputs(self, pairs: list[tuple[str, object]], meta: ProgramMeta | None) -> None:
        """Inputs against the sidecar's parameters (count; tensor or scalar; dtype; static dims), before a run."""
        if meta is None:
            return
        import torch

        side, params = meta.path.name, meta.params
        if len(pairs) != len(params):
            raise GoldenError(f"{self.path}: generate_inputs() returns {len(pairs)} input(s) "
                              f"({', '.join(n for n, _ in pairs)}) but {side} declares {len(params)} parameter(s) "
                              f"({', '.join(p.name for p in params)}); fix golden.py (or recompile via ir.compile() "
                              "if the program changed)")
        for (name, value), p in zip(pairs, params):
            declared = f"{side} declares {p.name!r} as " + ("a scalar" if p.shape is None else
                                                             f"{p.dtype} {list(p.shape)}")
            if p.shape is None:
                problem = "is a tensor" if isinstance(value, torch.Tensor) else None
            elif not isinstance(value, torch.Tensor):
                problem = f"is a {type(value).__name__}, not a tensor"
            elif (want := known_torch_dtype(p.dtype)) and value.dtype != getattr(torch, want):
                problem = f"is {value.dtype}"
            elif len(value.shape) != len(p.shape) or any(d >= 0 and d != s for d, s in zip(p.shape, value.shape)):
                problem = f"has shape {list(value.shape)}"
            else:
                problem = None
            if problem:
                raise GoldenError(f"{self.path}: input {name!r} {problem}, but {declared}; fix golden.py")

    def expected(self, named: dict[str, object]) -> dict[str, object]:
        """Expected outputs: compute_golden on clones of the outputs (the run's tensors stay as they are)."""
        expected = {n: named[n].clone() for n in self.outputs}
        try:
            self.module.compute_golden({**named, **expected}, {})
        except Exception as exc:
            raise GoldenError(f"{self.path}: compute_golden() raised {_raised(exc)}; fix golden.py") from None
        return expected


def _raised(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}", 300)


def load_golden(work_dir: Path) -> Golden:
    """Import `<work_dir>/golden.py` as a fresh module (never cached between loads)."""
    path = Path(work_dir) / "golden.py"
    if path.exists() and not path.is_file():
        raise GoldenError(refusal(path, path.stat().st_mode, "replace it with golden.py"))
    if not path.is_file():
        raise GoldenError(f"{path} not found; cannot derive named inputs / outputs. Pass the inputs yourself "
                          "(pypto_build.replay(dir, *tensors)) or add a golden.py with generate_inputs() and "
                          "compute_golden()")
    name = f"_pypto_build_golden_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        exec_file(module, path)
    except Exception as exc:
        raise GoldenError(f"{path}: importing golden.py raised {_raised(exc)}; fix golden.py") from None
    finally:
        sys.modules.pop(name, None)
    for required in ("generate_inputs", "compute_golden"):
        if not callable(getattr(module, required, None)):
            raise GoldenError(f"{path}: no {required}() function; add it to golden.py (it must define "
                              "generate_inputs(params) and compute_golden(tensors, params))")
    return Golden(path, module)


def compare(golden: Golden, named: dict[str, object]) -> list[str]:
    """Check every output in `__outputs__`; AssertionError naming the first mismatch.

    Returns the names checked (empty when golden.py declares no outputs).
    """
    import torch

    expected = golden.expected(named)
    for name in golden.outputs:
        try:
            torch.testing.assert_close(named[name].cpu(), expected[name].cpu(), rtol=golden.rtol, atol=golden.atol)
        except AssertionError as exc:
            raise AssertionError(f"Output '{name}' does not match golden (rtol={golden.rtol}, "
                                 f"atol={golden.atol}):\n{exc}") from None
    return golden.outputs
