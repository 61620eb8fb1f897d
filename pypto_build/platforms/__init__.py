"""Target platforms: one small interface (`Platform`, base.py) and its implementations (`host` today).

Door: `Platform`, `load_platform` (planning: the toolchain located), `platform_class`
(running: no toolchain needed), `default_platform`, `PLATFORMS`, `HostPlatform`.
Modules: `base` (the interface), `registry` (names), `host`.
"""
from __future__ import annotations

from ..doors import door

_EXPORTS = {
    "Platform": "base",
    "HostPlatform": "host",
    "PLATFORMS": "registry",
    "DEFAULT_PLATFORM": "registry",
    "default_platform": "registry",
    "load_platform": "registry",
    "platform_class": "registry",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
