"""The file names that make a directory a PyPTO build directory (PyPTO's own marker rules).

Reads names only (no file content): `present_markers`, `next_level_names`, `is_build_dir`.
Where a directory is classified by them: `layout.classify`; finding the build directory a
path is in: `layout.find_root`.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import LayoutError
from ..core.safeio import refusal

KERNEL_CONFIG = "kernel_config.py"
COMPILED_META = "compiled_meta.json"
DISTRIBUTED_META = "distributed_meta.json"
HOST_ORCH = "orchestration/host_orch.py"
MARKERS = (COMPILED_META, DISTRIBUTED_META, KERNEL_CONFIG, HOST_ORCH)


def present_markers(root: Path) -> tuple[str, ...]:
    """The marker files of `root`; a directory, FIFO, socket or device under a marker's name is refused (never
    read)."""
    found = []
    for m in MARKERS:
        try:
            st = os.stat(root / m)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append(m)
        elif stat.S_ISDIR(st.st_mode):
            raise LayoutError(f"{root / m}: is a directory, not a file; remove it and restore the {m} ir.compile() "
                              "wrote (or recompile via ir.compile())")
        else:
            raise LayoutError(refusal(root / m, st.st_mode, "replace it with the file ir.compile() wrote (or "
                                                            "recompile via ir.compile())"))
    return tuple(found)


def next_level_names(root: Path) -> list[str]:
    """`next_levels/<name>` entries with a kernel_config.py, sorted."""
    base = root / "next_levels"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / KERNEL_CONFIG).is_file())


def is_build_dir(path: Path) -> bool:
    """Whether `path` holds a marker file or next_levels/*/kernel_config.py."""
    return bool(present_markers(path)) or bool(next_level_names(path))
