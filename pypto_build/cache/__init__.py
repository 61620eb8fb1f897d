"""The artefact cache: binaries reused by content across directories, clones and machines.

Door: `open_caches` / `Caches` (what one run restores from and stores to), the
compile entries (`compile_key`, `restore_compile`, `store_compile`,
`open_cache`), the local store (`ArtifactCache`, `human_size`) and the remote
(`open_remote`, `Remote`, `remote_settings`: its URL and deadline parsed, `RemoteSettings`).
Modules: `store` (the content-addressed local store), `compiles` (compile keys and header
manifests), `remote`, `remote_http`, `remote_config` (the Bazel-HTTP protocol), `preludes` (the
store of precompiled preludes: `PreludeStore`, `prelude_store_dir`, `entry_name`).
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "Caches": "compiles",
    "open_caches": "compiles",
    "open_cache": "compiles",
    "compile_key": "compiles",
    "restore_compile": "compiles",
    "store_compile": "compiles",
    "ArtifactCache": "store",
    "human_size": "store",
    "Remote": "remote",
    "open_remote": "remote",
    "remote_settings": "remote_config",
    "RemoteSettings": "remote_config",
    "PreludeStore": "preludes",
    "prelude_store_dir": "preludes",
    "entry_name": "preludes",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
