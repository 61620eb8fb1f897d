"""A local content-addressed cache of built binaries (like ccache), shareable by processes.

Layout under the cache directory::

    .lock            flocked for accounting, eviction and clean (never deleted); holds the
                     persisted counters and tracked total size as JSON padded to 256 bytes
    ab/abcdef...     one entry per key, sharded by the key's first two hex digits:
                     a 36-byte header (magic, flags, xxh3-128 of the data, data length) + the data
    ab/.abcdef....tmp  a writer's private temp file, renamed onto the entry when complete

Writers fill a unique temp file and `os.replace` it onto the entry, so readers see
an old or new entry, never a torn one; concurrent writers of one key store identical
content and the last one wins. A reader verifies length and digest while copying,
so a truncated or flipped entry is reported once, removed and counted. Entry mtimes
(set explicitly, in ns) record the last store or hit; eviction drops the oldest first.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

import xxhash

from ..core import atomic
from .. import errors
from ..core.safeio import NotRegularFile, kind_of, open_regular
from ..core.settings import CACHE, DEFAULT_CACHE_BYTES, cache_size

_HEADER = struct.Struct("<8sI16sQ")      # magic, flags, raw xxh3-128 digest, data length
_MAGIC = b"PTOAC\x00\x00\x01"
_EXEC = 1                                # flag: the stored file was executable
_INDEX = 2                               # flag: an index record (compiles.py's manifest), not a binary
_CHUNK = 1 << 20
_KEY_RE = re.compile(r"[0-9a-f]{16,128}")
_SHARD_RE = re.compile(r"[0-9a-f]{2}")
STALE_TMP_S = 3600                      # temp files older than this are crash leftovers
_STATS_SIZE = 256                        # bytes of padded JSON counters in .lock
_COUNTERS = ("hits", "misses", "stores", "corrupt", "evicted")


@dataclass(frozen=True)
class CacheStats:
    """Entries and bytes on disk now, plus counters persisted across processes.

    `entries`/`bytes` count everything; `binaries`/`binary_bytes` only stored binaries (not index
    records); hits and misses count binary lookups, one per compile unit that asked.
    """
    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    stores: int
    corrupt: int
    evicted: int
    binaries: int = 0
    binary_bytes: int = 0

    def summary(self, directory: Path) -> str:
        """One line for people: binaries and their size, the limit, the counters."""
        index = self.entries - self.binaries
        return (f"cache {directory}: {self.binaries} binaries ({human_size(self.binary_bytes)})"
                + (f" + {index} index records ({human_size(self.bytes - self.binary_bytes)})" if index else "")
                + f", limit {human_size(self.max_bytes)}; {self.hits} hits, {self.misses} misses, "
                  f"{self.stores} stores, {self.corrupt} corrupt dropped, {self.evicted} evicted")


def human_size(n: int) -> str:
    """Bytes in binary units, as people read them: 512 B, 3.4 KiB, 5.0 GiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _unlink(path: Path | str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@contextlib.contextmanager
def flocked(path: Path) -> Iterator[int]:
    """Hold the exclusive flock on the regular file `path` (made with its folder if missing; a fresh fd, so
    threads and forks exclude too); yields the fd."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):        # a FIFO: pread would fail, a device could do anything
            raise NotRegularFile(path, kind_of(st.st_mode))
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


class ArtifactCache:
    """The local store: `get` restores a binary by key, `put` stores one."""

    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_CACHE_BYTES,
                 warn: Callable[[str], None] | None = None) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.warn = warn or errors.warn

    @classmethod
    def from_env(cls, directory: str | Path | None = None,
                 env: Mapping[str, str] | None = None) -> "ArtifactCache | None":
        """The cache at `directory` (--cache-dir), else $PYPTO_BUILD_CACHE, else None."""
        env = os.environ if env is None else env
        where = directory or env.get(CACHE) or None
        if where is None:
            return None
        return cls(Path(os.path.expanduser(str(where))), max_bytes=cache_size(env))

    # -- paths and locking ---------------------------------------------------------
    def entry_path(self, key: str) -> Path:
        """Where entry `key` lives; ValueError unless `key` is 16..128 hex digits."""
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key.lower()):
            raise ValueError(f"invalid cache key {key!r} (expected 16..128 hex digits)")
        key = key.lower()
        return self.directory / key[:2] / key

    def _locked(self) -> contextlib.AbstractContextManager[int]:
        """Hold the exclusive flock on `<dir>/.lock`."""
        return flocked(self.directory / ".lock")

    @staticmethod
    def _read_counters(fd: int) -> dict[str, int]:
        """The counters kept in the lock file (zeros if it is new or damaged)."""
        try:
            data = json.loads(os.pread(fd, _STATS_SIZE, 0) or b"{}")
            return {name: int(data.get(name, 0)) for name in (*_COUNTERS, "bytes")}
        except (ValueError, TypeError, AttributeError):
            return dict.fromkeys((*_COUNTERS, "bytes"), 0)

    @staticmethod
    def _write_counters(fd: int, counters: dict[str, int]) -> None:
        """One fixed-size pwrite (whitespace-padded), so no truncate and no torn tail."""
        os.pwrite(fd, json.dumps(counters).encode().ljust(_STATS_SIZE), 0)

    def _bump(self, fd: int, **deltas: int) -> dict[str, int]:
        """Add `deltas` to the persisted counters (caller holds the lock); return them."""
        counters = self._read_counters(fd)
        for name, delta in deltas.items():
            counters[name] = max(0, counters[name] + delta)
        self._write_counters(fd, counters)
        return counters

    def _count(self, **deltas: int) -> None:
        """Bump counters under the lock; a failure only warns (statistics are not worth a build)."""
        try:
            with self._locked() as fd:
                self._bump(fd, **deltas)
        except OSError as exc:
            self.warn(f"cache statistics in {self.directory} not updated: {exc}")

    # -- get / put --------------------------------------------------------------------
    def record_miss(self) -> None:
        """Count one lookup that found nothing to restore (`get(count=False)` calls count nothing)."""
        self._count(misses=1)

    def record_hit(self) -> None:
        """Count one binary restored from elsewhere (the remote behind this cache)."""
        self._count(hits=1)

    def get(self, key: str, dest: Path, *, count: bool = True) -> bool:
        """Restore entry `key` onto `dest` atomically; False on a miss or a corrupt entry.

        `count`: this lookup is a unit's binary (hits/misses); index lookups pass False.
        """
        path, dest = self.entry_path(key), Path(dest)
        try:
            handle = open_regular(path)             # a planted FIFO or device is never read
        except FileNotFoundError:
            if count:
                self._count(misses=1)
            return False
        except OSError as exc:
            self.warn(f"cache entry {path} unreadable: {exc}")
            if count:
                self._count(misses=1)
            return False
        tmp = None
        with handle:
            try:
                st = os.fstat(handle.fileno())
                raw = handle.read(_HEADER.size)
                magic, flags, digest, length = (_HEADER.unpack(raw) if len(raw) == _HEADER.size
                                                else (b"", 0, b"", -1))
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = atomic.temp_path_for(dest)     # swept by the next writer of `dest` if we are killed
                hasher, copied = xxhash.xxh3_128(), 0
                with open(tmp, "wb") as out:
                    while chunk := handle.read(min(_CHUNK, length - copied + 1)):
                        hasher.update(chunk)
                        out.write(chunk)
                        copied += len(chunk)
                        if copied > length:
                            break
                    reason = ("bad header" if magic != _MAGIC else
                              f"{copied} data bytes, header says {length}" if copied != length else
                              "digest mismatch" if hasher.digest() != digest else None)
                    if reason is None:
                        os.fchmod(out.fileno(), 0o755 if flags & _EXEC or dest.suffix == ".so" else 0o644)
                if reason is not None:
                    _unlink(tmp)
                    self._drop_corrupt(path, st, reason)
                    return False
                os.replace(tmp, dest)
            except OSError as exc:
                if tmp is not None:
                    _unlink(tmp)
                self.warn(f"cache entry {path} not restored to {dest}: {exc}")
                if count:
                    self._count(misses=1)
                return False
        now = time.time_ns()
        with contextlib.suppress(OSError):
            os.utime(path, ns=(now, now))          # most recently used
        if count:
            self._count(hits=1)
        return True

    def _drop_corrupt(self, path: Path, st: os.stat_result, reason: str) -> None:
        """Warn once about a corrupt entry and remove it unless a writer has replaced it meanwhile."""
        self.warn(f"ignoring corrupt cache entry {path} ({reason}); removed")
        try:
            with self._locked() as fd:
                freed = 0
                with contextlib.suppress(FileNotFoundError):
                    now = os.stat(path)
                    if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                        os.unlink(path)
                        freed = st.st_size
                self._bump(fd, corrupt=1, misses=1, bytes=-freed)
        except OSError as exc:
            self.warn(f"corrupt cache entry {path} not removed: {exc}")

    def put(self, key: str, src: Path, *, index: bool = False) -> None:
        """Store a copy of `src` under `key` atomically; I/O failures (full disk, races) only warn.

        `index`: an index record (not a binary; `stats` tells them apart).
        """
        path = self.entry_path(key)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as out, open_regular(src) as handle:
                flags = (_EXEC if os.fstat(handle.fileno()).st_mode & 0o111 else 0) | (_INDEX if index else 0)
                out.write(b"\0" * _HEADER.size)
                hasher, length = xxhash.xxh3_128(), 0
                while chunk := handle.read(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
                    length += len(chunk)
                out.flush()
                os.pwrite(out.fileno(), _HEADER.pack(_MAGIC, flags, hasher.digest(), length), 0)
                os.fchmod(out.fileno(), 0o644)
            now = time.time_ns()
            os.utime(tmp, ns=(now, now))
            size = _HEADER.size + length
            with self._locked() as fd:
                try:
                    old = os.stat(path).st_size
                except FileNotFoundError:
                    old = 0
                os.replace(tmp, path)
                tmp = None
                counters = self._bump(fd, stores=1, bytes=size - old)
                if counters["bytes"] > self.max_bytes:
                    self._evict_locked(fd)
        except OSError as exc:
            what = ("disk full; free space in the cache's filesystem (or lower PYPTO_BUILD_CACHE_SIZE)"
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT) else str(exc))
            self.warn(f"cache entry {path} not stored: {what}")
        finally:
            if tmp is not None:
                _unlink(tmp)

    # -- management ---------------------------------------------------------------------
    def _scan(self) -> tuple[list[tuple[int, str, int, Path]], list[Path]]:
        """(mtime_ns, name, size, path) of every entry, and stale temp files."""
        entries: list[tuple[int, str, int, Path]] = []
        stale: list[Path] = []
        cutoff = time.time() - STALE_TMP_S
        try:
            with os.scandir(self.directory) as it:
                top = list(it)
        except FileNotFoundError:
            return entries, stale
        for shard in (d for d in top if _SHARD_RE.fullmatch(d.name) and d.is_dir()):
            with contextlib.suppress(FileNotFoundError), os.scandir(shard.path) as it:
                for item in it:
                    with contextlib.suppress(FileNotFoundError):
                        if _KEY_RE.fullmatch(item.name) and item.name.startswith(shard.name):
                            st = item.stat(follow_symlinks=False)
                            entries.append((st.st_mtime_ns, item.name, st.st_size, Path(item.path)))
                        elif item.name.endswith(".tmp") and item.stat().st_mtime < cutoff:
                            stale.append(Path(item.path))
        return entries, stale

    def _evict_locked(self, fd: int) -> int:
        entries, stale = self._scan()
        for path in stale:
            _unlink(path)
        total = sum(size for _, _, size, _ in entries)
        freed = count = 0
        for _, _, size, path in sorted(entries):
            if total - freed <= self.max_bytes:
                break
            _unlink(path)
            freed += size
            count += 1
        counters = self._read_counters(fd)
        counters["evicted"] += count
        counters["bytes"] = total - freed           # resynchronise the tracked size with the disk
        self._write_counters(fd, counters)
        return freed

    def evict(self) -> int:
        """Remove least-recently-used entries until the total is <= max_bytes; return bytes freed."""
        with self._locked() as fd:
            return self._evict_locked(fd)

    def clean(self) -> int:
        """Remove every entry (and stale temp files); return the bytes freed."""
        with self._locked() as fd:
            entries, stale = self._scan()
            freed = 0
            for path in stale:
                _unlink(path)
            for _, _, size, path in entries:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    freed += size
            counters = self._read_counters(fd)
            counters["bytes"] = 0
            self._write_counters(fd, counters)
            return freed

    def stats(self) -> CacheStats:
        """Entries and bytes on disk now, with the persisted counters (none yet: zeros; a read makes no lock)."""
        if not os.path.lexists(self.directory / ".lock"):
            entries, _ = self._scan()
            counters = dict.fromkeys((*_COUNTERS, "bytes"), 0)
        else:
            with self._locked() as fd:
                entries, _ = self._scan()
                counters = self._read_counters(fd)
        binaries = [size for _, _, size, path in entries if not _is_index(path)]
        return CacheStats(entries=len(entries), bytes=sum(size for _, _, size, _ in entries),
                          max_bytes=self.max_bytes, binaries=len(binaries),
                          binary_bytes=sum(binaries) - _HEADER.size * len(binaries),
                          **{name: counters[name] for name in _COUNTERS})


def _is_index(path: Path) -> bool:
    """Whether the entry at `path` is an index record (its header says so; unreadable: not a binary)."""
    try:
        with open_regular(path) as handle:
            raw = handle.read(_HEADER.size)
    except OSError:
        return True
    return len(raw) != _HEADER.size or bool(_HEADER.unpack(raw)[1] & _INDEX)
