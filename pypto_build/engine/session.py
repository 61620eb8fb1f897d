"""One run of doit on a build directory: planned first, under the lock, in the root, on our state.

`planned` and `locked` are what every doit command on a build directory shares
(`commands.BuildDirCommand`: `pypto-build doit ...` and `run_build`, the engine
stage of the one pipeline, `pipeline.run`); `answer_read_only` answers a run on
a directory it cannot write when nothing needs to run (the build's own dry run says so).
"""
from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator

from doit.control import TaskControl
from doit.exceptions import InvalidCommand
from doit.globals import Globals

from ..errors import UserError, one_line
from ..builddir.state_dir import STATE_DIR
from ..core.oserrors import run_failure
from .depstate import ContentDependency
from .loader import BuildDirLoader
from .lock import NotWritable, dir_lock, sigterm_as_interrupt
from .reporter import BuildReporter
from .statedb import open_state
from .tasks import default_tasks
from .workers import install_fork_hooks


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
    """The directory lock, the root as working directory, SIGTERM as an interrupt, the pipeline's
    `bookkeeping.before` first (its no-op record removed: the state is about to change, or be read by doit;
    the state of before taken over for the graph's platform: the line it returns is said) and the platform's
    state opened (`adopts`: a build). What the run leaves besides is the caller's (`bookkeeping.after`)."""
    root = loader.root
    install_fork_hooks()            # a process forked while the lock is held is a doit worker (workers.py)
    with dir_lock(root / STATE_DIR, quiet=loader.quiet), contextlib.chdir(root), sigterm_as_interrupt():
        said = loader.bookkeeping.before(root, loader.graph.platform.name) if loader.bookkeeping is not None else None
        if said and not loader.quiet:
            print(said, file=loader.progress, flush=True)      # the caller's stream (None: stdout)
        yield open_state(loader.dep_file, adopts, force=loader.forced())


def answer_read_only(loader: BuildDirLoader, tasks: list[str], refused: NotWritable, recompile: bool = False) -> int:
    """A run on a directory it cannot write: when nothing needs to run, what the run would say (every task up
    to date, a kept verdict), read from the state without writing anything, status 0; else `refused`, naming
    the first task that would have to run and why (`recompile`: every compile unit would). Decided by the
    build's own dry run (`explanation.dry_run`), forced as the build is (`forcing.force_rebuilds`)."""
    from .explanation import dry_run, read_only_state      # a read-only directory only
    from .forcing import force_rebuilds

    task_list = loader.load_tasks(None, tasks)
    control = TaskControl(task_list)
    control.process(tasks or default_tasks(loader.stages))     # task names as a run takes them (unknown: one line)
    with read_only_state(loader.root, loader.plan().platform.name, force=loader.forced()) as dep:
        if dep is not None:
            force_rebuilds(dep, loader.root, loader.graph.compile_tasks, recompile)
        found = dry_run(task_list, control.selected_tasks, dep, loader.stages)
        for e in found.values():
            if e.status == "error":
                raise UserError(e.reason)
            if e.status == "run":
                raise refused.needing(e.task, e.reason)
        Globals.dep_manager = dep
        reporter = loader.reporter if loader.reporter is not None else BuildReporter(stages=loader.stages)
        reporter.initialize(control.tasks, control.selected_tasks)
        for e in found.values():
            (reporter.skip_uptodate if e.status == "up-to-date" else reporter.skip_ignore)(control.tasks[e.task])
        reporter.complete_run()
    return 0
