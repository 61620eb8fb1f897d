"""Our doit state backend: the sqlite file doit's own `sqlite3` backend writes, opened by us.

doit lets a build give its `Dependency` any class with the backend interface
(`__init__(name, codec)`, `get`, `set`, `in_`, `remove`, `remove_all`, `dump`);
this one keeps doit's file format (table `doit`: a task id, its JSON dict) so a
state written by either reads in the other, and adds what a build needs that
doit's backend keeps private: `commit()` (a unit's success written at once, so a
killed run keeps its finished units), `discard()` (close, writing nothing) and a
read-only opening (`ReadOnlyStateDB`, sqlite `mode=ro`: creates and changes
nothing). `set` marks a task dirty only when the value differs, so a run writes
only the rows whose state changed.

Failures are sqlite's own `sqlite3.Error`; `statedb.open_state` and `depstate` turn
them into one line.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

_TABLE = "create table if not exists doit (task_id text not null primary key, task_data json)"


class StateDB:
    """doit's backend interface on the state file, with `commit`, `discard` and `commit_each`."""

    def __init__(self, name: str, codec, **_doit_options) -> None:
        self.name = name
        self.codec = codec
        self._conn: sqlite3.Connection | None = self._connect(name)
        self._rows: dict[str, dict] = {}        # task id -> its dict, read once, changed in place
        self._dirty: set[str] = set()

    def _connect(self, name: str) -> sqlite3.Connection:
        conn = sqlite3.connect(name, isolation_level="DEFERRED")
        try:
            conn.execute(_TABLE)
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def commit_each(self) -> None:
        """A run that commits after each unit: sqlite syncs less (no WAL: the file alone is the state)."""
        self._connection().execute("PRAGMA synchronous=NORMAL")

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise sqlite3.ProgrammingError(f"{self.name}: the state is closed")
        return self._conn

    def _row(self, task_id: str) -> dict:
        row = self._rows.get(task_id)
        if row is None:
            found = self._connection().execute("select task_data from doit where task_id=?", (task_id,)).fetchone()
            row = self._rows[task_id] = self.codec.decode(found[0]) if found and found[0] is not None else {}
        return row

    def get(self, task_id: str, dependency: str):
        """The value stored for `dependency` of the task (None: none)."""
        return self._row(task_id).get(dependency)

    def set(self, task_id: str, dependency: str, value) -> None:
        """Store a value (the row is written at the next commit or dump, and only if it changed)."""
        row = self._row(task_id)
        held = row.get(dependency)
        if held == value or (isinstance(value, tuple) and held == list(value)):
            return              # unchanged (stored as JSON: a tuple reads back as a list)
        row[dependency] = value
        self._dirty.add(task_id)

    def in_(self, task_id: str) -> bool:
        """Whether anything is stored for the task."""
        return bool(self._row(task_id))

    def remove(self, task_id: str) -> None:
        """Forget the task (written at the next commit or dump)."""
        self._rows[task_id] = {}
        self._dirty.discard(task_id)
        self._connection().execute("delete from doit where task_id=?", (task_id,))

    def remove_all(self) -> None:
        self._rows.clear()
        self._dirty.clear()
        self._connection().execute("delete from doit")

    def commit(self) -> None:
        """Write the changed rows and commit, keeping the file open; on failure nothing of them is written."""
        conn = self._connection()
        try:
            for task_id in sorted(self._dirty):
                conn.execute("insert or replace into doit values (?,?)",
                             (task_id, self.codec.encode(self._rows[task_id])))
            conn.commit()
        except sqlite3.Error:
            try:
                conn.rollback()
            except sqlite3.Error:
                pass
            raise
        self._dirty.clear()

    def dump(self) -> None:
        """doit's end of a run: commit and close (once; closed already: nothing to do)."""
        if self._conn is None:
            return
        try:
            self.commit()
        finally:
            self.discard()

    def discard(self) -> None:
        """Close without writing anything not committed yet (sqlite rolls it back: the file stays whole)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class ReadOnlyStateDB(StateDB):
    """The state opened with sqlite's `mode=ro`: reads only, creates nothing (no table, no journal)."""

    def _connect(self, name: str) -> sqlite3.Connection:
        conn = sqlite3.connect(Path(name).absolute().as_uri() + "?mode=ro", uri=True)
        try:
            conn.execute("select count(*) from doit").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def commit(self) -> None:
        """Reading writes nothing: what a check refreshed is dropped."""
        self._dirty.clear()

    def remove(self, task_id: str) -> None:
        self._rows[task_id] = {}

    def remove_all(self) -> None:
        self._rows.clear()
