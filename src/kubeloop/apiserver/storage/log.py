"""The durable log of the embedded server: one append-only SQLite table in the style of kine.

Every write is a row: ``id`` is the global revision (the resourceVersion), ``name`` the key
(``/registry/apps/deployments/ns/name``), ``created``/``deleted`` flags, ``create_revision``,
``prev_revision`` and ``value``. ``UNIQUE(name, prev_revision)`` is the compare-and-swap guard that
makes a lost update impossible even if two writers raced. An update or a delete (a tombstone row
carrying the object's last state) names the row it replaces; a create names the revision before its
own (kine's rule when no tombstone is at hand): no earlier row of that key can carry it, so a key
deleted and created again — any number of times, compacted or not — never trips the guard.

Writes are group-committed: one writer thread takes every pending batch, commits it in one
transaction and only then reports each write done. With ``synchronous=FULL`` in WAL mode that
commit fsyncs the WAL, so nothing is reported durable before it is on disk. A batch that breaks a
constraint is retried one write at a time, so only the offending write fails; any other storage
error (a full disk, a database locked by another process, an I/O error) fails the batch with a
:class:`StorageError` that says why, and the next batch tries again — nothing latches.

Compaction removes superseded rows at or below a revision and the tombstones there; with
``secure_delete`` the freed pages are zeroed, the WAL is truncated and free pages are returned to the
file system, so the values of deleted or rotated Secrets are gone from disk afterwards.

The database file and its WAL are private (0600). Reads never touch SQLite after start-up: the
in-memory :class:`~kubeloop.apiserver.store.ObjectStore` serves them (kube-apiserver's watch cache
plays that role) and the log stays the source of truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import pathlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

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
_COLUMNS = "k.id, k.name, k.created, k.deleted, k.create_revision, k.prev_revision, k.value"
#: Files SQLite keeps beside the database in WAL mode.
_SIDE_FILES = ("-wal", "-shm", "-journal")

#: Rows inserted by one statement. The writer thread gives up the GIL while SQLite steps a
#: statement and must queue behind the serving loop to take it back: ``executemany`` steps once
#: per row, one multi-row INSERT once per commit (B4, six runs alternated: +2-15 % writes/s, each
#: run ahead). 128 rows are 896 parameters, under the 999 of SQLite builds before 3.32.
_ROWS_PER_STATEMENT = 128


@functools.lru_cache(maxsize=_ROWS_PER_STATEMENT)
def _insert_statement(rows: int) -> str:
    return (
        "INSERT INTO kine (id, name, created, deleted, create_revision, prev_revision, value) VALUES "
        + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)
    )


def _insert_rows(conn: sqlite3.Connection, records: Sequence[LogRecord]) -> None:
    """One INSERT of up to ``_ROWS_PER_STATEMENT`` records."""
    values: list[object] = []
    for r in records:
        values += (
            r.revision,
            r.key,
            int(r.created),
            int(r.deleted),
            r.create_revision,
            r.prev_revision,
            r.value,
        )
    conn.execute(_insert_statement(len(records)), values)


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


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One row of the log: a create, an update or a delete (tombstone) of one key."""

    revision: int
    key: str
    created: bool
    deleted: bool
    create_revision: int
    prev_revision: int
    value: bytes


@dataclass
class LoadedState:
    """What a log holds at start-up."""

    #: The newest row of every live key.
    current: list[LogRecord]
    #: Rows after the compacted revision, oldest first, each with the value of the row it replaced
    #: (None for creates). Lazy: read while the consumer trims what it keeps.
    history: Iterator[tuple[LogRecord, bytes | None]]
    #: Revisions at or below this one have been compacted.
    compacted: int
    #: The highest revision ever handed out: the next write gets a higher one, across any crash.
    top: int


#: Called on the submitting event loop once a write is durable (None) or has failed (the error).
DoneCallback = Callable[[StorageError | None], None]


class Log(Protocol):
    """What the object store needs from durable storage."""

    def load(self) -> LoadedState: ...

    def submit(self, writes: Sequence[tuple[LogRecord, DoneCallback]]) -> None:
        """Persist the records in one transaction; each callback runs on the caller's loop after.
        A record that breaks the compare-and-swap guard fails alone."""

    async def probe(self) -> None:
        """A small write that proves the storage accepts writes; raises StorageError if not."""

    async def compact(self, revision: int) -> None:
        """Forget rows superseded at or below ``revision``, and their values on disk."""

    async def close(self) -> None: ...


class MemoryLog:
    """``--memory``: nothing survives the process; appends complete on the next loop turn."""

    def load(self) -> LoadedState:
        return LoadedState([], iter(()), 0, 0)

    def submit(self, writes: Sequence[tuple[LogRecord, DoneCallback]]) -> None:
        results: list[tuple[DoneCallback, StorageError | None]] = [(on_done, None) for _r, on_done in writes]
        asyncio.get_running_loop().call_soon(_deliver, results)

    async def probe(self) -> None:
        return None

    async def compact(self, revision: int) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass(eq=False)
class _Job:
    kind: Literal["append", "probe", "compact", "stop"]
    loop: asyncio.AbstractEventLoop | None = None
    writes: Sequence[tuple[LogRecord, DoneCallback]] = ()
    revision: int = 0
    future: asyncio.Future[None] | None = None


class SQLiteLog:
    """The kine-style log in a SQLite database in WAL mode, written by one group-commit thread."""

    #: How long a write waits for a lock another process holds before failing (busy).
    busy_timeout_seconds = 2.0
    #: Bytes a probe writes (and removes in the same transaction) to prove space is available.
    probe_bytes = 64 * 1024

    def __init__(self, path: pathlib.Path, *, durable: bool = True) -> None:
        self._path = path
        self._durable = durable
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _create_private(path)
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._conn = self._connect()
        for suffix in _SIDE_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(f"{path}{suffix}", 0o600)
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def path(self) -> pathlib.Path:
        return self._path

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, check_same_thread=False, isolation_level=None, timeout=self.busy_timeout_seconds
        )
        # Before the first table exists: pages freed by compaction can go back to the file system.
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: the WAL is fsynced at every commit, so an acknowledged write survives power loss too.
        conn.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
        # Deleted rows (compacted history, deleted Secrets) are overwritten with zeros on disk.
        conn.execute("PRAGMA secure_delete=ON")
        for statement in _SCHEMA:
            conn.execute(statement)
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
            # A database from before incremental auto-vacuum: convert it once.
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.execute("VACUUM")
        return conn

    def pragma(self, name: str, value: int | None = None) -> object:
        """Read (or set) a PRAGMA on the live connection: diagnostics, and tests that limit the
        database's size (``max_page_count``) to make SQLite report a full disk."""
        if not name.replace("_", "").isalpha():
            raise ValueError(f"not a pragma name: {name!r}")
        statement = f"PRAGMA {name}" if value is None else f"PRAGMA {name}={int(value)}"
        with self._lock:
            row = self._conn.execute(statement).fetchone()
        return row[0] if row else None

    # ------------------------------------------------------------------ start-up

    def load(self) -> LoadedState:
        conn = self._conn
        with self._lock:
            row = conn.execute("SELECT value FROM kine_meta WHERE key = 'compact_revision'").fetchone()
            compacted = int(row[0]) if row else 0
            current = [
                _record(r)
                for r in conn.execute(
                    f"SELECT {_COLUMNS} FROM kine k "
                    "WHERE k.id IN (SELECT MAX(id) FROM kine GROUP BY name) AND k.deleted = 0"
                )
            ]
            top = max(
                compacted,
                _scalar(conn, "SELECT MAX(id) FROM kine"),
                _scalar(conn, "SELECT seq FROM sqlite_sequence WHERE name = 'kine'"),
            )
        return LoadedState(current, self._history(compacted), compacted, top)

    def _history(self, compacted: int) -> Iterator[tuple[LogRecord, bytes | None]]:
        # The replaced row's value (rows written by earlier versions kept it in old_value).
        cursor = self._conn.execute(
            f"SELECT {_COLUMNS}, COALESCE(p.value, k.old_value) FROM kine k "
            "LEFT JOIN kine p ON k.created = 0 AND p.id = k.prev_revision AND p.name = k.name "
            "WHERE k.id > ? ORDER BY k.id",
            (compacted,),
        )
        for r in cursor:
            yield _record(r[:7]), (None if r[2] else r[7])

    # ------------------------------------------------------------------ the writer thread

    def _ensure_thread(self) -> None:
        if self._closed:
            raise StorageError("the storage is closed", reason="closed")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kubeloop-storage-writer", daemon=True)
            self._thread.start()

    def submit(self, writes: Sequence[tuple[LogRecord, DoneCallback]]) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._ensure_thread()
        except StorageError as error:
            failed: list[tuple[DoneCallback, StorageError | None]] = [
                (on_done, error) for _r, on_done in writes
            ]
            loop.call_soon(_deliver, failed)
            return
        self._jobs.put(_Job("append", loop, writes))

    async def _call(self, job: _Job) -> None:
        self._ensure_thread()
        job.loop = asyncio.get_running_loop()
        job.future = job.loop.create_future()
        self._jobs.put(job)
        await job.future

    async def probe(self) -> None:
        await self._call(_Job("probe"))

    async def compact(self, revision: int) -> None:
        await self._call(_Job("compact", revision=revision))

    def _run(self) -> None:
        while True:
            jobs = [self._jobs.get()]
            while True:
                try:
                    jobs.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            appends: list[_Job] = []
            for job in jobs:
                if job.kind == "append":
                    appends.append(job)
                    continue
                self._append_batch(appends)
                appends = []
                if job.kind == "stop":
                    return
                self._run_call(job)
            self._append_batch(appends)

    def _append_batch(self, batch: list[_Job]) -> None:
        if not batch:
            return
        writes = [write for job in batch for write in job.writes]
        results: list[tuple[DoneCallback, StorageError | None]]
        with self._lock:
            try:
                results = self._commit(writes)
            except BaseException as exc:  # the thread must live on: every waiting write hears of it
                error = StorageError(f"{type(exc).__name__}: {exc}", reason="other")
                results = [(on_done, error) for _record, on_done in writes]
        # Results are in the order of the writes, job after job; each goes back to its job's loop.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[DoneCallback, StorageError | None]]] = {}
        offset = 0
        for job in batch:
            assert job.loop is not None
            by_loop.setdefault(job.loop, []).extend(results[offset : offset + len(job.writes)])
            offset += len(job.writes)
        for loop, own in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
                loop.call_soon_threadsafe(_deliver, own)

    def _commit(
        self, writes: list[tuple[LogRecord, DoneCallback]]
    ) -> list[tuple[DoneCallback, StorageError | None]]:
        """Insert the writes in one transaction; each write's outcome, in order."""
        try:
            self._insert([record for record, _done in writes])
        except sqlite3.IntegrityError:
            # One write broke the compare-and-swap guard: commit the others one by one.
            results: list[tuple[DoneCallback, StorageError | None]] = []
            for record, on_done in writes:
                try:
                    self._insert((record,))
                except sqlite3.Error as exc:
                    results.append((on_done, StorageError.from_sqlite(exc)))
                else:
                    results.append((on_done, None))
            return results
        except sqlite3.Error as exc:
            error = StorageError.from_sqlite(exc)
            return [(on_done, error) for _record, on_done in writes]
        return [(on_done, None) for _record, on_done in writes]

    def _insert(self, records: Sequence[LogRecord]) -> None:
        conn = self._conn
        if len(records) <= _ROWS_PER_STATEMENT:
            # One statement is its own transaction: the GIL given up once for the whole commit
            # (BEGIN and COMMIT as statements of their own would take it back twice more).
            _insert_rows(conn, records)
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            for start in range(0, len(records), _ROWS_PER_STATEMENT):
                _insert_rows(conn, records[start : start + _ROWS_PER_STATEMENT])
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _run_call(self, job: _Job) -> None:
        error: BaseException | None = None
        try:
            with self._lock:
                if job.kind == "probe":
                    self._probe_sync()
                else:
                    self._compact_sync(job.revision)
        except sqlite3.Error as exc:
            error = StorageError.from_sqlite(exc)
        except BaseException as exc:  # reported to the caller
            error = exc
        assert job.loop is not None and job.future is not None
        with contextlib.suppress(RuntimeError):
            job.loop.call_soon_threadsafe(_settle, job.future, error)

    def _probe_sync(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS kine_probe (data BLOB)")
            conn.execute("INSERT INTO kine_probe (data) VALUES (zeroblob(?))", (self.probe_bytes,))
            conn.execute("DELETE FROM kine_probe")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _compact_sync(self, revision: int) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Rows replaced by a later row at or below the compaction point, then old tombstones.
            conn.execute(
                "DELETE FROM kine WHERE id IN (SELECT prev_revision FROM kine "
                "WHERE id <= ? AND created = 0 AND prev_revision > 0)",
                (revision,),
            )
            conn.execute("DELETE FROM kine WHERE id <= ? AND deleted = 1", (revision,))
            # Databases written by earlier versions kept each replaced value a second time.
            conn.execute(
                "UPDATE kine SET old_value = NULL WHERE id <= ? AND old_value IS NOT NULL", (revision,)
            )
            conn.execute(
                "INSERT INTO kine_meta (key, value) VALUES ('compact_revision', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
                (revision,),
            )
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        # Give freed pages back and empty the WAL: old values leave the disk, not only the table.
        # (executescript steps the pragma to its end; one execute() frees a single page.)
        conn.executescript("PRAGMA incremental_vacuum;")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._jobs.put(_Job("stop"))
            await asyncio.to_thread(self._thread.join)
            self._thread = None
        with self._lock:
            self._conn.close()

    def rows(self) -> list[tuple[int, str, int]]:
        """(revision, key, deleted) of every row, oldest first; for tests and diagnostics."""
        with self._lock:
            return list(self._conn.execute("SELECT id, name, deleted FROM kine ORDER BY id").fetchall())


def _create_private(path: pathlib.Path) -> None:
    """Create the database file 0600 (SQLite gives its WAL the same mode), or make it 0600."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back (a full disk does): a second ROLLBACK would raise
    # "cannot rollback - no transaction is active" and hide the real error.
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _scalar(conn: sqlite3.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _deliver(results: list[tuple[DoneCallback, StorageError | None]]) -> None:
    for on_done, error in results:
        on_done(error)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _record(row: tuple[int, str, int, int, int, int, bytes]) -> LogRecord:
    return LogRecord(
        revision=row[0],
        key=row[1],
        created=bool(row[2]),
        deleted=bool(row[3]),
        create_revision=row[4],
        prev_revision=row[5],
        value=row[6],
    )
