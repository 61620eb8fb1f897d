"""The host platform's part of the no-op key: `$CXX` as probed, `PTO_ISA_ROOT` as resolved.

Light (the no-op path imports it instead of the planning class): `toolchain_key`
formats what planning located, `toolchain_key_now` looks the same up now.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from ...toolchain.compiler import probe_compiler


def toolchain_key(compiler_probe: str, pto_isa_root: Path | None) -> str:
    """The key's toolchain part: the compiler probe's digest and the resolved PTO-ISA checkout (a link may be
    pointed at another)."""
    return json.dumps([compiler_probe, None if pto_isa_root is None else str(pto_isa_root)])


def toolchain_key_now(env: Mapping[str, str]) -> str:
    """`toolchain_key` as `HostPlatform.locate` would find it in `env` (runs `$CXX --version`)."""
    pto = env.get("PTO_ISA_ROOT") or None
    return toolchain_key(probe_compiler(env.get("CXX") or "g++", path=env.get("PATH")).digest,
                         Path(pto).resolve() if pto else None)
