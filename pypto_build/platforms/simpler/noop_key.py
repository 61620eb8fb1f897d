"""a2a3sim / a5sim's part of the no-op key: where simpler and its PTO-ISA tree are, and the two compilers.

Light (the no-op path imports it instead of the planning class), and it asks
neither git nor simpler: the trees' identities are the record's watch of them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from ...toolchain.compiler import probe_compiler
from .argv import HOST_CXX, SIM_CXX
from .env import PTO_ISA_TREE, install_places


def toolchain_key(project_root: Path, pto_isa_root: Path | None, setup_dir: Path, kernel_probe: str,
                  orchestration_probe: str) -> str:
    """The key's toolchain part: simpler's places and each compiler probe's digest."""
    return json.dumps([str(project_root), str(pto_isa_root), str(setup_dir), kernel_probe, orchestration_probe])


def toolchain_key_now(env: Mapping[str, str]) -> str:
    """`toolchain_key` as `SimplerSimPlatform.locate` would find it in `env` (runs each compiler's `--version`)."""
    root, setup_dir = install_places()
    probes = [probe_compiler(cxx, path=env.get("PATH")).digest for cxx in (SIM_CXX, HOST_CXX)]
    return toolchain_key(root, (root / PTO_ISA_TREE).resolve(), setup_dir, *probes)
