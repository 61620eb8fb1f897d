"""When a file's stat can be trusted: one rule on ctime, never on mtime.

The kernel sets a file's ctime to its clock on every change (content, rename,
chmod, utime) and no call sets it to another value, so `touch -d`, `cp -p`,
`tar x` or a checkout cannot make a file look older or newer than its last
change. File timestamps come from the kernel's coarse clock (up to a tick,
<= 10 ms, behind the time we read) and are stored with the file system's
granularity (whole seconds on ext3, HFS+, FAT and some network file systems,
which we recognise by a ctime with no sub-second part). `window_ns` covers both.

Two questions use the rule:
* may a state recorded now be trusted by stat alone later (the racy-git
  guard)? Only when its file has not changed within the window before now: a
  later change then always gets another ctime;
* may the file have changed since a compile started (so its digest, taken
  after the compile, may not be what the compiler read)? There the start is read
  off the file system's own clock (`fs_now`: the ctime of a file created then),
  so only whole-second timestamps need a window: a change one tick before the
  compile is not taken for one during it.
"""
from __future__ import annotations

import os

RACY_NS = 2_000_000_000   # whole-second timestamps: the window, also the worst case anywhere
FINE_NS = 50_000_000      # nanosecond timestamps: a few ticks of the coarse clock


def window_ns(st: os.stat_result, *, fs_clock: bool = False) -> int:
    """How much earlier than the truth a ctime may read, at most (`fs_clock`: against the file system's clock)."""
    if st.st_ctime_ns % 1_000_000_000 == 0:
        return RACY_NS
    return 0 if fs_clock else FINE_NS


def changed_since(st: os.stat_result, since_ns: int, *, fs_clock: bool = False) -> bool:
    """True when the file may have changed at or after `since_ns` (a ctime in the future counts).

    `fs_clock`: `since_ns` is itself a ctime (`fs_now`), from the same clock as the file's.
    """
    return st.st_ctime_ns >= since_ns - window_ns(st, fs_clock=fs_clock)


def fs_now(near: str | os.PathLike) -> int:
    """The file system's clock now: the ctime of a temp file of `near`'s, created and removed.

    Named as an atomic write's temp of `near` (a unit's output), so that one left by a
    process killed right here is swept with that unit's other temps on its next run.
    """
    from pathlib import Path        # here: the rest of this module serves the console script's quick
    from . import atomic            # no-op answer too (toolchain/watch_stats), which loads neither
    fd, name = atomic.create_temp(Path(near), ".tmp")
    try:
        return os.fstat(fd).st_ctime_ns
    finally:
        os.close(fd)
        os.unlink(name)
