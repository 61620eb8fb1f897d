"""doit's dependency manager with the fixes content builds need, on our state backend (`sqlitedb`).

1. Input states are snapshotted when a task is checked and those are saved
   after it succeeds (doit saves them after the action: pydoit/doit#119).
2. An up-to-date task whose files were only touched gets its states refreshed,
   so the next no-op does not hash them again.
3. The reason a task must run is kept per task (`reasons`), for reports.
4. A failed task keeps what its last success recorded (doit erases it), marked
   failed: the next run decides against the real last build and says the real
   reason, and a failure never loses what the next run needs (issue: a `.pto`
   edit was dropped after a failed splice wiped its state).

A state that cannot be written (full disk) stops the run with one line
(`PyptoBuildError`) instead of a traceback; the database itself stays whole
(sqlite's journal), so the next run with space goes on from the last commit.
"""
from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping

from doit.dependency import Dependency, get_md5

from ..core.filestate import is_modified, make_state, refreshed
from ..core.stage_seam import NO_EFFECT
from ..errors import PyptoBuildError
from ..core.oserrors import run_failure
from ..core.safeio import is_regular, refusal


class ContentDependency(Dependency):
    """doit's dependency manager with the fixes above; `reasons` says why each task must run."""

    def __init__(self, *args, adopt: bool = False, checkpoint: bool = False, force: Mapping[str, str] | None = None,
                 read_only: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        # task-name prefixes that run whatever their state says, each with why (its stage's words: `Stage.forced`)
        self.force = dict(force or {})
        self.read_only = read_only  # a reader deciding as a build does (explain): adopts in memory, records nothing
        # commit each success at once (sqlitedb.StateDB): a killed run keeps its finished units
        self.checkpoint = checkpoint
        if checkpoint:
            self.backend.commit_each()
        self._snapshots: dict[str, dict[str, list]] = {}
        self.reasons: dict[str, str] = {}
        self.refused: set[str] = set()  # tasks whose inputs hold a FIFO or device: bad input, not a failed unit
        self.adopt = adopt          # a build adopts (and explain, read-only); inspecting commands never write

    def get_status(self, task, tasks_dict, get_log=False):
        if self.adopt and not self.recorded(task.name) and not self.failed(task.name):
            self._adopt(task)                                           # never recorded: first sight
        result = super().get_status(task, tasks_dict, get_log=get_log)
        if result.status == "up-to-date" and ((self.failed(task.name) and not _failure_writes_nothing(task))
                                              or self._forced(task.name)):
            result.status = "run"
        snapshot = {}
        blocked = [getattr(utd, "blocked", "") for utd, _args, _kwargs in task.uptodate]
        for dep in task.file_dep:
            saved = self.backend.get(task.name, dep)
            try:
                st = os.stat(dep)
                if not is_regular(st):
                    blocked.append(refusal(dep, st.st_mode))
                if saved and not is_modified(dep, st, saved):
                    snapshot[dep] = refreshed(dep, st, saved) or saved
                else:
                    snapshot[dep] = make_state(dep, st)
            except OSError:         # unreadable now: the task's own run reports it
                continue
        self._snapshots[task.name] = snapshot
        if any(blocked) and result.status != "error":
            # Running it would read a FIFO or device (and block): refuse the task with that one line instead
            # (the pipeline raises it as a `UserError`, as planning refuses a FIFO where a source should be).
            result.status, result.error_reason = "error", next(b for b in blocked if b)
            self.refused.add(task.name)
        if result.status == "up-to-date":
            self._refresh(task, snapshot)
        else:
            self.reasons[task.name] = self._reason(task, result)
        return result

    def _forced(self, name: str) -> str:
        """Why `name` runs whatever its state says ('' when the request does not force it)."""
        return next((why for prefix, why in self.force.items() if name.startswith(prefix)), "")

    def failed(self, name: str) -> bool:
        """Whether the task's last run failed (it runs again until it succeeds)."""
        return bool(self.backend.get(name, "failed:"))

    def recorded(self, name: str) -> bool:
        """Whether a success of the task is recorded (doit's `checker:` entry, written with it)."""
        return self.backend.get(name, "checker:") is not None

    def _adopt(self, task) -> None:
        """First sight of a generated output: record it as built if a check says so (by content)."""
        for utd, _args, _kwargs in task.uptodate:
            adopt = getattr(utd, "adopt", None)
            values = adopt(self.get_values) if adopt else None
            if values is not None:
                adopted = getattr(utd, "adopted", None)
                try:
                    if adopted and not self.read_only:
                        adopted(values)
                except OSError:
                    return          # its record cannot be written (full disk): not adopted, the task runs
                self.backend.set(task.name, "_values_:", values)
                self.backend.set(task.name, "checker:", self.checker.__class__.__name__)
                for dep in task.file_dep:
                    try:
                        self.backend.set(task.name, dep, make_state(dep))
                    except OSError:
                        pass        # doit reports the missing file_dep itself
                self.backend.set(task.name, "deps:", tuple(task.file_dep))
                return

    def mark_forced(self, task_name: str, why: str) -> None:
        """Make a task stale until it next succeeds (its uptodate check sees `forced`)."""
        values = dict(self.get_values(task_name))
        values["forced"] = why
        self.backend.set(task_name, "_values_:", values)

    def commit(self) -> bool:
        """Write what is set so far now, when this state commits as it goes (a build); False otherwise."""
        if not self.checkpoint:
            return False
        self._commit()
        return True

    def _refresh(self, task, snapshot: dict) -> None:
        for dep, state in snapshot.items():
            if state != self.backend.get(task.name, dep):
                self.backend.set(task.name, dep, state)
        values = self.get_values(task.name)
        for utd, _args, _kwargs in task.uptodate:
            refresh = getattr(utd, "refresh", None)
            new = refresh(values) if refresh else None
            if new is not None:
                values = new
                self.backend.set(task.name, "_values_:", new)

    def _reason(self, task, result) -> str:
        """Why `task` must run, in the words explain and the progress lines use."""
        if self.failed(task.name) and not self.recorded(task.name):
            return "its last run failed (it never succeeded)"
        if self._forced(task.name):
            return self._forced(task.name)
        for utd, _args, _kwargs in task.uptodate:
            if utd is False:
                return "runs every time it is asked for"
            reason = getattr(utd, "reason", "")
            if reason:
                return reason
        why = result.reasons
        for key, word in (("missing_target", "output missing"), ("missing_file_dep", "missing input"),
                          ("added_file_dep", "new input"), ("removed_file_dep", "input removed")):
            items = why.get(key)
            if items:
                return f"{word}: {', '.join(map(str, items if isinstance(items, list) else [items]))}"
        if task.dep_changed:
            return "changed: " + ", ".join(task.dep_changed)
        if self.failed(task.name):
            return "its last run failed"
        if why.get("checker_changed"):
            return "state written by another checker"
        return "never built" if result.status == "run" else result.status

    def save_success(self, task, result_hash=None):
        snapshot = self._snapshots.pop(task.name, {})
        if isinstance(task.values, dict) and task.values.get(NO_EFFECT):
            return                  # ran without effect (no ptoas): stay stale, say so again next run
        self.backend.set(task.name, "_values_:", task.values)
        if result_hash is not None:
            self.backend.set(task.name, "result:", result_hash)
        elif task.result:
            self.backend.set(task.name, "result:", task.result if isinstance(task.result, dict) else get_md5(task.result))
        self.backend.set(task.name, "checker:", self.checker.__class__.__name__)
        for dep in task.file_dep:
            state = snapshot.get(dep) or self.checker.get_state(dep, self.backend.get(task.name, dep))
            if state is not None:
                self.backend.set(task.name, dep, state)
        self.backend.set(task.name, "deps:", tuple(task.file_dep))
        if self.backend.get(task.name, "failed:") is not None:
            self.backend.set(task.name, "failed:", None)
        if self.checkpoint and task.actions:    # a unit (group tasks have nothing to keep)
            self._commit()                      # doit otherwise writes state only at the end of the run

    def _commit(self) -> None:
        """Write the changed rows now, keeping the state open; a failure is one line."""
        try:
            self.backend.commit()
        except sqlite3.Error as exc:
            raise self._not_written(exc) from None

    def close(self) -> None:
        """doit's final write of the state; a failure is one line, not a traceback.

        In a build (`checkpoint`) every success is already committed: what is left are refreshed
        states and first-sight adoptions, which the next run recomputes — losing them is no failure
        (the run's own line, or the no-op record's warning, already says the disk is full).
        """
        try:
            self.backend.dump()             # once: closed whether or not it could write
        except sqlite3.Error as exc:
            if not self.checkpoint:         # uncommitted rows are rolled back: the file stays whole
                raise self._not_written(exc) from None

    def _not_written(self, exc: sqlite3.Error) -> PyptoBuildError:
        return run_failure(self.backend.name, exc)

    def remove_success(self, task) -> None:
        """doit erases a failed task's state; keep it, marked failed (see the module docstring).

        A build that cannot write the mark (full disk) goes on: the kept row still describes the last
        good build, so the task runs again whenever its inputs differ from it; its own failure is reported.
        """
        self._snapshots.pop(task.name, None)
        try:
            self.backend.set(task.name, "failed:", "1")
            if self.checkpoint and task.actions:
                self._commit()
        except (sqlite3.Error, PyptoBuildError) as exc:
            if not self.checkpoint:
                raise exc if isinstance(exc, PyptoBuildError) else self._not_written(exc) from None


def _failure_writes_nothing(task) -> bool:
    """A task whose failed run changed nothing: up to date again once its inputs are back as its last
    success recorded them (say, a `.pto` edit reverted). Other failed tasks run until they succeed."""
    return any(getattr(utd, "failure_writes_nothing", False) for utd, _args, _kwargs in task.uptodate)
