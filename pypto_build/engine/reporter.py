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

from ..core import stages
from ..errors import one_line


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
    must never be hidden — a verdict, a `.pto` edit not applied (failures are said by the caller)."""

    desc = "pypto_build: one line per unit run, then a summary"

    def __init__(self, outstream=None, options=None, *, quiet: bool = False, echo_errors: bool = True):
        self.out = outstream or sys.stdout
        self.quiet = quiet
        self.echo_errors = echo_errors      # False: the caller raises `errors` as its one line
        self.outcomes: dict[str, Outcome] = {}
        self._start: dict[str, float] = {}
        self.errors: list[str] = []
        self.refused: list[str] = []        # tasks that refused their input (`_refused`): a user error's line
        self.not_applied: list[str] = []    # .pto units whose edits could not be applied
        self.spliced: list[str] = []        # kernel files re-spliced this run
        self.pto_rejected: list[str] = []   # .pto never seen edited that ptoas could not compile: kernels kept
        self.warnings: list[str] = []       # said by units that succeeded (`pypto-build: warning: ...` lines)
        self.identical: list[str] = []      # compile units that ran and built the bytes in place: file kept
        self.stamped: list[str] = []        # stamp tasks that wrote binary_context.json (run_stamp's values say)
        self.unstamped: list[str] = []      # ... that ran and wrote none (an identity unknown: stale one removed)
        self.spans: list[tuple[str, int, float, float]] = []   # (task, lane, start, end) for --trace
        self.values: dict[str, dict] = {}   # each task that ran: the values it returned (the caller reads them)
        self.raised: dict[str, BaseException] = {}  # each failed task whose failure carries a typed error (`error`)
        self._lane: dict[str, int] = {}
        self._t0 = time.monotonic()
        self.total = 0
        self.done = 0
        self.tty = not quiet and hasattr(self.out, "isatty") and self.out.isatty()

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
        if not task.name.startswith(stages.PTO):      # those print PyPTO's own lines when done
            self._line(f"{task.name}" + (f"  ({reason})" if reason else ""))

    def add_success(self, task):
        if not task.actions:
            return
        values = task.values if isinstance(task.values, dict) else {}
        self.values[task.name] = values
        if values.get("not_applied"):
            self.not_applied.append(values["not_applied"])
            self._finish(task.name, "skipped", "ptoas not found (--allow-unapplied-pto)")
            if self.quiet:      # said at once, before any verdict: an edit that did not land is never hidden
                self._line(_not_applied([values["not_applied"]]), always=True)
            return
        self._finish(task.name, "from-cache" if values.get("cache") == "hit" else "ran")
        if values.get("kept") == "identical" and task.name.startswith(stages.UNITS):
            self.identical.append(task.name)
        if task.name.startswith(stages.prefix(stages.STAMP)):
            (self.stamped if values.get("stamp") else self.unstamped).append(task.name)
        self.spliced += values.get("spliced") or []
        for line in values.get("lines") or []:
            self._line(line)
        if values.get("rejected"):
            self.pto_rejected.append(values["rejected"])
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
        if not self.echo_errors and _refused(task, exception):
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
        if task.name.startswith(stages.prefix(stages.VALIDATE)):
            values = Globals.dep_manager.get_values(task.name) if Globals.dep_manager else {}
            self._line(f"{task.name}  Golden validation: {values.get('verdict', 'PASSED')} {KEPT_VERDICT}", always=True)

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
        for line in self.pto_summary():
            print(line, file=self.out)
        print(self.summary(), file=self.out, flush=True)

    def pto_summary(self) -> list[str]:
        """PyPTO's closing lines of the .pto stage, plus every edit that did not reach the kernels."""
        if not any(n.startswith(stages.PTO) for n in self.outcomes):
            return []
        lines = [f"[pto->cpp] updated {len(self.spliced)} kernel cpp(s)"] if self.spliced else []
        if self.pto_rejected:
            lines.append("[pto->cpp] kernels kept as they are (never seen edited; ptoas cannot compile): "
                         + ", ".join(sorted(self.pto_rejected)))
        lines += self.unapplied()
        return lines or ["[pto->cpp] no .pto changes detected"]

    def unapplied(self) -> list[str]:
        """The lines naming each `.pto` edit that did not reach the kernel files this run (none: []): accepted
        by --allow-unapplied-pto, or whose ptoas or splice failed."""
        failed = sorted(n for n, o in self.outcomes.items() if n.startswith(stages.PTO) and o.status == "failed")
        lines = [_not_applied(self.not_applied)] if self.not_applied else []
        if failed:
            lines.append(f"[pto->cpp] edits NOT applied: {', '.join(failed)} failed (see above)")
        return lines

    # ---------------------------------------------------------------------
    def count(self, status: str, kind: str = "") -> int:
        return sum(1 for n, o in self.outcomes.items() if o.status == status and n.startswith(kind))

    def summary(self) -> str:
        units = stages.UNITS
        compiled = sum(self.count("ran", k) for k in units)
        current = sum(self.count("up-to-date", k) for k in units)
        parts = [f"{compiled} compiled", f"{current} up to date"]
        cached = sum(self.count("from-cache", k) for k in units)
        if cached:
            parts.insert(1, f"{cached} from cache")
        for status in ("failed", "skipped"):
            if self.count(status):
                parts.append(f"{self.count(status)} {status}")
        if self.stamped:
            parts.append(f"{len(self.stamped)} stamp(s) written")
        if self.unstamped:
            parts.append(f"{len(self.unstamped)} sub-build(s) not stamped (identity unknown)")
        if self.identical:      # last: `ls -l` shows these files untouched (atomic.install kept them)
            parts.append(f"{len(self.identical)} recompiled, identical bytes kept")
        return "pypto-build: " + ", ".join(parts)

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


KEPT_VERDICT = "(cached: binaries, run configuration and golden result, with all it depends on, are unchanged)"
"""What a reused verdict's line says after it (the verdict's key: `run.checks.VerdictCheck`)."""


def _refused(task, exception: object) -> bool:
    """The task refused its input rather than failed: the replay child's `UserError` (`run.Refused`), or a FIFO
    or device among the files it would read, found by its up-to-date check (`ContentDependency.refused`)."""
    from ..run import Refused
    return isinstance(exception, Refused) or task.name in getattr(Globals.dep_manager, "refused", ())


def _not_applied(units: list[str]) -> str:
    return "[pto->cpp] edits NOT applied (ptoas not found; accepted by --allow-unapplied-pto): " + \
        ", ".join(sorted(units))
