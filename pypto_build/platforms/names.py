"""The platform names PyPTO records, and which one a run targets by default (light: the no-op path asks)."""
from __future__ import annotations

import os

PLATFORMS = ("host", "a2a3sim", "a5sim", "a2a3", "a5")      # every name PyPTO records
DEFAULT_PLATFORM = "host"


def default_platform() -> str:
    """`$PYPTO_BUILD_PLATFORM`, else host."""
    return os.environ.get("PYPTO_BUILD_PLATFORM") or DEFAULT_PLATFORM
