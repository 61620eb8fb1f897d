"""The host platform's part of the no-op key (`noop_keys`): `PTO_ISA_ROOT` as resolved, and `$CXX`.

Light (`os` only): the console script's quick answer and `HostPlatform.locate` look the same up here.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def places(env: Mapping[str, str]) -> list[str | None]:
    """The resolved PTO-ISA checkout (a link may be pointed at another), or None when `PTO_ISA_ROOT` is unset."""
    pto = env.get("PTO_ISA_ROOT") or None
    return [os.path.realpath(pto) if pto else None]


def compilers(env: Mapping[str, str]) -> list[str]:
    """`$CXX` as configured (default g++)."""
    return [env.get("CXX") or "g++"]
