"""Where the host platform puts a sub-build's binaries and stamp: under `.pypto_build/host/`.

Apart from the places PyPTO reads for the platform the directory records, so neither
tool throws away the other's work (PyPTO never builds for host). Shared by planning
(where to write) and running (what to load), so the two never disagree.
"""
from __future__ import annotations

import posixpath

from ...builddir.markers import CACHE_DIR, STAMP_FILE
from ...builddir.state_dir import STATE_DIR

HOST_OUTPUTS = f"{STATE_DIR}/host"
HOST_STAMP = f"{HOST_OUTPUTS}/{STAMP_FILE}"


def host_binary(source: str) -> str:
    """Where the host platform puts the binary built from `source` (both relative to the sub-build; a `..`
    step becomes `__`, so the binary stays under HOST_OUTPUTS)."""
    parts = ["__" if part == ".." else part for part in posixpath.normpath(source).split("/")]
    return f"{HOST_OUTPUTS}/{posixpath.splitext('/'.join(parts))[0]}.so"


def host_external_binary(func_id: int, core_type: str, stem: str) -> str:
    """Where the host platform puts an external kernel's binary (relative to the sub-build)."""
    return f"{HOST_OUTPUTS}/{CACHE_DIR}/external/{func_id}_{core_type}_{stem}.so"
