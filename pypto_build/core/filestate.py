"""The state recorded per file, and whether a file changed since: content (xxh3) decides, stat only short-circuits.

State saved per file: `FileState` (stored by doit as the plain list
``[mtime_ns, size, ino, ctime_ns, digest, trusted]``, read back by field index: MTIME, SIZE, ...).

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

No doit here: `engine/file_checker.py` plugs these rules into doit.
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

from .hashing import file_digest, remember
from .racy import RACY_NS, changed_since
from .safeio import NotRegularFile, is_regular

__all__ = ["FileState", "State", "make_state", "same_stat", "is_modified", "first_changed", "refreshed",
           "refreshed_file", "digest_of", "RACY_NS"]    # RACY_NS: the worst-case racy window (bench/ reads it here)

State = list  # a FileState as stored: [mtime_ns, size, ino, ctime_ns, digest | None, trusted]


class FileState(NamedTuple):
    """One file as a run saw it. `digest` is None when it must not be trusted (not a regular file, or
    changed while a compiler read it); `trusted` is False while a same-size rewrite could still hide
    behind the same stat (the racy window)."""

    mtime_ns: int
    size: int
    ino: int
    ctime_ns: int
    digest: str | None
    trusted: bool


# The stored list read by field name without building a FileState: these run per file per task of a no-op.
MTIME, SIZE, INO, CTIME, DIGEST, TRUSTED = range(len(FileState._fields))


def _stored(saved: object) -> bool:
    return isinstance(saved, (list, tuple)) and len(saved) == len(FileState._fields)


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
    return list(FileState(st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns, digest, trusted))


def same_stat(st: os.stat_result, state: State) -> bool:
    return _stored(state) and st.st_mtime_ns == state[MTIME] and st.st_size == state[SIZE] and \
        st.st_ino == state[INO] and st.st_ctime_ns == state[CTIME]


def is_modified(path: str, st: os.stat_result, state: State | None) -> bool:
    """True when the file's content differs from the recorded state."""
    if not _stored(state) or not is_regular(st) or st.st_size != state[SIZE] or state[DIGEST] is None:
        return True
    if state[TRUSTED] and same_stat(st, state):
        remember(path, st, state[DIGEST])       # settled and unmoved: its digest holds for this process
        return False
    try:
        return file_digest(path, st) != state[DIGEST]
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
    if state[TRUSTED] and same_stat(st, state):
        return None
    new = make_state(path, st)
    return None if new == state else new


def digest_of(state: object) -> str | None:
    """The recorded digest, or None (none recorded, or not a state of this format)."""
    return state[DIGEST] if _stored(state) else None


def refreshed_file(path: str, state: State | None) -> State | None:
    """A newer state for `path` when it is unchanged but its stat moved; None when it changed, is gone
    or nothing moved."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not state or is_modified(path, st, state):
        return None
    return refreshed(path, st, state)
