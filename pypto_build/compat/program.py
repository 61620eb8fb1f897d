"""`CompiledProgram.from_dir(dir)` and `benchmark()`, as PyPTO's have them: on the host runtime, or on simpler.

torch is imported only when a program runs, so `import pypto_build` stays light.
"""
from __future__ import annotations

import os
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..run import require_fit
from ..errors import ArgumentError
from ..builddir.markers import COMPILED_META
from ..builddir.sidecars import ParamMeta, ProgramMeta, load_compiled_meta

__all__ = ["CompiledProgram", "BenchmarkStats", "benchmark"]

_MISSING = ("{path} not found — cannot reconstruct a compiled program from this directory. It predates the "
            "single-chip replay feature, is a distributed (L3+) build (use DistributedCompiledProgram.from_dir), "
            "or is the parent of a multi-orch build (each next_levels/<name>/ sub-build has its own sidecar — "
            "reload one of those). Recompile via ir.compile() to refresh.")


class CompiledProgram:
    """A single-chip build directory as a callable program, running on the platform it records (or host).

    Build it with `CompiledProgram.from_dir(dir)`. Unlike PyPTO's `from_dir`,
    which serves whatever cached binaries exist (no `.pto` splice, no
    invalidation of hand-edited sources), every call first builds what changed
    — content-keyed, including edited kernel `.cpp` and `ptoas/*.pto` — and
    the loaded binaries are reused across calls until a rebuild replaces them.
    """

    def __init__(self, output_dir: Path, meta: ProgramMeta, *, platform: str | None = None,
                 backend_type: str | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.meta = meta
        self.params: tuple[ParamMeta, ...] = meta.params
        self.output_indices: tuple[int, ...] = meta.output_indices
        self.num_return_types: int = meta.num_return_types
        self.persisted_platform: str | None = meta.platform
        self.platform: str | None = platform       # None: the recorded one (platforms.choose); set by the first build
        self.backend_type: str = backend_type or meta.backend_type
        self.program = None
        self.jobs = 1
        self._lock = threading.RLock()
        self._loaded = None             # run.Loaded: the host executor kept loaded across calls

    @classmethod
    def from_dir(cls, output_dir, *, platform: str | None = None,
                 backend_type: str | None = None) -> "CompiledProgram":
        """Load `<output_dir>/compiled_meta.json` (only that file, as PyPTO's `from_dir` does).

        Missing -> FileNotFoundError (PyPTO's message); malformed -> MetaError
        (a ValueError naming the field). `platform` defaults to the one the
        directory records (`persisted_platform`; host when simpler cannot run it
        here, as every build decides); `backend_type` defaults to the persisted one.
        """
        root = Path(output_dir).resolve()
        path = root / COMPILED_META
        if not path.is_file():
            raise FileNotFoundError(_MISSING.format(path=path))
        return cls(root, load_compiled_meta(path), platform=platform, backend_type=backend_type)

    def __repr__(self) -> str:
        names = ", ".join(f"{p.name}: {p.direction}" for p in self.params)
        return f"CompiledProgram({str(self.output_dir)!r}, ({names}), platform={self.platform!r})"

    # -- arguments -------------------------------------------------------------
    def _full_args(self, args: Sequence) -> tuple[list, list[int]]:
        """All arguments in call order, checked against the sidecar (`arguments.require_fit`), `Out` tensors
        allocated for a return-style call. A misfit raises ArgumentError: nothing is built or run."""
        args = list(args)
        missing = len(self.params) - len(self.output_indices)
        allocated: list[int] = []
        if self.output_indices and len(args) == missing:
            import torch
            from .runner import torch_dtype_name

            full, it = [], iter(args)
            for i, p in enumerate(self.params):
                if i not in self.output_indices:
                    full.append(next(it))
                    continue
                if p.shape is None or any(d < 0 for d in p.shape):
                    raise ArgumentError(f"{self.meta.path}: output {p.name!r} has shape {p.shape}; pass it "
                                        "yourself (its size is not known before the run)")
                full.append(torch.zeros(p.shape, dtype=getattr(torch, torch_dtype_name(p.dtype)[6:])))
            args, allocated = full, list(self.output_indices)
        require_fit(self.meta, args, outputs_optional=True)
        return args, allocated

    # -- build + run ------------------------------------------------------------
    @property
    def _executor(self):
        """The host executor holding the loaded binaries (None: nothing loaded)."""
        return None if self._loaded is None else self._loaded.executor

    def ensure_built(self):
        """Build what changed; return the program the build planned (`plan.program.Program`: its directory, kind
        and platform), which `run.run_built` runs."""
        from ..api import build

        with self._lock:
            built = build(self.output_dir, platform=self.platform, jobs=self.jobs, progress=None)
            self.platform = built.platform
            return built.program()

    def close(self) -> None:
        """Drop the loaded binaries (the next call loads them again)."""
        with self._lock:
            if self._loaded is not None:
                self._loaded.close()

    def _run(self, full: list, *, config=None, timing_runs: int = 1) -> list[float]:
        """Build what changed and run on `full` in this process (the run stage's one entry), keeping the host
        executor loaded across calls; each run's seconds."""
        from ..run import Loaded, run_built

        program = self.ensure_built()
        if self._loaded is None:
            self._loaded = Loaded()
        outcome = run_built(program, config=config, tensors=full, names=[p.name for p in self.params],
                            loaded=self._loaded, timing_runs=timing_runs)
        return outcome.run_seconds

    def __call__(self, *args, config=None):
        """Build what changed, then run on `args` (outputs written in place).

        Pass every parameter (returns None), or only the non-`Out` ones: the
        outputs are then allocated and returned (one tensor, or a tuple). The
        arguments are checked against compiled_meta.json first (count, dtype,
        shape, contiguous, CPU, no Out/InOut tensor sharing memory with another): a
        misfit raises ArgumentError, nothing is built or run.
        `config` (a RunConfig) with swimlane / dump-args writes those under
        dfx_outputs/ as replay does.
        """
        with self._lock:
            full, allocated = self._full_args(args)
            self._run(full, config=config)
        if not allocated:
            return None
        outs = tuple(full[i] for i in allocated)
        return outs[0] if len(outs) == 1 else outs


@dataclass
class BenchmarkStats:
    """Host wall-clock times of a program on pypto_build's host runtime.

    A functional CPU reference, not NPU performance: the host runtime has no
    device clock, so `device_wall_us` reports the host figures (and
    `all_zero_device` is False).
    """

    host_wall_us: list[float]
    rounds: int
    warmup: int
    notes: list[str] = field(default_factory=lambda: [
        "host runtime: device_wall_us are host wall-clock times (no device clock); not NPU performance"])

    @property
    def samples(self) -> int:
        return len(self.host_wall_us)

    @property
    def host_us_min(self) -> float:
        return min(self.host_wall_us)

    @property
    def host_us_median(self) -> float:
        return statistics.median(self.host_wall_us)

    @property
    def host_us_mean(self) -> float:
        return statistics.fmean(self.host_wall_us)

    @property
    def host_us_max(self) -> float:
        return max(self.host_wall_us)

    @property
    def host_us_stdev(self) -> float:
        return statistics.stdev(self.host_wall_us) if len(self.host_wall_us) > 1 else 0.0

    @property
    def device_wall_us(self) -> list[float]:
        """The host figures: the host runtime has no device clock."""
        return list(self.host_wall_us)

    device_us_min = host_us_min
    device_us_median = host_us_median
    device_us_mean = host_us_mean
    device_us_max = host_us_max
    device_us_stdev = host_us_stdev

    @property
    def all_zero_device(self) -> bool:
        return False

    def __str__(self) -> str:
        return (f"host runtime: {self.rounds} rounds (+{self.warmup} warm-up): min {self.host_us_min:.1f} us, "
                f"median {self.host_us_median:.1f} us, mean {self.host_us_mean:.1f} us, "
                f"max {self.host_us_max:.1f} us, stdev {self.host_us_stdev:.1f} us (CPU reference, not NPU)")


def benchmark(compiled, args: Sequence, *, rounds: int = 100, warmup: int = 3) -> BenchmarkStats:
    """Run `compiled` warmup + rounds times on a warm host executor; time each measured round.

    `compiled` is a CompiledProgram (or a build directory path); `args` as for
    calling it (checked the same way first). Builds once, before timing. A functional CPU reference, not
    NPU performance (PyPTO's device timings do not exist on the host runtime).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds <= 0:
        raise ArgumentError(f"benchmark(): rounds must be a positive integer, got {rounds!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ArgumentError(f"benchmark(): warmup must be a non-negative integer, got {warmup!r}")
    if not isinstance(compiled, CompiledProgram):
        if isinstance(compiled, (str, os.PathLike)):
            compiled = CompiledProgram.from_dir(compiled)
        else:
            raise ArgumentError(f"benchmark(): expected a CompiledProgram, got {type(compiled).__name__}")
    with compiled._lock:
        full, _ = compiled._full_args(args)
        seconds = compiled._run(full, timing_runs=warmup + rounds)
    return BenchmarkStats([s * 1e6 for s in seconds[warmup:]], rounds, warmup)
