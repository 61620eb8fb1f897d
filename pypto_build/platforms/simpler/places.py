"""Where PyPTO reads a sub-build's binaries on its own platforms (simpler's simulators and devices).

A generated kernel's payload is `cache/incore_<func_id>_<core>_<stem>_<platform>.bin`, the orchestration
`orchestration/<stem>.so` on every platform (PyPTO's `device_runner`). Shared by planning (where to write)
and running (what to load), so the two never disagree.
"""
from __future__ import annotations

from pathlib import Path

from ...builddir.markers import CACHE_DIR, ORCHESTRATION_DIR


def kernel_payload_path(platform: str, func_id: int, core_type: str, source: str, external: bool) -> str:
    """Where PyPTO reads a generated kernel's payload (relative to the sub-build); an external kernel's name in
    PyPTO carries a fingerprint of its include closure we do not compute, so ours has a name of its own."""
    stem = Path(source).stem
    if external:
        return f"{CACHE_DIR}/external/{func_id}_{core_type}_{stem}_{platform}.bin"
    return f"{CACHE_DIR}/incore_{func_id}_{core_type}_{stem}_{platform}.bin"


def orchestration_path(source: str) -> str:
    """`orchestration/<stem>.so`: PyPTO's place for it on every platform."""
    return f"{ORCHESTRATION_DIR}/{Path(source).stem}.so"
