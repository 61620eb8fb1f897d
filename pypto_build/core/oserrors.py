"""Operating-system failures (full disk, read-only filesystem, long names, ...) as one line with a fix.

Any `OSError` escaping a doit action would become a traceback text in the
task's output; `one_line_failures` turns it into `TaskFailed("<file>: <what>;
<fix>")` in one place. `describe` is the same sentence for the run-level
writes (lock, no-op record), `describe_sqlite` / `run_failure` for the state
database and anything else a run fails to write outside an action.
"""
from __future__ import annotations

import errno
import functools
import os
from typing import Callable

from ..errors import UserError, one_line
from .safeio import NotRegularFile

FREE_SPACE = "free space and rebuild"
COPY_WRITABLE = "copy the build directory somewhere writable (cp -a DIR NEWDIR) and build there"

_FIXES = {
    errno.ENOSPC: ("no space left on device", FREE_SPACE),
    errno.EDQUOT: ("disk quota exceeded", "free space (or raise the quota) and rebuild"),
    errno.EROFS: ("read-only filesystem", COPY_WRITABLE),
    errno.EACCES: ("permission denied", "make it writable and readable by you, or " + COPY_WRITABLE),
    errno.EPERM: ("operation not permitted", "make it writable by you, or " + COPY_WRITABLE),
    errno.ENAMETOOLONG: ("file name too long", "shorten the file name (at most 255 bytes per name, "
                                               "4095 per path) and rebuild"),
    errno.EIO: ("input/output error", "check the disk (dmesg) and rebuild"),
}
_SQLITE_FULL, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN = 13, 8, 10, 14


def fix_for(code: int | None) -> tuple[str, str] | None:
    """(what happened, how to fix it) for an errno we know, else None."""
    return _FIXES.get(code or 0)


def describe(exc: OSError, path: str | os.PathLike | None = None, doing: str = "") -> str:
    """One line: the file, what failed, the fix. `doing` ("written", "read") names the operation."""
    if isinstance(exc, NotRegularFile) and path is None:
        return str(exc)                         # already says all of it
    where = os.fspath(path) if path is not None else exc.filename or "a file"
    known = fix_for(exc.errno)
    what, fix = known if known else ((exc.strerror or str(exc)).lower(), "check the file and rebuild")
    verb = f"could not be {doing}: " if doing else ""
    return " ".join(f"{where}: {verb}{what}; {fix}".split())


def one_line_failures(action: Callable) -> Callable:
    """Decorate a doit action: an OSError it raises becomes `TaskFailed(describe(exc))`, no traceback."""
    @functools.wraps(action)
    def run(*args, **kwargs):
        try:
            return action(*args, **kwargs)
        except OSError as exc:
            from doit.exceptions import TaskFailed
            return TaskFailed(describe(exc))
    return run


def describe_sqlite(path: str | os.PathLike, exc: BaseException, doing: str) -> str | None:
    """One line for a full disk / read-only / I/O failure of the state database; None for other errors."""
    code = getattr(exc, "sqlite_errorcode", None)
    base = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if base == _SQLITE_FULL or "disk is full" in text:
        what, fix = _FIXES[errno.ENOSPC]
    elif base == _SQLITE_READONLY or "readonly database" in text:
        what, fix = _FIXES[errno.EROFS] if _read_only_fs(path) else _FIXES[errno.EACCES]
    elif base in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and _read_only_fs(path):
        what, fix = _FIXES[errno.EROFS]
    elif base == _SQLITE_IOERR:
        what, fix = f"I/O error ({exc})", "free space, check the disk, and rebuild"
    else:
        return None
    return f"{os.fspath(path)}: the build state could not be {doing}: {what}; {fix}"


def run_failure(state_db: str | os.PathLike, exc: BaseException) -> UserError:
    """The one line for a write of the run itself that failed (the state database, doit's own file work)."""
    if isinstance(exc, OSError):
        return UserError(describe(exc))
    line = describe_sqlite(state_db, exc, "written") or (f"{os.fspath(state_db)}: the build state could not be "
                                                          f"written ({one_line(exc)}); {FREE_SPACE}")
    return UserError(line + " (finished binaries are kept; units whose state was lost rebuild once)")


def _read_only_fs(path: str | os.PathLike) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(os.path.abspath(path))).f_flag & os.ST_RDONLY)
    except OSError:
        return False
