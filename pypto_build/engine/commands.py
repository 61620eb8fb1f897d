"""doit's commands on a build directory: `run`, `list`, `info`, `forget`, ... (`pypto-build doit <cmd> DIR`).

Every command runs with the build root as working directory (state keys are
relative paths, so copies of a directory keep their state), under the
directory lock, with the content dependency manager and the xxhash checker,
and with the pipeline's `bookkeeping` around it (the loader's); bad input is one
line. `BuildDirMain` offers them as `pypto-build doit <cmd> DIR` (its `run`: the
one it is given, the pipeline's); `run_build` is the run of the one pipeline
(build, replay, validate, the API, `pypto-build doit run`): doit's own `run`
command (`BuildDirRun`), given the values a build asks for.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from typing import Any

from doit.cmd_clean import Clean
from doit.cmd_forget import Forget
from doit.cmd_help import Help
from doit.cmd_ignore import Ignore
from doit.cmd_info import Info
from doit.cmd_list import List
from doit.cmd_resetdep import ResetDep
from doit.cmd_run import Run
from doit.doit_cmd import DoitMain
from doit import reporter as doit_reporters
from doit.runner import ERROR as TASK_RAISED

from ..toolchain import local_slots
from ..errors import FAILED
from ..core.exits import OneLineOptions, guarded
from ..toolchain.launcher import local_jobs
from .loader import BuildDirLoader, opt_recompile
from .lock import NotWritable
from .forcing import force_rebuilds
from .reporter import BuildReporter
from .session import answer_read_only, locked, planned
from .shown import shown
from .sqlitedb import StateDB
from .workers import supervise


class BuildDirCommand(OneLineOptions):
    """Mixin for doit commands: build root as cwd, directory lock, content state (`session.planned` /
    `session.locked`, shared with the build's own run), and, inside doit's command line, what stops it said
    as every front end says it, with its exit status (`exits.guarded`)."""

    adopts = False      # commands that build adopt generated outputs on first sight
    raises = False      # the pipeline's own run (`run_build`): what stops it is raised to its front end

    def get_backends(self):
        """The state is ours (`locked` hands every command its dependency manager, on `sqlitedb.StateDB`):
        no backend, doit's or a plugin's, is looked up (a look-up reads every installed package's entry
        points: ~7 ms)."""
        return {"sqlite3": StateDB}

    def execute(self, params, args):
        if not isinstance(self.loader, BuildDirLoader):
            self.loader = BuildDirLoader()
        def body() -> int:
            return planned(self.loader, params, lambda: self._execute_locked(params, args))
        return body() if self.raises else guarded(body)

    def _execute_locked(self, params, args):
        try:
            with locked(self.loader, self.adopts) as self.dep_manager, self.around_run(params):
                rc = supervise(functools.partial(super().execute, params, args),
                               watch=bool(params.get("num_process")), where=str(self.loader.root))
                kept = self.loader.bookkeeping
                if self.adopts and kept is not None:     # the pipeline's bookkeeping, still under the lock
                    kept.after(self.loader.graph, self.task_list if rc == 0 and not args else None)
                return FAILED if rc == TASK_RAISED else rc     # a task that raised is a failed unit, not bad input
        except NotWritable as refused:          # raised taking the lock: nothing was written
            return self.read_only(params, args, refused)

    def around_run(self, params) -> contextlib.AbstractContextManager:
        """What the command sets up around doit's own execution, on the open state (a build: `BuildDirRun`)."""
        return contextlib.nullcontext()

    def read_only(self, params, args, refused: NotWritable) -> int:
        """The directory cannot be written: say so (a command that builds may still answer)."""
        raise refused


class BuildDirRun(BuildDirCommand, Run):
    """`run`: build (part of) the graph — the engine stage of the pipeline (`run_build`); `pypto-build doit run`
    is the pipeline's run, a subclass with these options and help (cli/doit_commands.py)."""

    name = "run"
    adopts = True
    cmd_options = Run.cmd_options + (opt_recompile,)

    def __init__(self, task_loader=None, **kwargs):
        kwargs["config"] = {}       # a build directory is data: its doit.cfg / pyproject.toml are not read
        super().__init__(task_loader=task_loader, **kwargs)

    def get_reporters(self):
        """doit's own reporters for `--reporter` (the default is ours, `BuildReporter`, from the loader's
        config); no plugin's is looked up, as `BuildDirMain.get_cmds` looks up no command."""
        reporters = {"console": doit_reporters.ConsoleReporter, "executed-only": doit_reporters.ExecutedOnlyReporter,
                     "json": doit_reporters.JsonReporter, "zero": doit_reporters.ZeroReporter,
                     "error-only": doit_reporters.ErrorOnlyReporter}
        self.cmdparser["reporter"].choices = {name: cls.desc for name, cls in reporters.items()}
        return reporters

    @contextlib.contextmanager
    def around_run(self, params) -> Iterator[None]:
        """`--recompile` (or an `invalidate_binary_cache()` mark) applied to the state, once (`force_rebuilds`);
        with a launcher, -n counts compiles that may run elsewhere: the local work gets this machine's CPUs (the
        workers fork after this and inherit the limit)."""
        graph = self.loader.graph
        force_rebuilds(self.dep_manager, self.loader.root, graph.compile_tasks, bool(params.get("recompile")))
        distributed = graph.launcher is not None and (params.get("num_process") or 0) > local_jobs()
        previous = local_slots.configure(local_jobs()) if distributed else None
        try:
            yield
        finally:
            if previous is not None:
                local_slots.configure(previous)

    def read_only(self, params, args, refused: NotWritable) -> int:
        """Nothing to run on a directory it cannot write: answered from the state, writing nothing
        (`session.answer_read_only`); else `refused`, naming what would have to run."""
        return answer_read_only(self.loader, list(args), refused, bool(params.get("recompile")))


class BuildDirList(BuildDirCommand, List):
    name = "list"


class BuildDirInfo(BuildDirCommand, Info):
    name = "info"


class BuildDirForget(BuildDirCommand, Forget):
    name = "forget"


class BuildDirClean(BuildDirCommand, Clean):
    name = "clean"


class BuildDirIgnore(BuildDirCommand, Ignore):
    name = "ignore"


class BuildDirResetDep(BuildDirCommand, ResetDep):
    name = "reset-dep"


class BuildDirMain(DoitMain):
    """doit's own commands on a build directory's graph (no dodo.py, no config files); `run` is the one given,
    a `BuildDirRun` that builds through the pipeline (`pypto-build doit run`: cli/doit_commands.py)."""

    BIN_NAME = "pypto-build doit"
    DOIT_CMDS = (Help, BuildDirList, BuildDirInfo, BuildDirClean, BuildDirForget, BuildDirIgnore, BuildDirResetDep)

    def __init__(self, loader: BuildDirLoader, *, run: type[BuildDirRun]):
        super().__init__(loader, config_filenames=())
        self.commands = (self.DOIT_CMDS[0], run, *self.DOIT_CMDS[1:])

    def get_cmds(self):
        # Only our commands: a plugin elsewhere must not replace them.
        from doit.plugin import PluginDict
        cmds = PluginDict()
        for cls in self.commands:
            cmds[cls.get_name()] = cls
        return cmds


DOIT_ONLY = tuple(o["name"] for o in Run.cmd_options if o["name"] not in ("num_process", "continue"))
"""doit's own `run` options a build has no word for (`--reporter`, `--verbosity`, `--always-execute`, ...):
`pypto-build doit run` hands them to `run_build` as given (`options.Request.doit`)."""


def run_build(loader: BuildDirLoader, tasks: list[str] | None = None, *, jobs: int = 1, recompile: bool = False,
              keep_going: bool = False, doit: Iterable[tuple[str, Any]] = ()) -> int:
    """Build `tasks` (default: every stamp) of the loader's graph with doit's `run` command: the engine stage
    of the one pipeline. Its exit status (0, or 1: a task failed or raised); bad input, a failed write of
    the run and anything that stops doit itself are raised (errors.py says each).

    `jobs` > 1 runs that many doit worker processes (`-n`); `recompile` marks every compile stale (kept
    until each has run); `keep_going` goes on past a failed task (`--continue`); `doit`: doit's own options of
    `DOIT_ONLY` as `pypto-build doit run` was given them (a reporter named: it shows the run, the loader's
    still hears every event: `shown`). Around the run the loader's `bookkeeping` (the pipeline's) are called,
    under the lock. doit's `run` gets its options' defaults with these values set, and the task names as its
    arguments (no argv to parse again).
    """
    command = BuildDirRun(task_loader=loader, bin_name=BuildDirMain.BIN_NAME)
    command.raises = True
    params, _ = command.cmdparser.parse([])          # doit's defaults for `run`, then what this build asks
    params["num_process"], params["continue"], params["recompile"] = jobs if jobs > 1 else 0, keep_going, recompile
    given = dict(doit)
    for name, value in given.items():
        params[name] = value
    with shown(given, params, command.reporters, loader.reporter, BuildReporter):
        return command.execute(params, list(tasks or []))
