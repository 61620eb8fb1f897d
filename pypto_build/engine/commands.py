"""doit's commands on a build directory: `run`, `list`, `info`, `forget`, ... (`pypto-build doit <cmd> DIR`).

Every command runs with the build root as working directory (state keys are
relative paths, so copies of a directory keep their state), under the
directory lock, with the content dependency manager and the xxhash checker;
bad input is one line. `BuildDirMain` offers them as `pypto-build doit <cmd> DIR`;
`run_build` is the run build / replay / validate and the API make: doit's own
`run` command (`BuildDirRun`), given the options a build asks for.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

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
from .session import answer_read_only, locked, planned
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
                kept = self.loader.after_whole_build
                if rc == 0 and self.adopts and not args and kept is not None:
                    kept(self.loader.graph, self.task_list)     # the pipeline's records, still under the lock
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
    """`run`: build (part of) the graph (`pypto-build doit run DIR`; build, replay, validate and the API run
    the same through `run_build`)."""

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
    """doit's own commands on a build directory's graph (no dodo.py, no config files)."""

    BIN_NAME = "pypto-build doit"
    DOIT_CMDS = (Help, BuildDirRun, BuildDirList, BuildDirInfo, BuildDirClean, BuildDirForget,
                 BuildDirIgnore, BuildDirResetDep)

    def __init__(self, loader: BuildDirLoader):
        super().__init__(loader, config_filenames=())

    def get_cmds(self):
        # Only our commands: a plugin elsewhere must not replace them.
        from doit.plugin import PluginDict
        cmds = PluginDict()
        for cls in self.DOIT_CMDS:
            cmds[cls.get_name()] = cls
        return cmds


def run_build(loader: BuildDirLoader, tasks: list[str] | None = None, *, jobs: int = 1, recompile: bool = False,
              keep_going: bool = False) -> int:
    """Build `tasks` (default: every stamp) of the loader's graph with doit's `run` command: the engine stage
    of the one pipeline. Its exit status (0, or 1: a task failed or raised); bad input, a failed write of
    the run and anything that stops doit itself are raised (errors.py says each).

    `jobs` > 1 runs that many doit worker processes (`-n`); `recompile` marks every compile stale (kept
    until each has run); `keep_going` goes on past a failed task (`--continue`). After a full clean build
    the loader's `after_whole_build` runs (the pipeline's records), still under the lock. doit's `run` gets its
    options' defaults with these values set, and the task names as its arguments (no argv to parse again).
    """
    command = BuildDirRun(task_loader=loader, bin_name=BuildDirMain.BIN_NAME)
    command.raises = True
    params, _ = command.cmdparser.parse([])          # doit's defaults for `run`, then what this build asks
    params["num_process"], params["continue"], params["recompile"] = jobs if jobs > 1 else 0, keep_going, recompile
    return command.execute(params, list(tasks or []))
