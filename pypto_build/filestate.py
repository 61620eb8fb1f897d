"""The doit file checker: content (xxh3) decides, stat only short-circuits.

State saved per file: ``[mtime_ns, size, ino, ctime_ns, digest, trusted]``.

* Same stat tuple and ``trusted``: unchanged, no read.
* Different size: changed, no read.
* Otherwise the digest decides (so `touch`, `cp -r` and checkouts rebuild nothing).

A FIFO, socket or device where a file was is never read (reading could block
forever): it counts as changed, and its state carries no digest.

``trusted`` is False when the file changed (by ctime, `racy.changed_since`)
within the timestamp granularity before its state was recorded: a same-size
rewrite in that window could keep the stat tuple, so such a state is always
re-hashed until a later run records it as settled (the racy-git / ccache
guard). mtimes are only ever compared for equality: a file dated in the
future is trusted like any other once its last change has settled.

The class name is stored by doit per task; keep it stable.
"""
from __future__ import annotations

import os
import time

from doit.dependency import CHECKERS, FileChangedChecker

from .hashing import file_digest
from .racy import RACY_NS, changed_since
from .safeio import NotRegularFile, is_regular

__all__ = ["State", "make_state", "same_stat", "is_modified", "first_changed", "refreshed", "XXHChecker",
           "RACY_NS"]    # RACY_NS: the worst-case racy window (bench/ reads it here)

State = list  # [mtime_ns, size, ino, ctime_ns, digest | None, trusted]


def make_state(path: str, st: os.stat_result | None = None, *, changed_since_ns: int | None = None) -> State:
    """Record the state of `path` now.

    With `changed_since_ns` (a `racy.fs_now()` reading), a file that may have changed
    at or after that time (while a compiler was reading it) gets no digest: it must be
    rebuilt next time; so does anything but a regular file (never read).
    """
    if st is None:
        st = os.stat(path)
    now = time.time_ns()
    try:
        digest: str | None = file_digest(path, st)
    except NotRegularFile:          # a FIFO or device: never read
        digest = None
    if changed_since_ns is not None and changed_since(st, changed_since_ns, fs_clock=True):
        digest = None
    trusted = not changed_since(st, now)
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns, digest, trusted]


def same_stat(st: os.stat_result, state: State) -> bool:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == tuple(state[:4])


def is_modified(path: str, st: os.stat_result, state: State | None) -> bool:
    """True when the file's content differs from the recorded state."""
    if not state or len(state) != 6 or not is_regular(st):
        return True
    if st.st_size != state[1]:
        return True
    if state[4] is None:
        return True
    if state[5] and same_stat(st, state):
        return False
    try:
        return file_digest(path, st) != state[4]
    except NotRegularFile:          # swapped for a FIFO since the stat: changed, never read
        return True


def first_changed(states: dict) -> str | None:
    """`<path> removed` / `<path> changed` for the first recorded file whose content moved, else None."""
    for path, state in states.items():
        try:
            st = os.stat(path)
        except OSError:
            return f"{path} removed"
        if is_modified(path, st, state):
            return f"{path} changed"
    return None


def refreshed(path: str, st: os.stat_result, state: State) -> State | None:
    """A newer state for an unchanged file whose stat moved, else None."""
    if state[5] and same_stat(st, state):
        return None
    new = make_state(path, st)
    return None if new == state else new


class XXHChecker(FileChangedChecker):
    """Content checker plugged into doit (`check_file_uptodate`)."""

    CheckerError = OSError

    def check_modified(self, file_path, file_stat, state):
        return is_modified(file_path, file_stat, state)

    def get_state(self, dep, current_state):
        st = os.stat(dep)
        if current_state and len(current_state) == 6 and not is_modified(dep, st, current_state):
            return refreshed(dep, st, current_state)
        return make_state(dep, st)


CHECKERS.setdefault("xxh", XXHChecker)
