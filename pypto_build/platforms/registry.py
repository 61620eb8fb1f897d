"""Platform implementations by name: one door, `implementation(name)`, for planning and execution alike.

An `Implementation` is a platform's record (`records`) with its two classes at hand: the planning one
(`locate`: the toolchain found) and the runner (`runner()`: runs a built directory). Each module is imported
only when asked for, so a build loads neither simpler's nor CANN's code, planning never loads execution code
(torch, simpler, the runtime), and the replay child never loads planning's toolchain code.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ToolchainError
from .records import RECORDS, Record, platform_names

if TYPE_CHECKING:
    from .base import Platform, Runner


@dataclass(frozen=True)
class Implementation:
    """Platform `record.name`: its planning class and its runner, as its record names them."""

    record: Record

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def platform_class(self) -> type[Platform]:
        """The planning class (nothing located)."""
        return _load(self.record.planning)

    def locate(self, env: Mapping[str, str] | None = None) -> Platform:
        """The platform with its toolchain located, or ToolchainError naming what is missing."""
        return self.platform_class.locate(os.environ if env is None else env, self.name)

    def runner(self) -> Runner:
        """What runs a directory built for this platform (needs no toolchain)."""
        if self.record.execution is None:
            raise ToolchainError(f"the {self.name} platform runs nothing: its record names no runner")
        return _load(self.record.execution)(self.name)


def implementation(name: str) -> Implementation:
    """Platform `name`'s implementation, or ToolchainError saying there is none."""
    record = RECORDS.get(name)
    if record is None:
        raise ToolchainError(f"unknown platform {name!r}; choose one of {', '.join(platform_names())}")
    return Implementation(record)


def _load(where: str) -> Any:
    """`module:attr` (relative to this package, or absolute) imported."""
    module, attr = where.split(":")
    return getattr(importlib.import_module(module, __package__), attr)
