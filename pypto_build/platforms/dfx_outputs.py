"""Which files a run wrote under its dfx_outputs folder, whatever runtime ran it (the host runtime, simpler, the L3
driver over either): `dfx_snapshot` before the run, `changed_files` after. A listing for the user, no decision."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["dfx_snapshot", "changed_files"]


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
