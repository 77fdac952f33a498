"""The durable log of the embedded server: one append-only SQLite table in the style of kine.

Every write is a row: ``id`` is the global revision (the resourceVersion), ``name`` the key
(``/registry/apps/deployments/ns/name``), ``created``/``deleted`` flags, ``create_revision``,
``prev_revision`` (the row it replaces), ``value`` and ``old_value``. ``UNIQUE(name, prev_revision)``
is the compare-and-swap guard that makes a lost update impossible even if two writers raced.

Writes are group-committed: one writer thread takes every pending batch, commits them in one
transaction (one fsync) and then acknowledges each. Reads never touch SQLite after start-up; the
in-memory :class:`~kubeloop.apiserver.store.ObjectStore` serves them (kube-apiserver's watch cache
plays that role) and the log stays the source of truth.
"""

from __future__ import annotations

import asyncio
import pathlib
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

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


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One row of the log: a create, an update or a delete (tombstone) of one key."""

    revision: int
    key: str
    created: bool
    deleted: bool
    create_revision: int
    prev_revision: int
    value: bytes | None
    old_value: bytes | None


class Log(Protocol):
    """What the object store needs from durable storage."""

    def load(self) -> tuple[list[LogRecord], list[LogRecord], int]:
        """(current rows of live keys, rows after the compacted revision in order, compacted revision)."""

    async def append(self, records: Sequence[LogRecord]) -> None:
        """Persist records durably; returns once they survive a crash."""

    async def compact(self, revision: int) -> None:
        """Forget rows superseded at or below ``revision``."""

    async def close(self) -> None: ...


class MemoryLog:
    """``--memory``: nothing survives the process; appends complete at once."""

    def load(self) -> tuple[list[LogRecord], list[LogRecord], int]:
        return [], [], 0

    async def append(self, records: Sequence[LogRecord]) -> None:
        return None

    async def compact(self, revision: int) -> None:
        return None

    async def close(self) -> None:
        return None


_Job = tuple[Sequence[LogRecord], asyncio.Future[None], asyncio.AbstractEventLoop]


class SQLiteLog:
    """The kine-style log in a SQLite database in WAL mode, written by one group-commit thread."""

    def __init__(self, path: pathlib.Path, *, durable: bool = True) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._durable = durable
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._conn = self._connect()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: the WAL is fsynced at every commit, so an acknowledged write survives power loss too.
        conn.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
        for statement in _SCHEMA:
            conn.execute(statement)
        return conn

    def load(self) -> tuple[list[LogRecord], list[LogRecord], int]:
        with self._lock:
            row = self._conn.execute("SELECT value FROM kine_meta WHERE key = 'compact_revision'").fetchone()
            compacted = int(row[0]) if row else 0
            current = [
                _record(r)
                for r in self._conn.execute(
                    "SELECT id, name, created, deleted, create_revision, prev_revision, value, old_value "
                    "FROM kine WHERE id IN (SELECT MAX(id) FROM kine GROUP BY name) AND deleted = 0"
                )
            ]
            history = [
                _record(r)
                for r in self._conn.execute(
                    "SELECT id, name, created, deleted, create_revision, prev_revision, value, old_value "
                    "FROM kine WHERE id > ? ORDER BY id",
                    (compacted,),
                )
            ]
            max_row = self._conn.execute("SELECT MAX(id) FROM kine").fetchone()
            top = int(max_row[0]) if max_row and max_row[0] is not None else 0
            if top and not history and compacted < top:
                compacted = top
        return current, history, compacted

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kubeloop-storage-writer", daemon=True)
            self._thread.start()

    async def append(self, records: Sequence[LogRecord]) -> None:
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._jobs.put((records, done, loop))
        await done

    def _run(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                batch.append(job)
            error: BaseException | None = None
            try:
                with self._lock:
                    self._write_batch(batch)
            except BaseException as exc:  # reported to every waiting writer
                error = exc
            for _records, done, loop in batch:
                loop.call_soon_threadsafe(_settle, done, error)
            if stop:
                return

    def _write_batch(self, batch: list[_Job]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT INTO kine (id, name, created, deleted, create_revision, prev_revision, value, old_value) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.revision,
                        r.key,
                        int(r.created),
                        int(r.deleted),
                        r.create_revision,
                        r.prev_revision,
                        r.value,
                        r.old_value,
                    )
                    for records, _done, _loop in batch
                    for r in records
                ],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def compact(self, revision: int) -> None:
        await asyncio.to_thread(self._compact_sync, revision)

    def _compact_sync(self, revision: int) -> None:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Rows replaced by a later row at or below the compaction point, then old tombstones.
                conn.execute(
                    "DELETE FROM kine WHERE id IN (SELECT prev_revision FROM kine WHERE id <= ? AND prev_revision > 0)",
                    (revision,),
                )
                conn.execute("DELETE FROM kine WHERE id <= ? AND deleted = 1", (revision,))
                conn.execute(
                    "INSERT INTO kine_meta (key, value) VALUES ('compact_revision', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (revision,),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def close(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(self._thread.join)
            self._thread = None
        with self._lock:
            self._conn.close()

    def rows(self) -> Iterator[tuple[int, str, int]]:
        """(revision, key, deleted) of every row, oldest first; for tests and diagnostics."""
        with self._lock:
            yield from self._conn.execute("SELECT id, name, deleted FROM kine ORDER BY id").fetchall()


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _record(row: tuple[int, str, int, int, int, int, bytes | None, bytes | None]) -> LogRecord:
    return LogRecord(
        revision=row[0],
        key=row[1],
        created=bool(row[2]),
        deleted=bool(row[3]),
        create_revision=row[4],
        prev_revision=row[5],
        value=row[6],
        old_value=row[7],
    )
