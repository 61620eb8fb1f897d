"""Each platform's part of the no-op key, from light modules (the console script's quick answer asks them
before anything else loads): where the platform finds what its key names (`places(env)`: resolved paths)
and which compilers it probes (`compilers(env)`: as configured), each looked up as its `locate` does.
`toolchain_key` formats them with the compilers' probe digests: `Facts.noop` (`NoopKey.toolchain_key`) from
what planning located, `toolchain_key_now` from what is there now (it runs each compiler's `--version`).
"""
from __future__ import annotations

import importlib

from .records import RECORDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType


def key_module(platform: str) -> ModuleType | None:
    """The light module with `places(env)` and `compilers(env)` for `platform`, as its record names it
    (`records`: `noop_key`); None when it keeps no no-op record."""
    record = RECORDS.get(platform)
    return importlib.import_module(record.noop_key, __package__) if record and record.noop_key else None


def toolchain_key(places: list[str | None], probes: list[str]) -> str:
    """The key's toolchain part: the places, then each compiler probe's digest (`CompilerProbe.digest`)."""
    import json
    return json.dumps([*places, *probes])


def toolchain_key_now(platform: str, env: Mapping[str, str]) -> str | None:
    """`toolchain_key` as `platform`'s `locate` would find it in `env`, without locating (no git, no planning
    class imported); None when it keeps no no-op record. ToolchainError when a compiler is missing."""
    from ..toolchain.compiler import probe_compiler
    module = key_module(platform)
    if module is None:
        return None
    return toolchain_key(module.places(env), [probe_compiler(cxx, path=env.get("PATH")).digest
                                              for cxx in module.compilers(env)])
