"""`BuildDirLoader`: a build directory as doit tasks (no dodo.py), with the state and checker we use.

It is given the graph, caches and run settings of the one pipeline (`pipeline.run`), or,
under doit's own commands, plans them from their option values through the same
`options.Request` (`options.request`: the pipeline's first two stages), then says what
that planning has to tell (`Graph.notices`); it hands doit the task dicts of the stages it is given
(`engine/tasks.py`; default the build's table). The commands that use it are in `engine/commands.py`. What a
command leaves for the next run besides doit's state (the no-op record, the compiler's answers, digests,
header sets) is the pipeline's: it hands its `Bookkeeping` here, and the commands call them under the directory
lock; the engine keeps no record of its own.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from doit.exceptions import InvalidCommand
from doit.loader import generate_tasks

from .. import options
from ..cache import Caches
from ..errors import PyptoBuildError
from ..plan.graph import Graph
from ..builddir.state_dir import STATE_DB, state_folder
from ..builddir.layout import find_root
from ..builddir.runconfig import RunSpec
from .file_checker import XXHChecker
from ..core.stage_seam import forced_why
from .reporter import BuildReporter
from .tasks import build_stages, default_tasks, task_dicts

if TYPE_CHECKING:
    from ..core.stage_seam import Stage


class Bookkeeping(Protocol):
    """What the pipeline keeps around a doit command on the directory (`pipeline.Bookkeeping`), called under the
    directory lock."""

    def before(self, root: Path, platform: str) -> str | None:
        """Every command, before anything can change the state (nothing of the run is written yet), for the
        state of `platform`; a line to say (None: nothing)."""

    def after(self, graph: Graph, tasks: list | None) -> None:
        """A command that builds, once it ended without raising; `tasks`: doit's tasks when the run was whole
        and clean (every default task, none failed), else None."""


opt_recompile, = options.doit_options(tuple(o for o in options.BUILD if o.dest == "recompile"))
GRAPH_OPTIONS = ("platform", "no_rebuild_from_pto", "ptoas", "allow_unapplied_pto", "include_stale", "cache_dir",
                 "remote_cache")


class BuildDirLoader:
    """Loads the task graph of one build directory.

    doit's task-loader interface (`doit.cmd_base.TaskLoader2`: `API`, `cmd_names`, `config`,
    `task_opts`, `setup`, `load_doit_config`, `load_tasks`) without subclassing it: `cmd_base`
    brings doit's command layer and plugin loading, which a build (`commands.run_build`) never uses.
    """

    API = 2
    cmd_options = (options.DOIT_DIR, *options.doit_options(tuple(o for o in options.BUILD if o.dest in GRAPH_OPTIONS)))

    def __init__(self, root: Path | None = None, *, graph: Graph | None = None, caches: Caches | None = None,
                 run: RunSpec | None = None, reporter: object = None, quiet: bool = False,
                 force: tuple[str, ...] = (), bookkeeping: Bookkeeping | None = None, progress: TextIO | None = None,
                 stages: tuple[Stage, ...] | None = None):
        self.cmd_names: list[str] = []           # set by doit's command layer (`pypto-build doit ...`)
        self.config: dict | None = None
        self.task_opts: dict | None = None
        self.root = Path(root).resolve() if root else None
        self.graph = graph
        self.given = graph is not None              # planned by the pipeline (which says its notices), not here
        self.caches = caches or Caches()
        self.run = run
        self.reporter = reporter
        self.quiet = quiet
        self.force = force                         # task-name prefixes that run whatever their state says
        self.bookkeeping = bookkeeping             # the pipeline's bookkeeping around a command; None: none
        self.progress = progress                   # where the engine's own notices go (None: stdout)
        self.values: dict = {}
        self.stages = build_stages() if stages is None else stages      # what the graph is assembled from

    def forced(self) -> dict[str, str]:
        """The task-name prefixes the run forces, each with its stage's words for why (`Stage.forced`)."""
        return forced_why(self.stages, self.force)

    def setup(self, opt_values):
        if self.root is None:
            self.root = find_root(Path(opt_values.get("build_dir") or os.getcwd()))
        if self.graph is None:
            self.values = dict(opt_values)

    @property
    def dep_file(self) -> Path:
        """The doit state of the planned graph's platform (each platform's is its own: state_dir.state_folder)."""
        return self.root / state_folder(self.plan().platform.name) / STATE_DB

    def load_doit_config(self):
        return {"check_file_uptodate": XXHChecker, "backend": "sqlite3", "dep_file": str(self.dep_file),
                "default_tasks": default_tasks(self.stages), "reporter": self.reporter or BuildReporter}

    def plan(self) -> Graph:
        """The graph, planned once from doit's option values when none was given (bad input: a UserError)."""
        if self.graph is None:
            request = options.request(self.values)
            self.graph, self.caches, self.run = request.plan(self.root), request.caches(), request.run
        return self.graph

    def load_tasks(self, cmd, pos_args):
        try:
            self.plan()
        except PyptoBuildError as exc:
            raise InvalidCommand(str(exc)) from None
        if not self.quiet and not self.given:        # the pipeline says a graph's notices it plans itself
            out, err = self.graph.notices()
            for line in out:
                print(line)
            for line in err:
                print(line, file=sys.stderr)
        tasks = []
        for base, dicts in task_dicts(self.graph, self.caches, self.run, self.stages).items():
            tasks.extend(generate_tasks(base, (d for d in dicts), f"{base} units of {self.root.name}"))
        return tasks
