"""`pypto-build` command line: a table of verbs (`VERBS`), each with its help, its arguments and its runner.

Bad input: one line, exit 2; failed units: exit 1; interrupted: 130 (exits.guarded).
build / explain / replay / validate share their options and behaviour with
`doit replay|pypto-build|pypto-validate|pypto-watch` (options.py, verbs.py).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .. import __version__
from .. import options
from ..errors import USER
from ..core.exits import guarded
from ..verbs import run_verb

EXPLAIN_OPTIONS = ("platform", "no_rebuild_from_pto", "ptoas", "allow_unapplied_pto", "include_stale", "recompile",
                   "cache_dir", "remote_cache", "no_pch")
# What compdb takes of BUILD, with its help: what decides the commands a build runs.
COMPDB_OPTIONS = {
    "cache_dir": "the artefact cache the build uses (default $PYPTO_BUILD_CACHE): the precompiled preludes "
                 "beside it are the ones listed",
    "launcher": "the launcher the build runs compiles through (default $PYPTO_BUILD_LAUNCHER, or the one $CXX "
                "starts with): list its commands",
    "no_pch": "list every kernel without a precompiled prelude, as the build compiles them with --no-pch (also "
              "PYPTO_BUILD_PCH=0)",
}
CI_OPTIONS = ("jobs", "platform", "no_rebuild_from_pto", "ptoas", "allow_unapplied_pto", "include_stale", "quiet",
              "cache_dir", "remote_cache", "run_timeout", "launcher", "no_pch")     # every option its messages name
# What ci's -j counts (ci.run_ci): directories, each in its own process building one unit at a time.
CI_JOBS_HELP = "run N directories at once, each in its own process, compiling one unit at a time (default 1)"
# Where replay and validate run, as platforms/choice.py decides.
PLATFORM_NOTE = "or --platform's; see docs/platforms.md"

EPILOG = """examples:
  pypto-build example                        # copy the shipped example, replay + validate it, edit once
  pypto-build example --pto                  # the same with its ptoas/*.pto stage, and a .pto edit
  pypto-build replay --validate DIR          # build what changed, run on golden.py's inputs, compare
  pypto-build validate DIR                   # the same, reusing the last verdict if nothing changed
  pypto-build build build_output/_jit_add_20260101_120000
  pypto-build build -j 2 DIR                 # two compiles at a time
  pypto-build build --recompile DIR          # rebuild every binary once
  pypto-build doit list --all --status DIR   # doit's own commands on DIR's graph
  pypto-build doit info DIR compile:aiv/k0   # why is this unit stale?
  pypto-build bisect DIR                     # which kernels broke it, against the last PASSED variant
  doit replay / doit pypto-build / doit pypto-validate / doit pypto-watch   # the same, inside DIR

DIR may be any directory inside a build directory (found as git finds its top).
Staleness is decided by content (xxhash), not mtimes. State lives in DIR/.pypto_build/.
Exit status: 0 ok; 1 a unit, the program or a validation failed, or a .pto edit could not be applied;
2 bad input or environment; 3 an internal error (a bug: its traceback is shown); 130 interrupted.
Output to a pipe closed early (`| head -1`) stops nothing: the run goes on quietly to its end and exits
with its own status. Environment: CXX (default g++), CXXFLAGS (appended), PTO_ISA_ROOT, PYPTO_BUILD_PLATFORM,
PYPTO_COMPILER_TIMEOUT (seconds, default 900), PTOAS_ROOT, PYPTO_REBUILD_FROM_PTO=0,
PYPTO_PTOAS_TIMEOUT (seconds, default 60), PYPTO_RUN_TIMEOUT (seconds a replayed program may run,
default 1800), PYPTO_BUILD_VARIANTS_SIZE (the kept variants' store, default 2G)."""


@dataclass(frozen=True)
class Verb:
    """One `pypto-build` verb: its one-line help, its description, its arguments and what runs it."""

    name: str
    help: str
    description: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _dir(p: argparse.ArgumentParser, **kwargs) -> None:
    p.add_argument("dir", type=Path, metavar="DIR", **kwargs)


def _build_arguments(p: argparse.ArgumentParser) -> None:
    _dir(p, help="build_output/<jit_dir>/ directory (or a directory inside one)")
    p.add_argument("tasks", nargs="*", metavar="TASK", help="only these tasks (e.g. compile:aiv/k0); default all")
    options.add_to_parser(p, (*options.BUILD, options.DRY_RUN))


def _explain_arguments(p: argparse.ArgumentParser) -> None:
    _dir(p)
    p.add_argument("units", nargs="*", metavar="UNIT", help="only these tasks (e.g. compile:aiv/k0)")
    p.add_argument("--all", action="store_true", help="also list the units that are up to date")
    options.add_to_parser(p, tuple(o for o in options.BUILD if o.dest in EXPLAIN_OPTIONS))


def _compdb_arguments(p: argparse.ArgumentParser) -> None:
    _dir(p)
    p.add_argument("-o", "--output", type=Path, default=None, metavar="FILE")
    p.add_argument("--platform", default=None,
                   help="target platform (default: $PYPTO_BUILD_PLATFORM, else the recorded one)")
    options.add_to_parser(p, tuple(replace(o, help=COMPDB_OPTIONS[o.dest]) for o in options.BUILD
                                   if o.dest in COMPDB_OPTIONS))


def _ci_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    options.add_to_parser(p, tuple(replace(o, help=CI_JOBS_HELP) if o.dest == "jobs" else o
                                   for o in (*options.BUILD, *options.RUN) if o.dest in CI_OPTIONS))
    p.add_argument("--junit-xml", type=Path, default=None, metavar="FILE", help="one test case per directory")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help="per directory and per unit: status, reason, duration, cache hits")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="build only shard K (1..N) of the DIRs split over N machines: the same split on every "
                        "machine, whatever the order of the DIRs; reports record the shard (merge them with "
                        "ci-report)")
    p.add_argument("--list", action="store_true",
                   help="print the plan, one `K/N<TAB>DIR` line per directory, and build nothing: shard K's "
                        "(--shard K/N), every shard's (--shard N), or all as 1/1")
    p.add_argument("--bisect", action="store_true",
                   help="bisect each directory whose validation FAILED against a good variant; its JSON entry "
                        "(`bisect`) and JUnit failure name the culprits (exit status unchanged; see docs/ci.md)")
    p.add_argument("--good-dir", type=Path, default=None, metavar="BASE",
                   help="with --bisect: the good copy of each DIR is at the same relative path under BASE as DIR "
                        "under the DIRs' common parent (one DIR: BASE/<its name>); a missing copy falls back to "
                        "DIR's history (default: the newest PASSED variant in DIR's history)")
    p.add_argument("--bisect-method", choices=("trace", "mix"), default=None,
                   help="with --bisect: as bisect's --method (default: trace where the platform's dump carries "
                        "payloads, then mix)")


def _ci_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json",
                   help="every shard's `ci --shard K/N --json` report, one per shard")
    p.add_argument("--junit-xml", type=Path, default=None, metavar="FILE", help="one test suite per shard")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help="every directory (with its shard) and per shard a summary")


def _cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("stats", "clean"))
    p.add_argument("dir", type=Path, nargs="?", default=None, metavar="DIR",
                   help="stats: also what DIR's .pypto_build/ holds (default: the build directory the working "
                        "directory is in, if any)")
    p.add_argument("--cache-dir", default=None, metavar="DIR", help="default $PYPTO_BUILD_CACHE")


def _replay_arguments(p: argparse.ArgumentParser) -> None:
    _dir(p)
    options.add_to_parser(p, (*options.BUILD, *options.RUN, options.VALIDATE))


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    _dir(p)
    options.add_to_parser(p, (*options.BUILD, *options.RUN))


def _watch_arguments(p: argparse.ArgumentParser) -> None:
    from .watch import watch_options
    _dir(p)
    options.add_to_parser(p, watch_options())


def _emit_runner_arguments(p: argparse.ArgumentParser) -> None:
    from ..compat import add_emit_runner_arguments
    add_emit_runner_arguments(p)


def _example_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dest", type=Path, nargs="?", default=None, metavar="DEST",
                   help="where the copy lives (default ./pypto_build_example)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="run N compiles at once")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--l3", action="store_true",
                       help="the distributed example instead: two chip programs on two ranks (default DEST "
                            "./pypto_build_example_l3)")
    which.add_argument("--pto", action="store_true",
                       help="the example with its ptoas/*.pto, built with the package's labelled stand-in ptoas "
                            "(never the one on PATH), and a .pto edit as the demonstration (default DEST "
                            "./pypto_build_example_pto)")


def _doit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", help="doit command: list, info, forget, clean, ignore, reset-dep, run, help")
    p.add_argument("args", nargs=argparse.REMAINDER, help="DIR, then the command's own options and tasks")


def _run_verb(args: argparse.Namespace) -> int:
    return run_verb(args.verb, args, args.dir, getattr(args, "tasks", None) or getattr(args, "units", None))


def _compdb(args: argparse.Namespace) -> int:
    from .compdb import write_compdb
    from ..builddir.layout import find_root
    request = options.request(args)
    store = replace(request, remote=None).caches().preludes         # the build's prelude store; nothing pinged
    print(write_compdb(request.plan(find_root(args.dir)), args.output, store))
    return 0


def _watch(args: argparse.Namespace) -> int:
    from .watch import watch_verb
    return watch_verb(args, args.dir)


def _history(args: argparse.Namespace) -> int:
    from .watch import history_verb
    return history_verb(args.dir)


def _bisect_arguments(p: argparse.ArgumentParser) -> None:
    from .bisect_verb import add_arguments
    add_arguments(p)


def _bisect(args: argparse.Namespace) -> int:
    from .bisect_verb import bisect_verb
    return bisect_verb(args)


def _emit_runner(args: argparse.Namespace) -> int:
    from ..compat import emit_runner_command
    return emit_runner_command(args)


def _example(args: argparse.Namespace) -> int:
    from .example import run_example
    return run_example(args)


def _ci(args: argparse.Namespace) -> int:
    from ..ci.run import ci_verb
    return ci_verb(args)


def _ci_report(args: argparse.Namespace) -> int:
    from ..ci.report import ci_report_verb
    return ci_report_verb(args)


def _cache(args: argparse.Namespace) -> int:
    from .cache_verb import cache_verb
    return cache_verb(args)


def _doit(args: argparse.Namespace) -> int:
    from .doit_commands import doit_verb
    return doit_verb(args.command, list(args.args))


VERBS = (
    Verb("build", "compile every kernel and orchestration whose inputs changed",
         "Compile every kernel and orchestration of DIR (all sub-builds) whose inputs changed, then write "
         "cache/binary_context.json per sub-build.", _build_arguments, _run_verb),
    Verb("explain", "say, for each stale unit, exactly what changed",
         "For each unit that would run, say why: which input (and which header), the command line, the compiler, "
         "which identity, a missing or modified output, or --recompile. Runs nothing and writes nothing; its "
         "counts are build's.", _explain_arguments, _run_verb),
    Verb("compdb", "write compile_commands.json (for clangd) of every compile unit",
         "Write DIR/compile_commands.json (or -o FILE): the command the build runs for every kernel and "
         "orchestration compile, for clangd and other tools; it names the "
         "output where the build writes a temp file first, and leaves out the depfile flags (-MD -MF -MT) the "
         "build adds; a kernel whose precompiled prelude is in the store (--cache-dir's, else the user's) gets the "
         "flags that take it. Runs nothing.", _compdb_arguments, _compdb),
    Verb("ci", "build and validate many build directories; go on past failures; reports",
         "Build every DIR (and validate those with a golden.py; a verdict is reused while nothing changed), "
         "continuing past failures and crashes; exit 1 if any failed. With --shard K/N only this machine's "
         "share of the DIRs (see docs/ci.md).", _ci_arguments, _ci),
    Verb("ci-report", "merge the JSON reports of every shard of a `ci --shard` run into one",
         "Check that the reports are every shard of one plan, each once, every directory once, then write "
         "one JSON and one JUnit XML and print a summary; exit 1 if any directory failed, 2 (writing "
         "nothing) if a shard is missing, repeated or from another plan.", _ci_report_arguments, _ci_report),
    Verb("cache", "show or empty the artefact cache, the precompiled preludes and the kept variants (stats [DIR] | "
         "clean)",
         "stats: entries, size, hits, misses, stores, corrupt entries dropped, evictions; the precompiled "
         "preludes' count and size; the kept variants' binaries and sources (what `bisect` runs); then, for "
         "DIR (or the build directory the working directory is in), what its .pypto_build/ holds, as `history` "
         "shows it. clean: remove every entry of the three (the preludes' "
         "and the variants' stores are beside the cache, else under $XDG_CACHE_HOME, even when no cache is "
         "configured).",
         _cache_arguments, _cache),
    Verb("replay", "build what changed, then run DIR on golden.py's inputs on the platform DIR records",
         "Build what changed (content-keyed), run the program on golden.py's inputs in a child process on the "
         f"platform DIR records ({PLATFORM_NOTE}), optionally validate (and record the verdict) — PyPTO's replay "
         "CLI, same flags.", _replay_arguments, _run_verb),
    Verb("validate", "run DIR and compare with golden.py, reusing the last verdict if nothing changed",
         f"Build what changed, run on golden.py's inputs on the platform DIR records ({PLATFORM_NOTE}) and "
         "validate; the verdict is reused while the binaries, the run configuration and golden.py's kept result "
         "(with all it depends on: the directory's own files, what golden.py read, the environment variables it "
         "read, the packages it ran on) are unchanged. A validation skipped by `doit ignore` exits 1: not "
         "validated.", _validate_arguments, _run_verb),
    Verb("watch", "build, run and validate now, then again on every change; keeps torch and the plan warm",
         "Build, replay (with --validate: validate) and time DIR once, then wait for changes and repeat on every "
         "save of anything the build depends on: kernel and orchestration sources, the headers their depfiles "
         "list, .pto files, kernel_config.py, golden.py and what it reads, the compiler. Each round prints what "
         "changed, what was rebuilt, the verdict, the program's run time (median of --runs, with its change "
         "against the previous and the first round) and the round's time split. Golden values are cached; the "
         "program runs in a fresh process forked from a warm one (torch imported once). A burst of writes is one "
         "round, for its final content. A compile error, a crash or bad input is shown and the watch goes on. "
         "Ctrl-C or SIGTERM ends it (exit 130). `doit pypto-watch` does the same inside DIR.",
         _watch_arguments, _watch),
    Verb("history", "list the program variants DIR ran: verdict and run time per content of the binaries",
         "One line per variant (a digest of every binary the program runs) that a verdict recorded in DIR "
         "(validate, replay --validate, ci, the API, each watch round), oldest first: when, how many runs, the "
         "last verdict, the median run time of watch's timed runs and its change against the first; then "
         "what DIR's .pypto_build/ holds: the kept golden result, the last run's output tensors, "
         "the build state, the history (one line per .pypto_build/, sub-builds' too).", _dir, _history),
    Verb("bisect", "name the kernels that make DIR's current variant fail where a good one passed",
         "Compare DIR's current variant with a good one (the newest PASSED in its history, --good VARIANT, or "
         "--good DIR2) in a scratch copy (DIR is never touched): trace runs each with the arguments dump and "
         "names the first task whose outputs differ; mix runs the program with the good binaries of some units "
         "and the current ones of the rest and finds the smallest set of culprit units by delta debugging. "
         "Prints each run as it goes, then the culprits with their source diffs, the first divergent task and "
         "the runs. Exit 0: a culprit named; 1: nothing to blame (the variants agree); 2: bad input.",
         _bisect_arguments, _bisect),
    Verb("emit-runner", "write DIR/debug/run.py (PyPTO's debug runner, running our replay)",
         "Write DIR/debug/run.py as PyPTO does: inputs from golden.py when present (validated), else inline "
         "inputs from compiled_meta.json (L3: distributed_meta.json) you can edit, and a _user_compare() hook. "
         "PYPTO_EMIT_DEBUG_RUNNER=0 disables it.", _emit_runner_arguments, _emit_runner),
    Verb("example", "copy the embedded example, replay and validate it, show one edit loop",
         "Copy the example build directory shipped with the package (out = relu(a @ b + bias)) to DEST, replay "
         "it with validation, then edit one kernel and replay again to show that only that kernel recompiles. An "
         "existing copy is kept with your edits and just replayed; a DEST that is not a copy of the example is "
         "refused. The plain example ships no .pto files, so it passes whatever ptoas is installed; --pto adds "
         "them (in the format of the package's stand-in ptoas, which builds them).", _example_arguments, _example),
    Verb("doit", "run a doit command (list, info, forget, clean, ...) on DIR's graph",
         "Run one of doit's commands on the task graph of DIR, e.g. `pypto-build doit list --all --status DIR`, "
         "`pypto-build doit info DIR compile:aiv/k0`, `pypto-build doit forget DIR compile:aiv/k0`.",
         _doit_arguments, _doit),
)
_BY_NAME = {v.name: v for v in VERBS}


def _columns() -> int:
    """The terminal's width as `shutil.get_terminal_size()` says it ($COLUMNS, else the terminal, else 80),
    without importing shutil: argparse's formatter does for each parser it builds (~1.5 ms of every run)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Help(argparse.HelpFormatter):
    """argparse's formatter, its width from `_columns()`."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class _RawHelp(_Help, argparse.RawDescriptionHelpFormatter):
    """The same, the description kept as written (the top-level epilog)."""


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only` (the verb being run) just that verb's (the others are never
    parsed then, and building them costs every run a few ms and the compat imports)."""
    return _parsers(only)[0]


def _parsers(only: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """`_parser(only)` and each verb's own parser, by name."""
    p = argparse.ArgumentParser(
        prog="pypto-build", formatter_class=_RawHelp, epilog=EPILOG,
        description="Incremental, content-hashed builds of PyPTO build_output/<jit_dir>/ directories.")
    p.add_argument("--version", action="version", version=f"pypto_build {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    children: dict[str, argparse.ArgumentParser] = {}
    for verb in VERBS if only is None else (_BY_NAME[only],):
        child = children[verb.name] = sub.add_parser(verb.name, help=verb.help, description=verb.description,
                                                     formatter_class=_Help)
        verb.arguments(child)
        try:                                # `--debug` is accepted after the verb too
            child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        except argparse.ArgumentError:      # the verb has a --debug of its own
            pass
    return p, children


def reference() -> str:
    """docs/cli.md: every verb's --help, so the reference cannot drift from the parser."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser, verbs = _parsers()
        parts = ["# pypto-build command reference", "",
                 "Generated from the parser (`python -c \"from pypto_build.cli.main import reference; "
                 "print(reference(), end='')\" > docs/cli.md`); a test keeps it in sync.", "",
                 "```", parser.format_help().rstrip(), "```", ""]
        for name, child in verbs.items():
            parts += [f"## pypto-build {name}", "", "```", child.format_help().rstrip(), "```", ""]
        return "\n".join(parts)
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def entry() -> int:
    """The `pypto-build` program past the console script's quick answer (`quick.start`, which leaves with
    the status this returns): `main()`, with doit's None for success as 0."""
    code = main()
    return 0 if code is None else code


def main(argv: list[str] | None = None) -> int:
    argv = options.normalize_argv(sys.argv[1:] if argv is None else argv)
    verb = next((word for word in argv if not word.startswith("-")), None)    # no top-level option takes a value
    parser = _parser(verb if verb in _BY_NAME else None)
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return USER
    from ..engine import sigterm_as_interrupt
    with sigterm_as_interrupt():        # from the start: a program planning runs is ended with its group too
        return guarded(lambda: _BY_NAME[args.verb].run(args), debug=args.debug)
