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

from doit.cmd_base import TaskLoader2
from doit.cmd_clean import Clean
from doit.cmd_forget import Forget
from doit.cmd_help import Help
from doit.cmd_ignore import Ignore
from doit.cmd_info import Info
from doit.cmd_list import List
from doit.cmd_resetdep import ResetDep
from doit.cmd_run import Run
from doit.dependency import DatabaseException, SqliteDB
from doit.doit_cmd import DoitMain
from doit.exceptions import InvalidCommand
from doit.loader import generate_tasks

from .checker import XXHChecker
from .depstate import ContentDependency
from .errors import PyptoBuildError, one_line
from .graph import DEFAULT_TASKS, Graph, build_graph, task_dicts
from .layout import STATE_DIR, load_layout
from .lock import dir_lock, sigterm_as_interrupt
from .workers import exit_now, supervise
from .pto_plan import PtoOptions, pto_options
from .ptoas import find_ptoas
from .runconfig import RunConfig
from .reporter import BuildReporter
from .toolchain import default_platform, load_platform
from . import header_sets, noop

STATE_DB = "state.sqlite3"

opt_platform = {"section": "pypto_build", "name": "platform", "long": "platform", "type": str,
                "default": "", "help": "target platform (default: $PYPTO_BUILD_PLATFORM or host)"}
opt_build_dir = {"section": "pypto_build", "name": "build_dir", "long": "dir", "type": str,
                 "default": "", "help": "build directory (default: the current directory)"}
opt_no_pto = {"section": "pypto_build", "name": "no_rebuild_from_pto", "long": "no-rebuild-from-pto", "type": bool,
              "default": False, "help": "do not regenerate kernel bodies from edited ptoas/*.pto"}
opt_ptoas = {"section": "pypto_build", "name": "ptoas", "long": "ptoas", "type": str, "default": "",
             "help": "ptoas executable (default: $PTOAS_ROOT/{ptoas,ptoas.sh,bin/ptoas}, else PATH)"}
opt_include_stale = {"section": "pypto_build", "name": "include_stale", "long": "include-stale", "type": bool,
                     "default": False, "help": "also build next_levels/ sub-builds the host driver never references"}
opt_cache_dir = {"section": "pypto_build", "name": "cache_dir", "long": "cache-dir", "type": str, "default": "",
                 "help": "artefact cache to restore binaries from and store them to (default $PYPTO_BUILD_CACHE)"}
opt_remote = {"section": "pypto_build", "name": "remote_cache", "long": "remote-cache", "type": str, "default": "",
              "help": "Bazel-HTTP remote cache URL (default $PYPTO_BUILD_REMOTE_CACHE)"}
opt_recompile = {"section": "pypto_build", "name": "recompile", "long": "recompile", "type": bool,
                 "default": False, "help": "mark every compile target out of date (sources are never deleted)"}


def load_graph(root: Path, platform: str | None = None, pto: PtoOptions | None = None,
               run: RunConfig | None = None, validate_on_replay: bool = False,
               include_stale: bool = False, cache_dir: str | None = None, remote_cache: str | None = None,
               check_remote: bool = True) -> Graph:
    """Read a build directory and plan its graph (no doit, nothing executed).

    `cache_dir` (else $PYPTO_BUILD_CACHE) is the artefact cache compiles restore from and store to;
    `remote_cache` (else $PYPTO_BUILD_REMOTE_CACHE) a Bazel-HTTP cache URL, checked once here: an
    unreachable one is dropped with one warning and the build goes on locally. With
    `check_remote=False` the given URL (or None) is taken as already checked.
    """
    from .remote_cache import reachable

    started = time.time_ns()
    layout = load_layout(root, include_stale=include_stale)
    cache = cache_dir or os.environ.get("PYPTO_BUILD_CACHE") or None
    remote = reachable(remote_cache) if check_remote else remote_cache
    return build_graph(layout, load_platform(platform or default_platform()), pto or pto_options(),
                       run, validate_on_replay, os.path.abspath(os.path.expanduser(cache)) if cache else None,
                       remote, started)


def _opt(name: str, long: str, type_, default, help_: str, **extra) -> dict:
    return {"section": "replay", "name": name, "long": long, "type": type_, "default": default,
            "help": help_, **extra}


REPLAY_OPTIONS = (
    _opt("device_id", "device-id", int, 0, "device id (no meaning on the host runtime)"),
    _opt("pmu", "pmu", int, 0, "PMU event type (not available on the host runtime)"),
    _opt("swimlane", "swimlane", bool, False, "write a task timeline (Perfetto) to dfx_outputs/"),
    _opt("swimlane_level", "swimlane-level", int, -1, "swimlane level 0..4 (overrides --swimlane)"),
    _opt("dump_args", "dump-args", bool, False, "write each task's arguments to dfx_outputs/args_dump/"),
    _opt("dump_args_level", "dump-args-level", int, -1, "args dump level (2 = full); implies --dump-args"),
    _opt("dep_gen", "dep-gen", bool, False, "dependency generation (not available on the host runtime)"),
    _opt("scope_stats", "scope-stats", bool, False, "scope statistics (not available on the host runtime)"),
    _opt("no_recompile", "no-recompile", bool, False, "accepted for PyPTO compatibility: nothing is force-rebuilt"),
    _opt("validate", "validate", bool, False, "compare outputs with golden.py", inverse="no-validate"),
    _opt("log_level", "log-level", str, "", "runtime log level: debug, info, timing, warn, error, null "
                                             "(default $PYPTO_RUNTIME_LOG or warn)"),
    _opt("log_sync_pypto", "log-sync-pypto", bool, False, "accepted for PyPTO compatibility (no C++ logger here)"),
)


def run_config_from(opts: dict) -> RunConfig:
    """RunConfig from replay command-line values (doit or argparse, same names)."""
    swimlane = opts.get("swimlane_level", -1)
    swimlane = swimlane if swimlane is not None and swimlane >= 0 else (4 if opts.get("swimlane") else 0)
    dump = opts.get("dump_args_level", -1)
    dump = dump if dump is not None and dump >= 0 else (1 if opts.get("dump_args") else 0)
    try:
        return RunConfig(platform="host", device_id=opts.get("device_id") or 0, enable_pmu=opts.get("pmu") or 0,
                         enable_chip_swimlane=swimlane, enable_dump_args=dump,
                         enable_dep_gen=bool(opts.get("dep_gen")), enable_scope_stats=bool(opts.get("scope_stats")),
                         log_level=opts.get("log_level") or None)
    except ValueError as exc:
        raise InvalidCommand(str(exc)) from None


class BuildDirLoader(TaskLoader2):
    """Loads the task graph of one build directory."""

    cmd_options = (opt_build_dir, opt_platform, opt_no_pto, opt_ptoas, opt_include_stale, opt_cache_dir,
                   opt_remote)

    def __init__(self, root: Path | None = None, *, graph: Graph | None = None,
                 reporter: object = None, quiet: bool = False, keep_errors: bool = False):
        super().__init__()
        self.root = Path(root).resolve() if root else None
        self.graph = graph
        self.reporter = reporter
        self.quiet = quiet
        self.keep_errors = keep_errors             # True: a PyptoBuildError is kept in `error` for the caller
        self.error: PyptoBuildError | None = None
        self.platform: str | None = graph.platform.name if graph else None
        self.pto: PtoOptions | None = None
        self.run: RunConfig | None = None
        self.validate_on_replay = False
        self.include_stale = False
        self.cache_dir: str | None = None
        self.remote_cache: str | None = None

    def setup(self, opt_values):
        if self.root is None:
            self.root = Path(opt_values.get("build_dir") or os.getcwd()).resolve()
        if self.platform is None:
            self.platform = opt_values.get("platform") or None
        if self.graph is None:
            no_pto = opt_values.get("no_rebuild_from_pto")
            self.pto = pto_options(False if no_pto else None, opt_values.get("ptoas") or None)
            self.run = run_config_from(opt_values)
            self.validate_on_replay = bool(opt_values.get("validate"))
            self.include_stale = bool(opt_values.get("include_stale"))
            self.cache_dir = opt_values.get("cache_dir") or None
            self.remote_cache = opt_values.get("remote_cache") or None

    @property
    def dep_file(self) -> Path:
        return self.root / STATE_DIR / STATE_DB

    def load_doit_config(self):
        return {"check_file_uptodate": XXHChecker, "backend": "sqlite3", "dep_file": str(self.dep_file),
                "default_tasks": list(DEFAULT_TASKS), "reporter": self.reporter or BuildReporter}

    def plan(self) -> Graph:
        """Read the build directory and plan its graph once (bad input raises PyptoBuildError)."""
        if self.graph is None:
            self.graph = load_graph(self.root, self.platform, self.pto, self.run, self.validate_on_replay,
                                    self.include_stale, self.cache_dir, self.remote_cache)
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
    options, compiler = graph.pto.options, graph.platform.compiler
    ptoas_path = graph.pto.lookup.path if graph.pto.lookup else find_ptoas(options.ptoas).path
    run_key = noop.key(graph.platform.name, options.enabled, options.ptoas, compiler=compiler.probe,
                       ptoas_path=ptoas_path)
    paths += noop.tool_paths(compiler.path, ptoas_path)
    return noop.record(graph.layout.root, run_key, paths, {"tasks": names, "lines": lines}, graph.planned_ns)


def open_state(dep_file: Path, adopt: bool) -> ContentDependency:
    """The doit state of a build directory (`adopt`: a building command); one clear error when unreadable."""
    try:
        return ContentDependency(SqliteDB, str(dep_file), checker_cls=XXHChecker, adopt=adopt, checkpoint=adopt)
    except (DatabaseException, sqlite3.DatabaseError) as exc:
        reason = one_line(str(exc).rsplit("Original error:", 1)[-1])
        raise PyptoBuildError(f"{dep_file}: the build state is unreadable ({reason}); remove {dep_file.parent} "
                              "to start afresh (sources and binaries are kept; every unit rebuilds once)") from None


class BuildDirCommand:
    """Mixin for doit commands: build root as cwd, directory lock, content state."""

    adopts = False      # commands that build adopt generated outputs on first sight

    def execute(self, params, args):
        if not isinstance(self.loader, BuildDirLoader):
            self.loader = BuildDirLoader()
        self.loader.setup(params)
        try:
            self.loader.plan()                  # bad input is refused before anything is written
            return self._execute_locked(params, args)
        except PyptoBuildError as exc:          # one line: doit's `ERROR: ...`, or the caller's
            if self.loader.keep_errors:
                self.loader.error = exc
                return 3
            raise InvalidCommand(str(exc)) from None
        except KeyboardInterrupt:
            if self.loader.keep_errors:         # a library caller handles its own interrupts
                raise
            print("pypto-build: interrupted; finished units are kept", file=sys.stderr)   # `doit build`
            exit_now(130)
        except InvalidCommand as exc:
            if not self.loader.keep_errors:
                raise
            self.loader.error = PyptoBuildError(
                f"{self.loader.root}: no task or target named {exc.not_found!r}; see them with `pypto-build doit "
                f"list --all {self.loader.root}`" if exc.not_found else one_line(exc))
            return 3

    def _execute_locked(self, params, args):
        root = self.loader.root
        state = root / STATE_DIR
        with dir_lock(state, quiet=self.loader.quiet), contextlib.chdir(root), sigterm_as_interrupt():
            noop.invalidate(root)          # the state is about to change (or be read by doit)
            self.dep_manager = open_state(self.loader.dep_file, self.adopts)
            rc = supervise(functools.partial(super().execute, params, args),
                           watch=bool(params.get("num_process")), where=str(root))
            if rc == 0 and self.adopts and not args:
                record_noop(self.loader.graph, self.task_list)
            return rc


class Build(BuildDirCommand, Run):
    """`doit build`: build every unit of the build directory in the cwd (or --dir)."""

    name = "build"
    adopts = True
    doc_purpose = "build a PyPTO build directory incrementally (pypto_build)"
    doc_usage = "[TASK ...]"
    doc_description = ("Compiles every kernel and orchestration whose inputs changed (by content), "
                       "then writes cache/binary_context.json per sub-build.")
    cmd_options = Run.cmd_options + (opt_recompile,)

    def __init__(self, task_loader=None, **kwargs):
        if not isinstance(task_loader, BuildDirLoader):
            task_loader = BuildDirLoader()
        # A build directory is data: its doit.cfg / pyproject.toml must not redirect output or state.
        kwargs["config"] = {}
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


class Replay(Build):
    """`doit replay`: build what changed, then run the build directory on golden.py's inputs."""

    name = "replay"
    doc_purpose = "replay a PyPTO build directory on the host runtime (pypto_build)"
    doc_usage = ""
    doc_description = ("Builds what changed (content-keyed), runs the program on golden.py's inputs on the "
                       "host runtime, and with --validate compares outputs with compute_golden.")
    cmd_options = Build.cmd_options + REPLAY_OPTIONS

    def execute(self, params, args):
        return super().execute(params, args or ["replay"])

    def _execute(self, outfile, verbosity=None, always=False, continue_=False, reporter="console",
                 num_process=0, par_type="process", single=False, auto_delayed_regex=False,
                 force_verbosity=False, failure_verbosity=0, pdb=False, recompile=False,
                 validate=False, log_sync_pypto=False):
        # The replay options reached the loader (setup) and live in the graph's RunConfig.
        if log_sync_pypto:
            print("[execute] --log-sync-pypto: there is no PyPTO C++ logger on the host runtime; ignored")
        return super()._execute(outfile, verbosity=verbosity, always=always, continue_=continue_,
                                reporter=reporter, num_process=num_process, par_type=par_type, single=single,
                                auto_delayed_regex=auto_delayed_regex, force_verbosity=force_verbosity,
                                failure_verbosity=failure_verbosity, pdb=pdb, recompile=recompile)


class BuildDirRun(BuildDirCommand, Run):
    name = "run"
    adopts = True


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
                 BuildDirIgnore, BuildDirResetDep, Build, Replay)

    def __init__(self, loader: BuildDirLoader):
        super().__init__(loader, config_filenames=())

    def get_cmds(self):
        # Only our commands: a plugin elsewhere must not replace them.
        from doit.plugin import PluginDict
        cmds = PluginDict()
        for cls in self.DOIT_CMDS:
            cmds[cls.get_name()] = cls
        return cmds
