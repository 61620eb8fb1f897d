"""`Request`: what the user asked for one run, parsed once, and the pipeline's first two stages.

Every front end makes one — `pypto-build`'s and doit's option values through
`options.request`, the API's keyword arguments through `Request.given` — and every
stage reads it: `plan` (the graph), `caches` (the caches), the engine (tasks,
jobs, forcing) and the program's runs (`run`). What it holds is judged where it is
made: the option ranges, the `.pto` settings, the launcher (found on PATH) and the
remote cache's URL (parsed), so each is checked once and a bad one is refused even
when there is nothing to build. `pipeline.run` takes it from there.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from .builddir.runconfig import RunSpec
from .core.settings import CACHE, LAUNCHER, REMOTE_CACHE

if TYPE_CHECKING:
    from .cache import Caches, Remote
    from .cache import RemoteSettings
    from .plan.graph import Graph
    from .platforms import Choice
    from .pto import PtoOptions



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

    @classmethod
    def given(cls, *, platform: str | None = None, rebuild_from_pto: bool | None = None, ptoas: str | None = None,
              allow_unapplied_pto: bool = False, pto: PtoOptions | None = None, include_stale: bool = False,
              launcher: str | None = None, cache_dir: str | os.PathLike | None = None,
              remote_cache: str | None = None, tasks: Iterable[str] = (), jobs: int = 1, recompile: bool = False,
              keep_going: bool = False, force: Iterable[str] = (), trace: str | os.PathLike | None = None,
              quiet: bool = False, run: RunSpec | None = None) -> Request:
        """The API's keyword arguments (and the flags', through `options.request`) as a Request, judged here:
        the `.pto` settings, the launcher and the remote cache's URL (each a `UserError` in one line)."""
        found = None
        if launcher or os.environ.get(LAUNCHER, "").strip():
            from .toolchain.launcher import find
            found = find(launcher)                  # not there: one line, even with nothing to build
        remote = None
        if remote_cache or os.environ.get(REMOTE_CACHE):
            from .cache import settings             # malformed: one line, even with nothing to build
            remote = settings(remote_cache)
        return cls(platform=platform or None,
                   pto=pto or _pto_options(rebuild_from_pto, ptoas, allow_unapplied_pto),
                   include_stale=include_stale, launcher=found,
                   cache_dir=os.fspath(cache_dir) if cache_dir else os.environ.get(CACHE) or None,
                   remote=remote, tasks=tuple(tasks or ()), jobs=max(1, int(jobs)), recompile=recompile,
                   keep_going=keep_going, force=tuple(force or ()),
                   trace=os.fspath(trace) if trace is not None else None, quiet=quiet, run=run or RunSpec())

    @property
    def may_skip(self) -> bool:
        """Whether the no-op record may answer: a whole build, nothing forced, nothing extra asked."""
        return not (self.tasks or self.recompile or self.include_stale or self.force or self.trace is not None)

    def plan(self, root: Path, choice: Choice | None = None) -> Graph:
        """The pipeline's first stage: the graph of the build directory at `root` (`choice`: the platform
        already chosen for it, else `platforms.choose` chooses it, once)."""
        from .plan.graph import load_graph
        return load_graph(root, choice or self.platform, self.pto, include_stale=self.include_stale,
                          launcher=self.launcher)

    def caches(self) -> Caches:
        """The pipeline's second stage: the caches this run restores from and stores to."""
        from .cache import open_caches
        return open_caches(self.cache_dir, self.remote)
