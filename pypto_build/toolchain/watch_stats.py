"""The stat signatures a git checkout's watch compares (`git_watch`), in one function both readers share.

The no-op record keeps them whole (`noop.record`, which digests them too, to tell when a kept list of
watched files still holds), and both its readers — `noop.check` (the pipeline) and `noop_record.quick`
(the console script, before anything loads) — compare them with what this returns now (`unchanged`).
Light: `os`, `array` and `core/racy` only.
"""
from __future__ import annotations

import os
from array import array

from ..core.racy import changed_since

TYPE_CHECKING = False
if TYPE_CHECKING:           # annotations only: `collections` would cost the quick answer's start
    from collections.abc import Iterable

MISSING = (-1, -1, -1, -1, -1, -1)      # an optional path that does not exist
SIG_BYTES = len(MISSING) * 8            # one path's signature
SPLIT_FROM = 2000       # paths from which a second process halves the wall time (each lstat ~2.5 us from Python)


def signatures(root: str, paths: Iterable[str], optional: Iterable[str], since_ns: int | None = None) -> bytes | None:
    """The `lstat` signature (mtime and ctime to the nanosecond, size, inode, device, mode) of each of `paths`
    (relative to `root`, each required) and of `optional` (absolute; a missing one as MISSING), in order, as
    bytes; None when a required path is missing or (`since_ns` given) any of them may have changed at or
    after `since_ns`. Runs no process."""
    values = array("q")
    lstat = os.lstat
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for rel in paths:
            st = lstat(rel, dir_fd=fd)
            if since_ns is not None and changed_since(st, since_ns):
                return None
            values.extend((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev, st.st_mode))
        for path in optional:
            try:
                st = lstat(path)
            except OSError:
                values.extend(MISSING)
                continue
            if since_ns is not None and changed_since(st, since_ns):
                return None
            values.extend((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev, st.st_mode))
    except (OSError, OverflowError, TypeError):   # OverflowError: an inode or device number past 63 bits
        return None
    finally:
        os.close(fd)
    return values.tobytes()


def unchanged(trees: Iterable[tuple[str, list[str], list[str], bytes]], *, split: bool = False) -> bool:
    """Whether each tree (root, paths, optional, the `signatures` they had) has the same signatures now.

    With `split` (the console script's quick answer: one thread, nothing else loaded), more than one CPU and
    at least SPLIT_FROM paths, a forked child compares the first half of each tree's paths while this process
    compares the rest, and says "same" in one byte; a child that dies or says nothing means "changed".
    """
    trees = list(trees)
    if split and sum(len(t[1]) for t in trees) >= SPLIT_FROM and _cpus() > 1:
        answer = _in_two(trees)
        if answer is not None:
            return answer
    return all(signatures(top, paths, optional) == sigs for top, paths, optional, sigs in trees)


def _in_two(trees: list[tuple[str, list[str], list[str], bytes]]) -> bool | None:
    """`unchanged`, a forked child taking the first half of each tree's paths; None when no process can start."""
    halves = [len(paths) // 2 for _, paths, _, _ in trees]
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:                            # the child: the first halves, then leave without any clean-up
        try:
            os.close(r)
            if all(signatures(top, paths[:k], ()) == sigs[:k * SIG_BYTES]
                   for (top, paths, _, sigs), k in zip(trees, halves)):
                os.write(w, b"1")
        finally:
            os._exit(0)
    os.close(w)
    same = False
    try:
        same = all(signatures(top, paths[k:], optional) == sigs[k * SIG_BYTES:]
                   for (top, paths, optional, sigs), k in zip(trees, halves))
        if same:
            same = os.read(r, 1) == b"1"
        else:
            os.kill(pid, 9)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return same


def _cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
