"""The kine table in SQLite: its schema and every statement run on it, by the server (start-up,
diagnostics) and by its writer process (commits, probes, compaction).

No asyncio here: the writer process imports this module alone and starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import sqlite3
from collections.abc import Sequence
from typing import Literal

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kine (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        created INTEGER NOT NULL,
        deleted INTEGER NOT NULL,
        create_revision INTEGER NOT NULL,
        prev_revision INTEGER NOT NULL,
        lease INTEGER NOT NULL DEFAULT 0,
        value BLOB,
        old_value BLOB
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS kine_name_prev_revision_uindex ON kine (name, prev_revision)",
    "CREATE INDEX IF NOT EXISTS kine_name_index ON kine (name)",
    "CREATE TABLE IF NOT EXISTS kine_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)
COLUMNS = "k.id, k.name, k.created, k.deleted, k.create_revision, k.prev_revision, k.value"
#: Files SQLite keeps beside the database in WAL mode.
SIDE_FILES = ("-wal", "-shm", "-journal")

#: One row as stored: (revision, key, created, deleted, create_revision, prev_revision, value).
Row = tuple[int, str, int, int, int, int, bytes]

#: Rows inserted by one statement: SQLite steps a statement once, ``executemany`` once per row
#: (B4, six runs alternated: +2-15 % writes/s when the writer was a thread of the server). 128
#: rows are 896 parameters, under the 999 of SQLite builds before 3.32.
ROWS_PER_STATEMENT = 128

StorageErrorReason = Literal["full", "busy", "io", "constraint", "closed", "other"]


class StorageError(Exception):
    """A write that did not become durable; ``reason`` says why in one word."""

    def __init__(self, message: str, *, reason: StorageErrorReason) -> None:
        super().__init__(message)
        self.message = message
        self.reason: StorageErrorReason = reason

    @classmethod
    def from_sqlite(cls, exc: sqlite3.Error) -> StorageError:
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc)
        if name.startswith("SQLITE_FULL") or "disk is full" in text:
            return cls(f"{text} (the data directory's file system has no space left)", reason="full")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
            return cls(f"{text} (another process holds the database's write lock)", reason="busy")
        if name.startswith("SQLITE_CONSTRAINT") or isinstance(exc, sqlite3.IntegrityError):
            return cls(text, reason="constraint")
        if name.startswith(("SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN")):
            return cls(text, reason="io")
        return cls(text, reason="other")


def create_private(path: pathlib.Path) -> None:
    """Create the database file 0600 (SQLite gives its WAL the same mode), or make it 0600."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def connect(path: pathlib.Path, *, durable: bool, busy_timeout: float) -> sqlite3.Connection:
    """A connection in WAL mode with the table in place; ``durable``: every commit fsyncs."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_timeout)
    # Before the first table exists: pages freed by compaction can go back to the file system.
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: the WAL is fsynced at every commit, so an acknowledged write survives power loss too.
    conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
    # Deleted rows (compacted history, deleted Secrets) are overwritten with zeros on disk.
    conn.execute("PRAGMA secure_delete=ON")
    for statement in _SCHEMA:
        conn.execute(statement)
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        # A database from before incremental auto-vacuum: convert it once.
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("VACUUM")
    for suffix in SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600)
    return conn


def pragma_statement(name: str, value: int | None = None) -> str:
    """The statement that reads (or sets) a PRAGMA; ValueError for anything but a pragma's name."""
    if not name.replace("_", "").isalpha():
        raise ValueError(f"not a pragma name: {name!r}")
    return f"PRAGMA {name}" if value is None else f"PRAGMA {name}={int(value)}"


def pragma(conn: sqlite3.Connection, name: str, value: int | None = None) -> object:
    """Read (or set) a PRAGMA."""
    row = conn.execute(pragma_statement(name, value)).fetchone()
    return row[0] if row else None


@functools.lru_cache(maxsize=ROWS_PER_STATEMENT)
def _insert_statement(rows: int) -> str:
    return (
        "INSERT INTO kine (id, name, created, deleted, create_revision, prev_revision, value) VALUES "
        + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)
    )


def _insert_rows(conn: sqlite3.Connection, rows: Sequence[Row]) -> None:
    """One INSERT of up to ``ROWS_PER_STATEMENT`` rows."""
    values: list[object] = []
    for row in rows:
        values += row
    conn.execute(_insert_statement(len(rows)), values)


def insert(conn: sqlite3.Connection, rows: Sequence[Row]) -> None:
    """Insert the rows in one transaction."""
    if len(rows) <= ROWS_PER_STATEMENT:
        _insert_rows(conn, rows)  # one statement is its own transaction
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            _insert_rows(conn, rows[start : start + ROWS_PER_STATEMENT])
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def commit(conn: sqlite3.Connection, rows: Sequence[Row]) -> list[StorageError | None]:
    """Insert the rows in one transaction; each row's outcome, in order. A row that breaks the
    compare-and-swap guard fails alone: the others are then committed one by one."""
    try:
        insert(conn, rows)
    except sqlite3.IntegrityError:
        results: list[StorageError | None] = []
        for row in rows:
            try:
                insert(conn, (row,))
            except sqlite3.Error as exc:
                results.append(StorageError.from_sqlite(exc))
            else:
                results.append(None)
        return results
    except sqlite3.Error as exc:
        return [StorageError.from_sqlite(exc)] * len(rows)
    return [None] * len(rows)


def probe(conn: sqlite3.Connection, size: int) -> None:
    """Write ``size`` bytes and remove them in one transaction: proof that writes fit."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS kine_probe (data BLOB)")
        conn.execute("INSERT INTO kine_probe (data) VALUES (zeroblob(?))", (size,))
        conn.execute("DELETE FROM kine_probe")
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def compact(conn: sqlite3.Connection, revision: int) -> None:
    """Remove rows superseded at or below ``revision`` and the tombstones there, then give the
    freed pages back and empty the WAL: old values leave the disk, not only the table."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "DELETE FROM kine WHERE id IN (SELECT prev_revision FROM kine "
            "WHERE id <= ? AND created = 0 AND prev_revision > 0)",
            (revision,),
        )
        conn.execute("DELETE FROM kine WHERE id <= ? AND deleted = 1", (revision,))
        # Databases written by earlier versions kept each replaced value a second time.
        conn.execute("UPDATE kine SET old_value = NULL WHERE id <= ? AND old_value IS NOT NULL", (revision,))
        conn.execute(
            "INSERT INTO kine_meta (key, value) VALUES ('compact_revision', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
            (revision,),
        )
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    # executescript steps the pragma to its end; one execute() frees a single page.
    conn.executescript("PRAGMA incremental_vacuum;")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back (a full disk does): a second ROLLBACK would raise
    # "cannot rollback - no transaction is active" and hide the real error.
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def scalar(conn: sqlite3.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
