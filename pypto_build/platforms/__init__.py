"""Target platforms: one small interface (`Platform`, base.py) and its implementations (`host` today).

Door: `Platform`, `load_platform` (planning: the toolchain located), `platform_class`
(running: no toolchain needed), `choose`/`Choice` (which platform a directory targets, and why),
`cannot_serve`, `default_platform`, `PLATFORMS`, `HostPlatform`.
Modules: `base` (the interface), `names` (PyPTO's platform names, the default), `choice`, `registry`
(implementations by name), `host`.
"""
from __future__ import annotations

from ..doors import door

_EXPORTS = {
    "Platform": "base",
    "HostPlatform": "host",
    "PLATFORMS": "names",
    "DEFAULT_PLATFORM": "names",
    "default_platform": "names",
    "load_platform": "registry",
    "platform_class": "registry",
    "cannot_serve": "choice",
    "Choice": "choice",
    "choose": "choice",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
