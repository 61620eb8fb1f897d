"""Platform implementations by name: `load_platform` for planning, `platform_class` for running."""
from __future__ import annotations

import os
from typing import Mapping

from ..errors import ToolchainError
from .base import Platform
from .host import HostPlatform
from .names import PLATFORMS

_IMPLEMENTED: dict[str, type[Platform]] = {"host": HostPlatform}


def platform_class(name: str) -> type[Platform]:
    """The implementation of platform `name` (nothing located), or ToolchainError saying why there is none."""
    found = _IMPLEMENTED.get(name)
    if found is not None:
        return found
    if name in PLATFORMS:
        raise ToolchainError(
            f"platform {name!r} needs PyPTO's runtime toolchain (simpler, PTO-ISA"
            f"{', ccec' if not name.endswith('sim') else ''}), which this version of pypto_build does not drive yet; "
            "use --platform host")
    raise ToolchainError(f"unknown platform {name!r}; choose one of {', '.join(PLATFORMS)}")


def load_platform(name: str, env: Mapping[str, str] | None = None) -> Platform:
    """The platform called `name` with its toolchain located, or ToolchainError naming what is missing."""
    return platform_class(name).locate(os.environ if env is None else env)
