"""doit's commands on a build directory: `run`, `list`, `info`, `forget`, ... (`pypto-build doit <cmd> DIR`).

Every command runs with the build root as working directory (state keys are
relative paths, so copies of a directory keep their state), under the
directory lock, with the content dependency manager and the xxhash checker;
bad input is one line. `BuildDirMain` offers them as `pypto-build doit <cmd> DIR`.
"""
from __future__ import annotations

import functools

from doit.cmd_clean import Clean
from doit.cmd_forget import Forget
from doit.cmd_help import Help
from doit.cmd_ignore import Ignore
from doit.cmd_info import Info
from doit.cmd_list import List
from doit.cmd_resetdep import ResetDep
from doit.cmd_run import Run
from doit.doit_cmd import DoitMain
from doit.runner import ERROR as TASK_RAISED

from ..errors import FAILED
from ..exits import OneLineOptions, guarded
from . import noop
from .loader import BuildDirLoader, opt_recompile
from .session import force_rebuilds, locked, planned
from .workers import supervise


class BuildDirCommand(OneLineOptions):
    """Mixin for doit commands: build root as cwd, directory lock, content state (`session.planned` /
    `session.locked`, shared with the build's own run), and, inside doit's command line, what stops it said
    as every front end says it, with its exit status (`exits.guarded`)."""

    adopts = False      # commands that build adopt generated outputs on first sight

    def execute(self, params, args):
        if not isinstance(self.loader, BuildDirLoader):
            self.loader = BuildDirLoader()
        return guarded(lambda: planned(self.loader, params, lambda: self._execute_locked(params, args)))

    def _execute_locked(self, params, args):
        with locked(self.loader, self.adopts) as self.dep_manager:
            rc = supervise(functools.partial(super().execute, params, args),
                           watch=bool(params.get("num_process")), where=str(self.loader.root))
            if rc == 0 and self.adopts and not args:
                noop.record_graph(self.loader.graph, self.task_list)
            return FAILED if rc == TASK_RAISED else rc     # a task that raised is a failed unit, not bad input


class BuildDirRun(BuildDirCommand, Run):
    """`run`: build (part of) the graph (`pypto-build doit run DIR`; build, replay, validate and the API run
    the same through `session.run_build`)."""

    name = "run"
    adopts = True
    cmd_options = Run.cmd_options + (opt_recompile,)

    def __init__(self, task_loader=None, **kwargs):
        kwargs["config"] = {}       # a build directory is data: its doit.cfg / pyproject.toml are not read
        super().__init__(task_loader=task_loader, **kwargs)

    def _execute(self, outfile, verbosity=None, always=False, continue_=False, reporter="console",
                 num_process=0, par_type="process", single=False, auto_delayed_regex=False,
                 force_verbosity=False, failure_verbosity=0, pdb=False, recompile=False):
        force_rebuilds(self.dep_manager, self.loader, recompile)
        return super()._execute(outfile, verbosity=verbosity, always=always, continue_=continue_,
                                reporter=reporter, num_process=num_process, par_type=par_type,
                                single=single, auto_delayed_regex=auto_delayed_regex,
                                force_verbosity=force_verbosity, failure_verbosity=failure_verbosity,
                                pdb=pdb)


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
