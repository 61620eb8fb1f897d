"""What the user asks: the options declared once for every front end, and the `Request` they become.

`pypto-build build/replay/validate` (argparse), `debug/run.py` (argparse) and
`doit pypto-build` / `doit replay` (doit's option dicts) render the same `Opt` table,
so they accept the same options with the same meaning. `request()` turns parsed
values (an argparse namespace or doit's dict, same names) into the one `Request`
every stage of the pipeline reads, and `Request.given` the API's keyword arguments;
`run_spec()` is the one place a `RunConfig` is made from flags.

A `Request` is judged where it is made: the option ranges, the `.pto` settings, the
launcher (found on PATH) and the remote cache's URL (parsed), so each is checked once
and a bad one is refused even when there is nothing to build. `pipeline.run` takes it
from there: `plan` (the graph), `caches`, the engine (tasks, jobs, forcing) and the
program's runs (`run`).
"""
from __future__ import annotations

import argparse
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .builddir.runconfig import LOG_LEVELS, RunConfig, RunSpec
from .core import settings
from .core.settings import LAUNCHER, REMOTE_CACHE, precompiled_preludes
from .errors import ArgumentError, UserError
from .platforms import platform_names

if TYPE_CHECKING:
    from .cache import Caches, Remote, RemoteSettings
    from .plan.graph import Graph
    from .platforms import Choice
    from .pto import PtoOptions

DEFAULT_RUN_TIMEOUT = settings.RUN_TIMEOUT[1]
DUMP_LEVELS = (0, 3)        # the args dump levels PyPTO's runtime has (simpler's CallConfig: 0-3)


@dataclass(frozen=True)
class Opt:
    """One option. kind: flag | negatable (--x/--no-x) | int | float | str | level (optional int)."""

    dest: str
    long: str
    kind: str
    help: str
    short: str = ""
    default: Any = None
    metavar: str | None = None
    choices: tuple | None = None
    limits: tuple[int, int | None] | None = None     # an int's least and greatest value (None: no greatest)

    @property
    def spelled(self) -> str:
        """How the command line spells it: `-j/--jobs`, `--dump-args`."""
        return (f"-{self.short}/" if self.short else "") + f"--{self.long}"


def _either(names: tuple[str, ...]) -> str:
    """`a, b or c`: the platforms' names (their records, `platforms.records`) as the help lists them."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)


BUILD = (
    Opt("jobs", "jobs", "int", "run N compiles at once (default 1)", "j", 1, "N", limits=(1, None)),
    Opt("platform", "platform", "str", f"target platform: {_either(platform_names())} (default: "
        "$PYPTO_BUILD_PLATFORM, else the one compiled_meta.json records — host when simpler cannot run it here)",
        metavar="NAME"),
    Opt("recompile", "recompile", "flag", "mark every compile target out of date once (never deletes sources; "
        "edits are picked up without it)"),
    Opt("no_rebuild_from_pto", "no-rebuild-from-pto", "flag", "do not regenerate kernel bodies from edited "
        "ptoas/*.pto (also PYPTO_REBUILD_FROM_PTO=0)"),
    Opt("ptoas", "ptoas", "str", "ptoas executable (default: $PTOAS_ROOT/ptoas, ptoas.sh or bin/ptoas; else PATH)",
        metavar="PATH"),
    Opt("allow_unapplied_pto", "allow-unapplied-pto", "flag", "accept .pto edits that cannot be applied (no "
        "ptoas): build and run without them instead of failing"),
    Opt("include_stale", "include-stale", "flag", "also build next_levels/ sub-builds that "
        "orchestration/host_orch.py never references"),
    Opt("keep_going", "keep-going", "flag", "go on building other units after a failure", "k"),
    Opt("quiet", "quiet", "flag", "print only errors, the verdict and any .pto edit not applied (never hidden); "
        "the program's own log lines follow --log-level", "q"),
    Opt("cache_dir", "cache-dir", "str", "artefact cache: restore binaries whose inputs match instead of "
        "compiling, store fresh ones (default $PYPTO_BUILD_CACHE; size $PYPTO_BUILD_CACHE_SIZE, default 5G)",
        metavar="DIR"),
    Opt("remote_cache", "remote-cache", "str", "Bazel HTTP cache (GET/PUT /ac/, /cas/) behind the local one "
        "(default $PYPTO_BUILD_REMOTE_CACHE; deadline per request $PYPTO_BUILD_REMOTE_TIMEOUT, default 10 s); a "
        "failing one: one warning per run, local build", metavar="URL"),
    Opt("launcher", "launcher", "str", "run compiles through a launcher such as distcc or icecc (default "
        "$PYPTO_BUILD_LAUNCHER, or the one $CXX starts with); not part of any unit's identity: switching it "
        "rebuilds nothing. With it, -j may exceed this machine's CPUs: links and other local work stay within them",
        metavar="CMD"),
    Opt("no_pch", "no-pch", "flag", "compile every kernel without a precompiled prelude (also "
        "PYPTO_BUILD_PCH=0); never changes a binary, so switching it rebuilds nothing"),
    Opt("trace", "trace", "str", "write a Chrome-trace/Perfetto timeline of the run (one span per task, per "
        "worker)", metavar="FILE"),
)

RUN = (
    Opt("device_id", "device-id", "int", "device id (no meaning on the host runtime)", default=0, metavar="ID"),
    Opt("pmu", "pmu", "int", "PMU event type (not on the host runtime)", default=0, metavar="LEVEL"),
    Opt("swimlane", "swimlane", "flag", "write a task timeline to dfx_outputs/ (opens in Perfetto / "
        "chrome://tracing)"),
    Opt("swimlane_level", "swimlane-level", "int", "0..4, overrides --swimlane", metavar="LEVEL",
        choices=tuple(range(5))),
    Opt("dump_args", "dump-args", "level", "write each task's arguments to dfx_outputs/args_dump/ (LEVEL 0..3; "
        "2: full)", default=0, metavar="LEVEL", limits=DUMP_LEVELS),
    Opt("dump_args_level", "dump-args-level", "int", "args dump level (0..3); implies --dump-args",
        metavar="LEVEL", limits=DUMP_LEVELS),
    Opt("dep_gen", "dep-gen", "flag", "dependency generation (not on the host runtime)"),
    Opt("scope_stats", "scope-stats", "flag", "scope statistics (not on the host runtime)"),
    Opt("no_recompile", "no-recompile", "flag", "accepted for PyPTO compatibility (nothing is force-rebuilt "
        "here anyway)"),
    Opt("log_level", "log-level", "str", "runtime log level (default $PYPTO_RUNTIME_LOG or warn); "
        "debug on the host runtime adds each tensor staged and each task dispatched",
        metavar="LEVEL", choices=LOG_LEVELS),
    Opt("log_sync_pypto", "log-sync-pypto", "flag", "accepted for PyPTO compatibility (no C++ logger here)"),
    Opt("run_timeout", "run-timeout", "float", "stop the program after SECONDS (default $PYPTO_RUN_TIMEOUT or "
        f"{DEFAULT_RUN_TIMEOUT:g})", metavar="SECONDS"),
)

VALIDATE = Opt("validate", "validate", "negatable", "compare outputs with golden.py::compute_golden (RTOL/ATOL) "
               "and record the verdict", default=False)
WATCH = (
    Opt("runs", "runs", "int", "time the program over N runs per round (median and spread; default 5)",
        default=5, metavar="N", limits=(1, None)),
    Opt("poll", "poll", "flag", "poll for changes instead of inotify (network file systems; also "
        "WATCHFILES_FORCE_POLLING=1)"),
)
# What `watch` takes of BUILD: the rest (recompile, keep-going, trace, quiet) is about one run, not a session.
WATCH_BUILD = ("jobs", "platform", "no_rebuild_from_pto", "ptoas", "allow_unapplied_pto", "include_stale",
               "cache_dir", "remote_cache", "launcher", "no_pch")
DRY_RUN = Opt("dry_run", "dry-run", "flag", "list what would run and why; run nothing, write nothing", "n")


def add_to_parser(parser: argparse.ArgumentParser, options: tuple[Opt, ...]) -> None:
    """Render `options` as argparse arguments (dest names as declared)."""
    types = {"int": int, "float": float, "str": str}
    for o in options:
        names = ([f"-{o.short}"] if o.short else []) + [f"--{o.long}"]
        if o.kind == "flag":
            parser.add_argument(*names, dest=o.dest, action="store_true", help=o.help)
        elif o.kind == "negatable":
            parser.add_argument(*names, dest=o.dest, action=argparse.BooleanOptionalAction, default=o.default,
                                help=o.help)
        elif o.kind == "level":
            parser.add_argument(*names, dest=o.dest, type=int, nargs="?", const=1, default=o.default,
                                metavar=o.metavar, help=o.help)
        else:
            parser.add_argument(*names, dest=o.dest, type=types[o.kind], default=o.default, metavar=o.metavar,
                                choices=o.choices, help=o.help)


def doit_options(options: tuple[Opt, ...], section: str = "pypto_build") -> tuple[dict, ...]:
    """Render `options` as doit option dicts (a `level` option is a flag there; see its `-level` twin)."""
    out = []
    for o in options:
        d = {"section": section, "name": o.dest, "long": o.long, "help": o.help}
        if o.short and o.short != "n":          # doit's own -n is --process
            d["short"] = o.short
        if o.kind in ("flag", "negatable", "level"):
            d.update(type=bool, default=False)
            if o.kind == "negatable":
                d["inverse"] = f"no-{o.long}"
        else:
            d.update(type={"int": int, "float": float, "str": str}[o.kind], default=o.default)
        out.append(d)
    return tuple(out)


# doit's commands (ours, and doit's own on a build directory's graph) take the directory as an option, not an argument.
DOIT_DIR = {"section": "pypto_build", "name": "build_dir", "long": "dir", "type": str, "default": "",
            "help": "build directory (default: the one the current directory is in)"}


def normalize_argv(argv: list[str]) -> list[str]:
    """`--dump-args DIR` means the flag then the directory (PyPTO's optional LEVEL is a number)."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--dump-args" and not out[i + 1].lstrip("-").isdigit():
            out[i] = "--dump-args=1"
    return out


def judge(values: Any) -> None:
    """Refuse an option value out of its declared range (`Opt.limits`): one line, exit 2, before anything runs.

    argparse and doit parse the numbers; the range is judged here for both, so `-j 0` or `--dump-args 7`
    is never taken silently.
    """
    for o in (*BUILD, *RUN, *WATCH):
        value = option_value(values, o.dest)
        if o.limits is None or value is None or isinstance(value, bool):     # doit's --dump-args is a flag
            continue
        least, most = o.limits
        if value < least or (most is not None and value > most):
            allowed = f"a number from {least} to {most}" if most is not None else f"a number of at least {least}"
            raise UserError(f"{o.spelled} {value}: out of range; pass {allowed}"
                            + (f", or leave it out for {o.default}" if o.default is not None else ""))


def option_value(values: Any, name: str, default: Any = None) -> Any:
    """Option `name` of parsed values (an argparse namespace or doit's dict, the same names); `default` when it
    is missing, None or empty."""
    value = values.get(name, default) if isinstance(values, Mapping) else getattr(values, name, default)
    return default if value in (None, "") else value


def run_config(values: Any) -> RunConfig:
    """The RunConfig of parsed RUN option values (argparse namespace or doit dict)."""
    swimlane = option_value(values, "swimlane_level")
    if swimlane is None or swimlane < 0:
        swimlane = 4 if option_value(values, "swimlane", False) else 0
    dump = option_value(values, "dump_args_level")
    if dump is None or dump < 0:
        raw = option_value(values, "dump_args", 0)
        dump = 1 if raw is True else int(raw or 0)
    try:
        return RunConfig(platform=option_value(values, "platform"), device_id=option_value(values, "device_id", 0),
                         enable_pmu=option_value(values, "pmu", 0),
                         enable_chip_swimlane=swimlane, enable_dump_args=dump,
                         enable_dep_gen=bool(option_value(values, "dep_gen", False)),
                         enable_scope_stats=bool(option_value(values, "scope_stats", False)),
                         log_level=option_value(values, "log_level"))
    except ValueError as exc:
        raise UserError(f"{exc}; pass one of the listed values") from None


def run_timeout(values: Any = None, env: Mapping[str, str] | None = None) -> float:
    """--run-timeout, else $PYPTO_RUN_TIMEOUT, else the default; one clear error for a bad value."""
    given = option_value(values, "run_timeout") if values is not None else None
    if given is not None:
        return settings.judge_seconds("--run-timeout", str(given), DEFAULT_RUN_TIMEOUT)
    return settings.seconds(*settings.RUN_TIMEOUT, env=env)


def run_spec(values: Any) -> RunSpec:
    """The RunConfig, timeout and -q of parsed option values (missing ones: the defaults)."""
    return RunSpec(run_config(values), run_timeout(values), bool(option_value(values, "quiet", False)))


def request(values: Any, **fields: Any) -> Request:
    """What the user asked, from parsed option values (an argparse namespace or doit's dict, the same names;
    missing ones: the defaults) and `fields` the front end adds (`tasks`, `force`): judged once, here."""
    judge(values)
    get = functools.partial(option_value, values)
    given = {"platform": get("platform"), "ptoas": get("ptoas"),
             "rebuild_from_pto": False if get("no_rebuild_from_pto", False) else None,
             "allow_unapplied_pto": bool(get("allow_unapplied_pto", False)),
             "include_stale": bool(get("include_stale", False)), "launcher": get("launcher"),
             "preludes": False if get("no_pch", False) else None,
             "cache_dir": get("cache_dir"), "remote_cache": get("remote_cache"),
             "jobs": int(get("jobs", 1)), "recompile": bool(get("recompile", False)),
             "keep_going": bool(get("keep_going", False)), "trace": get("trace"),
             "quiet": bool(get("quiet", False)), "run": run_spec(values)}
    return Request.given(**{**given, **fields})


def _pto_options(rebuild_from_pto: bool | None = None, ptoas: str | None = None,
                 allow_unapplied: bool = False) -> PtoOptions:
    """The `.pto` stage's settings (`PYPTO_REBUILD_FROM_PTO` judged here); imported when first asked."""
    from .pto import pto_options
    return pto_options(rebuild_from_pto, ptoas, allow_unapplied=allow_unapplied)


@dataclass(frozen=True)
class Request:
    """One run as asked: what to plan for, which caches, what the engine runs, how the program runs."""

    platform: str | None = None                 # --platform (None: $PYPTO_BUILD_PLATFORM, else the recorded one)
    pto: PtoOptions = field(default_factory=_pto_options)
    include_stale: bool = False
    launcher: tuple[str, ...] | None = None     # as found (None: none asked; $CXX's is found while planning)
    preludes: bool = True                       # precompiled preludes (--no-pch / $PYPTO_BUILD_PCH=0: off)
    cache_dir: str | None = None                # --cache-dir, else $PYPTO_BUILD_CACHE
    remote: RemoteSettings | Remote | None = None   # --remote-cache, else $PYPTO_BUILD_REMOTE_CACHE (ci: opened)
    tasks: tuple[str, ...] = ()                 # none: every stamp (a build)
    jobs: int = 1
    recompile: bool = False
    keep_going: bool = False
    force: tuple[str, ...] = ()                 # task-name prefixes that run whatever their state says
    trace: str | None = None
    quiet: bool = False
    run: RunSpec = field(default_factory=RunSpec)
    # doit's own `run` options a build has no word for, as `pypto-build doit run` was given them (`--reporter`,
    # `--verbosity`, `--always-execute`, ...: name, value; `engine.commands.DOIT_ONLY`): handed to the engine
    doit: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.jobs > 1 and self.run.in_process is not None:
            raise ArgumentError("a run heard in this process (RunSpec.in_process) cannot go to doit's worker "
                                "processes; run it with jobs=1")

    @classmethod
    def given(cls, *, platform: str | None = None, rebuild_from_pto: bool | None = None, ptoas: str | None = None,
              allow_unapplied_pto: bool = False, pto: PtoOptions | None = None, include_stale: bool = False,
              launcher: str | None = None, preludes: bool | None = None, cache_dir: str | os.PathLike | None = None,
              remote_cache: str | None = None, tasks: Iterable[str] = (), jobs: int = 1, recompile: bool = False,
              keep_going: bool = False, force: Iterable[str] = (), trace: str | os.PathLike | None = None,
              quiet: bool = False, run: RunSpec | None = None, doit: Iterable[tuple[str, Any]] = ()) -> Request:
        """The API's keyword arguments (and the flags', through `request`) as a Request, judged here:
        the `.pto` settings, the launcher, the remote cache's URL, the cache's folder and $PYPTO_BUILD_PCH (each
        a `UserError` in one line). `preludes`: None takes $PYPTO_BUILD_PCH (default on)."""
        found = None
        if launcher or os.environ.get(LAUNCHER, "").strip():
            from .toolchain.launcher import find
            found = find(launcher)                  # not there: one line, even with nothing to build
        remote = None
        if remote_cache or os.environ.get(REMOTE_CACHE):
            from .cache import remote_settings      # malformed: one line, even with nothing to build
            remote = remote_settings(remote_cache)
        return cls(platform=platform or None,
                   pto=pto or _pto_options(rebuild_from_pto, ptoas, allow_unapplied_pto),
                   include_stale=include_stale, launcher=found,
                   preludes=precompiled_preludes() if preludes is None else bool(preludes),
                   cache_dir=settings.cache_folder(os.fspath(cache_dir) if cache_dir else None),
                   remote=remote, tasks=tuple(tasks or ()), jobs=max(1, int(jobs)), recompile=recompile,
                   keep_going=keep_going, force=tuple(force or ()),
                   trace=os.fspath(trace) if trace is not None else None, quiet=quiet, run=run or RunSpec(), doit=tuple(doit))

    @property
    def may_skip(self) -> bool:
        """Whether the no-op record may answer: a whole build, nothing forced, nothing extra asked."""
        return not (self.tasks or self.recompile or self.include_stale or self.force or self.trace is not None
                    or self.doit)

    @property
    def doit_reports(self) -> bool:
        """Whether one of doit's reporters shows the run (`pypto-build doit run --reporter`, `--output-file`): the
        pipeline's then only collects what happened."""
        return any(name in ("reporter", "outfile") for name, _value in self.doit)

    def plan(self, root: Path, choice: Choice | None = None) -> Graph:
        """The pipeline's first stage: the graph of the build directory at `root` (`choice`: the platform
        already chosen for it, else `platforms.choose` chooses it, once)."""
        from .plan.graph import load_graph
        return load_graph(root, choice or self.platform, self.pto, include_stale=self.include_stale,
                          launcher=self.launcher, preludes=self.preludes)

    def caches(self) -> Caches:
        """The pipeline's second stage: the caches this run restores from and stores to."""
        from .cache import open_caches
        return open_caches(self.cache_dir, self.remote, preludes=self.preludes, fresh=self.recompile)
