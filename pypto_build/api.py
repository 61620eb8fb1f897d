"""Library API: `build()`, `validate()` and their result, through the one pipeline (pipeline.py)."""
from __future__ import annotations

from pathlib import Path
from typing import TextIO

from . import pipeline
from .core import stages
from .pipeline import BuildResult, UnitResult
from .options import Request

__all__ = ["build", "validate", "BuildResult", "UnitResult"]


def build(work_dir, *, platform: str | None = None, jobs: int = 1, recompile: bool = False,
          keep_going: bool = False, tasks: list[str] | None = None, progress: TextIO | None = None,
          rebuild_from_pto: bool | None = None, ptoas: str | None = None, allow_unapplied_pto: bool = False,
          include_stale: bool = False, trace: str | Path | None = None, cache_dir: str | Path | None = None,
          remote_cache: str | None = None, check: bool = True, pto=None, launcher: str | None = None,
          quiet: bool = False, preludes: bool | None = None) -> BuildResult:
    """Build a PyPTO build directory incrementally.

    Returns what ran, what was up to date and why. With `check` (default) a
    failed unit raises `BuildError` naming the unit, the command and the
    compiler's message; bad input raises a `UserError` (both are `PyptoBuildError`s).
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
    the compiles; it is no unit's input, so switching it rebuilds nothing. `preludes=False` (else
    $PYPTO_BUILD_PCH=0) compiles every kernel without a precompiled prelude (never a unit's input either).
    """
    request = Request.given(platform=platform, jobs=jobs, recompile=recompile, keep_going=keep_going, tasks=tasks,
                            rebuild_from_pto=rebuild_from_pto, ptoas=ptoas, allow_unapplied_pto=allow_unapplied_pto,
                            include_stale=include_stale, trace=trace, cache_dir=cache_dir, remote_cache=remote_cache,
                            pto=pto, launcher=launcher, quiet=quiet, preludes=preludes)
    return pipeline.run(Path(work_dir), request, progress=progress, check=check)


def validate(work_dir, *, config=None, jobs: int = 1, progress: TextIO | None = None,
             rebuild_from_pto: bool | None = None, allow_unapplied_pto: bool = False,
             run_timeout: float | None = None, check: bool = True, platform: str | None = None,
             ptoas: str | None = None, cache_dir: str | Path | None = None, remote_cache: str | None = None,
             launcher: str | None = None, quiet: bool = False) -> BuildResult:
    """Build what changed, then run and validate against golden.py — unless the last verdict still holds.

    The verdict is kept while the binaries, the run configuration and golden.py's kept result (with all it
    depends on: the sub-build's own files, what golden.py read, the environment variables it read, the
    packages it ran on) are unchanged (`result.names("up-to-date", "validate:")`). A validation skipped by
    `doit ignore` is no verdict: `result.not_validated`, and with `check` a BuildError.
    The program runs in a child process: a crash, an exit or a hang (`run_timeout`, default
    $PYPTO_RUN_TIMEOUT or 1800 s) is a failed validation, never a passed one. The platform is `platform`,
    else `config.platform`, else the one `build()` would choose; the other options are `build()`'s.
    """
    from .builddir.runconfig import RunSpec

    run = RunSpec.given(config, run_timeout)
    request = Request.given(platform=platform or run.config.platform, jobs=jobs, rebuild_from_pto=rebuild_from_pto,
                            ptoas=ptoas, allow_unapplied_pto=allow_unapplied_pto, cache_dir=cache_dir,
                            remote_cache=remote_cache, launcher=launcher, quiet=quiet, tasks=[stages.VALIDATE], run=run)
    return pipeline.run(Path(work_dir), request, progress=progress, check=check)
