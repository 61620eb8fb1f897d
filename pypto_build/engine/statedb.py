"""Opening a build directory's doit state (`.pypto_build/state.sqlite3`): for a run, or read-only.

Before sqlite touches the database or its journal, their types are checked: a
FIFO there would block sqlite's first read forever. Readers (explain,
--dry-run) open the database read-only (`mode=ro`), so they work on a
read-only directory and can never change it. Every failure is one line that
says what to do: free space, copy the directory somewhere writable, or remove
the damaged database file (never the whole state folder: it holds the host binaries).
"""
from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from doit.dependency import DatabaseException, SqliteDB

from .file_checker import XXHChecker
from .depstate import ContentDependency
from ..errors import PyptoBuildError, one_line
from ..oserrors import describe_sqlite
from ..safeio import refusal

SIDE_FILES = ("-journal", "-wal", "-shm")     # sqlite's companions of the database file


class ReadOnlySqliteDB(SqliteDB):
    """doit's sqlite backend opened with `mode=ro`: reads only, creates nothing (no table, no journal)."""

    def _sqlite3(self, name):
        codec = self.codec
        sqlite3.register_adapter(list, codec.encode)
        sqlite3.register_adapter(dict, codec.encode)
        sqlite3.register_converter("json", lambda data: codec.decode(data.decode("utf-8")))
        conn = sqlite3.connect(Path(name).absolute().as_uri() + "?mode=ro", uri=True,
                               detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES)
        conn.row_factory = lambda cursor, row: {col[0]: row[i] for i, col in enumerate(cursor.description)}
        try:
            conn.execute("select count(*) from doit").fetchone()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise DatabaseException(f"Original error: {exc}") from exc
        return conn


def check_state_files(dep_file: Path) -> None:
    """Refuse a database (or journal) that is a FIFO, socket or device: sqlite would block or worse."""
    for path in (dep_file, *(Path(f"{dep_file}{side}") for side in SIDE_FILES)):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise PyptoBuildError(f"{path}: the build state cannot be read ({one_line(exc.strerror)}); "
                                  f"{start_afresh(path)}") from None
        if not stat.S_ISREG(mode):
            after = ("the build state starts afresh: sources and binaries are kept, every unit rebuilds once"
                     if path == dep_file else "sqlite creates it again when it needs one")
            raise PyptoBuildError(refusal(path, mode, f"remove it ({after})"))


def open_state(dep_file: Path, adopt: bool, read_only: bool = False, force: tuple[str, ...] = ()) -> ContentDependency:
    """The doit state of a build directory (`adopt`: a building command; `read_only`: a reader;
    `force`: task-name prefixes that run whatever their state says).

    One clear `PyptoBuildError` when it cannot be opened.
    """
    check_state_files(dep_file)
    backend = ReadOnlySqliteDB if read_only else SqliteDB
    try:
        return ContentDependency(backend, str(dep_file), checker_cls=XXHChecker, adopt=adopt, checkpoint=adopt,
                                 force=force)
    except (DatabaseException, sqlite3.Error) as exc:
        cause = exc.__cause__ or exc.__context__ or exc
        line = describe_sqlite(dep_file, cause, "opened")
        if line:
            raise PyptoBuildError(line) from None
        reason = one_line(str(exc).rsplit("Original error:", 1)[-1])
        raise PyptoBuildError(f"{dep_file}: the build state is unreadable ({reason}); "
                              f"{start_afresh(dep_file)}") from None


def start_afresh(path: Path) -> str:
    """The fix for a damaged state database (or companion file): remove that file only — the rest of the state
    folder holds the host binaries, the backups of hand-edited kernels and the kept golden results."""
    return (f"remove {path} (only that file: keep the rest of {path.parent.name}/, which holds the host binaries "
            "and the backups of hand-edited kernels) to start afresh; every unit then compiles once")
