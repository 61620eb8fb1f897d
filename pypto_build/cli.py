"""`pypto-build` command line. Bad input: one line, exit 2; failed units: exit 1."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import BuildError, PyptoBuildError, WorkerDied

EPILOG = """examples:
  pypto-build example                        # copy the shipped example, replay + validate it, edit once
  pypto-build replay --validate DIR          # build what changed, run on golden.py's inputs, compare
  pypto-build validate DIR                   # the same, reusing the last verdict if nothing changed
  pypto-build build build_output/_jit_add_20260101_120000
  pypto-build build -j 2 DIR                 # two compiles at a time
  pypto-build build --recompile DIR          # rebuild every binary once
  pypto-build doit list --all --status DIR   # doit's own commands on DIR's graph
  pypto-build doit info DIR compile:aiv/k0   # why is this unit stale?
  doit build / doit replay                   # the same, as doit commands, inside DIR

Staleness is decided by content (xxhash), not mtimes. State lives in DIR/.pypto_build/.
Environment: CXX (default g++), CXXFLAGS (appended), PTO_ISA_ROOT, PYPTO_BUILD_PLATFORM,
PYPTO_COMPILER_TIMEOUT (seconds, default 900), PTOAS_ROOT, PYPTO_REBUILD_FROM_PTO=0,
PYPTO_PTOAS_TIMEOUT (seconds, default 60)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pypto-build", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Incremental, content-hashed builds of PyPTO build_output/<jit_dir>/ directories.")
    p.add_argument("--version", action="version", version=f"pypto_build {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="verb", metavar="VERB")

    b = sub.add_parser("build", help="compile every kernel and orchestration whose inputs changed",
                       description="Compile every kernel and orchestration of DIR (all sub-builds) whose "
                                   "inputs changed, then write cache/binary_context.json per sub-build.")
    b.add_argument("dir", type=Path, metavar="DIR", help="build_output/<jit_dir>/ directory")
    b.add_argument("tasks", nargs="*", metavar="TASK", help="only these tasks (e.g. compile:aiv/k0); default all")
    b.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="run N compiles at once (default 1)")
    b.add_argument("--platform", default=None,
                   help="target platform: host (default, or $PYPTO_BUILD_PLATFORM), a2a3sim, a5sim, a2a3, a5")
    b.add_argument("--recompile", action="store_true",
                   help="mark every compile target out of date (never deletes sources; edits are "
                        "picked up without it)")
    b.add_argument("--no-rebuild-from-pto", action="store_true",
                   help="do not regenerate kernel bodies from edited ptoas/*.pto (also PYPTO_REBUILD_FROM_PTO=0)")
    b.add_argument("--ptoas", default=None, metavar="PATH",
                   help="ptoas executable (default: $PTOAS_ROOT/ptoas, ptoas.sh or bin/ptoas; else PATH)")
    b.add_argument("--include-stale", action="store_true",
                   help="also build next_levels/ sub-builds that orchestration/host_orch.py never references")
    b.add_argument("-k", "--keep-going", action="store_true", help="go on building other units after a failure")
    b.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    b.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="artefact cache: restore binaries whose inputs match instead of compiling, store fresh ones "
                        "(default $PYPTO_BUILD_CACHE; size limit $PYPTO_BUILD_CACHE_SIZE, default 5G)")
    b.add_argument("--remote-cache", default=None, metavar="URL",
                   help="Bazel HTTP cache (GET/PUT /ac/, /cas/) behind the local one (default "
                        "$PYPTO_BUILD_REMOTE_CACHE); unreachable: one warning, local build")
    b.add_argument("--trace", type=Path, default=None, metavar="FILE",
                   help="write a Chrome-trace/Perfetto timeline of the run (one span per task, per worker)")
    b.add_argument("-n", "--dry-run", action="store_true",
                   help="list what would run and why; run nothing, write nothing")
    b.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    x = sub.add_parser("explain", help="say, for each stale unit, exactly what changed",
                       description="For each unit that would run, say why: which input (and which header), the "
                                   "command line, the compiler, which identity, a missing or modified output, or "
                                   "--recompile. Runs nothing and writes nothing.")
    x.add_argument("dir", type=Path, metavar="DIR")
    x.add_argument("units", nargs="*", metavar="UNIT", help="only these tasks (e.g. compile:aiv/k0)")
    x.add_argument("--all", action="store_true", help="also list the units that are up to date")
    x.add_argument("--platform", default=None, help="target platform (default host)")
    x.add_argument("--no-rebuild-from-pto", action="store_true", help="as for build")

    c = sub.add_parser("compdb", help="write compile_commands.json (for clangd) of every compile unit",
                       description="Write DIR/compile_commands.json (or -o FILE): the exact command of every kernel "
                                   "and orchestration compile, for clangd and other tools. Runs nothing.")
    c.add_argument("dir", type=Path, metavar="DIR")
    c.add_argument("-o", "--output", type=Path, default=None, metavar="FILE")
    c.add_argument("--platform", default=None, help="target platform (default host)")

    ci = sub.add_parser("ci", help="build and validate many build directories; go on past failures; reports",
                        description="Build every DIR (and validate those with a golden.py; a verdict is reused "
                                    "while nothing changed), continuing past failures; exit 1 if any failed.")
    ci.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    ci.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="directories built at once")
    ci.add_argument("--cache-dir", default=None, metavar="DIR", help="artefact cache (default $PYPTO_BUILD_CACHE)")
    ci.add_argument("--remote-cache", default=None, metavar="URL", help="Bazel HTTP cache behind the local one")
    ci.add_argument("--junit-xml", type=Path, default=None, metavar="FILE", help="one test case per directory")
    ci.add_argument("--json", type=Path, default=None, metavar="FILE",
                    help="per directory and per unit: status, reason, duration, cache hits")
    ci.add_argument("-q", "--quiet", action="store_true", help="print only the summary")

    k = sub.add_parser("cache", help="show or empty the artefact cache (stats | clean)",
                       description="stats: entries, size, hits, misses, stores, corrupt entries dropped, evictions. "
                                   "clean: remove every entry.")
    k.add_argument("action", choices=("stats", "clean"))
    k.add_argument("--cache-dir", default=None, metavar="DIR", help="default $PYPTO_BUILD_CACHE")

    r = sub.add_parser("replay", help="build what changed, then run DIR on golden.py's inputs (host runtime)",
                       description="Build what changed (content-keyed), run the program on golden.py's inputs on "
                                   "the host runtime, optionally validate — PyPTO's replay CLI, same flags.")
    r.add_argument("dir", type=Path, metavar="DIR")
    _replay_flags(r)
    r.add_argument("--validate", action=argparse.BooleanOptionalAction, default=False,
                   help="compare outputs with golden.py::compute_golden (RTOL/ATOL)")

    v = sub.add_parser("validate", help="run DIR and compare with golden.py, reusing the last verdict if nothing changed",
                       description="Build what changed, run on golden.py's inputs and validate; the verdict is "
                                   "reused while the binaries, golden.py, its data and the run configuration are "
                                   "unchanged.")
    v.add_argument("dir", type=Path, metavar="DIR")
    _replay_flags(v)

    from .runner_script import add_emit_runner_arguments
    er = sub.add_parser("emit-runner", help="write DIR/debug/run.py (PyPTO's debug runner, running our replay)",
                        description="Write DIR/debug/run.py as PyPTO does: inputs from golden.py when present "
                                    "(validated), else inline inputs from compiled_meta.json you can edit, and a "
                                    "_user_compare() hook. PYPTO_EMIT_DEBUG_RUNNER=0 disables it.")
    add_emit_runner_arguments(er)

    e = sub.add_parser("example", help="copy the embedded example, replay and validate it, show one edit loop",
                       description="Copy the example build directory shipped with the package (out = relu(a @ b "
                                   "+ bias)) to DEST, replay it with validation, then edit one kernel and replay "
                                   "again to show that only that kernel recompiles. An existing copy is kept with "
                                   "your edits and just replayed.")
    e.add_argument("dest", type=Path, nargs="?", default=None, metavar="DEST",
                   help="where the copy lives (default ./pypto_build_example)")
    e.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="run N compiles at once")
    e.add_argument("--l3", action="store_true",
                   help="the distributed example instead: two chip programs on two ranks (default DEST "
                        "./pypto_build_example_l3)")

    d = sub.add_parser("doit", help="run a doit command (list, info, forget, clean, ...) on DIR's graph",
                       description="Run one of doit's commands on the task graph of DIR, e.g. "
                                   "`pypto-build doit list --all --status DIR`, "
                                   "`pypto-build doit info DIR compile:aiv/k0`, "
                                   "`pypto-build doit forget DIR compile:aiv/k0`.")
    d.add_argument("command", help="doit command: list, info, forget, clean, ignore, reset-dep, run, help")
    d.add_argument("args", nargs=argparse.REMAINDER, help="DIR, then the command's own options and tasks")
    return p


def _replay_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", default="host", help="host (the only runtime here)")
    p.add_argument("--device-id", type=int, default=0, help="device id (no meaning on the host runtime)")
    p.add_argument("--pmu", type=int, default=0, metavar="LEVEL", help="PMU event type (not on the host runtime)")
    p.add_argument("--swimlane", action="store_const", const=4, default=0,
                   help="write a task timeline to dfx_outputs/ (opens in Perfetto / chrome://tracing)")
    p.add_argument("--swimlane-level", type=int, choices=range(5), default=None, metavar="LEVEL",
                   help="0..4, overrides --swimlane")
    p.add_argument("--dump-args", type=int, nargs="?", const=1, default=0, metavar="LEVEL",
                   help="write each task's arguments to dfx_outputs/args_dump/")
    p.add_argument("--dep-gen", action="store_true", help="dependency generation (not on the host runtime)")
    p.add_argument("--scope-stats", action="store_true", help="scope statistics (not on the host runtime)")
    p.add_argument("--no-recompile", action="store_true", help="accepted for PyPTO compatibility (default here)")
    p.add_argument("--recompile", action="store_true", help="rebuild every binary once")
    p.add_argument("--no-rebuild-from-pto", action="store_true", help="do not regenerate bodies from edited .pto")
    p.add_argument("--log-level", choices=("debug", "info", "timing", "warn", "error", "null"), default=None,
                   help="runtime log level (default $PYPTO_RUNTIME_LOG or warn)")
    p.add_argument("--log-sync-pypto", action="store_true", help="accepted for PyPTO compatibility")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="run N compiles at once")


def reference() -> str:
    """docs/cli.md: every verb's --help, so the reference cannot drift from the parser."""
    import os
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = _parser()
        parts = ["# pypto-build command reference", "",
                 "Generated from the parser (`python -c \"from pypto_build.cli import reference; "
                 "print(reference(), end='')\" > docs/cli.md`); a test keeps it in sync.", "",
                 "```", parser.format_help().rstrip(), "```", ""]
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, child in sub.choices.items():
            parts += [f"## pypto-build {name}", "", "```", child.format_help().rstrip(), "```", ""]
        return "\n".join(parts)
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 2
    try:
        if args.verb == "build":
            return _build(args)
        if args.verb == "example":
            return _example(args)
        if args.verb == "explain":
            return _explain(args, args.units, args.all)
        if args.verb == "cache":
            return _cache(args)
        if args.verb == "ci":
            return _ci(args)
        if args.verb == "compdb":
            from .engine import load_graph
            from .timeline import write_compdb
            print(write_compdb(load_graph(args.dir.resolve(), args.platform), args.output))
            return 0
        if args.verb in ("replay", "validate"):
            return _replay(args)
        if args.verb == "emit-runner":
            from .runner_script import emit_runner_command
            return emit_runner_command(args)
        return _doit(args)
    except BuildError as exc:
        if args.debug:
            raise
        if args.verb != "build" or getattr(args, "quiet", False):
            print(f"pypto-build: {exc}", file=sys.stderr)
        return 1
    except (PyptoBuildError, OSError) as exc:
        if args.debug:
            raise
        from .oserrors import describe
        print(f"pypto-build: error: {describe(exc) if isinstance(exc, OSError) else exc}", file=sys.stderr)
        if isinstance(exc, WorkerDied):     # as after an interrupt: skip multiprocessing's exit-time joins
            from .workers import exit_now
            exit_now(2)
        return 2
    except KeyboardInterrupt:
        print("pypto-build: interrupted; finished units are kept", file=sys.stderr)
        from .workers import exit_now
        exit_now(130)


def _ci(args) -> int:
    from .ci import run_ci, write_json, write_junit
    result = run_ci(args.dirs, jobs=args.jobs, cache_dir=args.cache_dir, remote_cache=args.remote_cache,
                    progress=None if args.quiet else sys.stdout)
    if args.junit_xml:
        write_junit(result, args.junit_xml)
    if args.json:
        write_json(result, args.json)
    for d in result.dirs:
        verdict = "ok" if d.ok else "FAILED"
        extra = " (verdict reused)" if d.cached_verdict else ""
        print(f"pypto-build ci: {verdict} {d.kind} {d.path}{extra}" + ("" if d.ok else f": {d.error.splitlines()[0]}"))
    failed = sum(1 for d in result.dirs if not d.ok)
    print(f"pypto-build ci: {len(result.dirs) - failed} ok, {failed} failed")
    return 0 if result.ok else 1


def _cache(args) -> int:
    from .artifact_cache import ArtifactCache
    cache = ArtifactCache.from_env(args.cache_dir)
    if cache is None:
        raise PyptoBuildError("no artefact cache configured: pass --cache-dir DIR or set PYPTO_BUILD_CACHE")
    if args.action == "clean":
        print(f"pypto-build: removed {cache.clean()} bytes from {cache.directory}")
        return 0
    st = cache.stats()
    print(f"cache {cache.directory}: {st.entries} entries, {st.bytes} of {st.max_bytes} bytes; "
          f"{st.hits} hits, {st.misses} misses, {st.stores} stores, {st.corrupt} corrupt, {st.evicted} evicted")
    return 0


def _explain(args, units: list[str], all_tasks: bool) -> int:
    from .engine import load_graph
    from .explain import explain, format_lines
    from .pto_plan import pto_options

    graph = load_graph(args.dir.resolve(), args.platform, pto_options(False if args.no_rebuild_from_pto else None),
                       include_stale=getattr(args, "include_stale", False))
    for line in format_lines(explain(graph, units or None), all_tasks=all_tasks or bool(units)):
        print(line)
    return 0


def _build(args) -> int:
    from .api import build
    if args.dry_run:
        return _explain(args, args.tasks, False)
    result = build(args.dir, platform=args.platform, jobs=args.jobs, recompile=args.recompile,
                   keep_going=args.keep_going, tasks=args.tasks, ptoas=args.ptoas,
                   rebuild_from_pto=False if args.no_rebuild_from_pto else None, include_stale=args.include_stale,
                   trace=args.trace, cache_dir=args.cache_dir, remote_cache=args.remote_cache,
                   progress=None if args.quiet else sys.stdout, check=False)
    if result.failures:
        if args.quiet:      # the reporter said nothing: one line per failed unit, as without -q
            for u in result.failures:
                print(f"pypto-build: FAILED {u.task}: {u.headline}", file=sys.stderr)
        return 1
    return 0 if result.ok else 1


def _replay(args) -> int:
    from .api import run_graph
    from .engine import load_graph, run_config_from
    from .pto_plan import pto_options
    from .replayer import check_replayable

    if args.platform != "host":
        raise PyptoBuildError(f"--platform {args.platform}: replay runs on the host runtime only (--platform host)")
    root = check_replayable(args.dir.resolve())
    if not (root / "golden.py").is_file():
        raise PyptoBuildError(f"{root / 'golden.py'} not found; the CLI takes its inputs from golden.py — add one "
                              "(generate_inputs/compute_golden) or call pypto_build.replay(dir, *tensors) from Python")
    config = run_config_from({"device_id": args.device_id, "pmu": args.pmu, "swimlane": False,
                              "swimlane_level": args.swimlane if args.swimlane_level is None else args.swimlane_level,
                              "dump_args_level": args.dump_args, "dep_gen": args.dep_gen,
                              "scope_stats": args.scope_stats, "log_level": args.log_level})
    if args.log_sync_pypto:
        print("[execute] --log-sync-pypto: there is no PyPTO C++ logger on the host runtime; ignored")
    validating = args.verb == "validate" or args.validate
    graph = load_graph(root, "host", pto_options(False if args.no_rebuild_from_pto else None), config,
                       validate_on_replay=validating)
    result = run_graph(graph, tasks=["validate" if args.verb == "validate" else "replay"], jobs=args.jobs,
                       recompile=args.recompile, progress=sys.stdout, check=False)
    return 0 if result.ok and not result.failures else 1


def _example(args) -> int:
    """Copy the shipped example, replay it with validation, then show one edit-rebuild-replay loop."""
    import os
    import shutil
    from .api import run_graph
    from .engine import load_graph

    name, what, kernel = (("two_chips", "two chip programs on two ranks, comm-free",
                           "next_levels/chip_b/kernels/aiv/chip_b_incore_1_aiv.cpp") if args.l3 else
                          ("matmul_relu", "out = relu(a @ b + bias)", "kernels/aiv/matmul_relu_incore_1_aiv.cpp"))
    dest = args.dest or Path("pypto_build_example_l3" if args.l3 else "pypto_build_example")
    fresh = not dest.exists()
    if fresh:
        shutil.copytree(Path(__file__).resolve().parent / "examples" / name, dest)
        for raw in dest.rglob("ptoas/*.cpp"):
            os.utime(raw)        # a fresh ir.compile() output: raw ptoas output newer than its .pto
        print(f"pypto-build: copied the example ({what}) to {dest}")

    def replay_once() -> bool:
        graph = load_graph(dest.resolve(), "host", validate_on_replay=True)
        result = run_graph(graph, tasks=["replay"], jobs=args.jobs, progress=sys.stdout, check=False)
        return result.ok and not result.failures

    if not replay_once():
        return 1
    kernel = dest / kernel
    if fresh:
        print(f"\npypto-build: now editing {kernel} (a comment) and replaying: only that kernel recompiles")
        with open(kernel, "a", encoding="utf-8") as handle:
            handle.write("// edited by `pypto-build example` to show an incremental rebuild\n")
        if not replay_once():
            return 1
    print(f"\npypto-build: edit the kernels (or ptoas/*.pto) under {dest}, then run "
          f"`pypto-build replay --validate {dest}`")
    return 0


def _doit(args) -> int:
    from .engine import BuildDirLoader, BuildDirMain
    if not args.args:
        print("pypto-build: error: doit needs a build directory: pypto-build doit <command> DIR [...]",
              file=sys.stderr)
        return 2
    rest = list(args.args)           # DIR is the first word that is not an option (`doit list --all DIR`)
    directory = Path(rest.pop(next((i for i, a in enumerate(rest) if not a.startswith("-")), 0)))
    if not directory.is_dir():
        raise PyptoBuildError(f"{directory}: not a directory; usage: pypto-build doit <command> DIR [...]")
    return BuildDirMain(BuildDirLoader(directory)).run([args.command, *rest])
