"""Platform implementations by name: `load_platform` for planning, `platform_class` for running."""
from __future__ import annotations

import os
from typing import Mapping

from ..errors import ToolchainError
from .base import Platform
from .host import HostPlatform
from .names import PLATFORMS
from .simpler_device import A2a3Platform, A5Platform
from .simpler_sim import A2a3SimPlatform, A5SimPlatform

_IMPLEMENTED: dict[str, type[Platform]] = {"host": HostPlatform, "a2a3sim": A2a3SimPlatform, "a5sim": A5SimPlatform,
                                           "a2a3": A2a3Platform, "a5": A5Platform}


def platform_class(name: str) -> type[Platform]:
    """The implementation of platform `name` (nothing located), or ToolchainError saying why there is none."""
    found = _IMPLEMENTED.get(name)
    if found is not None:
        return found
    raise ToolchainError(f"unknown platform {name!r}; choose one of {', '.join(PLATFORMS)}")


def load_platform(name: str, env: Mapping[str, str] | None = None) -> Platform:
    """The platform called `name` with its toolchain located, or ToolchainError naming what is missing."""
    return platform_class(name).locate(os.environ if env is None else env)
