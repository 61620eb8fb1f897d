"""What a stage hands the engine: its task dicts, what its tasks add to the run's report, its explain rules.

Plain data and module-level functions, as doit's task dicts and ninja's rules are: the contract. Each
stage package declares its `Stage`s (`pto/stage.py`; `compile/stage.py`: prelude, compile, stamp;
`run/tasks.py`); the build's table lists them in graph order (`build_stages.STAGES`); the engine iterates
the stages it is given and names none of them. A stage's task names are `<group>:<name>` (core/stages.py).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


NO_EFFECT = "not_applied"
"""The key of a task's values when it ran without effect (a `.pto` edit ptoas could not apply, accepted): its
state is not saved (`ContentDependency.save_success`), so it stays stale and says so again, and no no-op
record is kept after the run (`plan.noop.record_graph`); its stage reports it (`Done.skipped`)."""


@dataclass(frozen=True)
class Done:
    """What one success of a stage's task adds to the run's report."""

    tally: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # named lists the result keeps
    skipped: str = ""      # the task had no effect: reported skipped, with this reason (its state is not saved)
    say: str = ""          # a line said at once, even under -q (an edit that did not land is never hidden)


@dataclass(frozen=True)
class Seen:
    """What a run saw, as a stage's report reads it: every task's outcome (`.status`, `.reason`) and the
    lists its tasks' successes tallied (`Done.tally`)."""

    outcomes: Mapping[str, Any]
    tallies: Mapping[str, list[str]]

    def names(self, status: str, prefixes: tuple[str, ...]) -> list[str]:
        """The tasks with `status` whose names start with one of `prefixes`."""
        return [n for n, o in self.outcomes.items() if o.status == status and n.startswith(prefixes)]

    def tallied(self, key: str) -> list[str]:
        return self.tallies.get(key, [])


def _nothing(*_args) -> list:
    return []


def _same(_name: str, _status: str, reason: str, _values: dict | None) -> str | None:
    return reason


@dataclass(frozen=True)
class Stage:
    """One stage of a build, as the engine assembles it.

    `tasks(graph, caches, run)` gives its doit task dicts by group (a group is a task-name basename; a
    stage names other stages' tasks only by name, as doit's `task_dep` and `setup` do).
    Report: `done(name, values)` is what a success adds (`Done`); `kept(name, values)` a line said when
    its task is up to date (None: nothing); `closing(seen)` its lines before the summary; `warnings(seen)`
    the lines the run's result keeps as warnings; `summary(seen)` its parts of the summary line, each with a
    rank (0: what ran; 1 is the run's own failed/skipped counts; 2: what a stage wrote; 3: what it kept).
    Explain (`explain`, `build --dry-run`): `follows` are its groups whose task runs after any of its
    dependencies runs (its inputs are rewritten then, which a run that executes nothing cannot see);
    `explain(name, status, reason, values)` the reason in the stage's words, given what the task last recorded
    (None: never recorded) — None: not listed unless asked for; `last_run(values)` the words on how its task
    last ran ("with prelude:<name>"). `units` are the groups counted as compile units, `verdicts` the groups
    that keep a verdict (listed held or not), `shown` the groups explain judges unless asked for names.
    `forced`: why its task runs when the request forces it whatever its state says (`Request.force`).
    """

    groups: tuple[str, ...]
    tasks: Callable[[Any, Any, Any], dict[str, list[dict]]]
    default: bool = False                   # a run given no task names builds this stage's tasks
    announced: bool = True                  # a progress line when a task starts (else it says its own lines)
    shown: tuple[str, ...] | None = None    # None: every group
    follows: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    refusal: type | None = None             # the failure of a task that refused its input (a user error)
    forced: str = "asked to run again whatever its state says"
    done: Callable[[str, dict], Done] | None = None
    kept: Callable[[str, dict], str | None] | None = None
    closing: Callable[[Seen], list[str]] = _nothing
    warnings: Callable[[Seen], list[str]] = _nothing
    summary: Callable[[Seen], list[tuple[int, str]]] = _nothing
    explain: Callable[[str, str, str, dict | None], str | None] = _same
    last_run: Callable[[dict], str] | None = None

    def owns(self, task: str) -> bool:
        """Whether `task` is one of this stage's."""
        return task.partition(":")[0] in self.groups


def forced_why(stages: tuple[Stage, ...] | list[Stage], prefixes: tuple[str, ...]) -> dict[str, str]:
    """Each task-name prefix the request forces, with its stage's words for why such a task runs."""
    found = {}
    for prefix in prefixes:
        stage = stage_of(stages, prefix)
        found[prefix] = stage.forced if stage is not None else Stage.forced
    return found


def stage_of(stages: tuple[Stage, ...] | list[Stage], task: str) -> Stage | None:
    """The stage among `stages` that made `task` (None: a group task, or another's)."""
    group = task.partition(":")[0] if ":" in task else None
    return next((s for s in stages if group in s.groups), None)
