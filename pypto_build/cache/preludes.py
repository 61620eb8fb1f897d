"""The store of precompiled preludes: one per user, beside the artefact cache, bounded in size.

Layout under the store's directory (`prelude_store_dir`: `<cache dir>/preludes` when an artefact cache is
configured, else `$XDG_CACHE_HOME/pypto_build/preludes`, by default `~/.cache/pypto_build/preludes`)::

    <key>.json        which entry answers the prelude `key` now (written atomically)
    <entry>/          an entry, never changed once made: prelude.h, prelude.h.gch, entry.json
                      (the key, the .gch's size and digest, every header the compiler read with its digest)
    locks/<key>       flocked while `key` is built: a second run (or directory) waits, then finds it made
    .lock             flocked while entries are counted and the oldest removed (at most `$PYPTO_BUILD_PCH_SIZE`,
                      default 2 GiB, in all), or all of them (`clean`)
    .tmp-*            an entry being built (renamed into place when whole; a killed builder's is swept)

An entry is named by its key and its headers' digests, so an edited header makes another entry, never
changes one in use. `current` trusts an entry only when its files are whole and every header it read still
has its digest: GCC itself checks neither (it accepts a PCH made from headers since edited).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..core import atomic, settings
from .store import STALE_TMP_S, flocked
from ..core.hashing import file_digest, text_digest
from ..core.safeio import read_text

HEADER, PCH, META = "prelude.h", "prelude.h.gch", "entry.json"


def prelude_store_dir(cache_dir: str | None, env: Mapping[str, str] | None = None) -> str:
    """Where this user's preludes live: beside the artefact cache (`cache_dir`), else the user's cache folder."""
    if cache_dir:
        return os.path.join(cache_dir, "preludes")
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "pypto_build", "preludes")


@dataclass(frozen=True)
class Entry:
    """A whole, current entry: its folder, and the headers it was made from with their digests."""

    path: str
    name: str
    headers: dict[str, str]

    @property
    def header(self) -> str:
        """What a kernel's compile names with `-include` (GCC finds the `.gch` beside it)."""
        return os.path.join(self.path, HEADER)


class PreludeStore:
    """The store at `directory`: `current` finds a prelude's entry, `make` builds one (once, across runs)."""

    def __init__(self, directory: str | os.PathLike, max_bytes: int | None = None) -> None:
        self.directory = Path(directory)
        self.max_bytes = settings.pch_size() if max_bytes is None else max_bytes

    def current(self, key: str) -> Entry | None:
        """The entry that answers `key`, when whole and made from headers that are unchanged; else None."""
        try:
            ref = json.loads(read_text(self.directory / f"{key}.json"))
            return self.entry(ref["entry"], key)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def entry(self, name: str, key: str) -> Entry | None:
        """Entry `name` of `key` when whole and current (see `current`)."""
        folder = self.directory / name
        try:
            meta = json.loads(read_text(folder / META))
            if meta["key"] != key or text_digest(key, *_pairs(meta["headers"])) != name:
                return None
            if os.stat(folder / PCH).st_size != meta["size"] or not (folder / HEADER).is_file():
                return None
            headers = {str(p): str(d) for p, d in meta["headers"].items()}
            if any(file_digest(p) != d for p, d in headers.items()):
                return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        with contextlib.suppress(OSError):
            now = time.time_ns()
            os.utime(folder / META, ns=(now, now))          # most recently used: eviction spares it
        return Entry(os.fspath(folder), name, headers)

    def holds(self, name: str) -> bool:
        """Whether entry `name` is still in the store (eviction may have removed it)."""
        return (self.directory / name / PCH).is_file()

    def answers(self, key: str, name: str) -> bool:
        """Whether the store still names entry `name` for `key`, and holds it (no header is hashed)."""
        try:
            return json.loads(read_text(self.directory / f"{key}.json"))["entry"] == name and self.holds(name)
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def forget(self, key: str, name: str) -> None:
        """Drop entry `name` of `key` (GCC would not take it): the next `make` builds it again."""
        with flocked(self.directory / "locks" / key):
            if self.answers(key, name):
                with contextlib.suppress(OSError):
                    os.unlink(self.directory / f"{key}.json")
                self._remove(self.directory / name)

    def _remove(self, entry: Path) -> bool:
        """Move an entry aside, then delete it (a reader sees it whole or not at all); whether it was there."""
        aside = self.directory / f".tmp-removed-{entry.name}-{os.getpid()}"
        try:
            os.rename(entry, aside)
        except OSError:
            return False
        shutil.rmtree(aside, ignore_errors=True)
        return True

    def make(self, key: str, text: str, build: Callable[[Path, Path], list[str]]) -> Entry:
        """The current entry of `key`, built when there is none: `build(header, pch)` compiles the header (whose
        text is `text`) into `pch` and returns the headers it read (resolved). Under the key's lock, so
        concurrent runs build it once; whatever `build` raises leaves nothing behind."""
        with flocked(self.directory / "locks" / key):
            found = self.current(key)
            if found is not None:
                return found
            self._sweep()
            scratch = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.directory))
            try:
                atomic.write_text(scratch / HEADER, text)
                headers = [h for h in build(scratch / HEADER, scratch / PCH)
                           if not h.startswith(os.path.realpath(scratch) + os.sep)]
                digests = {h: file_digest(h) for h in headers}
                name = text_digest(key, *_pairs(digests))
                size = os.stat(scratch / PCH).st_size
                with open(scratch / PCH, "rb") as gch:
                    os.fsync(gch.fileno())
                atomic.write_text(scratch / META, json.dumps({"key": key, "size": size, "headers": digests,
                                                               "digest": file_digest(os.fspath(scratch / PCH))}))
                final = self.directory / name
                try:
                    os.rename(scratch, final)
                except OSError:
                    if not (final / META).is_file():       # not an identical entry made meanwhile: a real error
                        raise
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            atomic.write_text(self.directory / f"{key}.json", json.dumps({"entry": name}))
            made = self.entry(name, key)
            if made is None:
                raise OSError(f"{final}: the precompiled prelude just made is not whole or a header it read changed "
                              "meanwhile")
        self.evict(keep=name)
        return made

    def evict(self, keep: str = "") -> int:
        """Remove the least recently used entries (never `keep`) until the store holds at most `max_bytes`;
        the bytes freed. An entry is moved aside before it is deleted: a kernel using it fails, and compiles
        the plain way."""
        with flocked(self.directory / ".lock"):
            entries = []
            for item in self._entries():
                try:
                    used = os.stat(item / META).st_mtime_ns
                except OSError:
                    used = 0
                entries.append((used, item, _size(item)))
            total, freed = sum(size for _, _, size in entries), 0
            for _, item, size in sorted(entries):
                if total - freed <= self.max_bytes:
                    break
                if item.name == keep:
                    continue
                if self._remove(item):
                    freed += size
            return freed

    def clean(self) -> int:
        """Remove every entry (each moved aside first: a kernel using one compiles the plain way); the bytes freed."""
        with flocked(self.directory / ".lock"):
            freed = 0
            for item in self._entries():
                size = _size(item)
                if self._remove(item):
                    freed += size
            with contextlib.suppress(OSError):
                for e in os.scandir(self.directory):
                    if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                        os.unlink(e.path)
            return freed

    def usage(self) -> tuple[int, int]:
        """(entries, bytes) in the store now."""
        sizes = [_size(item) for item in self._entries()]
        return len(sizes), sum(sizes)

    def _entries(self) -> list[Path]:
        try:
            return [Path(e.path) for e in os.scandir(self.directory)
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name != "locks"]
        except OSError:
            return []

    def _sweep(self) -> None:
        """Remove what a killed builder left (older than an hour: a live one is still writing)."""
        cutoff = time.time() - STALE_TMP_S
        with contextlib.suppress(OSError):
            for e in os.scandir(self.directory):
                if e.name.startswith(".tmp-") and e.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(e.path, ignore_errors=True)


def _pairs(headers: Mapping[str, str]) -> list[str]:
    return [f"{p}\0{d}" for p, d in sorted(headers.items())]


def _size(folder: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for e in os.scandir(folder):
            with contextlib.suppress(OSError):
                total += e.stat(follow_symlinks=False).st_size
    return total
