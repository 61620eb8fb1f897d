"""The store of precompiled preludes: one per user, beside the artefact cache, bounded in size.

Layout under the store's directory (`prelude_store_dir`: `<cache dir>/preludes` when an artefact cache is
configured, else `$XDG_CACHE_HOME/pypto_build/preludes`, by default `~/.cache/pypto_build/preludes`)::

    <key>.json        what answers the prelude `key` now (written atomically): {"entry": name}, or
                      {"entry": null, "name": name, "why": ...} when the headers named `name` cannot make an exact one
    <entry>/          an entry, never changed once made: prelude.h, prelude.h.gch, entry.json
                      (the key, the .gch's size and digest, every header the compiler read with its digest)
    locks/<key>       flocked while `key` is built: a second run (or directory) waits, then finds it made
    .lock             flocked while entries are counted and the oldest removed (at most `$PYPTO_BUILD_PCH_SIZE`,
                      default 2 GiB, in all), or all of them (`clean`)
    .tmp-*            an entry being built, or a resolution probe (renamed into place when whole; a killed
                      builder's is swept)

An entry is named (`entry_name`) by its key and every header the compiler reads for it, by the path it found
each at (so a header found elsewhere in the search path now, or through a retargeted symbolic link, names
another entry) and its digest (so an edited header makes another entry, never changes one in use). `entry`
trusts one only when its files are whole — the .gch by its digest, every time — and every header still has
its digest: GCC itself checks neither (it accepts a PCH made from headers since edited).
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

    def ref(self, key: str) -> dict:
        """What `<key>.json` says answers `key` (empty: nothing)."""
        try:
            ref = json.loads(read_text(self.directory / f"{key}.json"))
        except (OSError, ValueError):
            return {}
        return ref if isinstance(ref, dict) else {}

    def current(self, key: str) -> Entry | None:
        """The entry that answers `key`, when whole and made from headers that are unchanged; else None."""
        return self.lookup(key)[0]

    def lookup(self, key: str) -> tuple[Entry | None, str]:
        """`current(key)`, and when there is none the refusal recorded for `key` (`refuse`; '' when none is)."""
        ref = self.ref(key)
        name = ref.get("entry")
        entry = self.entry(name, key) if isinstance(name, str) else None
        return entry, "" if entry is not None else str(ref.get("why") or "")

    def refuse(self, key: str, name: str, why: str) -> None:
        """Record that the headers `name` stands for make no exact prelude of `key` (`why`): its kernels compile
        the plain way until they change."""
        with flocked(self.directory / "locks" / key):
            atomic.write_text(self.directory / f"{key}.json", json.dumps({"entry": None, "name": name, "why": why}))

    def entry(self, name: str, key: str) -> Entry | None:
        """Entry `name` of `key` when whole and current (see `current`)."""
        folder = self.directory / name
        try:
            meta = json.loads(read_text(folder / META))
            if meta["key"] != key or entry_name(key, meta["headers"]) != name:
                return None
            if (os.stat(folder / PCH).st_size != meta["size"] or file_digest(os.fspath(folder / PCH)) != meta["digest"]
                    or not (folder / HEADER).is_file()):
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
        return self.ref(key).get("entry") == name and self.holds(name)

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

    def make(self, key: str, text: str, headers: Mapping[str, str], build: Callable[[Path, Path], list[str]],
             *, fresh: bool = False) -> Entry:
        """The entry of `key` for `headers` (each header the compiler finds, by the path it found it at, and its
        digest: the resolution probed just before), built when the store has none whole (`fresh`: built again
        anyway, `--recompile`), and named by `<key>.json` from then on. `build(header, pch)` compiles the header
        (whose text is `text`) into `pch` and returns the headers it read, which must be `headers` (else the
        file system moved meanwhile: OSError). Under the key's lock, so concurrent runs build it once; whatever
        `build` raises leaves nothing behind."""
        name = entry_name(key, headers)
        with flocked(self.directory / "locks" / key):
            found = None if fresh else self.entry(name, key)
            if found is None:
                self._build(key, name, text, headers, build)
                found = self.entry(name, key)
                if found is None:
                    raise OSError(f"{self.directory / name}: the precompiled prelude just made is not whole or a "
                                  "header it read changed meanwhile")
            atomic.write_text(self.directory / f"{key}.json", json.dumps({"entry": name}))
        self.evict(keep=name)
        return found

    def _build(self, key: str, name: str, text: str, headers: Mapping[str, str],
               build: Callable[[Path, Path], list[str]]) -> None:
        """Build entry `name` in a temp folder and rename it into place whole (replacing an older one)."""
        self._sweep()
        scratch = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.directory))
        try:
            atomic.write_text(scratch / HEADER, text)
            read = [h for h in build(scratch / HEADER, scratch / PCH)
                    if not h.startswith(os.fspath(scratch) + os.sep)]
            digests = {h: file_digest(h) for h in read}
            if digests != dict(headers):
                raise OSError("the headers it read are not the ones found just before (changed meanwhile); "
                              "build again")
            size = os.stat(scratch / PCH).st_size
            with open(scratch / PCH, "rb") as gch:
                os.fsync(gch.fileno())
            atomic.write_text(scratch / META, json.dumps({"key": key, "size": size, "headers": digests,
                                                           "digest": file_digest(os.fspath(scratch / PCH))}))
            final = self.directory / name
            self._remove(final)                             # a rebuilt one (--recompile) or a damaged one
            os.rename(scratch, final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

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


def entry_name(key: str, headers: Mapping[str, str]) -> str:
    """The entry of `key` made from `headers` (path as the compiler found it -> digest)."""
    return text_digest(key, *_pairs(headers))


def _pairs(headers: Mapping[str, str]) -> list[str]:
    return [f"{p}\0{d}" for p, d in sorted(headers.items())]


def _size(folder: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for e in os.scandir(folder):
            with contextlib.suppress(OSError):
                total += e.stat(follow_symlinks=False).st_size
    return total
