"""A doit reporter that records each unit's outcome and prints short lines.

Lives in the main process (doit forwards worker calls), so outcomes and
timings are complete with `-n N`. Group tasks (no actions) are not reported.
"""
from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass

from doit.exceptions import UnmetDependency
from doit.globals import Globals

from ..core.stage_seam import Done, Seen, Stage, stage_of
from ..errors import one_line
from .tasks import build_stages


_DOIT_PREFIX = re.compile(r"\AERROR: Task '[^\n]*?' checking dependencies: ")


@dataclass
class Outcome:
    """What happened to one task in a run, as the reporter saw it (`api.UnitResult` is made from it)."""

    status: str          # "ran" | "from-cache" | "up-to-date" | "failed" | "skipped"
    reason: str = ""
    seconds: float = 0.0
    message: str = ""


class BuildReporter:
    """Collects `outcomes`; prints one line per unit run and a summary. `quiet` (-q): only the lines that
    must never be hidden — a verdict, a `.pto` edit not applied (failures are said by the caller).

    What a task adds beyond its outcome is its stage's to say (`Stage.done`, `kept`, `closing`, `summary`,
    `warnings`): `tallies` keeps the named lists the stages' successes add (`tallied`); `stages` default
    the build's."""

    desc = "pypto_build: one line per unit run, then a summary"

    def __init__(self, outstream=None, options=None, *, quiet: bool = False, echo_errors: bool = True,
                 stages: tuple[Stage, ...] | None = None):
        self.out = outstream or sys.stdout
        self.quiet = quiet
        self.echo_errors = echo_errors      # False: the caller raises `errors` as its one line
        self.stages = build_stages() if stages is None else stages
        self.outcomes: dict[str, Outcome] = {}
        self._start: dict[str, float] = {}
        self.errors: list[str] = []
        self.refused: list[str] = []        # tasks that refused their input (`_refused`): a user error's line
        self.tallies: dict[str, list[str]] = {}     # what the stages' successes tallied (`Done.tally`)
        self.warnings: list[str] = []       # said by units that succeeded (`pypto-build: warning: ...` lines)
        self.spans: list[tuple[str, int, float, float]] = []   # (task, lane, start, end) for --trace
        self.values: dict[str, dict] = {}   # each task that ran: the values it returned (the caller reads them)
        self.raised: dict[str, BaseException] = {}  # each failed task whose failure carries a typed error (`error`)
        self._lane: dict[str, int] = {}
        self._t0 = time.monotonic()
        self.total = 0
        self.done = 0
        self.tty = not quiet and hasattr(self.out, "isatty") and self.out.isatty()

    def tallied(self, key: str) -> list[str]:
        """The names a stage's successes tallied under `key` this run (`spliced`, `identical`, ...)."""
        return self.tallies.get(key, [])

    def seen(self) -> Seen:
        return Seen(self.outcomes, self.tallies)

    def stage_warnings(self) -> list[str]:
        """The lines the stages keep as the run's warnings (a `.pto` edit that did not land, ...)."""
        seen = self.seen()
        return [line for stage in self.stages for line in stage.warnings(seen)]

    # doit reporter interface ---------------------------------------------
    def initialize(self, tasks, selected_tasks):
        """Count the units this run will look at, for the [done/total] status line."""
        seen: set[str] = set()
        todo = list(selected_tasks or [])
        while todo:
            name = todo.pop()
            task = tasks.get(name)
            if task is None or name in seen:
                continue
            seen.add(name)
            todo.extend(task.task_dep)
        self.total = sum(1 for n in seen if tasks[n].actions)

    def get_status(self, task):
        pass

    def execute_task(self, task):
        if not task.actions:
            return
        self._start[task.name] = time.monotonic()
        busy = set(self._lane.values())
        self._lane[task.name] = next(i for i in range(len(busy) + 1) if i not in busy)
        reason = getattr(Globals.dep_manager, "reasons", {}).get(task.name, "")
        self.outcomes[task.name] = Outcome("running", reason)
        stage = stage_of(self.stages, task.name)
        if stage is None or stage.announced:      # else it says its own lines when done
            self._line(f"{task.name}" + (f"  ({reason})" if reason else ""))

    def add_success(self, task):
        if not task.actions:
            return
        values = task.values if isinstance(task.values, dict) else {}
        self.values[task.name] = values
        stage = stage_of(self.stages, task.name)
        done = stage.done(task.name, values) if stage is not None and stage.done is not None else Done()
        for key, names in done.tally.items():
            self.tallies.setdefault(key, []).extend(names)
        if done.skipped:                    # ran without effect
            self._finish(task.name, "skipped", done.skipped)
            if self.quiet and done.say:     # said at once, before any verdict (else the closing lines say it)
                self._line(done.say, always=True)
            return
        self._finish(task.name, "from-cache" if values.get("cache") == "hit" else "ran")
        for line in values.get("lines") or []:
            self._line(line)
        if values.get("warning"):
            self.warnings.append(values["warning"])
            self._line(f"pypto-build: warning: {values['warning']}", err=True)

    def add_failure(self, task, exception):
        if not task.actions and not isinstance(exception, UnmetDependency):
            return
        message = exception.get_msg() if hasattr(exception, "get_msg") else str(exception)
        message = _DOIT_PREFIX.sub("", message, count=1)     # the task is named in our own line already
        if isinstance(exception, UnmetDependency):
            if not task.actions:
                return
            self._finish(task.name, "skipped", "a unit it depends on failed")
            return
        out = self._finish(task.name, "failed", message=message.strip())
        if isinstance(getattr(exception, "error", None), BaseException):
            self.raised[task.name] = exception.error
        first, _, details = out.message.partition("\n")
        if not self.echo_errors and _refused(task, exception, self.stages):
            self.refused.append(first)              # the caller raises it: a user error, its one line
            return
        self._line(f"pypto-build: FAILED {task.name}: {first or 'failed'}", err=True)   # the one line
        if details.strip():
            self._line(details)                      # command, full compiler output, ...: with the progress

    def skip_uptodate(self, task):
        if not task.actions:
            return
        self.outcomes[task.name] = Outcome("up-to-date")
        self._progress(task.name)
        stage = stage_of(self.stages, task.name)
        if stage is not None and stage.kept is not None:
            values = Globals.dep_manager.get_values(task.name) if Globals.dep_manager else {}
            line = stage.kept(task.name, values)
            if line:
                self._line(line, always=True)

    def skip_ignore(self, task):
        if task.actions:
            self.outcomes[task.name] = Outcome("skipped", "ignored (doit ignore)")

    def cleanup_error(self, exception):
        self.errors.append(exception.get_msg())

    def runtime_error(self, msg):
        self.errors.append(one_line(msg))
        if self.echo_errors:
            self._line(f"ERROR: {self.errors[-1]}", err=True)

    def teardown_task(self, task):
        pass

    def complete_run(self):
        if self.tty:
            self.out.write("\r\x1b[K")
        if self.quiet:
            return
        for name, o in sorted(self.outcomes.items()):
            if o.status == "skipped":
                print(f"skipped {name}: {o.reason}", file=self.out)
        seen = self.seen()
        for stage in self.stages:
            for line in stage.closing(seen):
                print(line, file=self.out)
        print(self.summary(), file=self.out, flush=True)

    # ---------------------------------------------------------------------
    def count(self, status: str, kind: str = "") -> int:
        return sum(1 for n, o in self.outcomes.items() if o.status == status and n.startswith(kind))

    def summary(self) -> str:
        """The summary line: each stage's parts, by rank (0: what ran; 1: the run's failed and skipped
        counts, said here; 2: what a stage wrote; 3: what it kept)."""
        seen = self.seen()
        parts = [part for stage in self.stages for part in stage.summary(seen)]
        parts += [(1, f"{self.count(status)} {status}") for status in ("failed", "skipped") if self.count(status)]
        return "pypto-build: " + ", ".join(text for _rank, text in sorted(parts, key=lambda p: p[0]))

    def _finish(self, name: str, status: str, reason: str = "", message: str = "") -> Outcome:
        started = self._start.pop(name, None)
        lane = self._lane.pop(name, 0)
        if started is not None:
            self.spans.append((name, lane, started - self._t0, time.monotonic() - self._t0))
        self._progress(name)
        prev = self.outcomes.get(name)
        out = Outcome(status, reason or (prev.reason if prev else ""),
                      time.monotonic() - started if started else 0.0, message)
        self.outcomes[name] = out
        return out

    def _progress(self, name: str) -> None:
        """On a terminal, one status line `[done/total] unit` rewritten in place."""
        self.done += 1
        if self.tty:
            self.out.write(f"\r\x1b[K[{self.done}/{max(self.total, self.done)}] {name}")
            self.out.flush()

    def _line(self, text: str, err: bool = False, always: bool = False) -> None:
        if self.quiet and not always:
            return
        if self.tty:
            self.out.write("\r\x1b[K")
        print(text, file=sys.stderr if err else self.out, flush=True)


def _refused(task, exception: object, stages: tuple[Stage, ...]) -> bool:
    """The task refused its input rather than failed: its stage's `refusal` (the replay child's `UserError`),
    or a FIFO or device among the files it would read, found by its up-to-date check
    (`ContentDependency.refused`)."""
    stage = stage_of(stages, task.name)
    refusal = stage.refusal if stage is not None else None
    return (refusal is not None and isinstance(exception, refusal)) or \
        task.name in getattr(Globals.dep_manager, "refused", ())
