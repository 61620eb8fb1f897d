"""Platform implementations by name: one door, `implementation(name)`, for planning and execution alike.

An `Implementation` names two classes in two modules: the planning one (`locate`: the toolchain found) and
the runner (`runner()`: runs a built directory). Each module is imported only when asked for, so a build
loads neither simpler's nor CANN's code, planning never loads execution code (torch, simpler, the runtime),
and the replay child never loads planning's toolchain code.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from ..errors import ToolchainError
from .records import PLATFORMS

if TYPE_CHECKING:
    from .base import Platform, Runner


@dataclass(frozen=True)
class Implementation:
    """Platform `name`: its planning class and its runner, each `module:Class` in this package (the no-op
    key's toolchain part is looked up in `noop_keys`, without locating)."""

    name: str
    planning: str
    execution: str

    @property
    def platform_class(self) -> type[Platform]:
        """The planning class (nothing located)."""
        return _load(self.planning)

    def locate(self, env: Mapping[str, str] | None = None) -> Platform:
        """The platform with its toolchain located, or ToolchainError naming what is missing."""
        return self.platform_class.locate(os.environ if env is None else env)

    def runner(self) -> Runner:
        """What runs a directory built for this platform (needs no toolchain)."""
        return _load(self.execution)(self.name)


_IMPLEMENTED = {name: Implementation(name, planning, execution) for name, planning, execution in (
    ("host", "host.platform:HostPlatform", "host.run:HostRunner"),
    ("a2a3sim", "simpler.sim:A2a3SimPlatform", "simpler.runner:SimplerRunner"),
    ("a5sim", "simpler.sim:A5SimPlatform", "simpler.runner:SimplerRunner"),
    ("a2a3", "simpler.device:A2a3Platform", "simpler.runner:DeviceRunner"),
    ("a5", "simpler.device:A5Platform", "simpler.runner:DeviceRunner"),
)}


def implementation(name: str) -> Implementation:
    """Platform `name`'s implementation, or ToolchainError saying there is none."""
    found = _IMPLEMENTED.get(name)
    if found is None:
        raise ToolchainError(f"unknown platform {name!r}; choose one of {', '.join(PLATFORMS)}")
    return found


def _load(where: str):
    module, cls = where.split(":")
    return getattr(importlib.import_module(f".{module}", __package__), cls)
