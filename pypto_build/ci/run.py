"""`pypto-build ci DIR...`: build and validate many build directories, go on past failures, report.

Each directory is its own graph and state (its `.pypto_build/`); with `-j N`
up to N directories run at once, each in its own process (doit and the build
root as working directory are per process). A directory with a golden is
validated (the verdict is reused while nothing it depends on changed); one
without is built. A program that crashes or hangs fails its directory only (it
runs in a child process); a directory's own process that dies is reported as
that directory's failure. Each directory records the exit status `pypto-build
build` / `validate` would give it (`BuildResult.status`: 2 for one refused as bad
input, 1 for a failure); ci itself exits 1 if any directory is not 0. Reports: JUnit
XML (one test case per directory) and JSON (per directory and per unit: status,
reason, seconds, cache hits, `.pto` edits not applied) are complete in every case. A
directory whose validation was skipped (`doit ignore`) is "not validated": never ok,
in the line, the exit status and both reports. A shard's run (`--shard K/N`,
shards.py) records its shard in both; `ci-report` (report.py) merges the
shards' JSON, and writes its JUnit through `junit_suite` from the same JSON.
With `--bisect` (bisects.py) a directory whose validation FAILED is bisected
against a good variant, and both reports name its culprits.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from xml.etree import ElementTree as ET

from ..core import atomic
from ..core import stages
from ..builddir.markers import GOLDEN_PY
from . import bisects
from ..errors import FAILED, OK, USER, BuildError, PyptoBuildError, UserError, one_line

if TYPE_CHECKING:
    from ..options import Request
    from .bisects import BisectPlan, Good


@dataclass
class DirResult:
    """One directory of a `ci` run: its exit status (its `BuildResult.status`: what `pypto-build validate` or
    `build` gives it), how long it took, what it was (build or validate), the first failure's message, the
    build result, and whether the verdict was reused."""

    path: Path
    exit_status: int
    seconds: float
    kind: str = "build"                 # "build" | "validate"
    error: str = ""                     # bad input (one line) or the first failure's message
    result: object = None               # BuildResult
    cached_verdict: bool = False
    unapplied_pto: list[str] = field(default_factory=list)     # .pto edits that did not reach the kernels
    not_validated: bool = False         # its validation was skipped (`doit ignore`): no verdict, never ok
    key: str = ""                       # the directory as planned (shards.directory_key)
    bisect: dict | None = None          # with --bisect, a FAILED verdict's bisect (bisects.run)

    @property
    def ok(self) -> bool:
        return self.exit_status == OK

    @property
    def units(self) -> list:
        return list(self.result.units) if self.result is not None else []

    @property
    def headline(self) -> str:
        return self.error.partition("\n")[0] or "failed"

    @property
    def verdict(self) -> str:
        return "ok" if self.ok else "NOT VALIDATED" if self.not_validated else "FAILED"


@dataclass
class CiResult:
    """Every directory of a `ci` run, in the order given; the run's wall time; a shard's record
    (`ShardPlan.record`) when it is one shard of a plan."""

    dirs: list[DirResult] = field(default_factory=list)
    seconds: float = 0.0
    shard: dict | None = None
    bisected: bool = False              # --bisect was given: every entry carries `bisect` (null when not run)

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.dirs)


def run_ci(dirs: list[Path], request: Request, *, progress: TextIO | None = None,
           bisect: BisectPlan | None = None) -> CiResult:
    """Build (and validate where there is a golden) every directory; never stops at a failure.

    `request`: what the user asked, for every directory (`request.jobs`: directories at once, each building
    one unit at a time, going on past a failed unit). The remote cache is opened once for the whole run:
    one ping, one warning at most, and a failure in any directory (any process) disables it for all the
    others. With a launcher (its `launcher`, else $PYPTO_BUILD_LAUNCHER or $CXX's) and `request.jobs`
    above this machine's CPUs, the directories' local work (links, program runs) shares the CPUs' local
    slots. With `bisect` (--bisect), each directory whose validation FAILED is then bisected in the directory's
    process (`bisects`): its result carries the report.
    """
    from ..cache import open_remote
    from ..toolchain.launcher import local_jobs
    from .shards import directory_key

    start = time.monotonic()
    if not dirs:                # an empty shard: nothing to ask the remote (the request judged its URL)
        return CiResult(bisected=bisect is not None)
    roots = [Path(d).resolve() for d in dirs]
    jobs = request.jobs
    parallel = jobs > 1 and len(roots) > 1
    each = replace(request, jobs=1, keep_going=True, remote=open_remote(request.remote, for_spawn=parallel),
                   run=replace(request.run, quiet=progress is None))       # -q reaches the program
    args = (each, local_jobs() if jobs > local_jobs() else 0)
    goods = [bisect.good_for(d) if bisect is not None else None for d in dirs]
    if not parallel:
        results = [_one(r, *args, progress, good) for r, good in zip(roots, goods)]
    else:
        results = _in_processes(roots, jobs, args, goods)
        if progress is not None:
            for r in results:
                print(f"== {r.path}: {r.verdict}", file=progress)
    for given, r in zip(dirs, results):
        r.key = directory_key(given)
    return CiResult(results, time.monotonic() - start, bisected=bisect is not None)


def _in_processes(roots: list[Path], jobs: int, args: tuple, goods: list) -> list[DirResult]:
    """One spawned process per directory, `jobs` at a time; a process that dies fails only its directory."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    results: dict[int, DirResult] = {}
    running: dict[int, tuple] = {}
    todo = list(enumerate(roots))
    try:
        while todo or running:
            while todo and len(running) < jobs:
                i, root = todo.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(send, root, *args, None, goods[i]),
                                   daemon=True)
                proc.start()
                send.close()
                running[i] = (proc, receive, root, time.monotonic())
            for i, (proc, receive, root, start) in list(running.items()):
                if receive.poll(0.05):
                    try:
                        results[i] = receive.recv()
                    except (EOFError, OSError):
                        results[i] = _died(root, proc, start)
                elif proc.exitcode is not None and not receive.poll(0):
                    results[i] = _died(root, proc, start)
                else:
                    continue
                proc.join()
                receive.close()
                del running[i]
    finally:
        for proc, *_ in running.values():
            proc.kill()
    return [results[i] for i in range(len(roots))]


def _child(send, root: Path, *args) -> None:
    from ..core import pipes
    pipes.guard()           # a spawned process: its own sys.stderr, our descriptor
    send.send(_one(root, *args))


def _died(root: Path, proc, start: float) -> DirResult:
    """A directory whose process died before reporting: its run did not complete (a failure, 1)."""
    from ..pipeline import BuildResult

    proc.join()
    code = proc.exitcode
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
    said = (f"{root}: the ci process for this directory {how} before reporting; run "
            f"`pypto-build validate {root}` to see why")
    return DirResult(root, BuildResult.stopped_by(root, BuildError(said)).status, time.monotonic() - start,
                     error=said)


def _one(root: Path, request: Request, local_limit: int = 0, progress: TextIO | None = None,
         good: Good | None = None) -> DirResult:
    """One directory through the pipeline: validate if it has a golden, else build; bad input (or an OSError
    the run met) becomes a failed result with the status a one-directory command exits with (2). With `good`
    (--bisect), a FAILED verdict is then bisected against it."""
    from ..toolchain import local_slots
    from .. import pipeline
    from ..plan.graph import run_targets
    from ..pto import unapplied_sources

    start = time.monotonic()
    if progress is not None:
        print(f"== {root}", file=progress, flush=True)
    validating = False
    try:
        graph = request.plan(root)
        if graph.launcher is not None and local_limit:
            local_slots.configure(local_limit)      # this directory's process: each runs its units one at a time
        validating = any((root / t.rel / GOLDEN_PY).is_file() for t in run_targets(graph))
        result = pipeline.run(root, replace(request, tasks=(stages.VALIDATE,) if validating else ()), graph=graph,
                              progress=progress, check=False)
        failures = result.failures
        unvalidated = [] if failures or result.returncode else result.why_not_validated()
        error = (failures[0].message if failures else f"doit exit status {result.returncode}" if result.returncode
                 else f"not validated: {unvalidated[0]}" if unvalidated else "")
        verdict = stages.prefix(stages.VALIDATE)
        cached = validating and bool(result.names("up-to-date", verdict)) and not result.names("ran", verdict)
        unapplied = unapplied_sources(graph, result)
        seconds, found = time.monotonic() - start, None         # the directory's own time, without its bisect
        if good is not None and bisects.wanted(result.status, "validate" if validating else "build",
                                               bool(unvalidated), result):
            found = bisects.run(root, good, request.platform, request.cache_dir, say=_sayer(progress))
        return DirResult(root, result.status, seconds, "validate" if validating else "build",
                         error, result, cached, unapplied, bool(unvalidated), bisect=found)
    except (PyptoBuildError, OSError) as exc:   # kept out of the result sent back: not every error pickles
        return DirResult(root, pipeline.BuildResult.stopped_by(root, exc).status, time.monotonic() - start,
                         "validate" if validating else "build", _said(exc))


def _sayer(progress: TextIO | None):
    """Where a bisect's steps and runs go: ci's progress (nothing with -q or -j)."""
    def say(line: str) -> None:
        if progress is not None:
            print(line, file=progress, flush=True)
    return say


def _said(exc: BaseException) -> str:
    """What stopped a directory, as `pypto-build build` says it (an OSError: the file, what failed, the fix)."""
    if isinstance(exc, OSError):
        from ..core.oserrors import describe
        return one_line(describe(exc))
    return str(exc)


def ci_verb(args) -> int:
    """`pypto-build ci` with parsed arguments: the plan (--list), this shard's directories, the run, the
    reports and one line per directory; exit 1 if any failed (whatever status each records)."""
    from .. import options
    from .shards import parse_shard, shard_plan

    request = options.request(args)         # judged once: options, launcher, the remote cache's URL
    bisecting = bisects.plan(args.dirs, args.bisect, args.good_dir, args.bisect_method)   # every DIR: shards agree
    shard = parse_shard(args.shard) if args.shard is not None else None
    if args.list:
        for line in shard_plan(args.dirs, shard.count if shard else 1).lines(shard.index if shard else None):
            print(line)
        return 0
    dirs, record = args.dirs, None
    if shard is not None:
        if shard.index is None:
            raise UserError(f"--shard {args.shard!r}: names no shard to build; pass K/N (e.g. --shard "
                            f"1/{shard.count}), or add --list to print every shard's directories")
        plan = shard_plan(args.dirs, shard.count)
        dirs, record = plan.paths(shard.index), plan.record(shard.index)
        print(f"pypto-build ci: shard {shard}: {len(dirs)} of {plan.total} directories (plan {plan.digest[:16]})"
              + ("; nothing to build here, reports say so" if not dirs else ""))
    result = run_ci(dirs, request, progress=None if request.quiet else sys.stdout, bisect=bisecting)
    result.shard = record
    if args.junit_xml:
        write_junit(result, args.junit_xml)
    if args.json:
        write_json(result, args.json)
    for d in result.dirs:
        extra = " (verdict reused)" if d.cached_verdict else ""
        if d.ok and d.unapplied_pto:           # accepted by --allow-unapplied-pto: said even with -q
            extra += f"; .pto edits NOT applied: {', '.join(d.unapplied_pto)}"
        headline = d.headline.removeprefix("not validated: ") if d.not_validated else d.headline
        line = f"pypto-build ci: {d.verdict} {d.kind} {d.path}{extra}" + ("" if d.ok else f": {headline}")
        print(line, file=sys.stdout if d.ok else sys.stderr)
        for said in bisects.summary(d.bisect):
            print(f"pypto-build ci: {d.path}: {said}", file=sys.stderr)
    unvalidated = sum(1 for d in result.dirs if d.not_validated)
    failed = sum(1 for d in result.dirs if not d.ok) - unvalidated
    print(f"pypto-build ci: {len(result.dirs) - failed - unvalidated} ok, {failed} failed"
          + (f", {unvalidated} not validated" if unvalidated else ""))
    return OK if result.ok else FAILED


def report(ci: CiResult) -> dict:
    """The JSON report: per directory and per unit (the form `ci-report` merges and JUnit is made from)."""
    data = {"ok": ci.ok, "seconds": round(ci.seconds, 3), "directories": [{
        "path": str(d.path), "key": d.key, "ok": d.ok, "exit_status": d.exit_status, "kind": d.kind,
        "seconds": round(d.seconds, 3),
        "error": d.error, "cached_verdict": d.cached_verdict, "unapplied_pto": d.unapplied_pto,
        "not_validated": d.not_validated, **({"bisect": d.bisect} if ci.bisected else {}),
        "cache_hits": sum(1 for u in d.units if u.status == "from-cache"),
        "units": [{"task": u.task, "status": u.status, "reason": u.reason, "seconds": round(u.seconds, 3)}
                  for u in d.units],
    } for d in ci.dirs]}
    if ci.shard is not None:
        data["shard"] = ci.shard
    return data


def junit_suite(data: dict) -> ET.Element:
    """One JUnit test suite (one test case per directory) from a JSON report; a shard's names its shard."""
    dirs = data["directories"]
    shard = data.get("shard")
    name = "pypto-build ci" + (f" shard {shard['index']}/{shard['count']}" if shard else "")
    suite = ET.Element("testsuite", name=name, tests=str(len(dirs)), failures=str(sum(1 for d in dirs if not d["ok"])),
                       errors="0", time=f"{sum(d['seconds'] for d in dirs):.3f}")
    if shard:
        props = ET.SubElement(suite, "properties")
        for key in ("index", "count", "plan", "directories", "assigned"):
            ET.SubElement(props, "property", name=f"shard.{key}", value=str(shard.get(key, "")))
    for d in dirs:
        case = ET.SubElement(suite, "testcase", classname="pypto_build", name=d["path"], time=f"{d['seconds']:.3f}")
        unapplied = ", ".join(d["unapplied_pto"])
        if not d["ok"]:
            kind = ("not validated" if d.get("not_validated") else "bad input" if d.get("exit_status") == USER
                    else "failed")
            message, text = bisects.junit_failure(d["error"], d.get("bisect"))
            fail = ET.SubElement(case, "failure", message=message, type=kind)
            fail.text = text + (f"\n.pto edits NOT applied: {unapplied}" if unapplied else "")
        notes = ["validation verdict reused (nothing changed)"] if d["ok"] and d["cached_verdict"] else []
        if unapplied and d["ok"]:
            notes.append(f".pto edits NOT applied (--allow-unapplied-pto): {unapplied}")
        if notes:
            ET.SubElement(case, "system-out").text = "\n".join(notes)
    return suite


def write_xml(root: ET.Element, path: Path) -> None:
    atomic.write_text(Path(path), ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")


def write_junit(ci: CiResult, path: Path) -> None:
    write_xml(junit_suite(report(ci)), path)


def write_json(ci: CiResult, path: Path) -> None:
    atomic.write_text(Path(path), json.dumps(report(ci), indent=1) + "\n")
