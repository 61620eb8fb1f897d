"""The local artifact cache: round trips, corruption, LRU eviction, stats across processes, concurrency."""
from __future__ import annotations

import errno
import multiprocessing
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_build.cache.store import ArtifactCache
from pypto_build.core.settings import parse_size

KEYS = [f"{i:02x}" + "5a" * 15 for i in range(20)]     # 32 hex digits, 20 shards


def content(index: int) -> bytes:
    """Distinct, deterministic contents of varying size for key KEYS[index]."""
    return random.Random(index).randbytes(1_000 + index * 1_000)


def temp_files(*dirs: Path) -> list[Path]:
    return [p for d in dirs for p in d.rglob("*.tmp")]


@pytest.fixture
def warnings() -> list[str]:
    return []


@pytest.fixture
def cache(tmp_path, warnings) -> ArtifactCache:
    return ArtifactCache(tmp_path / "cache", warn=warnings.append)


def test_round_trip_replaces_dest_atomically(cache, tmp_path, warnings):
    src = tmp_path / "built" / "libk.so"
    src.parent.mkdir()
    src.write_bytes(content(3))
    cache.put(KEYS[3], src)
    dest = tmp_path / "out" / "libk.so"
    dest.parent.mkdir()
    dest.write_bytes(b"old binary")
    with open(dest, "rb") as old:               # a reader of the old file keeps it whole
        assert cache.get(KEYS[3], dest)
        assert old.read() == b"old binary"
    assert dest.read_bytes() == content(3)
    assert dest.stat().st_mode & 0o777 == 0o755
    assert temp_files(cache.directory, dest.parent) == []
    assert cache.entry_path(KEYS[3]) == cache.directory / KEYS[3][:2] / KEYS[3]
    stats = cache.stats()
    assert (stats.entries, stats.hits, stats.misses, stats.stores) == (1, 1, 0, 1)
    assert stats.bytes == cache.entry_path(KEYS[3]).stat().st_size > len(content(3))
    assert warnings == []


def test_miss_leaves_dest_alone(cache, tmp_path):
    dest = tmp_path / "libk.so"
    assert not cache.get(KEYS[0], dest)
    assert not dest.exists()
    assert cache.stats().misses == 1


@pytest.mark.parametrize("damage", ["truncate", "flip_data", "flip_header", "empty"])
def test_corrupt_entry_warns_once_and_is_removed(cache, tmp_path, warnings, damage):
    src = tmp_path / "libk.so"
    src.write_bytes(content(5))
    cache.put(KEYS[5], src)
    entry = cache.entry_path(KEYS[5])
    data = bytearray(entry.read_bytes())
    if damage == "truncate":
        data = data[:-100]
    elif damage == "flip_data":
        data[-7] ^= 0x40
    elif damage == "flip_header":
        data[20] ^= 0x01                        # inside the stored digest
    else:
        data = bytearray()
    entry.write_bytes(bytes(data))
    dest = tmp_path / "out.so"
    assert not cache.get(KEYS[5], dest)
    assert not dest.exists()
    assert len(warnings) == 1 and str(entry) in warnings[0] and "corrupt" in warnings[0]
    assert not entry.exists()
    assert not cache.get(KEYS[5], dest)         # now a plain miss: no second warning
    assert len(warnings) == 1
    stats = cache.stats()
    assert (stats.corrupt, stats.misses, stats.entries, stats.bytes) == (1, 2, 0, 0)
    assert temp_files(tmp_path) == []


def test_eviction_drops_least_recently_used(tmp_path, warnings):
    src = tmp_path / "blob"
    src.write_bytes(b"x" * 1000)
    probe = ArtifactCache(tmp_path / "probe")
    probe.put(KEYS[0], src)
    size = probe.entry_path(KEYS[0]).stat().st_size
    cache = ArtifactCache(tmp_path / "cache", max_bytes=3 * size, warn=warnings.append)
    for key in KEYS[:3]:                        # a, b, c: exactly at the limit, nothing goes
        cache.put(key, src)
    assert cache.stats().entries == 3
    assert cache.get(KEYS[0], tmp_path / "a")   # a becomes the most recently used
    cache.put(KEYS[3], src)                     # d: b (oldest) goes
    cache.put(KEYS[4], src)                     # e: c goes
    present = [k for k in KEYS[:5] if cache.entry_path(k).exists()]
    assert present == [KEYS[0], KEYS[3], KEYS[4]]
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.evicted) == (3, 3 * size, 2)
    smaller = ArtifactCache(cache.directory, max_bytes=size)
    assert smaller.evict() == 2 * size          # keeps only e, the newest
    assert [k for k in KEYS[:5] if cache.entry_path(k).exists()] == [KEYS[4]]
    assert smaller.evict() == 0
    assert warnings == []


def test_clean_empties_and_reports_bytes(cache, tmp_path):
    src = tmp_path / "blob"
    for i in range(4):
        src.write_bytes(content(i))
        cache.put(KEYS[i], src)
    total = cache.stats().bytes
    assert total > sum(len(content(i)) for i in range(4))
    assert cache.clean() == total
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.stores) == (0, 0, 4)
    assert not cache.get(KEYS[0], tmp_path / "out")
    assert cache.clean() == 0


_SCRIPT = """
import sys
from pathlib import Path
from pypto_build.cache.store import ArtifactCache
cache = ArtifactCache(Path(sys.argv[1]))
src = Path(sys.argv[1]).parent / "src"
cache.put(sys.argv[2], src)
assert cache.get(sys.argv[2], Path(sys.argv[1]).parent / "dest")
assert not cache.get("f" * 32, Path(sys.argv[1]).parent / "dest")
"""


def test_stats_persist_across_processes(tmp_path):
    (tmp_path / "src").write_bytes(b"binary")
    for key in KEYS[:2]:
        subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "cache"), key], check=True)
    stats = ArtifactCache(tmp_path / "cache").stats()
    assert (stats.entries, stats.hits, stats.misses, stats.stores, stats.corrupt) == (2, 2, 2, 2, 0)


def _hammer(directory: str, worker: int, rounds: int, max_bytes: int) -> tuple[int, int, list[str]]:
    """Put and get every key `rounds` times; return (hits, wrong restores, warnings)."""
    warned: list[str] = []
    cache = ArtifactCache(Path(directory), max_bytes=max_bytes, warn=warned.append)
    work = Path(directory).parent / f"w{worker}"
    work.mkdir()
    for index, key in enumerate(KEYS):
        (work / f"src{index}").write_bytes(content(index))
    rng = random.Random(worker)
    hits = wrong = 0
    for _ in range(rounds):
        for index in rng.sample(range(len(KEYS)), len(KEYS)):
            cache.put(KEYS[index], work / f"src{index}")
            index = rng.randrange(len(KEYS))
            dest = work / "dest.so"
            if cache.get(KEYS[index], dest):
                hits += 1
                wrong += dest.read_bytes() != content(index)
    return hits, wrong, warned


@pytest.mark.slow
def test_concurrent_processes_never_see_torn_entries(tmp_path):
    directory = tmp_path / "cache"
    total = sum(len(content(i)) for i in range(len(KEYS)))
    workers, rounds = 4, 100
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        results = pool.starmap(_hammer, [(str(directory), w, rounds, total // 2) for w in range(workers)])
    assert sum(r[0] for r in results) > 0
    assert [r[1] for r in results] == [0] * workers
    assert [r[2] for r in results] == [[]] * workers
    assert temp_files(tmp_path) == []
    stats = ArtifactCache(directory, max_bytes=total // 2).stats()
    ops = workers * rounds * len(KEYS)
    assert stats.stores == ops and stats.hits + stats.misses == ops and stats.corrupt == 0
    assert stats.evicted > 0 and stats.bytes <= total // 2


def test_from_env(tmp_path):
    assert ArtifactCache.from_env(env={}) is None
    assert ArtifactCache.from_env(env={"PYPTO_BUILD_CACHE": ""}) is None
    cache = ArtifactCache.from_env(env={"PYPTO_BUILD_CACHE": str(tmp_path / "c")})
    assert cache.directory == tmp_path / "c" and cache.max_bytes == 5 * 2**30
    cache = ArtifactCache.from_env(tmp_path / "flag", env={"PYPTO_BUILD_CACHE": str(tmp_path / "c"),
                                                         "PYPTO_BUILD_CACHE_SIZE": "500M"})
    assert cache.directory == tmp_path / "flag" and cache.max_bytes == 500 * 2**20
    assert ArtifactCache.from_env(str(tmp_path), env={"PYPTO_BUILD_CACHE_SIZE": "5G"}).max_bytes == 5 * 2**30
    for text, expected in [("1024", 1024), ("1.5K", 1536), ("64KiB", 65536), ("2g", 2 * 2**30), ("10MB", 10 * 2**20)]:
        assert parse_size(text) == expected
    for bad in ["", "lots", "5X", "-1G", "1.2.3M"]:
        with pytest.raises(ValueError):
            parse_size(bad)
    with pytest.raises(ValueError):
        ArtifactCache.from_env(str(tmp_path), env={"PYPTO_BUILD_CACHE_SIZE": "big"})


@pytest.mark.parametrize("key", ["../x", "../" + "a" * 30, "ab/" + "c" * 30, "a" * 15, "a" * 129, "g" * 32, ""])
def test_hostile_key_rejected(cache, tmp_path, key):
    (tmp_path / "src").write_bytes(b"x")
    with pytest.raises(ValueError):
        cache.put(key, tmp_path / "src")
    with pytest.raises(ValueError):
        cache.get(key, tmp_path / "dest")
    assert not (tmp_path / "x").exists()


def test_put_failures_only_warn(cache, tmp_path, warnings, monkeypatch):
    cache.put(KEYS[0], tmp_path / "missing")
    assert len(warnings) == 1 and "not stored" in warnings[0]
    (tmp_path / "src").write_bytes(b"binary")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "replace", full)
    cache.put(KEYS[1], tmp_path / "src")
    monkeypatch.undo()
    assert len(warnings) == 2 and "disk full" in warnings[1]
    assert temp_files(tmp_path) == []
    assert cache.stats().entries == 0
