"""One run of a mix of two variants' binaries in the scratch copy, judged by the oracle: `Mixer.run` -> `Run`.

A mix names the suspects that run with their current binaries; every other unit runs the good variant's (the
units both variants share are the same bytes either way). The oracle is golden.py's comparison (the run validates,
as `validate` does), or, with `--against-good`, the outputs of the good variant's own run on the same inputs,
compared within golden.py's RTOL/ATOL or the tolerances given. Every run goes through the run stage's one entry
(`run.run_built`) on the copy, so its golden result, outputs and diagnostics stay in the copy.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..builddir.markers import ARGS_DUMP_DIR, DFX_OUTPUTS
from ..builddir.state_dir import REPLAY, STATE_DIR
from ..errors import ExecutorError, ProgramFailed, ValidationFailed, one_line
from .scratch import Scratch
from .sides import Side

PASSED, FAILED, CRASHED = "PASSED", "FAILED", "CRASHED"


@dataclass(frozen=True)
class Run:
    """One program run a bisect made: the suspects it ran current (the rest good), its verdict and figures, its
    wall time, and why it was made."""

    current: tuple[str, ...]
    verdict: str
    detail: str
    seconds: float
    why: str
    golden: str | None = None       # the seal of the golden result it was compared against (None: not compared)

    @property
    def fails(self) -> bool:
        return self.verdict != PASSED


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


class Mixer:
    """Runs `program` (in the scratch copy) with a mix of `good`'s and `current`'s binaries of the `suspects`."""

    def __init__(self, scratch: Scratch, program, config, good: Side, current: Side, suspects: list[str], *,
                 against: Tolerance | None, on_run: Callable[[Run], None], start: Callable | None = None) -> None:
        self.scratch, self.program, self.config = scratch, program, config
        self.good, self.current, self.suspects = good, current, suspects
        self.against = against                    # None: golden.py's comparison; else the good run's outputs
        self.reference: dict[str, object] | None = None
        self.on_run = on_run
        self.start = start                        # how a run's process starts (a warm starter's fork; None: spawned)
        self.runs: list[Run] = []

    def run(self, current: frozenset[str] | set[str], why: str, *, dump: Path | None = None) -> Run:
        """Run the mix with `current`'s binaries of these suspects; with `dump`, the arguments dump (level 2) is
        copied there. The good variant's first run makes the reference outputs of `--against-good`."""
        for task in self.suspects:
            was, now = self.current.pair(self.good, task)
            unit = now if task in current else was
            self.scratch.install(Path(self.program.path) / unit.binary, unit.binary_digest)
        config = replace(self.config, enable_dump_args=2) if dump is not None else self.config
        began = time.perf_counter()
        verdict, detail, golden = self._judged(config, reference=not current and self.against is not None)
        seconds = time.perf_counter() - began
        if dump is not None:
            _copy_dumps(Path(self.program.path), dump)
        made = Run(tuple(t for t in self.suspects if t in current), verdict, detail, seconds, why, golden)
        self.runs.append(made)
        self.on_run(made)
        return made

    def _judged(self, config, *, reference: bool) -> tuple[str, str, str | None]:
        from ..run import run_built

        try:
            outcome = run_built(self.program, validate=self.against is None, config=config, say=lambda _l: None,
                                quiet=True, start=self.start)
        except ValidationFailed as exc:
            return FAILED, str(exc).partition("\n")[0], getattr(exc, "golden", None)
        except (ProgramFailed, ExecutorError) as exc:
            return CRASHED, one_line(exc, 300), None
        if self.against is None:
            return PASSED, f"compared {', '.join(outcome.checked)}", outcome.golden
        outputs = _outputs(Path(self.program.path))
        if reference:
            self.reference = outputs
            return PASSED, f"the good variant's outputs: {', '.join(outputs)} (the reference)", None
        if self.reference is None:
            raise AssertionError("a mix ran against the good variant's outputs before the good variant ran")
        return (*_against(outputs, self.reference, self.against), None)


def _outputs(program_dir: Path) -> dict[str, object]:
    """The outputs the last run kept in the copy (`.pypto_build/replay/<name>.pt`)."""
    import torch

    folder = program_dir / STATE_DIR / REPLAY
    return {p.stem: torch.load(p, weights_only=True) for p in sorted(folder.glob("*.pt"))}


def _against(outputs: dict, reference: dict, tolerance: Tolerance) -> tuple[str, str]:
    """The verdict of `outputs` against the good run's: each output within the tolerance (golden.py's rule)."""
    from ..run import mismatch

    for name, want in reference.items():
        got = outputs.get(name)
        if got is None:
            return FAILED, f"output '{name}' was not written"
        problem = mismatch(got, want, tolerance.rtol, tolerance.atol)
        if problem:
            return FAILED, (f"Output '{name}' differs from the good variant's (rtol={tolerance.rtol}, "
                            f"atol={tolerance.atol}): {problem}")
    return PASSED, f"agrees with the good variant's {', '.join(reference)}"


def _copy_dumps(program_dir: Path, dest: Path) -> None:
    """Copy every arguments dump the run wrote (L2: dfx_outputs/args_dump; L3: one per rank<r>/d<k>) to `dest`,
    keeping their places relative to dfx_outputs/."""
    dfx = program_dir / DFX_OUTPUTS
    shutil.rmtree(dest, ignore_errors=True)
    for found in sorted(dfx.rglob(ARGS_DUMP_DIR)) if dfx.is_dir() else ():
        if found.is_dir():
            shutil.copytree(found, dest / found.relative_to(dfx))
