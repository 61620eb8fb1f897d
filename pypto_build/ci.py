"""`pypto-build ci DIR...`: build and validate many build directories, go on past failures, report.

Each directory is its own graph and state (its `.pypto_build/`); with `-j N`
up to N directories run at once, each in its own process (doit and the build
root as working directory are per process). A directory with a golden is
validated (the verdict is reused while nothing it depends on changed); one
without is built. Reports: JUnit XML (one test case per directory) and JSON
(per directory and per unit: status, reason, seconds, cache hits).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from xml.etree import ElementTree as ET

from . import atomic
from .errors import PyptoBuildError

if TYPE_CHECKING:
    from .remote_cache import Remote


@dataclass
class DirResult:
    path: Path
    ok: bool
    seconds: float
    kind: str = "build"                 # "build" | "validate"
    error: str = ""                     # bad input (one line) or the first failure's message
    result: object = None               # BuildResult
    cached_verdict: bool = False

    @property
    def units(self) -> list:
        return list(self.result.units) if self.result is not None else []


@dataclass
class CiResult:
    dirs: list[DirResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.dirs)


def run_ci(dirs: list[Path], *, jobs: int = 1, cache_dir: str | None = None, remote_cache: str | None = None,
           progress: TextIO | None = None) -> CiResult:
    """Build (and validate where there is a golden) every directory; never stops at a failure.

    The remote cache is opened once for the whole run: one ping, one warning at most, and a
    failure in any directory (any process) disables it for all the others.
    """
    from .remote_cache import open_remote

    roots = [Path(d).resolve() for d in dirs]
    parallel = jobs > 1 and len(roots) > 1
    remote = open_remote(remote_cache, for_spawn=parallel)
    if not parallel:
        return CiResult([_one(r, cache_dir, remote, progress) for r in roots])
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_adopt_remote, initargs=(remote,)) as pool:
        results = list(pool.map(_one_spawned, roots, [cache_dir] * len(roots)))
    if progress is not None:
        for r in results:
            print(f"== {r.path}: {'ok' if r.ok else 'FAILED'}", file=progress)
    return CiResult(results)


_run_remote: Remote | None = None      # in a spawned `ci -j N` process: the run's Remote, handed over at process start


def _adopt_remote(remote: Remote | None) -> None:
    """Pool initializer: a shared flag can only reach a spawned process as it starts, not with each job."""
    global _run_remote
    _run_remote = remote


def _one_spawned(root: Path, cache_dir: str | None) -> DirResult:
    return _one(root, cache_dir, _run_remote)


def _one(root: Path, cache_dir: str | None, remote: Remote | None, progress: TextIO | None = None) -> DirResult:
    """One directory: validate if it has a golden, else build; bad input becomes a failed result."""
    from .api import run_graph
    from .engine import load_graph
    from .graph import run_targets

    start = time.monotonic()
    if progress is not None:
        print(f"== {root}", file=progress, flush=True)
    try:
        graph = load_graph(root, cache_dir=cache_dir, remote_cache=remote, check_remote=False)
        validating = any((root / t.rel / "golden.py").is_file() for t in run_targets(graph))
        result = run_graph(graph, tasks=["validate"] if validating else None, keep_going=True, progress=progress,
                           check=False)
        failures = result.failures
        error = failures[0].message if failures else ("" if result.ok else f"doit exit status {result.returncode}")
        cached = validating and bool(result.names("up-to-date", "validate:")) and not result.names("ran", "validate:")
        return DirResult(root, not error, time.monotonic() - start, "validate" if validating else "build",
                         error, result, cached)
    except PyptoBuildError as exc:
        return DirResult(root, False, time.monotonic() - start, error=str(exc))


def write_junit(ci: CiResult, path: Path) -> None:
    suite = ET.Element("testsuite", name="pypto-build ci", tests=str(len(ci.dirs)),
                       failures=str(sum(1 for d in ci.dirs if not d.ok)), errors="0",
                       time=f"{sum(d.seconds for d in ci.dirs):.3f}")
    for d in ci.dirs:
        case = ET.SubElement(suite, "testcase", classname="pypto_build", name=str(d.path), time=f"{d.seconds:.3f}")
        if not d.ok:
            first = d.error.splitlines()[0] if d.error else "failed"
            fail = ET.SubElement(case, "failure", message=first[:500])
            fail.text = d.error
        elif d.cached_verdict:
            ET.SubElement(case, "system-out").text = "validation verdict reused (nothing changed)"
    atomic.write_text(Path(path), ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


def write_json(ci: CiResult, path: Path) -> None:
    report = {"ok": ci.ok, "directories": [{
        "path": str(d.path), "ok": d.ok, "kind": d.kind, "seconds": round(d.seconds, 3), "error": d.error,
        "cached_verdict": d.cached_verdict,
        "cache_hits": sum(1 for u in d.units if u.status == "from-cache"),
        "units": [{"task": u.task, "status": u.status, "reason": u.reason, "seconds": round(u.seconds, 3)}
                  for u in d.units],
    } for d in ci.dirs]}
    atomic.write_text(Path(path), json.dumps(report, indent=1) + "\n")
