"""One run of doit on a build directory: planned first, under the lock, in the root, on our state.

`planned` and `locked` are what every run on a build directory shares (doit's own
commands too: `commands.BuildDirCommand`, `pypto-build doit ...`);
`run_build` is the engine stage of the one pipeline (`pipeline.run`): doit's task
control and runner driven directly — what doit's `run` command does with the
values the pipeline would have put on its command line (`-n`, `--continue`,
`--recompile`, task names) — so a build never imports doit's command layer,
its option parser or its plugin loading (`doit_core.py`).
"""
from __future__ import annotations

import contextlib
import functools
import sqlite3
import sys
from collections.abc import Callable, Iterator

from doit.control import TaskControl
from doit.exceptions import InvalidCommand
from doit.globals import Globals
from doit.runner import MRunner, MThreadRunner, Runner
from doit.task import Stream

from .. import hashing, invalidation, local_slots, search_dirs
from ..errors import UserError, one_line
from ..launcher import local_jobs
from ..markers import STATE_DIR
from ..oserrors import run_failure
from . import noop
from .depstate import ContentDependency
from .doit_core import realize
from .loader import BuildDirLoader
from .explanation import evaluate, read_only_state
from .lock import NotWritable, dir_lock, sigterm_as_interrupt
from .reporter import BuildReporter
from .statedb import open_state, take_over
from .tasks import DEFAULT_TASKS
from .workers import supervise


def planned(loader: BuildDirLoader, params, body: Callable[[], int]) -> int:
    """Plan (bad input is refused before anything is written), then `body()`. What stops it is raised in
    the error tree's words: an unknown task name, a failed write of the run itself, one line each."""
    try:
        loader.setup(params)
        loader.plan()
        try:
            return body()
        except (OSError, sqlite3.Error) as exc:     # a write of the run itself (full disk, ...): one line
            raise run_failure(loader.dep_file, exc) from None
    except InvalidCommand as exc:
        raise UserError(f"{loader.root}: no task or target named {exc.not_found!r}; see them with `pypto-build "
                        f"doit list --all {loader.root}`" if exc.not_found else one_line(exc)) from None


@contextlib.contextmanager
def locked(loader: BuildDirLoader, adopts: bool) -> Iterator[ContentDependency]:
    """The directory lock, the root as working directory, SIGTERM as an interrupt, the no-op record
    removed (the state is about to change, or be read by doit), the state of before taken over for the
    graph's platform (`statedb.take_over`) and the platform's state opened (`adopts`: a build,
    which also keeps the compiler's answers planning asked for, `search_dirs`, and the digests of files
    outside the directory, `hashing.keep`)."""
    root = loader.root
    with dir_lock(root / STATE_DIR, quiet=loader.quiet), contextlib.chdir(root), sigterm_as_interrupt():
        noop.invalidate(root)
        moved = take_over(root, loader.graph.platform.name)
        if moved and not loader.quiet:
            print(moved, flush=True)
        yield open_state(loader.dep_file, adopts, force=loader.force)
        if adopts:
            search_dirs.save(root)
            hashing.keep(root)


def run_build(loader: BuildDirLoader, tasks: list[str] | None = None, *, jobs: int = 1, recompile: bool = False,
              keep_going: bool = False) -> int:
    """Build `tasks` (default: every stamp) of the loader's graph; doit's exit status (0, or 1 / 2: a task
    failed / raised). Bad input and a failed write of the run are raised (errors.py), as is anything that
    stops doit itself.

    `jobs` > 1 runs that many doit worker processes; `recompile` marks every compile stale (kept
    until each has run); `keep_going` goes on past a failed task. After a full clean build the
    no-op record is written.
    """
    def body() -> int:
        try:
            with locked(loader, adopts=True) as dep:
                run = functools.partial(_run, loader, dep, list(tasks or []), jobs, recompile, keep_going)
                rc, task_list = supervise(run, watch=jobs > 1, where=str(loader.root))
                if rc == 0 and not tasks:
                    noop.record_graph(loader.graph, task_list)
                return rc
        except NotWritable as refused:          # raised taking the lock: nothing was written
            if recompile or invalidation.pending(loader.root) is not None:
                raise
            return _answer_read_only(loader, list(tasks or []), refused)

    return planned(loader, {}, body)


def force_rebuilds(dep: ContentDependency, loader: BuildDirLoader, recompile: bool) -> None:
    """`--recompile`, or an `invalidate_binary_cache()` mark: every compile unit stale until it next succeeds.

    Persistent: the forcing is kept in the state, so an interrupted or failed build still rebuilds the rest
    next time. The mark is removed only once that state is committed (under the directory lock).
    """
    why = "--recompile" if recompile else None
    mark = invalidation.pending(loader.root)
    if why is None and mark is None:
        return
    for name in loader.graph.compile_tasks:
        dep.mark_forced(name, why or mark)
    if mark is not None and dep.commit():
        invalidation.clear(loader.root)


def _answer_read_only(loader: BuildDirLoader, tasks: list[str], refused: NotWritable) -> int:
    """A run on a directory it cannot write: when nothing needs to run, what the run would say (every task up
    to date, a kept verdict), read from the state without writing anything, status 0; else `refused`, naming
    the first task that would have to run and why."""
    task_list = loader.load_tasks(None, tasks)
    control = TaskControl(task_list)
    control.process(tasks or list(DEFAULT_TASKS))        # task names as a run takes them (unknown: one line)
    by_name = control.tasks
    wanted, todo = {}, list(control.selected_tasks)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted[name] = by_name[name]
            todo.extend(by_name[name].task_dep)
    with read_only_state(loader.root, loader.plan().platform.name, force=loader.force) as dep:
        found = evaluate(dep, [t for t in wanted.values() if t.actions], by_name)
        for e in found.values():
            if e.status == "error":
                raise UserError(e.reason)
            if e.status != "up-to-date":
                raise refused.needing(e.task, e.reason)
        Globals.dep_manager = dep
        reporter = loader.reporter if loader.reporter is not None else BuildReporter()
        reporter.initialize(by_name, control.selected_tasks)
        for name in found:
            reporter.skip_uptodate(by_name[name])
        reporter.complete_run()
    return 0


def _run(loader: BuildDirLoader, dep: ContentDependency, tasks: list[str], jobs: int, recompile: bool,
         keep_going: bool) -> tuple[int, list]:
    """doit's `run` command (cmd_run.Run._execute) with the values a build gives it."""
    Globals.dep_manager = dep
    task_list = loader.load_tasks(None, tasks)
    force_rebuilds(dep, loader, recompile)
    control = TaskControl(task_list)
    control.process(tasks or list(DEFAULT_TASKS))
    stream = Stream(None, False)
    reporter = loader.reporter if loader.reporter is not None else BuildReporter()
    if jobs > 1:
        realize("multiprocessing")      # deferred for one-process builds (doit_core): the workers need it whole
        runner_class = MRunner if MRunner.available() else MThreadRunner
        if runner_class is MThreadRunner:
            sys.stderr.write("WARNING: multiprocessing module not available, running in parallel using threads.")
        runner = runner_class(dep, reporter, keep_going, False, stream, jobs)
    else:
        runner = Runner(dep, reporter, keep_going, False, stream)
    # With a launcher, -j counts compiles that may run elsewhere: the local work gets this machine's CPUs
    # (the workers fork after this and inherit the limit).
    distributed = loader.graph.launcher is not None and jobs > local_jobs()
    previous = local_slots.configure(local_jobs()) if distributed else None
    try:
        return runner.run_all(control.task_dispatcher()), task_list
    finally:
        if previous is not None:
            local_slots.configure(previous)
