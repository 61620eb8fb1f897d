"""a2a3sim / a5sim's part of the no-op key (`noop_keys`): where simpler and its PTO-ISA tree are, and the
two compilers simpler names.

Light (`os` and `installed`): the console script's quick answer asks it before anything loads. It asks
neither git nor simpler: the trees' identities are the record's watch of them.
"""
from __future__ import annotations

import os

from ..installed import PTO_ISA_TREE, install_places

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SIM_CXX = "g++-15"          # simpler's Gxx15Toolchain: a bare name, found on PATH
HOST_CXX = "g++"            # its GxxToolchain (g++-15 only under simpler's own sanitizer tests)


def places(env: Mapping[str, str]) -> list[str | None]:
    """simpler's project root, its `simpler_setup` folder and its PTO-ISA tree, resolved (`installed`)."""
    root, setup_dir = install_places()
    return [root, setup_dir, os.path.realpath(os.path.join(root, PTO_ISA_TREE))]


def compilers(env: Mapping[str, str]) -> list[str]:
    """The kernels' compiler, then the orchestrations'."""
    return [SIM_CXX, HOST_CXX]
