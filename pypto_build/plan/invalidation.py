"""`invalidate_binary_cache()`'s mark: the next build rebuilds every binary of the directory, deleting nothing.

PyPTO's `invalidate_binary_cache(work_dir)` deletes the cached binaries so that an edit is compiled. Here
nothing is deleted: `.pypto_build/invalidated.json`, written atomically, tells the next build — whichever
front end starts it (`pypto-build`, `doit`, the API, `CompiledProgram`, `watch`, `ci`) — to rebuild every
compile unit, as `--recompile` does. That build moves the mark into its state first (each unit stays
forced until it next succeeds, committed before the mark goes), so a build that fails or is interrupted
still rebuilds, next time, every unit it did not finish. While the mark is there the no-op record is not
trusted, and `explain` / `build --dry-run` show it. `pending` needs only `os`: the console script's no-op answer
(quick.py) asks it before anything else loads.
"""
from __future__ import annotations

import os
import stat

from ..builddir.state_dir import STATE_DIR

__all__ = ["RECORD", "REASON", "RECOMPILE", "mark", "pending", "forcing", "clear"]

RECORD = "invalidated.json"
REASON = "invalidate_binary_cache()"       # the reason every forced unit shows: `forced by invalidate_binary_cache()`
RECOMPILE = "--recompile"                   # ... and when the build was asked to recompile


def _path(root: str | os.PathLike) -> str:
    return os.path.join(root, STATE_DIR, RECORD)


def mark(root: str | os.PathLike):
    """Write the mark for the build directory `root` (atomically); returns its path (a `Path`)."""
    import json
    import time
    from pathlib import Path
    from ..core import atomic
    path = Path(_path(root))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps({"by": REASON, "at_ns": time.time_ns()}) + "\n", sweep=True)
    return path


def pending(root: str | os.PathLike) -> str | None:
    """The reason to force every compile unit of `root` (REASON) while the mark is there, else None."""
    try:
        return REASON if stat.S_ISREG(os.stat(_path(root)).st_mode) else None
    except OSError:
        return None


def forcing(root: str | os.PathLike, recompile: bool) -> str | None:
    """Why every compile unit of `root` runs in this build, or None: `--recompile` asked for, else the mark while
    it is there. Decided here once and applied by one function (`engine/forcing.force_rebuilds`) for the build,
    `explain` / `build --dry-run` and the answer on a read-only directory."""
    return RECOMPILE if recompile else pending(root)


def clear(root: str | os.PathLike) -> None:
    """Remove the mark (the build that read it has recorded every unit as forced, under the directory lock)."""
    try:
        os.unlink(_path(root))
    except FileNotFoundError:
        pass
