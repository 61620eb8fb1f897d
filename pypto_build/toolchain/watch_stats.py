"""The stat signatures a git checkout's watch compares (`git_watch`), in one function both readers share.

`git_watch.state` digests them for the kept list of watched files; the no-op record keeps them
whole, and both its readers — `noop.check` (the pipeline) and `noop_record.quick` (the console
script, before anything loads) — compare them with what this returns now. Light: `os`, `array` and
`core/racy` only.
"""
from __future__ import annotations

import os
from array import array

from ..core.racy import changed_since

TYPE_CHECKING = False
if TYPE_CHECKING:           # annotations only: `collections` would cost the quick answer's start
    from collections.abc import Iterable

MISSING = (-1, -1, -1, -1, -1, -1)      # an optional path that does not exist


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
