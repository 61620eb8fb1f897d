"""Why each unit would run: `pypto-build explain` and `build --dry-run` (like ninja -d explain / -n).

A dry run of the build itself, as ninja's `-n` is its builder with a runner that runs nothing: doit's own
selection and dispatch (`TaskControl`, `TaskDispatcher`) and doit's `Runner`, whose `execute_task` here
executes nothing (`DryRunner`), deciding each task with the build's own dependency manager
(`ContentDependency.get_status`: the same up-to-date checks, first-sight adoption and `--recompile` forcing,
`forcing.force_rebuilds`), asked for its log so the reasons are the build's own words. What a run that
executes nothing cannot see — a task whose inputs a dependency that runs would rewrite — is each stage's
rule (`Stage.follows`: "after <task>"); a stage's words on a task (a verdict, how a kernel last compiled)
are its own (`Stage.explain`, `Stage.last_run`).

Nothing is written: the state database is opened read-only (sqlite `mode=ro`, under the shared lock taken
on a read-only descriptor), so it works on a read-only directory; what the run sets in it (adoptions,
forcing) stays in memory and is dropped; a never-built directory is not touched at all (no state folder is
created).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from doit.control import TaskControl
from doit.dependency import DependencyStatus
from doit.exceptions import UnmetDependency
from doit.runner import Runner

from ..core.stage_seam import Stage, stage_of
from ..plan.graph import Graph
from .forcing import force_rebuilds
from .tasks import build_stages

if TYPE_CHECKING:
    from .depstate import ContentDependency


@dataclass(frozen=True)
class Explanation:
    """Why one task would run, or that it is up to date (what `explain` and `build --dry-run` print)."""

    task: str
    status: str      # "run" | "up-to-date" | "error" | "skipped" (doit ignore)
    reason: str
    how: str = ""    # a kernel's last compile: "with prelude:<name>" or "plainly: <why>" (precompiled preludes)


def explain(graph: Graph, only: list[str] | None = None, *, recompile: bool = False,
            stages: tuple[Stage, ...] | None = None) -> list[Explanation]:
    """The status and reason of every task a build looks at (each stage's `shown` groups) or of `only`, in
    doit's dispatch order.

    With `recompile`, what `build --recompile` would do: every compile unit runs; so it does while an
    `invalidate_binary_cache()` mark waits for the next build.
    """
    from .loader import BuildDirLoader

    root = graph.layout.root
    loader = BuildDirLoader(root, graph=graph, quiet=True, stages=stages)
    task_list = loader.load_tasks(None, [])
    names = {t.name for t in task_list if t.actions}
    if only:
        missing = [n for n in only if n not in names]
        if missing:
            from ..errors import UserError
            raise UserError(f"{root}: no task named {', '.join(missing)}; `pypto-build doit list --all "
                            f"{root}` lists them")
    wanted = [t.name for t in task_list if t.actions and (t.name in (only or ()) or _shown(loader.stages, t.name))]
    with read_only_state(root, graph.platform.name) as dep:
        if dep is not None:
            force_rebuilds(dep, root, graph.compile_tasks, recompile)
        found = dry_run(task_list, wanted, dep, loader.stages)
        out = [_in_stage_words(loader.stages, e, _recorded(dep, e.task), bool(only) and e.task in only)
               for e in found.values() if e.task in wanted]
    listed = [e for e in out if e is not None]
    return [e for e in listed if e.task in only] if only else listed


def _shown(stages: tuple[Stage, ...], name: str) -> bool:
    """Whether explain judges `name` unless asked for names: its stage's `shown` groups."""
    stage = stage_of(stages, name)
    return stage is not None and name.partition(":")[0] in (stage.groups if stage.shown is None else stage.shown)


def _recorded(dep: ContentDependency | None, name: str) -> dict | None:
    """What the task's last success recorded (None: none recorded)."""
    if dep is None or not dep.recorded(name):
        return None
    return dep.get_values(name) or {}


def _in_stage_words(stages: tuple[Stage, ...], e: Explanation, values: dict | None, asked: bool) -> Explanation | None:
    """`e` as its stage says it (None: not listed unless asked for)."""
    stage = stage_of(stages, e.task)
    if stage is None:
        return e
    reason = stage.explain(e.task, e.status, e.reason, values)
    if reason is None:
        return e if asked else None
    how = stage.last_run(values) if stage.last_run is not None and values is not None else ""
    return Explanation(e.task, e.status, reason, how)


@contextlib.contextmanager
def read_only_state(root: Path, platform: str,
                    force: Mapping[str, str] | None = None) -> Iterator[ContentDependency | None]:
    """`platform`'s state of the directory (what a build would take) opened read-only (sqlite `mode=ro`) under
    the shared lock taken on a read-only descriptor, with the root as working directory, deciding as a build
    does (first sight adopts, in memory); None when it was never built (nothing is created). Whatever a
    check refreshes in it is discarded: reading writes nothing."""
    from ..builddir.state_dir import STATE_DB, STATE_DIR, current_state_folder
    from .lock import dir_lock
    from .statedb import open_state

    state = root / current_state_folder(root, platform) / STATE_DB
    if not state.exists():
        yield None
        return
    with dir_lock(root / STATE_DIR, quiet=True, shared=True), contextlib.chdir(root):
        dep = open_state(state, adopt=True, read_only=True, force=force)
        try:
            yield dep
        finally:
            dep.backend.discard()              # drop refreshed states: reading writes nothing


def dry_run(task_list: list, selection: list[str], dep: ContentDependency | None,
            stages: tuple[Stage, ...]) -> dict[str, Explanation]:
    """The build of `selection` (task names as a run takes them) without executing anything: each task doit
    dispatches (with actions), decided on `dep` (None: never built), in dispatch order."""
    control = TaskControl(task_list)
    control.process(selection)
    judge = WouldRun(dep, stages)
    DryRunner(judge, Decisions(judge, control.tasks), continue_=True).run_all(control.task_dispatcher())
    return judge.found


class DryRunner(Runner):
    """doit's runner, executing nothing: a task doit selects to run succeeds at once (ninja's dry-run runner).
    Selection, dispatch, setup tasks and the decisions are doit's own (`Runner.select_task`)."""

    def execute_task(self, task):
        self.reporter.execute_task(task)
        return None


class WouldRun:
    """doit's dependency-manager interface for a dry run: each decision is the build's (`dep.get_status`,
    with its log for the reasons), a stage's `follows` rule added; a task "run" is remembered, nothing is
    written."""

    def __init__(self, dep: ContentDependency | None, stages: tuple[Stage, ...]):
        self.dep = dep
        self.stages = stages
        self.ran: list[str] = []                    # the tasks the dry run ran, in order
        self.found: dict[str, Explanation] = {}     # the decision on each task with actions

    def get_status(self, task, tasks_dict, get_log=False):
        if self.dep is None:
            result = DependencyStatus(True)
            result.status = "run"
            reason = "never built"
        else:
            result = self.dep.get_status(task, tasks_dict, get_log=True)
            reason = (result.get_error_message() if result.status == "error"
                      else self.dep.reasons.get(task.name) or "never built" if result.status == "run" else "")
        stage = stage_of(self.stages, task.name)
        if result.status == "up-to-date" and stage is not None and task.name.partition(":")[0] in stage.follows:
            after = [d for d in task.task_dep if d in self.ran]
            if after:       # a dependency that runs rewrites its inputs: it runs after it
                result.status, reason = "run", f"after {after[0]}"
        if task.actions:
            self.found[task.name] = Explanation(task.name, result.status, reason)
        return result

    def status_is_ignore(self, task) -> bool:
        return self.dep is not None and self.dep.status_is_ignore(task)

    def get_values(self, task_name: str) -> dict:
        return self.dep.get_values(task_name) if self.dep is not None else {}

    def get_value(self, task_id: str, key_name: str):
        return self.get_values(task_id).get(key_name)

    def save_success(self, task, result_hash=None) -> None:
        self.ran.append(task.name)

    def remove_success(self, task) -> None:
        pass

    def close(self) -> None:
        pass


class Decisions:
    """The dry run's reporter: a task doit ignores is skipped; one after a task that cannot be checked is
    judged on its own (the run stops at neither)."""

    def __init__(self, judge: WouldRun, tasks: dict):
        self.judge = judge
        self.tasks = tasks

    def skip_ignore(self, task):
        if task.actions:
            self.judge.found[task.name] = Explanation(task.name, "skipped", "ignored (doit ignore)")

    def add_failure(self, task, exception):
        if task.actions and isinstance(exception, UnmetDependency) and task.name not in self.judge.found:
            self.judge.get_status(task, self.tasks)

    def __getattr__(self, _name):           # the rest of doit's reporter interface: nothing to say
        return _ignore


def _ignore(*_args) -> None:
    return None


def format_lines(items: list[Explanation], *, all_tasks: bool = False,
                 stages: tuple[Stage, ...] | None = None) -> list[str]:
    """One line per stale task and per recorded verdict (holding or not), then the counts a build would print
    (compile units; other stages after; verdicts that no longer hold)."""
    stages = build_stages() if stages is None else stages
    units = tuple(f"{g}:" for s in stages for g in s.units)
    verdicts = tuple(f"{g}:" for s in stages for g in s.verdicts)
    lines = [f"{e.task}: {e.reason if e.status != 'up-to-date' or e.task.startswith(verdicts) else 'up to date'}"
             + (" (error)" if e.status == "error" else "") + (f" (last compiled {e.how})" if e.how else "")
             for e in items if all_tasks or e.status != "up-to-date" or e.task.startswith(verdicts)]
    counted = [e for e in items if e.task.startswith(units)]
    parts = [f"{sum(1 for e in counted if e.status == 'run')} would compile",
             f"{sum(1 for e in counted if e.status == 'up-to-date')} up to date"]
    others: dict[str, int] = {}
    for e in items:
        if e.status == "run" and not e.task.startswith((*units, *verdicts)):
            stage = e.task.split(":")[0]
            others[stage] = others.get(stage, 0) + 1
    if others:
        parts.append("also " + ", ".join(f"{n} {stage}" for stage, n in others.items()))
    stale = sum(1 for e in items if e.status == "run" and e.task.startswith(verdicts))
    if stale:
        parts.append(f"{stale} verdict(s) no longer hold")
    errors = sum(1 for e in items if e.status == "error")
    if errors:
        parts.append(f"{errors} cannot be checked")
    lines.append("pypto-build: " + ", ".join(parts))
    return lines
