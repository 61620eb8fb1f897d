"""Reusing built binaries across directories, clones and machines' runs (ccache's direct mode, by content).

A unit's *base key* digests everything known before compiling: kind, the argv
digest (relative paths, identity-covered roots as placeholders), the compiler
identity, the binary context and the source's content. Under it a *manifest*
lists the header sets seen so far, each with the digests of those headers and
the *result key* of the binary built with them. A lookup hashes the listed
headers; when one set matches, the binary is restored from the cache. Header
paths are kept relative to the sub-build, so a moved or re-cloned directory,
or another directory with the same kernel, hits. An unknown identity never
uses the cache (fail closed).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import atomic
from .. import errors
from ..core.hashing import file_digest, text_digest
from ..core.oserrors import describe
from ..core.safeio import read_text
from ..core.settings import check_environment

if TYPE_CHECKING:
    from .remote import Remote
    from .remote_config import RemoteSettings
    from .store import ArtifactCache

VERSION = "pypto_build-cache-2"     # 2: header lists from -MD (system headers too)
MAX_CANDIDATES = 8


def compile_key(kind: str, argv_key: str, compiler_id: str, context_digest: str, source: str) -> str:
    return text_digest(VERSION, kind, argv_key, compiler_id, context_digest, file_digest(source))


def restore_compile(cache: ArtifactCache, base: str, sub_rel: str, out: Path) -> list[str] | None:
    """Restore the binary onto `out` if a recorded header set matches; its headers (root-relative) or None."""
    for cand in _manifest(cache, base, out):
        headers = {_from_sub(sub_rel, p): d for p, d in cand.get("headers", {}).items()}
        try:
            if all(file_digest(p) == d for p, d in headers.items()) and cache.get(cand["result"], out):
                return list(headers)
        except (OSError, KeyError, TypeError, ValueError):
            continue
    cache.record_miss()
    return None


def store_compile(cache: ArtifactCache, base: str, sub_rel: str, headers: list[str], out: Path) -> None:
    """Record the binary just built and the header set it was built with."""
    try:
        digests = {_to_sub(sub_rel, h): file_digest(h) for h in headers}
    except OSError:
        return                                   # a header vanished meanwhile: do not record
    result = text_digest(base, *(f"{p}={d}" for p, d in sorted(digests.items())))
    cache.put(result, out)
    cands = [c for c in _manifest(cache, base, out) if c.get("result") != result]
    cands = [{"headers": digests, "result": result}, *cands][:MAX_CANDIDATES]
    tmp = None
    try:                                         # best effort, as cache.put: a full disk only warns
        tmp = atomic.temp_path_for(out, ".manifest.tmp")
        tmp.write_text(json.dumps(cands), encoding="utf-8")
        cache.put(base, tmp, index=True)
    except OSError as exc:
        getattr(cache, "warn", errors.warn)(f"cache manifest of {out} not stored: {describe(exc)}")
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _manifest(cache: ArtifactCache, base: str, near: Path) -> list[dict]:
    tmp = None
    try:
        tmp = atomic.temp_path_for(near, ".manifest.tmp")
        if not cache.get(base, tmp, count=False):
            return []
        data = json.loads(read_text(tmp))
        return [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []
    except (OSError, ValueError):
        return []                               # a miss (a full disk fails the compile itself, in one line)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _to_sub(sub_rel: str, path: str) -> str:
    if os.path.isabs(path) or sub_rel == ".":
        return path
    prefix = sub_rel + "/"
    return path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, sub_rel)


def _from_sub(sub_rel: str, path: str) -> str:
    return path if os.path.isabs(path) or sub_rel == "." else os.path.normpath(os.path.join(sub_rel, path))


@dataclass(frozen=True)
class Caches:
    """Where one run's compiles restore binaries from and store them to: a local directory (absolute)
    and the run's remote (opened once, `remote.open_remote`), each optional. Picklable (a task argument)."""

    directory: str | None = None
    remote: Remote | None = None
    preludes: str | None = None     # the store of precompiled preludes (None: off)
    fresh_preludes: bool = False    # build each prelude used again (`--recompile`)


def open_caches(cache_dir: str | None = None, remote: RemoteSettings | Remote | None = None,
                preludes: bool = False, fresh: bool = False) -> Caches:
    """The caches of a run as its `options.Request` holds them: the local directory `cache_dir` and the
    remote — its settings (opened here, once: pinged; an unreachable server is dropped with one warning)
    or a `Remote` some leader already opened (`pypto-build ci`, used as it is) — and, with `preludes`, the
    store of precompiled preludes beside them (`preludes.prelude_store_dir`; `fresh`: each prelude a run uses
    is built again, as `--recompile` asks). Nothing is read from the
    environment here but where the user's cache folder is: the request did that."""
    if cache_dir:
        check_environment(cache=True)   # the cache size: one line, before anything is written
    if remote is not None:
        from .remote import Remote, open_remote      # a run with no remote never imports its HTTP code
        if not isinstance(remote, Remote):
            remote = open_remote(remote)
    directory = os.path.abspath(os.path.expanduser(cache_dir)) if cache_dir else None
    store = None
    if preludes:
        from .preludes import prelude_store_dir
        store = prelude_store_dir(directory)
    return Caches(directory, remote, store, fresh and store is not None)


def open_cache(directory: str | None, remote: Remote | None = None):
    """The cache of a run: local `--cache-dir`, the run's `remote.Remote` (local first), or None."""
    local = None
    if directory:
        from .store import ArtifactCache
        local = ArtifactCache.from_env(directory)
    if remote is None:
        return local
    from .remote import RemoteCache, TieredCache
    return TieredCache(local, RemoteCache(remote))
