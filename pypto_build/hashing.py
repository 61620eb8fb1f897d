"""Content digests (xxh3-128) with a per-process memo keyed on the file's stat.

A file is read and hashed at most once per process while its stat identity
(device, inode, size, mtime_ns, ctime_ns) stays the same — the same idea as
ccache's inode cache — but only once its last change has settled (`racy`): a
same-size rewrite within one timestamp tick keeps the stat, so a digest of a
file changed that recently is never reused (a long-lived process such as
`ci` would otherwise keep an old digest past filestate's racy guard).
Digests are hex strings so they survive JSON state.
"""
from __future__ import annotations

import os
import time

import xxhash

from .racy import changed_since
from .safeio import check_regular, open_regular

_CHUNK = 1 << 20
_memo: dict[tuple, str] = {}


def stat_key(path: str, st: os.stat_result) -> tuple:
    """The identity under which a digest of `path` may be reused."""
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(path: str, st: os.stat_result | None = None) -> str:
    """xxh3-128 hex digest of the file at `path` (memoised on its stat).

    Only a regular file is read: a FIFO or device raises `safeio.NotRegularFile` (an OSError) at once.
    """
    st = check_regular(path, st)
    key = stat_key(path, st)
    digest = _memo.get(key)
    if digest is None:
        hasher = xxhash.xxh3_128()
        with open_regular(path) as handle:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
        digest = hasher.hexdigest()
        if not changed_since(st, time.time_ns()):
            _memo[key] = digest
    return digest


def remember(path: str, st: os.stat_result, digest: str) -> None:
    """Take `digest` as the content of `path` at stat `st` for the rest of the process: a state recorded
    as settled (`filestate`: trusted) whose stat is still the same. The compile after a check then
    reads none of the headers the check confirmed (the system headers of a one-edit rebuild)."""
    _memo.setdefault(stat_key(path, st), digest)


def bytes_digest(data: bytes) -> str:
    """xxh3-128 hex digest of `data`."""
    return xxhash.xxh3_128_hexdigest(data)


def text_digest(*parts: str) -> str:
    """Digest of a sequence of strings, unambiguous about boundaries."""
    hasher = xxhash.xxh3_128()
    for part in parts:
        data = part.encode("utf-8", "surrogateescape")
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()


def forget(path: str | None = None) -> None:
    """Drop memoised digests (all, or those of one path); for tests."""
    if path is None:
        _memo.clear()
        return
    for key in [k for k in _memo if k[0] == path]:
        del _memo[key]
