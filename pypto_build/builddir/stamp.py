"""The stamp, `cache/binary_context.json`: the identities a sub-build's binaries were built under.

PyPTO reuses a sub-build's binaries only under a stamp that matches its own context, so ours is written
as PyPTO writes it (byte for byte, atomically, under PyPTO's lock), last: once every binary is built. It
is removed while the sub-build is in flux.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Iterator

from ..core import atomic, safeio
from .markers import STAMP_LOCK
LOCK_WAIT_S = 600.0


@contextlib.contextmanager
def binary_context_lock(stamp_path: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """PyPTO's flock beside the stamp (`cache/.binary_context.lock`, never deleted), so a PyPTO replay and we
    never stamp or unstamp one sub-build at the same time. Waits at most `wait_s` (a PyPTO run compiles
    everything while holding it), then OSError naming the lock."""
    lock = Path(stamp_path).parent / STAMP_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OSError(f"{lock} is held by another process (a PyPTO replay?) for over {wait_s:g} s; "
                                  "let it finish, then rebuild") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def stamp_text(fields: dict) -> str:
    """The file's text for `fields` (`BinaryContext.stamp_fields`): json.dump(indent=2, sort_keys=True) plus a
    newline, as PyPTO writes it."""
    return json.dumps(fields, indent=2, sort_keys=True) + "\n"


def write_stamp(path: Path, fields: dict) -> None:
    atomic.write_text(path, stamp_text(fields), sweep=True)


def remove_stamp(path: Path) -> None:
    Path(path).unlink(missing_ok=True)


def stamp_matches(path: Path, fields: dict) -> bool:
    try:
        return safeio.read_text(path) == stamp_text(fields)
    except (OSError, UnicodeDecodeError):
        return False
