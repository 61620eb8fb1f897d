"""doit glue: the build-directory task loader and the doit commands.

* `BuildDirLoader` turns a build directory into doit tasks (no dodo.py).
* `Build` is the `doit build` plugin command (entry point `doit.COMMAND`).
* `BuildDirMain` runs any doit command (`list`, `info`, `forget`, `clean`, ...)
  on a build directory's graph: `pypto-build doit <cmd> DIR`.

Every command runs with the build root as working directory (state keys are
relative paths, so copies of a directory keep their state), under the
directory lock, with the content dependency manager and the xxhash checker.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from doit.cmd_base import TaskLoader2
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
from doit.loader import generate_tasks

from ..filestate import XXHChecker
from ..errors import PyptoBuildError, one_line
from ..graph import DEFAULT_TASKS, Graph, build_graph, task_dicts
from ..layout import load_layout
from ..markers import STATE_DIR, find_root
from .lock import dir_lock, sigterm_as_interrupt
from .workers import exit_now, supervise
from .. import options
from ..pto.plan import PtoOptions, pto_options
from ..pto.ptoas import find_ptoas
from ..runconfig import RunConfig
from ..oserrors import run_failure
from ..settings import check_environment
from .statedb import open_state
from .reporter import BuildReporter
from ..toolchain import default_platform, load_platform
from .. import header_sets
from . import noop

if TYPE_CHECKING:
    from ..cache.remote import Remote

STATE_DB = "state.sqlite3"

opt_build_dir = {"section": "pypto_build", "name": "build_dir", "long": "dir", "type": str,
                 "default": "", "help": "build directory (default: the one the current directory is in)"}
opt_recompile = {"section": "pypto_build", "name": "recompile", "long": "recompile", "type": bool,
                 "default": False, "help": "mark every compile target out of date (sources are never deleted)"}
GRAPH_OPTIONS = ("platform", "no_rebuild_from_pto", "ptoas", "allow_unapplied_pto", "include_stale", "cache_dir",
                 "remote_cache")


def load_graph(root: Path, platform: str | None = None, pto: PtoOptions | None = None,
               run: RunConfig | None = None, include_stale: bool = False, cache_dir: str | None = None,
               remote_cache: str | Remote | None = None, check_remote: bool = True,
               run_timeout: float | None = None) -> Graph:
    """Read a build directory and plan its graph (no doit, nothing executed).

    `cache_dir` (else $PYPTO_BUILD_CACHE) is the artefact cache compiles restore from and store to;
    `remote_cache` (else $PYPTO_BUILD_REMOTE_CACHE) a Bazel-HTTP cache URL, opened once here for the
    run (remote_cache.open_remote: a malformed URL is one line of error; an unreachable server is
    dropped with one warning and the build goes on locally). With `check_remote=False` it is not
    opened here: a `Remote` some leader already opened (`pypto-build ci`) is used as it is, and a
    URL is dropped (for graphs that compile nothing: explain, compdb). `run_timeout` bounds each
    replay/validate run (default: $PYPTO_RUN_TIMEOUT or 1800 s).
    """
    from ..cache.remote import open_remote

    started = time.time_ns()
    cache = cache_dir or os.environ.get("PYPTO_BUILD_CACHE") or None
    check_environment(cache=bool(cache))       # a bad value: one line, before anything is read or written
    layout = load_layout(root, include_stale=include_stale)
    remote = open_remote(remote_cache) if check_remote else None if isinstance(remote_cache, str) else remote_cache
    return build_graph(layout, load_platform(platform or default_platform()), pto or pto_options(),
                       run, os.path.abspath(os.path.expanduser(cache)) if cache else None, remote,
                       run_timeout if run_timeout is not None else options.run_timeout(), started)


class BuildDirLoader(TaskLoader2):
    """Loads the task graph of one build directory."""

    cmd_options = (opt_build_dir, *options.doit_options(tuple(o for o in options.BUILD if o.dest in GRAPH_OPTIONS)))

    def __init__(self, root: Path | None = None, *, graph: Graph | None = None,
                 reporter: object = None, quiet: bool = False, keep_errors: bool = False,
                 force: tuple[str, ...] = ()):
        super().__init__()
        self.root = Path(root).resolve() if root else None
        self.graph = graph
        self.reporter = reporter
        self.quiet = quiet
        self.keep_errors = keep_errors             # True: a PyptoBuildError is kept in `error` for the caller
        self.force = force                         # task-name prefixes that run whatever their state says
        self.error: PyptoBuildError | None = None
        self.values: dict = {}

    def setup(self, opt_values):
        if self.root is None:
            self.root = find_root(Path(opt_values.get("build_dir") or os.getcwd()))
        if self.graph is None:
            self.values = dict(opt_values)

    @property
    def dep_file(self) -> Path:
        return self.root / STATE_DIR / STATE_DB

    def load_doit_config(self):
        return {"check_file_uptodate": XXHChecker, "backend": "sqlite3", "dep_file": str(self.dep_file),
                "default_tasks": list(DEFAULT_TASKS), "reporter": self.reporter or BuildReporter}

    def plan(self) -> Graph:
        """Read the build directory and plan its graph once (bad input raises PyptoBuildError)."""
        if self.graph is None:
            self.graph = load_graph(self.root, **options.graph_options(self.values))
        return self.graph

    def load_tasks(self, cmd, pos_args):
        try:
            self.plan()
        except PyptoBuildError as exc:
            raise InvalidCommand(str(exc)) from None
        if not self.quiet:
            if self.graph.pto.skipped_line:
                print(self.graph.pto.skipped_line)
            for line in stale_lines(self.graph):
                print(line, file=sys.stderr)
            for why in self.graph.unknown_identities():
                print(f"pypto-build: {why}: binaries are not trusted, every unit rebuilds and no "
                      "binary_context.json is written", file=sys.stderr)
        tasks = []
        for base, dicts in task_dicts(self.graph).items():
            tasks.extend(generate_tasks(base, (d for d in dicts), f"{base} units of {self.root.name}"))
        return tasks


def stale_lines(graph: Graph) -> list[str]:
    return [f"pypto-build: {rel}: never referenced by orchestration/host_orch.py — a leftover of an earlier "
            "compile; not built (--include-stale builds it)" for rel in graph.layout.stale]


def record_noop(graph: Graph, tasks: list) -> bool:
    """After a full, clean build: let the next identical run skip doit (see noop.py)."""
    if graph is None or graph.unknown_identities():
        return False
    values = {t.name: t.values if isinstance(t.values, dict) else {} for t in tasks}
    sets = {v["outside"] for v in values.values() if v.get("outside")}
    header_sets.prune(graph.layout.root, sets)
    if any(v.get("not_applied") or v.get("forced") for v in values.values()):
        return False
    paths: list[str] = [".", *graph.layout.markers]
    for extra in ("orchestration", "next_levels"):
        if (graph.layout.root / extra).is_dir():
            paths.append(extra)
    for p in graph.plans:
        sub = p.sub.rel
        paths += [sub, p.stamp_path, f"{sub}/kernel_config.py" if sub != "." else "kernel_config.py"]
        if (p.sub.path / "ptoas").is_dir():
            paths.append("ptoas" if sub == "." else f"{sub}/ptoas")
        for u in p.units:
            paths += [u.source, u.output, *(values.get(u.task, {}).get("headers") or {})]
    outside = header_sets.files_of(sets)       # headers outside the build directory, and their records
    if outside is None:
        return False                           # a record is gone: its units rebuild next run
    paths += outside
    for u in graph.pto.units:
        paths += [u.pto, u.raw, u.record]
    names = [t.name for t in tasks if t.actions and t.name.split(":")[0] in ("ptoas", "splice", "compile",
                                                                             "orch", "stamp")]
    lines = [graph.pto.skipped_line] if graph.pto.skipped_line else []
    if graph.layout.stale:
        return False            # keep saying it: the leftover line is printed by the full path only
    # The key and the tools as planning saw them: what changed since is caught by `since_ns`.
    pto, compiler = graph.pto.options, graph.platform.compiler
    ptoas_path = graph.pto.lookup.path if graph.pto.lookup else find_ptoas(pto.ptoas).path
    run_key = noop.key(graph.platform.name, pto.enabled, pto.ptoas, compiler=compiler.probe,
                       ptoas_path=ptoas_path)
    paths += noop.tool_paths(compiler.path, ptoas_path)
    return noop.record(graph.layout.root, run_key, paths, {"tasks": names, "lines": lines}, graph.planned_ns)


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
            print(f"pypto-build: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            if self.loader.keep_errors:         # a library caller handles its own interrupts
                raise
            print("pypto-build: interrupted; finished units are kept", file=sys.stderr)
            exit_now(130)
        except InvalidCommand as exc:
            error = PyptoBuildError(
                f"{self.loader.root}: no task or target named {exc.not_found!r}; see them with `pypto-build doit "
                f"list --all {self.loader.root}`" if exc.not_found else one_line(exc))
            if not self.loader.keep_errors:
                print(f"pypto-build: error: {error}", file=sys.stderr)
                return 2
            self.loader.error = error
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
                record_noop(self.loader.graph, self.task_list)
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
