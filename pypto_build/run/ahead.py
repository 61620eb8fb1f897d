"""Runs begun before their binaries exist: golden.py's inputs and result are made while the compiler runs.

A `replay:`/`validate:` task runs after the compile units it depends on. Half of its run needs no binary:
starting the child, importing torch, golden.py's inputs and expected outputs, or the kept ones read back
(`prepare.prepare`). `RunAhead` begins that half, in the child the task will use, when the pipeline starts a
build whose run tasks will run whatever their state (`replay`, `replay --validate`, a `watch` round): the
task's action takes its child (`take`) and sends it the binaries. One child is begun at a time; when one is
taken, the next program's begins (a multi-orchestration parent's sub-builds: the next prepares while this
one runs). Those never taken (a unit failed, the run stopped) are stopped at the end (`close`).

The result is the one a run begun when its task runs gives: the child checks, once told the binaries, that
what it prepared is still what golden.py gives now (`prepare.Ready.holds`) and prepares again when not; a
preparation that failed is made again then. Only in the process that made it (its children's pipes are this
process's): the pipeline uses it with `-j 1` only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from ..builddir.runconfig import RunConfig

if TYPE_CHECKING:
    from ..builddir.runconfig import RunSpec
    from ..plan.graph import Graph
    from ..plan.program import Program
    from .entry import Begun


@dataclass(frozen=True)
class Wanted:
    """A run the build will make: its program and whether it validates (the `validate:` task)."""

    program: Program
    validate: bool


@dataclass
class RunAhead:
    """The runs to begin ahead, in the order their tasks run, with how their children start and what they ask."""

    wanted: list[Wanted]
    config: RunConfig
    quiet: bool = False
    start: Callable | None = None           # the warm starter's `start` (a `watch`), else a new interpreter
    timing_runs: int = 1
    _begun: dict = field(default_factory=dict)      # (path, validate) -> Begun

    def begin(self) -> None:
        """Begin the next wanted run, unless one begun is still waiting to be taken."""
        if self._begun or not self.wanted:
            return
        from .entry import begin

        want = self.wanted.pop(0)
        begun = begin(want.program, validate=want.validate, config=self.config, start=self.start,
                      timing_runs=self.timing_runs, quiet=self.quiet)
        begun.ahead = True
        self._begun[(str(want.program.path), want.validate)] = begun

    @property
    def waiting(self) -> bool:
        """Whether a run begun ahead waits to be taken."""
        return bool(self._begun)

    def take(self, program: Program, config: RunConfig, *, validate: bool, quiet: bool,
             timing_runs: int) -> Begun | None:
        """The child begun for this very run (the same program, configuration and question), or None; the next
        wanted run begins."""
        begun = self._begun.pop((str(program.path), validate), None)
        if begun is not None and (begun.request["config"] != config or begun.request["quiet"] != quiet
                                  or begun.request["timing_runs"] != timing_runs):
            begun.stop()
            begun = None
        self.begin()
        return begun

    def close(self) -> None:
        """Stop every child begun and not taken."""
        self.wanted.clear()
        for begun in self._begun.values():
            begun.stop()
        self._begun.clear()


def for_request(graph: Graph, tasks: Iterable[str], force: Iterable[str], jobs: int, run: RunSpec) -> RunAhead | None:
    """The runs to begin ahead for a request (its task names, forced prefixes, jobs and run spec) on `graph`, or
    None: none will surely run, doit's workers would run them (`-j` > 1: a child's pipes are this process's),
    or the caller brought its own (`watch`)."""
    from ..plan.graph import run_targets
    from ..plan.program import program

    here = run.in_process
    if jobs != 1 or (here is not None and here.ahead is not None):
        return None
    found = surely_run([(program(graph, t.rel), t.name) for t in run_targets(graph)], tasks, force)
    if not found:
        return None
    return RunAhead(found, run.config, quiet=run.quiet, start=here.start if here is not None else None,
                    timing_runs=here.timing_runs if here is not None else 1)


def surely_run(programs: Iterable[tuple[Program, str]], tasks: Iterable[str], force: Iterable[str]) -> list[Wanted]:
    """The runs a request will make whatever the state says, in task order: every selected `replay:` task, and
    the `validate:` tasks when validation is forced. `programs`: each run target's program and task name;
    `tasks`: the request's task names (a basename selects all of its stage's tasks)."""
    from ..core import stages

    tasks = list(tasks)
    forced = stages.prefix(stages.VALIDATE) in tuple(force)
    found = []
    for stage, validating in ((stages.REPLAY, False), (stages.VALIDATE, True)):
        if validating and not forced:
            continue
        for program, name in programs:
            if stage in tasks or stages.task(stage, name) in tasks:
                found.append(Wanted(program, validating))
    return found
