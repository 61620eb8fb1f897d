"""Opening a build directory's doit state (`.pypto_build/state/<platform>/state.sqlite3`): for a run, or read-only.

Each platform keeps its own (`state_dir.state_folder`), as it keeps its own
binaries, so switching platforms and back rebuilds nothing (the one state of
before is moved into a platform's folder by the pipeline: `pipeline.Bookkeeping.before`).

The database is doit's own sqlite format, read and written by our backend
(`sqlitedb.StateDB`). Before sqlite touches the database or its journal, their
types are checked: a FIFO there would block sqlite's first read forever. Readers
(explain, --dry-run) open the database read-only (`mode=ro`), so they work on a
read-only directory and can never change it (the type checks are `builddir/state_checks`'s,
which the no-op answer makes too). Every failure is one line that says what to do: free space,
copy the directory somewhere writable, or remove the damaged database file (never the whole
state folder: it holds the host binaries).
"""
from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

from .file_checker import XXHChecker
from .depstate import ContentDependency
from .sqlitedb import ReadOnlyStateDB, StateDB
from ..errors import UserError, one_line
from ..builddir.state_checks import SIDE_FILES, check_state_files, start_afresh
from ..core.oserrors import describe_sqlite

__all__ = ["SIDE_FILES", "check_state_files", "open_state", "start_afresh"]


def open_state(dep_file: Path, adopt: bool, read_only: bool = False,
               force: Mapping[str, str] | None = None) -> ContentDependency:
    """The doit state of a build directory (`adopt`: deciding as a build does; `read_only`: a reader, which
    writes nothing — what it adopts or forces stays in memory;
    `force`: task-name prefixes that run whatever their state says, each with why).

    One clear `UserError` when it cannot be opened.
    """
    check_state_files(dep_file)
    if not read_only:
        dep_file.parent.mkdir(parents=True, exist_ok=True)
    backend = ReadOnlyStateDB if read_only else StateDB
    try:
        return ContentDependency(backend, str(dep_file), checker_cls=XXHChecker, adopt=adopt,
                                 checkpoint=adopt and not read_only, force=force, read_only=read_only)
    except sqlite3.Error as exc:
        line = describe_sqlite(dep_file, exc, "opened")
        if line:
            raise UserError(line) from None
        raise UserError(f"{dep_file}: the build state is unreadable ({one_line(exc)}); "
                        f"{start_afresh(dep_file)}") from None
