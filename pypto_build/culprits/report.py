"""What a bisect found, as data (`Report`) and as words: one screen for a person (`lines`), an object for tools
(`as_json`).

The screen: the culprits first, each with its source diff against the good variant (from the kept sources), then
the first divergent task and its figures, then the runs it took and their times. The JSON object: `culprits` (each
its unit and source path), `first_divergence` (or null), `runs` (one entry per program run: the units mixed, the
verdict, the seconds) and `method`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .runs import Run

CULPRITS, AGREE, GOOD_FAILS, UNNAMED = "culprits", "agree", "good fails", "unnamed"
DIFF_LINES = 60                 # of a culprit's source diff on the screen (the JSON has it whole)


@dataclass(frozen=True)
class Culprit:
    """A unit whose current binary makes the program differ: its task (e.g. `compile:aiv/k3`), its source (relative
    to the build root), the diff of that source from the good variant's, and what else to know."""

    unit: str
    source: str
    diff: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Report:
    """A bisect's answer for one build directory."""

    directory: Path
    good: str                                  # the good variant, in words
    current: str                               # the current variant's id
    method: str                                # trace | mix | trace+mix
    outcome: str                               # CULPRITS | AGREE | GOOD_FAILS
    culprits: tuple[Culprit, ...] = ()
    suspects: tuple[str, ...] = ()             # the units whose binaries differ
    first_divergence: object | None = None     # the trace's `Divergence` (culprits.trace), or None
    parting: object | None = None              # where the two task sequences part (culprits.trace), or None
    runs: tuple[Run, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def status(self) -> int:
        """0: culprits named; 1: nothing to blame (the variants agree, or the good one fails the oracle too)."""
        return 0 if self.culprits else 1

    def lines(self) -> list[str]:
        out = [f"bisect {self.directory}: current {self.current[:10]} against {self.good} ({self.method}; "
               f"{len(self.suspects)} unit(s) differ, {len(self.runs)} run(s))"]
        if self.outcome == AGREE:
            out.append("the two variants agree: nothing to blame (every output within tolerance)")
        elif self.outcome == GOOD_FAILS:
            out.append("the good variant fails the oracle too: nothing to blame; pick another with --good")
        elif self.outcome == UNNAMED:
            out.append("the trace saw the difference below but cannot pin it on a unit; `--method mix` finds them")
        for c in self.culprits:
            out.append(f"culprit  {c.unit}  ({c.source})" + (f" — {c.note}" if c.note else ""))
            out += [f"    {line}" for line in c.diff[:DIFF_LINES]]
            if len(c.diff) > DIFF_LINES:
                out.append(f"    ... {len(c.diff) - DIFF_LINES} more line(s) of the diff (--json has them all)")
        if self.first_divergence is not None:
            out += divergence_lines(self.first_divergence)
        if self.parting is not None:
            out.append(f"parting  the task sequences part at {self.parting.describe()}")
        out += [f"note     {n}" for n in self.notes]
        if self.runs:
            out.append("runs")
            out += [f"  {run_line(i, r)}  [{r.why}]" for i, r in enumerate(self.runs, 1)]
        return out

    def as_json(self) -> dict:
        return {"directory": str(self.directory), "good": self.good, "current": self.current,
                "method": self.method, "outcome": self.outcome,
                "culprits": [{"unit": c.unit, "source": c.source, "note": c.note, "diff": list(c.diff)}
                             for c in self.culprits],
                "suspects": list(self.suspects),
                "first_divergence": _plain(self.first_divergence), "parting": _plain(self.parting),
                "runs": [{"units": list(r.current), "verdict": r.verdict, "seconds": round(r.seconds, 3),
                          "why": r.why, "detail": r.detail} for r in self.runs],
                "notes": list(self.notes)}


def run_line(number: int, r: Run) -> str:
    """One run in words: its number, verdict and time, the suspects it ran current, what was off."""
    mixed = ", ".join(r.current) if r.current else "none (all good)"
    return (f"run {number}: {r.verdict} in {r.seconds:.2f} s · current: {mixed}"
            + (f" — {r.detail}" if r.verdict != "PASSED" and r.detail else ""))


def _plain(found: object | None) -> dict | None:
    if found is None:
        return None
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(found).items()}


def divergence_summary(d) -> str:
    """The first divergent task (`trace.Divergence`) in one line: the task, the output, how far off, what follows."""
    what = (f"output {d.output}: {d.reason}" if d.reason else
            f"output {d.output}: {d.differing} of {d.numel} differ, max abs {d.max_abs:.6g}, max rel {d.max_rel:.6g}; "
            f"{d.later} later task(s) differ too")
    return f"task #{d.index} {d.kernel or '?'} (func_id {','.join(map(str, d.func_id))}): {what}"


def divergence_lines(d) -> list[str]:
    """The first divergent task (`trace.Divergence`) in words: where, which output, how far off, what follows."""
    ids = ",".join(str(f) for f in d.func_id)
    head = (f"first divergent task  #{d.index}: {d.kernel or '?'} (func_id {ids})"
            + (f", {d.source}" if d.source else ""))
    if d.reason:
        what = f"output {d.output} (arg {d.arg_index}): {d.reason}"
    else:
        what = (f"output {d.output} (arg {d.arg_index}): {d.differing} of {d.numel} elements differ; max abs error "
                f"{d.max_abs:.6g}, max rel error {d.max_rel:.6g}; first at {list(d.first_index or ())}: good "
                f"{d.good_value!r}, current {d.current_value!r}")
    return [head, f"    {what}", f"    {d.later} later task(s) differ too"]
