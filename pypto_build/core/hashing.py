"""Content digests (xxh3-128) with a per-process memo keyed on the file's stat.

A file is read and hashed at most once per process while its stat identity
(device, inode, size, mtime_ns, ctime_ns) stays the same — the same idea as
ccache's inode cache — but only once its last change has settled (`racy`): a
same-size rewrite within one timestamp tick keeps the stat, so a digest of a
file changed that recently is never reused (a long-lived process such as
`ci` would otherwise keep an old digest past filestate's racy guard).
Digests are hex strings so they survive JSON state.

Between runs, the settled digests of files outside a build directory (the
compiler binary, the host runtime's headers, system headers: identities and
header sets) are kept in its `.pypto_build/digests.json` (`keep`, by a build
under its lock) and taken back by the next run's planning (`recall`, read
only) for a file whose stat identity is still the same — the memo's own rule,
across processes (a 1.3 MB g++ driver is not read again every run; a CANN
compiler is far larger).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import xxhash

from . import atomic
from .racy import changed_since
from .safeio import check_regular, open_regular, read_text

_CHUNK = 1 << 20
_memo: dict[tuple, str] = {}
_recalled: dict[str, tuple] = {}    # path -> (dev, ino, size, mtime_ns, ctime_ns, digest) kept by an earlier run
RECORD = "digests.json"
MAX_KEPT = 4096


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
        kept = _recalled.get(path)
        if kept is not None and kept[:5] == key[1:]:
            _memo[key] = digest = kept[5]
            return digest
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


def recall(state_dir: Path) -> None:
    """Take back the digests an earlier build kept in `state_dir` (planning: a missing or damaged record is
    none)."""
    try:
        data = json.loads(read_text(Path(state_dir) / RECORD))
        _recalled.update({p: tuple(k) for p, k in data.items()
                          if isinstance(p, str) and isinstance(k, list) and len(k) == 6 and isinstance(k[5], str)})
    except (OSError, ValueError, TypeError, AttributeError):
        pass


def keep(root: Path, state_dir: Path) -> None:
    """Keep, in `state_dir`, the settled digests of this process's files outside `root` for its next run (a
    build, under its lock); written only when one is new, and quietly skipped when it cannot be (the next run
    hashes)."""
    real_root = os.path.realpath(root) + os.sep
    kept = {path: [*key, digest] for (path, *key), digest in _memo.items()
            if os.path.isabs(path) and not (path + os.sep).startswith(real_root)}
    if not kept:
        return
    record = Path(state_dir) / RECORD
    try:
        old = json.loads(read_text(record))
        old = old if isinstance(old, dict) else {}
    except (OSError, ValueError):
        old = {}
    if all(old.get(p) == k for p, k in kept.items()):
        return
    merged = {**kept, **{p: k for p, k in old.items() if p not in kept}}
    try:
        atomic.write_text(record, json.dumps(dict(list(merged.items())[:MAX_KEPT])), sweep=True)
    except OSError:
        pass


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
