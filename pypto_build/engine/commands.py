"""doit's commands on a build directory: `run` (what build/replay/validate use), `list`, `info`, `forget`, ...

Every command runs with the build root as working directory (state keys are
relative paths, so copies of a directory keep their state), under the
directory lock, with the content dependency manager and the xxhash checker;
bad input is one line. `BuildDirMain` offers them as `pypto-build doit <cmd> DIR`.
"""
from __future__ import annotations

import contextlib
import functools
import sqlite3

from doit.cmd_clean import Clean
from doit.cmd_forget import Forget
from doit.cmd_help import Help
from doit.cmd_ignore import Ignore
from doit.cmd_info import Info
from doit.cmd_list import List
from doit.cmd_resetdep import ResetDep
from doit.cmd_run import Run
from doit.doit_cmd import DoitMain
from doit.exceptions import InvalidCommand

from ..errors import PyptoBuildError, error, interrupted, one_line
from ..markers import STATE_DIR
from ..oserrors import run_failure
from . import noop
from .loader import BuildDirLoader, opt_recompile
from .lock import dir_lock, sigterm_as_interrupt
from .statedb import open_state
from .workers import exit_now, supervise


class BuildDirCommand:
    """Mixin for doit commands: build root as cwd, directory lock, content state, one-line errors."""

    adopts = False      # commands that build adopt generated outputs on first sight

    def execute(self, params, args):
        if not isinstance(self.loader, BuildDirLoader):
            self.loader = BuildDirLoader()
        try:
            self.loader.setup(params)
            self.loader.plan()                  # bad input is refused before anything is written
            try:
                return self._execute_locked(params, args)
            except (OSError, sqlite3.Error) as exc:     # a write of the run itself (full disk, ...): one line
                raise run_failure(self.loader.dep_file, exc) from None
        except PyptoBuildError as exc:
            if self.loader.keep_errors:         # a library caller raises it
                self.loader.error = exc
                return 3
            error(exc)
            return 2
        except KeyboardInterrupt:
            if self.loader.keep_errors:         # a library caller handles its own interrupts
                raise
            interrupted()
            exit_now(130)
        except InvalidCommand as exc:
            refused = PyptoBuildError(
                f"{self.loader.root}: no task or target named {exc.not_found!r}; see them with `pypto-build doit "
                f"list --all {self.loader.root}`" if exc.not_found else one_line(exc))
            if not self.loader.keep_errors:
                error(refused)
                return 2
            self.loader.error = refused
            return 3

    def _execute_locked(self, params, args):
        root = self.loader.root
        state = root / STATE_DIR
        with dir_lock(state, quiet=self.loader.quiet), contextlib.chdir(root), sigterm_as_interrupt():
            noop.invalidate(root)          # the state is about to change (or be read by doit)
            self.dep_manager = open_state(self.loader.dep_file, self.adopts, force=self.loader.force)
            rc = supervise(functools.partial(super().execute, params, args),
                           watch=bool(params.get("num_process")), where=str(root))
            if rc == 0 and self.adopts and not args:
                noop.record_graph(self.loader.graph, self.task_list)
            return rc


class BuildDirRun(BuildDirCommand, Run):
    """`run`: build (part of) the graph; what `pypto-build build/replay/validate` and the API use."""

    name = "run"
    adopts = True
    cmd_options = Run.cmd_options + (opt_recompile,)

    def __init__(self, task_loader=None, **kwargs):
        kwargs["config"] = {}       # a build directory is data: its doit.cfg / pyproject.toml are not read
        super().__init__(task_loader=task_loader, **kwargs)

    def _execute(self, outfile, verbosity=None, always=False, continue_=False, reporter="console",
                 num_process=0, par_type="process", single=False, auto_delayed_regex=False,
                 force_verbosity=False, failure_verbosity=0, pdb=False, recompile=False):
        if recompile:
            # Persistent: an interrupted --recompile still rebuilds the rest next time.
            for name in self.loader.graph.compile_tasks:
                self.dep_manager.mark_forced(name, "--recompile")
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
