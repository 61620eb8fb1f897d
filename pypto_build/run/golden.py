"""`golden.py` of a build directory: inputs, expected outputs, tolerances (PyPTO's format).

Loading it executes it — only the child process of a replay/validate run does
that (`run/child.py`), as PyPTO's replay does in its own process; nothing that
only inspects a directory imports this module.

A validation is a *comparison that ran and passed*, never less: the expected
values come from a snapshot of the inputs taken before the program ran (tensors
the program never touched); `compute_golden` must write every output in place;
`__outputs__` must name output parameters; RTOL/ATOL must be numbers >= 0; no
outputs, empty outputs or an infinite tolerance is "nothing compared", a failure.
"""
from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..errors import Failure, UserError, ValidationFailed, one_line
from .arguments import check_arguments
from .golden_key import GOLDEN_PARAMS, INPUT_PARAMS
from ..builddir.markers import GOLDEN_PY
from ..builddir.sidecars import ProgramMeta
from ..core.pyexec import exec_file
from ..core.safeio import refusal

DEFAULT_TOL = 1e-5


class GoldenError(Failure):
    """golden.py is missing or does not follow the contract: the validation cannot be made (exit 1)."""


class NothingCompared(GoldenError):
    """A validation that would compare nothing (no outputs, empty outputs, infinite tolerance)."""


@dataclass
class Golden:
    """A loaded `golden.py`: its inputs (`generate_inputs`), expected outputs (`compute_golden`), which
    outputs to compare (`__outputs__`) and the tolerances, each checked when asked for."""

    path: Path
    module: ModuleType

    @property
    def outputs(self) -> list[str]:
        """`__outputs__`, checked to be a list of names."""
        raw = getattr(self.module, "__outputs__", None)
        if raw is None:
            return []
        if isinstance(raw, str) or not isinstance(raw, (list, tuple)) or not all(isinstance(n, str) for n in raw):
            raise GoldenError(f"{self.path}: __outputs__ is {one_line(repr(raw), 80)}; it must be a list of output "
                              "parameter names, e.g. __outputs__ = ['out'] — fix golden.py")
        return list(dict.fromkeys(raw))

    @property
    def rtol(self) -> float:
        return self._tolerance("RTOL")

    @property
    def atol(self) -> float:
        return self._tolerance("ATOL")

    def _tolerance(self, name: str) -> float:
        value = getattr(self.module, name, DEFAULT_TOL)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
            raise GoldenError(f"{self.path}: {name} = {one_line(repr(value), 60)} is not a tolerance; set it to a "
                              f"number >= 0 (default {DEFAULT_TOL}) — fix golden.py")
        return float(value)

    def inputs(self) -> list[tuple[str, object]]:
        """`generate_inputs({"name": "Default"})` as (name, value) pairs, checked."""
        try:
            pairs = list(self.module.generate_inputs(dict(INPUT_PARAMS)))
        except Exception as exc:
            raise GoldenError(f"{self.path}: generate_inputs() raised {_raised(exc)}; "
                              "fix golden.py or pass the inputs yourself (replay(dir, *tensors))") from None
        names: set[str] = set()
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise GoldenError(f"{self.path}: generate_inputs() item {i} is {one_line(repr(pair), 80)}; "
                                  "expected a (name, value) tuple — fix golden.py")
            if pair[0] in names:
                raise GoldenError(f"{self.path}: generate_inputs() returns {pair[0]!r} twice; give each "
                                  "parameter its own name — fix golden.py")
            names.add(pair[0])
        return pairs

    def check_inputs(self, pairs: list[tuple[str, object]], meta: ProgramMeta | None) -> None:
        """Inputs against the sidecar's parameters, before a run: what every caller's arguments are held to
        (`arguments.check_arguments`: count; tensor or scalar; dtype; static dims; contiguous, on the CPU;
        no Out/InOut tensor sharing memory with another)."""
        if meta is None:
            return
        side, params = meta.path.name, meta.params
        misfit = check_arguments(params, [value for _, value in pairs])
        if misfit is None:
            return
        if misfit.param is None:
            raise GoldenError(f"{self.path}: generate_inputs() returns {len(pairs)} input(s) "
                              f"({', '.join(n for n, _ in pairs)}) but {side} declares {len(params)} parameter(s) "
                              f"({', '.join(p.name for p in params)}); fix golden.py (or recompile via ir.compile() "
                              "if the program changed)")
        if misfit.other is not None:
            q = params[misfit.other]
            raise GoldenError(f"{self.path}: inputs {pairs[misfit.index][0]!r} and {pairs[misfit.other][0]!r} "
                              f"{misfit.problem}, but {side} declares {misfit.param.name!r} as "
                              f"{misfit.param.direction} and {q.name!r} as {q.direction}; fix golden.py ({misfit.fix})")
        raise GoldenError(f"{self.path}: input {pairs[misfit.index][0]!r} {misfit.problem}, but {side} declares "
                          f"{misfit.param.name!r} as {misfit.declared}; fix golden.py ({misfit.fix})")

    def check_outputs(self, names: list[str], values: dict[str, object], meta: ProgramMeta | None) -> list[str]:
        """`__outputs__`, each a tensor parameter the program writes (Out/InOut in the sidecar)."""
        import torch

        outputs = self.outputs
        if not outputs:
            raise NothingCompared(f"{self.path}: __outputs__ is empty, so validation would compare nothing; list "
                                  "the output parameters in golden.py (e.g. __outputs__ = ['out'])")
        directions = {p.name: p.direction for p in meta.params} if meta is not None else {}
        for name in outputs:
            if name not in values:
                raise GoldenError(f"{self.path}: __outputs__ names {name!r}, which generate_inputs() does not "
                                  f"return (it returns {', '.join(names)}); fix __outputs__ in golden.py")
            if directions.get(name, "Out") == "In":
                raise GoldenError(f"{self.path}: __outputs__ names {name!r}, which {meta.path.name} declares as an "
                                  "input (In): the program never writes it, so comparing it proves nothing; list "
                                  "only Out/InOut parameters in __outputs__")
            if not isinstance(values[name], torch.Tensor):
                raise GoldenError(f"{self.path}: __outputs__ names {name!r}, which is a "
                                  f"{type(values[name]).__name__}, not a tensor; fix __outputs__ in golden.py")
        return outputs

    def expected(self, inputs: dict[str, object], outputs: list[str] | None = None) -> dict[str, object]:
        """Run compute_golden on copies of `inputs` (values taken before the run) and return the expected outputs.

        compute_golden must write each output in place: rebinding `tensors[name]` or leaving an output as
        generate_inputs() made it is refused, because either way nothing real would be compared.
        """
        import torch

        outputs = self.outputs if outputs is None else outputs
        snapshot = copies(inputs)
        tensors = dict(snapshot)
        before = {n: (snapshot[n].clone(), snapshot[n]._version) for n in outputs}
        try:
            self.module.compute_golden(tensors, dict(GOLDEN_PARAMS))
        except Exception as exc:
            raise GoldenError(f"{self.path}: compute_golden() raised {_raised(exc)}; fix golden.py") from None
        for name in outputs:
            if tensors.get(name) is not snapshot[name]:
                raise GoldenError(f"{self.path}: compute_golden() replaced tensors[{name!r}] instead of writing "
                                  f"into it, so the expected value was lost; write in place "
                                  f"(tensors[{name!r}][:] = ...) — fix golden.py")
            values, version = before[name]
            # never written (torch counts in-place writes) and still the same: compute_golden computed nothing
            if snapshot[name].numel() and snapshot[name]._version == version and torch.equal(snapshot[name], values):
                raise GoldenError(f"{self.path}: compute_golden() left output {name!r} exactly as generate_inputs() "
                                  "made it, so it computes nothing to compare against; write the expected value "
                                  f"into tensors[{name!r}] — fix golden.py")
        return {n: snapshot[n] for n in outputs}


def copies(named: dict) -> dict:
    """Tensors cloned (detached), anything else as it is: inputs as they were, whatever the program does."""
    import torch

    return {n: v.detach().clone() if isinstance(v, torch.Tensor) else v for n, v in named.items()}


RUN_EXTRA = ("torch", "numpy")          # what `pip install 'pypto_build[run]'` installs


def extra_missing(exc: BaseException) -> str | None:
    """The fix when `exc` says a module of the `run` extra is not installed (not golden.py's fault), else None."""
    if isinstance(exc, ModuleNotFoundError) and exc.name in RUN_EXTRA:
        return (f"module {exc.name!r} is not installed for {sys.executable}; replay and validate need the run "
                "extra: pip install 'pypto_build[run]'")
    return None


def require_run_extra() -> None:
    """Refuse to start a run when torch is not installed (`extra_missing`'s line), before anything else fails
    on it (a kept golden result, golden.py's own import). Looks it up only: imports nothing."""
    if importlib.util.find_spec("torch") is None:
        raise UserError(extra_missing(ModuleNotFoundError("No module named 'torch'", name="torch")))


def _raised(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}", 300)


def load_golden(work_dir: Path) -> Golden:
    """Import `<work_dir>/golden.py` as a fresh module (never cached between loads)."""
    path = Path(work_dir) / GOLDEN_PY
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
        fix = extra_missing(exc)
        if fix is not None:
            raise GoldenError(f"{path}: importing golden.py: {fix}") from None
        raise GoldenError(f"{path}: importing golden.py raised {_raised(exc)}; fix golden.py") from None
    for required in ("generate_inputs", "compute_golden"):
        if not callable(getattr(module, required, None)):
            raise GoldenError(f"{path}: no {required}() function; add it to golden.py (it must define "
                              "generate_inputs(params) and compute_golden(tensors, params))")
    return Golden(path, module)


def compare(golden: Golden, actual: dict[str, object], expected: dict[str, object]) -> list[str]:
    """Compare each output; AssertionError naming the first mismatch; NothingCompared when nothing would be.

    Returns the names compared.
    """
    rtol, atol = golden.rtol, golden.atol
    if math.isinf(rtol) or math.isinf(atol):
        raise NothingCompared(f"{golden.path}: RTOL={rtol:g}, ATOL={atol:g}: an infinite tolerance accepts any "
                              "value, so nothing was compared; set finite tolerances in golden.py")
    compared = []
    for name, want in expected.items():
        got = actual[name]
        if want.numel() == 0:
            continue
        problem = mismatch(got.detach().cpu(), want.detach().cpu(), rtol, atol)
        if problem:
            raise ValidationFailed(f"Output '{name}' does not match golden (rtol={rtol}, atol={atol}): {problem}")
        compared.append(name)
    if not compared:
        raise NothingCompared(f"{golden.path}: every output in __outputs__ ({', '.join(expected)}) has no "
                              "elements, so nothing was compared")
    return compared


def mismatch(got, want, rtol: float, atol: float) -> str | None:
    """What differs between `got` and `want` (torch.testing.assert_close's rule: |got - want| <= atol +
    rtol * |want|, NaN never equal; shape and dtype must match), or None when they match.

    Computed here rather than by assert_close, whose first call imports torch.distributed and sympy
    (0.4 s): the message names the mismatched count and the greatest absolute and relative errors.
    """
    import torch

    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype == torch.bool or not (want.is_floating_point() or want.is_complex()):
        a, b = got.to(torch.float64), want.to(torch.float64)
    else:
        a, b = got, want
    if _all_close(a, b, rtol, atol):
        return None
    close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=False)
    bad = int((~close).sum())
    if not bad:
        return None
    diff = (a - b).abs().to(torch.float64)
    rel = diff / b.abs().to(torch.float64)
    diff, rel = diff.masked_fill(close, 0), rel.masked_fill(close | (diff == 0), 0)
    worst_abs, worst_rel = (int(t.flatten().nan_to_num(nan=float("inf")).argmax()) for t in (diff, rel))
    return (f"{bad} of {want.numel()} elements differ; max abs error {float(diff.flatten()[worst_abs]):.6g} at "
            f"index {_index(worst_abs, want.shape)}, max rel error {float(rel.flatten()[worst_rel]):.6g} at index "
            f"{_index(worst_rel, want.shape)}")


_CHUNK = 1 << 18        # elements per pass of `_all_close`: its temporaries stay in the CPU's cache


def _all_close(a, b, rtol: float, atol: float) -> bool:
    """True only when `torch.isclose(a, b)` holds everywhere, decided chunk by chunk (several times faster on
    large outputs); False: not decided here (a mismatch, or a value this shortcut does not judge).

    It computes isclose's own terms, |a - b| <= atol + rtol * |b|, with the same float32/float64 operations; with
    `b` finite, that bound is finite, so a difference within it is finite and isclose holds (NaN is never
    within it). Any non-finite `b`, another dtype or one difference beyond the bound: False, and the caller
    runs isclose itself."""
    import torch

    if a.dtype not in (torch.float32, torch.float64) or rtol < 0 or atol < 0:
        return False
    x, y = a.detach().reshape(-1), b.detach().reshape(-1)
    for start in range(0, x.numel(), _CHUNK):
        want = y[start:start + _CHUNK]
        allowed = want.abs().mul_(rtol).add_(atol)
        if not bool(allowed.isfinite().all()):
            return False
        if not bool(torch.sub(x[start:start + _CHUNK], want).abs_().le_(allowed).all()):
            return False
    return True


def _index(flat: int, shape) -> tuple[int, ...]:
    """A flat position as an index into `shape`."""
    index = []
    for size in reversed(list(shape)):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))
