"""`pypto-build ci --shard K/N`: which of N machines builds which directory, the same answer on each.

Every machine of a CI matrix is given the same directories and computes the
same plan, whatever order they come in and wherever the checkout lives: a
directory's key is its path as given, normalised (posix; relative to the
current directory when inside it, whichever name reaches it — its real path or
a symbolic link, as `$PWD/...` in a checkout reached through one — absolute
otherwise), and a path given twice counts once.

The plan is rendezvous (highest-random-weight) hashing with bounded loads:
each (directory, shard) pair has a weight, a digest of both (xxh3, never
Python's per-process `hash()`); pairs are taken from the heaviest down, a
directory going to the shard of its first pair whose shard still has room.
Room is the balanced share: n directories over N shards give shards 1..r one
more than n // N (r = n % N), so loads differ by at most one. That is the one
assignment in which no directory and shard would both rather be together (a
stable matching), so it depends on the set of keys only. Adding a directory
adds it and one place (one shard's share grows by one): the directories that
move are a short chain of displaced ones, one to three on average (longer with
more shards) and never more than N - 1 in the tests (tests/test_shards.py). A
share of ceil(n / N) for every shard would grow all shares at once whenever n
passes a multiple of N, and then many directories move (up to 16 of 100 over
10 shards, measured).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Iterable

import xxhash

from ..errors import UserError

# N of `--shard K/N` is a number of CI jobs, and `ci-report` merges one report from each of them. CI services cap
# the jobs of one run far below this (GitHub Actions: 256 per matrix; GitLab: 200 per `parallel`), so a larger N
# is a typo (a job index pasted as N, a missing slash), refused in one line instead of planned.
MAX_SHARDS = 10_000


@dataclass(frozen=True)
class Shard:
    """`--shard K/N` (index K, 1-based) or, for `--list` only, `--shard N` (index None: every shard)."""

    index: int | None
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}" if self.index is not None else str(self.count)


def parse_shard(text: str) -> Shard:
    """`K/N` (1 <= K <= N) or a bare `N`; anything else is one line naming the value and the fix."""
    head, slash, tail = text.strip().partition("/")
    fix = "pass K/N with 1 <= K <= N, e.g. --shard 1/4 (or --shard N with --list to print every shard)"
    try:
        index, count = (int(head), int(tail)) if slash else (None, int(head))
    except ValueError:
        raise UserError(f"--shard {text!r}: not K/N; {fix}") from None
    if count < 1:
        raise UserError(f"--shard {text!r}: the number of shards must be at least 1; {fix}")
    if count > MAX_SHARDS:
        raise UserError(f"--shard {text!r}: {count:,} shards, more than the {MAX_SHARDS:,} a plan takes (each "
                        f"shard is one CI job and one report); pass K/N with N at most {MAX_SHARDS:,}")
    if index is not None and not 1 <= index <= count:
        what = "shards are numbered from 1" if index < 1 else f"there is no shard {index} of {count}"
        raise UserError(f"--shard {text!r}: {what}; {fix}")
    return Shard(index, count)


def directory_key(path: str | os.PathLike, cwd: str | os.PathLike | None = None) -> str:
    """The key a directory is planned by: its normalised posix path below the current directory (`cwd`) when
    inside it — by any name of that directory: its real path, a symbolic link to it ($PWD in a checkout reached
    through one) — else its normalised absolute path. So checkouts at different roots agree."""
    base = os.path.normpath(os.fspath(cwd) if cwd is not None else os.getcwd())
    full = os.path.normpath(os.path.join(base, os.fspath(path)))
    inside = os.path.relpath(full, base)
    if inside == ".." or inside.startswith("../"):
        inside = _below(full, base)
    return PurePath(inside or full).as_posix()


def _below(full: str, base: str) -> str | None:
    """`full` relative to its nearest ancestor (itself included) that is the directory `base` — the same device
    and inode, whatever the name — or None when none is."""
    try:
        want = os.stat(base)
    except OSError:
        return None
    head, below = full, []
    while True:
        try:
            st = os.stat(head)
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            return os.path.join(*reversed(below)) if below else "."
        parent, name = os.path.split(head)
        if parent == head:
            return None
        below.append(name)
        head = parent


def _weight(key: str, shard: int) -> int:
    return xxhash.xxh3_64_intdigest(f"{key}\0{shard}".encode("utf-8", "surrogateescape"))


def plan_digest(keys: Iterable[str]) -> str:
    """The digest naming a set of directory keys (every shard's report carries it)."""
    hasher = xxhash.xxh3_128()
    for key in sorted(set(keys)):
        data = key.encode("utf-8", "surrogateescape")
        hasher.update(len(data).to_bytes(8, "little") + data)
    return hasher.hexdigest()


@dataclass(frozen=True)
class ShardPlan:
    """Every directory's shard: `shards[K - 1]` holds shard K's keys (sorted); `given` maps each key to
    the path as it was first given; `digest` names the directory set (the same on every machine)."""

    count: int
    shards: tuple[tuple[str, ...], ...]
    digest: str
    given: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def total(self) -> int:
        return sum(len(keys) for keys in self.shards)

    def keys(self, index: int) -> tuple[str, ...]:
        return self.shards[index - 1]

    def paths(self, index: int) -> list[Path]:
        """Shard `index`'s directories as they were given."""
        return [Path(self.given.get(key, key)) for key in self.keys(index)]

    def shard_of(self, key: str) -> int:
        return next(i for i, keys in enumerate(self.shards, 1) if key in keys)

    def record(self, index: int) -> dict:
        """What a shard's JSON report says about its shard (`ci-report` checks it)."""
        return {"index": index, "count": self.count, "plan": self.digest, "directories": self.total,
                "assigned": len(self.keys(index))}

    def lines(self, index: int | None = None) -> list[str]:
        """`K/N<TAB>DIR` per directory: shard `index`'s, or every shard's in shard order."""
        chosen = range(1, self.count + 1) if index is None else (index,)
        return [f"{k}/{self.count}\t{key}" for k in chosen for key in self.keys(k)]


def shard_plan(dirs: Iterable[str | os.PathLike], count: int, *,
               cwd: str | os.PathLike | None = None) -> ShardPlan:
    """Split `dirs` over `count` shards (see the module's text); independent of their order."""
    if not 1 <= count <= MAX_SHARDS:
        raise UserError(f"shard_plan: count {count}: the number of shards must be 1 to {MAX_SHARDS}")
    given: dict[str, str] = {}
    for d in dirs:
        given.setdefault(directory_key(d, cwd), os.fspath(d))
    keys = sorted(given)
    share, extra = divmod(len(keys), count)
    # Only shards with room can take a directory: with more shards than directories (share 0) that is shards
    # 1..n, so the pairs weighed are n x min(n, N), never n x N.
    room = {s: share + (1 if s < extra else 0) for s in range(count if share else extra)}
    placed: dict[str, int] = {}
    for _weight_, key, s in sorted(((_weight(k, s + 1), k, s) for k in keys for s in room), reverse=True):
        if key not in placed and room[s] > 0:
            placed[key] = s
            room[s] -= 1
    by_shard: list[list[str]] = [[] for _ in range(count)]
    for key in keys:
        by_shard[placed[key]].append(key)
    return ShardPlan(count, tuple(map(tuple, by_shard)), plan_digest(keys), given)
