"""Platform implementations by name: `load_platform` for planning, `platform_class` for running.

Each implementation is imported when its name is asked for: a host build does not load
simpler's or CANN's code (a few ms of every run's start).
"""
from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Mapping

from ..errors import ToolchainError
from .names import PLATFORMS

if TYPE_CHECKING:
    from .base import Platform

# name -> (module of this package, class)
_IMPLEMENTED: dict[str, tuple[str, str]] = {
    "host": ("host", "HostPlatform"),
    "a2a3sim": ("simpler_sim", "A2a3SimPlatform"),
    "a5sim": ("simpler_sim", "A5SimPlatform"),
    "a2a3": ("simpler_device", "A2a3Platform"),
    "a5": ("simpler_device", "A5Platform"),
}


def platform_class(name: str) -> type[Platform]:
    """The implementation of platform `name` (nothing located), or ToolchainError saying why there is none."""
    found = _IMPLEMENTED.get(name)
    if found is not None:
        module, cls = found
        return getattr(importlib.import_module(f".{module}", __package__), cls)
    raise ToolchainError(f"unknown platform {name!r}; choose one of {', '.join(PLATFORMS)}")


def load_platform(name: str, env: Mapping[str, str] | None = None) -> Platform:
    """The platform called `name` with its toolchain located, or ToolchainError naming what is missing."""
    return platform_class(name).locate(os.environ if env is None else env)
