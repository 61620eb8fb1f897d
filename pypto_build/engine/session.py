"""One run of doit on a build directory: planned first, under the lock, in the root, on our state.

`planned` and `locked` are what every doit command on a build directory shares
(`commands.BuildDirCommand`: `pypto-build doit ...` and `run_build`, the engine
stage of the one pipeline, `pipeline.run`); `force_rebuilds` is `--recompile`;
`answer_read_only` answers a run on a directory it cannot write when nothing
needs to run.
"""
from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator

from doit.control import TaskControl
from doit.exceptions import InvalidCommand
from doit.globals import Globals

from ..core import hashing
from ..plan import invalidation
from ..toolchain import search_dirs
from ..errors import UserError, one_line
from ..builddir.state_dir import STATE_DIR
from ..core.oserrors import run_failure
from ..plan import noop
from .depstate import ContentDependency
from .loader import BuildDirLoader
from .lock import NotWritable, dir_lock, sigterm_as_interrupt
from .reporter import BuildReporter
from .statedb import open_state, take_over
from ..compile.stage import DEFAULT_TASKS
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
    """The directory lock, the root as working directory, SIGTERM as an interrupt, the no-op record
    removed (the state is about to change, or be read by doit), the state of before taken over for the
    graph's platform (`statedb.take_over`) and the platform's state opened (`adopts`: a build,
    which also keeps the compiler's answers planning asked for, `search_dirs`, and the digests of files
    outside the directory, `hashing.keep`)."""
    root = loader.root
    install_fork_hooks()            # a process forked while the lock is held is a doit worker (workers.py)
    with dir_lock(root / STATE_DIR, quiet=loader.quiet), contextlib.chdir(root), sigterm_as_interrupt():
        noop.invalidate(root)
        moved = take_over(root, loader.graph.platform.name)
        if moved and not loader.quiet:
            print(moved, flush=True)
        yield open_state(loader.dep_file, adopts, force=loader.force)
        if adopts:
            search_dirs.save(root)
            hashing.keep(root, root / STATE_DIR)


def force_rebuilds(dep: ContentDependency, loader: BuildDirLoader, recompile: bool) -> None:
    """`--recompile`, or an `invalidate_binary_cache()` mark: every compile unit stale until it next succeeds.

    Persistent: the forcing is kept in the state, so an interrupted or failed build still rebuilds the rest
    next time. The mark is removed only once that state is committed (under the directory lock).
    """
    why = invalidation.forcing(loader.root, recompile)
    if why is None:
        return
    for name in loader.graph.compile_tasks:
        dep.mark_forced(name, why)
    if invalidation.pending(loader.root) is not None and dep.commit():      # the mark is in the state now
        invalidation.clear(loader.root)


def answer_read_only(loader: BuildDirLoader, tasks: list[str], refused: NotWritable) -> int:
    """A run on a directory it cannot write: when nothing needs to run, what the run would say (every task up
    to date, a kept verdict), read from the state without writing anything, status 0; else `refused`, naming
    the first task that would have to run and why."""
    from .explanation import evaluate, read_only_state      # a read-only directory only

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
