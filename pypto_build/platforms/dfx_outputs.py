"""A run's dfx_outputs folder, whatever runtime writes it (the host runtime, simpler, the L3 driver over either):
what goes before a run (`clear_dfx`: an L2 run's timeline and arguments dump; `clear_dispatch_dirs`: an L3 run's
`rank<r>/d<k>` folders) and which files the run wrote (`dfx_snapshot` before, `changed_files` after: a listing
for the user, no decision).

The one home of that handling. It sits here, beside the platforms, rather than in the run stage: the runtimes
that write the folder and the one L3 driver clear and list it themselves, and they are a layer below the run
stage (which asks for an L2 run's clearing through `run.execution.execute`); the run stage can import what is
here, the platforms could not import the run stage.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..builddir.markers import ARGS_DUMP_DIR, SWIMLANE_PREFIX
from ..errors import UserError

__all__ = ["dfx_snapshot", "changed_files", "clear_dfx", "clear_dispatch_dirs"]


def dfx_snapshot(dfx: Path | None) -> dict[str, tuple[int, int, int]]:
    """Every file under `dfx` (links not followed) with what tells a rewrite apart."""
    found: dict[str, tuple[int, int, int]] = {}
    if dfx is None or not dfx.is_dir():
        return found
    for dirpath, _dirs, files in os.walk(dfx):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            found[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return found


def changed_files(dfx: Path | None, before: dict[str, tuple[int, int, int]]) -> list[str]:
    """The files under `dfx` that are new or rewritten since `before`, sorted."""
    after = dfx_snapshot(dfx)
    return sorted(path for path, state in after.items() if before.get(path) != state)


def clear_dfx(dfx: Path) -> None:
    """Remove what an earlier L2 run of ours wrote under dfx_outputs/ (PyPTO's own files stay): runs never mix."""
    for old in dfx.glob(f"{SWIMLANE_PREFIX}*.json"):
        old.unlink(missing_ok=True)
    shutil.rmtree(dfx / ARGS_DUMP_DIR, ignore_errors=True)


def clear_dispatch_dirs(dfx: Path) -> None:
    """Stale `rank<r>/d<k>` folders of an earlier (maybe larger) L3 run go first, as PyPTO does. A symbolic link
    where the run clears (the folder itself, a `rank*`, a `d<k>`) is refused in one line before anything is
    deleted: nothing is ever deleted through a link."""
    _no_link(dfx)
    if not dfx.is_dir():
        return
    doomed = []
    for rank_dir in sorted(dfx.glob("rank*")):
        _no_link(rank_dir)
        for folder in sorted(rank_dir.glob("d[0-9]*")) if rank_dir.is_dir() else ():
            _no_link(folder)
            if folder.is_dir():
                doomed.append(folder)
    for folder in doomed:
        shutil.rmtree(folder, ignore_errors=True)


def _no_link(path: Path) -> None:
    if path.is_symlink():
        raise UserError(f"{path}: a symbolic link where the run clears its dispatch folders (rank<r>/d<k>); "
                        "nothing was deleted — replace the link with a folder (or remove it) and run again")
