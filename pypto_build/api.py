"""Library API: `build()` and its result."""
from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .errors import BuildError, PyptoBuildError
from . import stages

_one_run = threading.Lock()   # doit keeps globals and we chdir: one run per process at a time


@dataclass(frozen=True)
class UnitResult:
    """What happened to one task: status is ran, up-to-date, failed or skipped."""

    task: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    message: str = ""

    @property
    def headline(self) -> str:
        """The message's first line: file, what is wrong, how to fix it (details follow it)."""
        return self.message.partition("\n")[0]


@dataclass(frozen=True)
class BuildResult:
    """What one run did: per task its status and reason (`units`), the run's exit status, what planning
    and the `.pto` stage had to say (`warnings`), the kernel files re-spliced from `.pto`, the `.pto`
    units whose edits could not be applied and those never seen edited that ptoas could not compile (their
    kernels built as they are). `ok`: the run succeeded and every validation it ran to make was made
    (`not_validated`: the ones skipped, e.g. after `doit ignore`); `failures` the failed tasks."""

    work_dir: Path
    platform: str
    units: tuple[UnitResult, ...]
    returncode: int
    warnings: tuple[str, ...] = field(default=())
    spliced: tuple[str, ...] = field(default=())        # kernel files re-spliced from .pto
    not_applied: tuple[str, ...] = field(default=())    # .pto units whose edits were not applied
    header: str = ""        # the run's first line: platform (and why, when not the recorded one), runtime, PTO-ISA
    pto_rejected: tuple[str, ...] = field(default=())   # unedited .pto ptoas could not compile: kernels kept

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.not_validated

    @property
    def not_validated(self) -> list[str]:
        """Validation tasks that were skipped (`doit ignore`, a unit they depend on failed): no verdict."""
        return self.names("skipped", stages.prefix(stages.VALIDATE))

    def why_not_validated(self) -> list[str]:
        """Per skipped validation, one line: the task, why, and how to have it run."""
        lines = []
        for u in self.units:
            if u.task in self.not_validated:
                fix = (f"`pypto-build doit forget {self.work_dir} {u.task}` makes it run again"
                       if "doit ignore" in u.reason else "fix what it depends on and run again")
                lines.append(f"{u.task}: {u.reason or 'skipped'}; nothing was compared — {fix}")
        return lines

    def names(self, status: str, prefix: str = "") -> list[str]:
        """Task names with `status`, optionally only those starting with `prefix`."""
        return sorted(u.task for u in self.units if u.status == status and u.task.startswith(prefix))

    @property
    def compiled(self) -> list[str]:
        """Compile and orchestration tasks that ran."""
        return [n for n in self.names("ran") if n.startswith(stages.UNITS)]

    @property
    def from_cache(self) -> list[str]:
        """Compile and orchestration tasks whose binary was restored from the artefact cache."""
        return self.names("from-cache")

    @property
    def failures(self) -> list[UnitResult]:
        return [u for u in self.units if u.status == "failed"]


def build(work_dir, *, platform: str | None = None, jobs: int = 1, recompile: bool = False,
          keep_going: bool = False, tasks: list[str] | None = None, progress: TextIO | None = None,
          rebuild_from_pto: bool | None = None, ptoas: str | None = None, allow_unapplied_pto: bool = False,
          include_stale: bool = False, trace: str | Path | None = None, cache_dir: str | Path | None = None,
          remote_cache: str | None = None, check: bool = True, pto=None, launcher: str | None = None,
          quiet: bool = False) -> BuildResult:
    """Build a PyPTO build directory incrementally.

    Returns what ran, what was up to date and why. With `check` (default) a
    failed unit raises `BuildError` naming the unit, the command and the
    compiler's message; bad input raises a `PyptoBuildError` subclass.
    `progress` is a stream for one line per unit run and a summary (None: silent); with `quiet` (-q) it
    gets only what is never hidden: verdicts and `.pto` edits not applied.
    `rebuild_from_pto=False` (or PYPTO_REBUILD_FROM_PTO=0) disables the .pto stage;
    `ptoas` names the ptoas executable (default: PTOAS_ROOT, then PATH); a `.pto` edit that cannot be
    applied (no ptoas) fails its unit unless `allow_unapplied_pto` (then `result.not_applied` lists it).
    `include_stale` also builds L3 `next_levels/` sub-builds the host driver never references.
    `trace` writes a Chrome-trace/Perfetto timeline of the run (one span per task, per worker).
    `cache_dir` (else $PYPTO_BUILD_CACHE) is an artefact cache: binaries whose inputs match an entry
    are restored instead of compiled (`result.from_cache`), fresh ones are stored; `remote_cache` (else
    $PYPTO_BUILD_REMOTE_CACHE) adds a Bazel-HTTP cache behind it (a dead one: one warning, local build).
    `launcher` (else $PYPTO_BUILD_LAUNCHER, else the one $CXX starts with: `distcc`, `icecc`, ...) runs
    the compiles; it is no unit's input, so switching it rebuilds nothing.
    """
    from .engine import noop
    from .pto import pto_options
    from .platforms import cannot_serve, choose

    if remote_cache or os.environ.get("PYPTO_BUILD_REMOTE_CACHE"):
        from .cache import settings  # a malformed remote URL is refused even with nothing to do
        settings(remote_cache)
    if launcher:
        from .launcher import find
        find(launcher)                  # a launcher that is not there is refused even with nothing to do
    root = Path(work_dir).resolve()
    pto = pto or pto_options(rebuild_from_pto, ptoas, allow_unapplied=allow_unapplied_pto)
    if not tasks and not recompile and not include_stale and trace is None:
        chosen = choose(root, platform, cannot_serve=cannot_serve).name
        hit = noop.check(root, lambda: noop.key(chosen, pto.enabled, pto.ptoas))
        if hit is not None:
            return _noop_result(root, chosen, hit, None if quiet else progress)
    from .cache import open_caches
    from .graph import load_graph
    graph = load_graph(root, platform, pto, include_stale=include_stale, launcher=launcher)
    caches = open_caches(os.fspath(cache_dir) if cache_dir else None, remote_cache)
    return run_graph(graph, caches=caches, tasks=tasks, jobs=jobs, recompile=recompile, keep_going=keep_going,
                     progress=progress, check=check, trace=trace, quiet=quiet)


def _noop_result(root: Path, platform: str, hit: dict, progress: TextIO | None) -> BuildResult:
    """The result of a run the no-op record answered: every task up to date, nothing loaded."""
    names = list(hit.get("tasks") or [])
    lines = list(hit.get("lines") or [])
    if progress is not None:
        current = sum(1 for n in names if n.startswith(stages.UNITS))
        for line in lines:
            print(line, file=progress)
        print(f"pypto-build: 0 compiled, {current} up to date", file=progress, flush=True)
    return BuildResult(root, platform, tuple(UnitResult(n, "up-to-date", "no-op record") for n in sorted(names)),
                       0, tuple(lines[1:]), header=lines[0] if lines else "")


def validate(work_dir, *, config=None, jobs: int = 1, progress: TextIO | None = None,
             rebuild_from_pto: bool | None = None, allow_unapplied_pto: bool = False,
             run_timeout: float | None = None, check: bool = True) -> BuildResult:
    """Build what changed, then run and validate against golden.py — unless the last verdict still holds.

    The verdict is kept while the binaries, the run configuration and golden.py's kept result (with all it
    depends on: the sub-build's own files, what golden.py read, the environment variables it read, the
    packages it ran on) are unchanged (`result.names("up-to-date", "validate:")`). A validation skipped by
    `doit ignore` is no verdict: `result.not_validated`, and with `check` a BuildError.
    The program runs in a child process: a crash, an exit or a hang (`run_timeout`, default
    $PYPTO_RUN_TIMEOUT or 1800 s) is a failed validation, never a passed one.
    """
    from .graph import load_graph
    from .pto import pto_options
    from .runconfig import RunSpec

    root = Path(work_dir).resolve()
    graph = load_graph(root, None, pto_options(rebuild_from_pto, allow_unapplied=allow_unapplied_pto))
    run = RunSpec.given(config, run_timeout)
    return run_graph(graph, run=run, tasks=[stages.VALIDATE], jobs=jobs, progress=progress, check=check)


def run_graph(graph, *, caches=None, run=None, tasks: list[str] | None = None, jobs: int = 1,
              recompile: bool = False, keep_going: bool = False, progress: TextIO | None = None,
              check: bool = True, trace: str | Path | None = None, force: tuple[str, ...] = (),
              quiet: bool = False) -> BuildResult:
    """Run (part of) a planned graph (`graph.load_graph`) through doit and collect what happened.

    `caches` (`cache.open_caches`): where compiles restore from and store to (default none); `run`
    (`runconfig.RunSpec`): how replay/validate tasks run the program (default config and timeout).

    `force`: task-name prefixes that run whatever their state says (`replay --validate` makes a fresh
    verdict and records it). `quiet`: `progress` gets only verdicts and `.pto` edits not applied.
    """
    from .engine import BuildDirLoader, BuildReporter, run_build

    root = graph.layout.root
    quiet = quiet or progress is None
    reporter = BuildReporter(progress or io.StringIO(), quiet=quiet, echo_errors=False)
    loader = BuildDirLoader(root, graph=graph, caches=caches, run=run, reporter=reporter, quiet=quiet,
                            keep_errors=True, force=force)
    with _one_run:
        rc = run_build(loader, list(tasks or []), jobs=max(1, jobs), recompile=recompile, keep_going=keep_going)
    if loader.error is not None:
        raise loader.error
    if trace is not None:
        from .engine import write_trace
        write_trace(reporter.spans, Path(trace))
    units = tuple(UnitResult(name, o.status, o.reason, o.seconds, o.message)
                  for name, o in sorted(reporter.outcomes.items()))
    (header, *said), warned = graph.notices()
    warnings = [*said, *reporter.warnings, *reporter.unapplied(), *warned]
    result = BuildResult(root, graph.platform.name, units, rc, tuple(warnings), tuple(reporter.spliced),
                         tuple(reporter.not_applied), header, tuple(reporter.pto_rejected))
    if rc == 3:
        raise PyptoBuildError(f"{root}: doit could not run the graph: {'; '.join(reporter.errors) or 'see stderr'}")
    if check and result.failures:
        first = result.failures[0]
        raise BuildError(f"{len(result.failures)} unit(s) failed; first: {first.task}: {first.headline}", list(result.failures), result)
    if check and rc != 0:
        raise BuildError(f"{root}: build did not complete (doit exit status {rc}): "
                         f"{'; '.join(reporter.errors)}", [], result)
    if check and result.not_validated:
        raise BuildError(f"{root}: not validated: {result.why_not_validated()[0]}", [], result)
    return result
