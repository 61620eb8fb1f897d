"""`--recompile`, or an `invalidate_binary_cache()` mark, applied to a state: every compile unit stale.

Decided once (`plan.invalidation.forcing`) and applied by this one function to the state a run decides
on: the build's (`commands.BuildDirRun`), and explain / `build --dry-run`'s read-only one, whose marks
stay in memory and are dropped — so the compile units' own check (`values["forced"]`) says why each runs
in both, in the same words.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..plan import invalidation
from .depstate import ContentDependency


def force_rebuilds(dep: ContentDependency, root: Path, compile_tasks: Iterable[str], recompile: bool) -> str | None:
    """Mark every one of `compile_tasks` stale until it next succeeds, when the build of `root` is forced;
    why (None: not forced).

    Persistent in a build: the forcing is kept in the state, so an interrupted or failed build still rebuilds
    the rest next time. The mark is removed only once that state is committed (under the directory lock); a
    read-only state commits nothing, so it keeps the mark.
    """
    why = invalidation.forcing(root, recompile)
    if why is None:
        return None
    for name in compile_tasks:
        dep.mark_forced(name, why)
    if invalidation.pending(root) is not None and dep.commit():      # the mark is in the state now
        invalidation.clear(root)
    return why
