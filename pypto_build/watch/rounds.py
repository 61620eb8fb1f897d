"""One watch session: what stays warm between rounds, and what one round does and prints.

A round builds what changed (doit, in this process: the graph is re-planned only
when a planning input changed), runs the program in a process forked from the warm
starter (torch and the runtime already imported; a fresh address space every time,
so a rebuilt kernel is always the one that runs), validates it, times it, and prints
one compact block. Whatever stops a round — bad input at any stage (planning, the
build, the run: an error a one-shot command reports in one line), a compile error, a
crash — is its verdict, and the session goes on; its status is the one a one-shot command
gives the same outcome (`BuildResult.status`, `errors.exit_status`). A round whose inputs moved before
its verdict (a burst of writes it started in the middle of) says so instead of a
verdict and runs again, in the same block, once the writes settle (`pending`).

One rule for the run, with `--validate` or without: it is the pipeline's own run task as
`pypto-build replay [--validate]` runs it (`validate:` forced, else `replay:`), on the warm
graph, in this process, started and heard through the run spec's `InProcess` (the warm
starter, the timing runs, the early verdict line, the split timings). So a PASSED round's
verdict is recorded as every verdict is (a later `pypto-build validate DIR` reuses it);
a round that did not pass records none.
"""
from __future__ import annotations

import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from ..core import stages
from ..errors import ProgramFailed, PyptoBuildError, exit_status, one_line
from ..builddir.runconfig import InProcess
from ..builddir.state_dir import STATE_DB, current_state_folder
from ..options import Request
from ..variants.history import Damaged, History, percent
from ..variants.units import program_units, unit_states, variant_id
from .inputs import PLANNING, Inputs, Snapshot, collect

TAIL_LINES = 30           # of a compiler's or a program's output, shown when a round fails
Change = tuple[str, str]  # (absolute path, "modified" | "added" | "removed")


@dataclass
class Settings:
    """How rounds run: what the user asked of each build and run (`request`: the options, the run spec),
    validate or only run, and the timed runs."""

    request: Request = field(default_factory=Request)
    validate: bool = True
    runs: int = 5


@dataclass
class Round:
    """What one round did: for the block it prints, the history and tests."""

    number: int
    changed: list[str]
    rebuilt: list[str] = field(default_factory=list)
    verdict: str = ""            # PASSED | FAILED | RAN | BUILD FAILED | CRASHED | ERROR
    status: int = 0              # the exit status of the same outcome from `pypto-build replay --validate`
    detail: str = ""
    seconds: list[float] = field(default_factory=list)
    split: dict[str, float] = field(default_factory=dict)
    variant: str | None = None   # the digest of the binaries that ran (variants.units.variant_id)
    units: list | None = None    # their units (variants.units.UnitState)
    diverges: list[str] = field(default_factory=list)    # a FAIL right after a PASS: where the runs part
    seen: bool = False           # that variant was tried before (a revert)
    said: bool = False           # the verdict line is printed


class Session:
    """The warm state of `pypto-build watch DIR`: imports, the planned graph, the warm starter, the inputs."""

    def __init__(self, root: Path, settings: Settings, out: TextIO | None = None, graph=None) -> None:
        from ..run import WarmStarter

        self.root, self.settings, self.out = root, settings, out if out is not None else sys.stdout
        self.graph = None
        self.plan(planned=graph)
        self.starter = WarmStarter(self.graph.platform.name)
        self.snapshot = Snapshot()
        self.inputs = Inputs(root)
        self.golden_reads: list[str] = []
        self.history, aside = History.set_aside(root)      # a damaged history does not stop the session
        if aside:
            self.say(f"[watch] {aside}")
        self.rounds: list[Round] = []
        self.pending: tuple[int, list[Change]] | None = None    # a round its inputs' moves cut short: runs again
        self.first: float | None = None
        self.previous: float | None = None
        self.ahead = None          # the next round's run, begun ahead (`_standby`)
        self._refresh()            # the inputs the last build recorded: an edit during round 1 counts

    def plan(self, report: Round | None = None, planned=None) -> bool:
        """(Re-)plan the graph (`planned`: the plan made already); on bad input the round is an ERROR (nothing built
        or run). Whether it planned."""
        try:
            self.graph = planned or self.settings.request.plan(self.root)
        except (PyptoBuildError, OSError) as exc:
            if report is None:
                raise
            report.verdict, report.detail = "ERROR", f"{_said(exc)} (nothing built; fix it and save again)"
            report.status = self._stopped(exc).status
            return False
        for line in self.graph.notices()[0]:
            self.say(line)
        return True

    def needs_plan(self, changed: list[Change]) -> bool:
        return any(self.inputs.roles.get(path, PLANNING) == PLANNING or how != "modified" for path, how in changed)

    def round(self, changed: list[Change]) -> Round:
        """Build, run, validate and time once, printing the block as it goes; record the variant.

        When an input the round read moved before its verdict, the block says so (`again`) and the round is
        left `pending`: the next call runs it again, in the same block, with what changed since."""
        resumed = self.pending is not None
        number, changed = self._resume(changed)
        names = [_rel(self.root, p) + ("" if how == "modified" else f" ({how})") for p, how in changed]
        report = Round(number, names or ["(first round)"])
        if not resumed:
            self.say(f"── round {report.number} · {time.strftime('%H:%M:%S')} · changed: {_few(report.changed)}")
        read = list(self.inputs.roles)
        self.snapshot.take(read)                       # what this round reads, as it starts
        began = time.perf_counter()
        result = None
        try:
            planned = self.plan(report) if changed and self.needs_plan(changed) else True
            if planned:
                self._standby()
            result = self._build(report) if planned else None
            if result is not None:
                self.snapshot.take([str(self.root / p) for p in result.spliced])    # our writes
            report.split["compile"] = time.perf_counter() - began
            self.say(f"   rebuilt  {_few(report.rebuilt) if report.rebuilt else 'nothing'}")
            self._unmoved(read)
            if result is not None and result.ok:
                report.units = unit_states(self.root, program_units(self.graph.plans, "."))
                report.variant = variant_id(report.units) if report.units is not None else None
                self._run(report, read)
            if not report.said:
                self._unmoved(read)
        except _Moved as moved:
            self.pending = (number, changed)
            self.say(f"   again    {_few([_rel(self.root, p) for p, _ in moved.changes])} changed while the round "
                     "ran: no verdict for what it read; it runs again on the new content")
            self._refresh()
            return report
        if report.variant:
            self._record(report)
            report.diverges = self._diverges(report)
        self._refresh()
        report.split["round"] = time.perf_counter() - began
        self.rounds.append(report)
        self._print(report)
        self._standby()
        return report

    def _standby(self) -> None:
        """Begin the next round's run now (`run.RunAhead`): golden.py's inputs and result are made while the user
        edits and the compiler runs, in a child forked from the warm starter, checked again when it is told the
        binaries. Kept while it waits (a round that built nothing, or failed to build, leaves it waiting)."""
        from ..run import RunAhead, Wanted, runnable

        if self.ahead is not None and self.ahead.waiting:
            return
        try:
            program = runnable(self.graph)
        except (PyptoBuildError, OSError):
            return                      # the round says it (a multi-orch parent, a missing sidecar)
        self.close()
        self.ahead = RunAhead([Wanted(program, self.settings.validate)], self.settings.request.run.config,
                              start=self.starter.start, timing_runs=self.settings.runs)
        self.ahead.begin()

    def close(self) -> None:
        """Stop the run begun ahead, if any."""
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None

    def _resume(self, changed: list[Change]) -> tuple[int, list[Change]]:
        """This round's number and changes: the pending round's, with what changed since, or a new one."""
        pending, self.pending = self.pending, None
        if pending is None:
            return len(self.rounds) + 1, changed
        number, before = pending
        merged = dict(before)
        for path, how in changed:
            if path not in merged or how != "modified":
                merged[path] = how
        return number, sorted(merged.items())

    def _unmoved(self, read: list[str]) -> None:
        """Raise `_Moved` when an input the round read has changed since it started."""
        moved = self.snapshot.changed(read)
        if moved:
            raise _Moved(moved)

    def _stopped(self, exc: BaseException):
        """The result of a build `exc` stopped (its status: the error tree's)."""
        from ..pipeline import BuildResult
        return BuildResult.stopped_by(self.root, exc, self.graph.platform.name if self.graph else "")

    def _build(self, report: Round):
        from .. import pipeline

        try:       # the build of the one pipeline, on the graph kept warm (planned again only when needed)
            result = pipeline.run(self.root, self.settings.request, graph=self.graph, progress=None, check=False)
        except (PyptoBuildError, OSError) as exc:
            report.verdict, report.detail = "BUILD FAILED", _said(exc)
            report.status = self._stopped(exc).status
            return None
        report.status = result.status
        report.rebuilt = [n for n in result.names("ran") + result.from_cache
                          if not n.startswith(stages.prefix(stages.STAMP))]
        report.rebuilt += [f"{p} (spliced)" for p in result.spliced]
        if not result.ok:
            first = result.failures[0] if result.failures else None
            report.verdict = "BUILD FAILED"
            report.detail = f"{first.task}: {_tail(first.message)}" if first else f"doit exit status {result.returncode}"
        return result

    def _run(self, report: Round, read: list[str]) -> None:
        from ..errors import ExecutorError

        lines: list[str] = []
        marks: dict[str, float] = {}
        began = time.perf_counter()

        def phase(what: str) -> None:
            if what.startswith("compared ") and what.endswith(": passed"):      # the verdict, before timing runs
                self._unmoved(read)         # moved: the run is stopped (the entry's way out), no verdict
                report.verdict, report.detail = "PASSED", what[len("compared "):-len(": passed")]
                self._verdict(report)
            for key in ("running the program", "comparing", "saving the outputs"):
                if what.startswith(key):
                    marks.setdefault(key, time.perf_counter())

        try:
            outcome = self._ran(InProcess(start=self.starter.start, timing_runs=self.settings.runs, on_phase=phase,
                                          say=lines.append, ahead=self.ahead))
            report.verdict = "PASSED" if self.settings.validate else "RAN"
            report.detail = ", ".join(outcome.checked)
            report.seconds = outcome.run_seconds
            self.golden_reads = outcome.reads
        except AssertionError as exc:       # a mismatch (ValidationFailed)
            report.verdict, report.detail = "FAILED", str(exc).partition("\n")[0]
            report.status = exit_status(exc)
        except ProgramFailed as exc:
            report.verdict, report.detail = "CRASHED", f"{one_line(exc, 400)}{_tail_of(lines)}"
            report.status = exit_status(exc)
        except (PyptoBuildError, ExecutorError, OSError) as exc:   # bad input: golden.py, func_ids, a kernel's entry
            report.verdict, report.detail = "ERROR", f"{_said(exc)}{_tail_of(lines)}"
            report.status = exit_status(exc)
        end = time.perf_counter()
        start = marks.get("running the program", end)
        saved = marks.get("saving the outputs", end)
        compare = saved - marks.get("comparing", saved)     # golden.py's half was made while the compiler ran
        report.split["run"] = (end - start) - compare
        if self.settings.validate:
            report.split["compare"] = compare
        report.split["start"] = start - began

    def _ran(self, here: InProcess):
        """The round's run: the pipeline's own run task on the warm graph (`validate:` forced, or `replay:`), in
        this process (-j 1) and heard through `here` (`InProcess`: the warm starter, the timing runs, `phase`, the
        lines); its outcome, or what the run raised (else what stopped the pipeline), raised as it is."""
        from .. import pipeline
        from ..run import runnable

        runnable(self.graph)            # a multi-orch parent, an L3 build without its sidecar: one line, as before
        stage = stages.VALIDATE if self.settings.validate else stages.REPLAY
        request = self.settings.request
        request = replace(request, tasks=(stages.task(stage, "."),), jobs=1, recompile=False, trace=None,
                          force=(stages.prefix(stages.VALIDATE),) if self.settings.validate else (),
                          run=replace(request.run, quiet=False, in_process=here))
        try:
            result = pipeline.run(self.root, request, graph=self.graph, progress=None, check=False)
        except (PyptoBuildError, OSError):
            if isinstance(here.ran, BaseException):
                raise here.ran from None        # the run's own error (a refused input), not the pipeline's line
            raise
        if isinstance(here.ran, BaseException):
            raise here.ran
        if here.ran is None:                    # the task did not get to run the program
            raise result.error() or ProgramFailed(f"{self.root}: the program was not run")
        return here.ran

    def _refresh(self) -> None:
        """The inputs as this round left them: new headers join (as they are now; our splices were taken as
        ours right after the build)."""
        from ..engine import open_state

        values: dict[str, dict] = {}
        try:
            state = open_state(self.root / current_state_folder(self.root, self.graph.platform.name) / STATE_DB,
                               adopt=False, read_only=True)
            try:
                for plan in self.graph.plans:
                    for unit in plan.units:
                        values[unit.task] = state.get_values(unit.task) or {}
            finally:
                state.close()
        except (PyptoBuildError, sqlite3.Error, OSError):   # no state yet (a failed first build): the plan's files
            pass
        self.inputs = collect(self.graph, values, self.golden_reads)
        self.snapshot.take(self.inputs.roles, keep=True)

    def _verdict(self, r: Round) -> None:
        """The verdict line, once per round: as soon as the comparison passed (timing runs come after)."""
        if not r.said:
            r.said = True
            self.say(f"   verdict  {r.verdict}" + (f": {r.detail}" if r.detail and r.verdict != "PASSED" else
                                                    f" ({r.detail})" if r.detail else ""))

    def _print(self, r: Round) -> None:
        """The rest of the block: the verdict (unless said), the program's run time, the time split."""
        self._verdict(r)
        if r.seconds:
            median = statistics.median(r.seconds)
            line = (f"   program  {_ms(median)} median of {len(r.seconds)} ({_ms(min(r.seconds))}–"
                    f"{_ms(max(r.seconds))})")
            if self.previous:
                line += f" · {percent(median, self.previous)} vs previous"
            if self.first:
                line += f" · {percent(median, self.first)} vs first"
            self.say(line + (f" · variant {r.variant[:10]}" + (" (tried before)" if r.seen else "")
                              if r.variant else ""))
            self.first = self.first or median
            self.previous = median
        for line in r.diverges:
            self.say(line)
        split = " · ".join(f"{k} {v:.2f} s" for k, v in r.split.items())
        self.say(f"   time     {split}")

    def _diverges(self, r: Round) -> list[str]:
        """A round that FAILED right after a PASSED one, on a platform whose dump carries payloads: the first
        divergent task against the PASSED variant (`diverges`)."""
        from ..platforms import RECORDS
        from .diverges import divergence_lines

        last = self.rounds[-1] if self.rounds else None
        if (r.verdict != "FAILED" or last is None or last.verdict != "PASSED" or not last.variant
                or last.variant == r.variant or not RECORDS[self.graph.platform.name].dump_payloads):
            return []
        return divergence_lines(self.root, last.variant, self.starter.start)

    def _record(self, r: Round) -> None:
        """Add the round's times and changes to its variant in the history, which its `validate:` task recorded
        with the verdict (a run without validation: recorded here); a failure to write is said, not fatal."""
        r.seen = r.variant in self.history.variants           # tried before this round
        try:
            self.history = History(self.root)                  # with what the round's validate: task recorded
        except Damaged:
            self.history, _ = History.set_aside(self.root)
        by_task = self.settings.validate and r.verdict in ("PASSED", "FAILED", "CRASHED")
        self.history.record(r.variant, r.verdict, r.seconds, r.changed, units=[u.as_dict() for u in r.units or ()],
                            platform=self.graph.platform.name, again=not (by_task and r.variant in self.history.variants))
        try:
            self.history.save()
        except OSError as exc:
            self.say(f"pypto-build: the history was not saved ({one_line(exc)}); the round itself is complete")

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


class _Moved(Exception):
    """An input a round read changed before its verdict: the round has none for what it read."""

    def __init__(self, changes: list[Change]) -> None:
        super().__init__(changes)
        self.changes = changes


def _said(exc: BaseException) -> str:
    """An error as the one line a one-shot command would print for it."""
    if isinstance(exc, OSError):
        from ..core.oserrors import describe
        return one_line(describe(exc), 400)
    return one_line(exc, 400)


def _rel(root: Path, path: str) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def _few(names: list[str], most: int = 4) -> str:
    return ", ".join(names[:most]) + (f" … ({len(names)} in all)" if len(names) > most else "")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _tail(text: str) -> str:
    lines = (text or "").splitlines()
    head = lines[0] if lines else ""
    rest = lines[1:][-TAIL_LINES:]
    return head + "".join(f"\n     {line}" for line in rest)


def _tail_of(lines: list[str]) -> str:
    return "".join(f"\n     {line}" for line in lines[-TAIL_LINES:])

