"""The durable log of the embedded server: one append-only SQLite table in the style of kine.

Every write is a row: ``id`` is the global revision (the resourceVersion), ``name`` the key
(``/registry/apps/deployments/ns/name``), ``created``/``deleted`` flags, ``create_revision``,
``prev_revision`` and ``value``. ``UNIQUE(name, prev_revision)`` is the compare-and-swap guard that
makes a lost update impossible even if two writers raced. An update or a delete (a tombstone row
carrying the object's last state) names the row it replaces; a create names the revision before its
own (kine's rule when no tombstone is at hand): no earlier row of that key can carry it, so a key
deleted and created again — any number of times, compacted or not — never trips the guard.

Writes are group-committed by the storage writer, a process of its own (``writer.py``): it takes
every batch sent since its last commit, commits them in one transaction and only then answers
each. With ``synchronous=FULL`` in WAL mode that commit fsyncs the WAL, so nothing is reported
durable before it is on disk. A batch that breaks a constraint is retried one write at a time, so
only the offending write fails; any other storage error (a full disk, a database locked by another
process, an I/O error) fails the batch with a :class:`StorageError` that says why, and the next
batch tries again — nothing latches. A writer that dies leaves no write in doubt: each one it had
not answered is settled by whether its row is in the log, and the next write starts another.

Compaction removes superseded rows at or below a revision and the tombstones there; with
``secure_delete`` the freed pages are zeroed, the WAL is truncated and free pages are returned to the
file system, so the values of deleted or rotated Secrets are gone from disk afterwards.

The database file and its WAL are private (0600). Reads never touch SQLite after start-up: the
in-memory :class:`~kubeloop.apiserver.store.ObjectStore` serves them (kube-apiserver's watch cache
plays that role) and the log stays the source of truth.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import os
import pathlib
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubeloop.apiserver.storage import kine
from kubeloop.apiserver.storage.kine import StorageError as StorageError  # the log's error, to its users
from kubeloop.apiserver.storage.writer import FrameReader, frame

log = logging.getLogger(__name__)


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


class SQLiteLog:
    """The kine-style log in a SQLite database in WAL mode. Appends, probes and compaction are
    done by the storage writer, a process of its own (``storage/writer.py``) started on first
    use; the server's own connection reads the log at start-up."""

    #: How long a write waits for a lock another process holds before failing (busy).
    busy_timeout_seconds = 2.0
    #: Bytes a probe writes (and removes in the same transaction) to prove space is available.
    probe_bytes = 64 * 1024
    #: How long opening the log waits for a stopped server's writer to finish and exit.
    lock_wait_seconds = 30.0

    def __init__(self, path: pathlib.Path, *, durable: bool = True) -> None:
        self._path = path
        self._durable = durable
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        kine.create_private(path)
        # Held by this server and inherited by its writer: released when both have gone, so a
        # server started again reads the log only once the last commit of the one before is over.
        self._lock_fd = _hold_lock(pathlib.Path(f"{path}.lock"), self.lock_wait_seconds)
        try:
            self._conn = kine.connect(path, durable=durable, busy_timeout=self.busy_timeout_seconds)
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._writer: _Writer | None = None
        #: Ended writers' sockets, kept open until the next writer has answered (see ``_Writer._end``).
        self._retired: list[socket.socket] = []
        self._closed = False

    @property
    def path(self) -> pathlib.Path:
        return self._path

    @property
    def writer_pid(self) -> int | None:
        """The storage writer's process id, once it runs."""
        return self._writer.process.pid if self._writer is not None else None

    @property
    def appends_in_flight(self) -> int:
        """Appends sent to the writer and not yet answered."""
        return self._writer.appends_in_flight if self._writer is not None else 0

    async def pragma(self, name: str, value: int | None = None) -> object:
        """Read (or set) a PRAGMA on the writer's connection: diagnostics, and tests that limit
        the database's size (``max_page_count``) to make SQLite report a full disk."""
        kine.pragma_statement(name, value)  # a name that is not a pragma's is refused here
        return await self._call(("pragma", name, value))

    # ------------------------------------------------------------------ start-up

    def load(self) -> LoadedState:
        conn = self._conn
        row = conn.execute("SELECT value FROM kine_meta WHERE key = 'compact_revision'").fetchone()
        compacted = int(row[0]) if row else 0
        current = [
            LogRecord(r[0], r[1], bool(r[2]), bool(r[3]), r[4], r[5], r[6])
            for r in conn.execute(
                f"SELECT {kine.COLUMNS} FROM kine k "
                "WHERE k.id IN (SELECT MAX(id) FROM kine GROUP BY name) AND k.deleted = 0"
            )
        ]
        top = max(
            compacted,
            kine.scalar(conn, "SELECT MAX(id) FROM kine"),
            kine.scalar(conn, "SELECT seq FROM sqlite_sequence WHERE name = 'kine'"),
        )
        return LoadedState(current, self._history(compacted), compacted, top)

    def _history(self, compacted: int) -> Iterator[tuple[LogRecord, bytes | None]]:
        # The replaced row's value (rows written by earlier versions kept it in old_value).
        cursor = self._conn.execute(
            f"SELECT {kine.COLUMNS}, COALESCE(p.value, k.old_value) FROM kine k "
            "LEFT JOIN kine p ON k.created = 0 AND p.id = k.prev_revision AND p.name = k.name "
            "WHERE k.id > ? ORDER BY k.id",
            (compacted,),
        )
        for r in cursor:
            yield LogRecord(r[0], r[1], bool(r[2]), bool(r[3]), r[4], r[5], r[6]), (None if r[2] else r[7])

    # ------------------------------------------------------------------ the writer

    def _writer_on(self, loop: asyncio.AbstractEventLoop) -> _Writer:
        if self._closed:
            raise StorageError("the storage is closed", reason="closed")
        writer = self._writer
        if writer is not None and writer.loop is not loop:
            writer.abandon()  # its loop has gone (a test's, or a server restarted in-process)
            writer = self._writer = None
        if writer is None:
            try:
                writer = _Writer(self, loop)
            except OSError as exc:
                raise StorageError(f"the storage writer did not start: {exc}", reason="other") from exc
            self._writer = writer
        return writer

    def submit(self, writes: Sequence[tuple[LogRecord, DoneCallback]]) -> None:
        loop = asyncio.get_running_loop()
        try:
            writer = self._writer_on(loop)
        except StorageError as error:
            failed: list[tuple[DoneCallback, StorageError | None]] = [
                (on_done, error) for _r, on_done in writes
            ]
            loop.call_soon(_deliver, failed)
            return
        writer.append(writes)

    async def _call(self, request: tuple[object, ...]) -> object:
        loop = asyncio.get_running_loop()
        return await self._writer_on(loop).call(request)

    async def probe(self) -> None:
        await self._call(("probe", self.probe_bytes))

    async def compact(self, revision: int) -> None:
        await self._call(("compact", revision))

    def _writer_gone(self, writer: _Writer) -> None:
        if self._writer is writer:
            self._writer = None

    def _retire(self, sock: socket.socket) -> None:
        """Keep an ended writer's socket open (its descriptor number taken) until the next
        writer has answered: a new socket given the same number at once was seen never to be
        read again under uvloop (its registration dropped, so every later write waited)."""
        self._retired.append(sock)

    def _writer_answered(self) -> None:
        """A writer answered: its socket is read, and no stale registration can reach it."""
        retired, self._retired = self._retired, []
        for sock in retired:
            sock.close()

    def committed(self, records: Sequence[LogRecord]) -> set[int]:
        """The revisions among ``records`` that are in the log: what a writer that died before
        it answered had made durable."""
        found: set[int] = set()
        for start in range(0, len(records), 500):
            chunk = records[start : start + 500]
            rows = self._read_retrying(
                f"SELECT id, name FROM kine WHERE id IN ({','.join('?' * len(chunk))})",
                [r.revision for r in chunk],
            )
            keys = {r.revision: r.key for r in chunk}
            found.update(revision for revision, key in rows if keys.get(revision) == key)
        return found

    #: How often a read that settles a dead writer's writes is tried before it fails.
    read_attempts = 5

    def _read_retrying(self, sql: str, parameters: Sequence[object]) -> list[Any]:
        """A read of the log on the server's own connection, tried again while SQLite reports
        the database locked or busy (a writer that died mid-commit can leave the WAL's index for
        the next reader to rebuild, under a lock); each try waits up to the busy timeout."""
        attempt = 1
        while True:
            try:
                return list(self._conn.execute(sql, parameters).fetchall())
            except sqlite3.OperationalError as exc:
                if attempt >= self.read_attempts or kine.StorageError.from_sqlite(exc).reason != "busy":
                    raise
                attempt += 1

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                if writer.loop is asyncio.get_running_loop():
                    await writer.finish()
                else:
                    writer.abandon()
        finally:
            self._writer_answered()
            self._conn.close()
            os.close(self._lock_fd)

    def rows(self) -> list[tuple[int, str, int]]:
        """(revision, key, deleted) of every row, oldest first; for tests and diagnostics."""
        return list(self._conn.execute("SELECT id, name, deleted FROM kine ORDER BY id").fetchall())


@dataclass(eq=False)
class _Append:
    writes: Sequence[tuple[LogRecord, DoneCallback]]


@dataclass(eq=False)
class _Call:
    answer: asyncio.Future[object]


class _Writer:
    """The server's side of one storage writer process: requests out, answers back in order."""

    def __init__(self, log: SQLiteLog, loop: asyncio.AbstractEventLoop) -> None:
        self.log = log
        self.loop = loop
        ours, theirs = socket.socketpair()
        try:
            command = [
                sys.executable,
                "-m",
                "kubeloop.apiserver.storage.writer",
                str(log.path),
                "--fd",
                str(theirs.fileno()),
                "--busy-timeout",
                str(log.busy_timeout_seconds),
            ]
            if not log._durable:
                command.append("--no-fsync")
            # Its stderr is the server's (a traceback belongs beside the server's own); it never
            # writes to stdout, which it must not hold open (a reader of the server's output
            # would wait for it to exit).
            self.process = subprocess.Popen(
                command,
                pass_fds=(theirs.fileno(), log._lock_fd),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours
        self.pending: collections.deque[_Append | _Call] = collections.deque()
        self.appends_in_flight = 0
        self._unsent = bytearray()
        self._frames = FrameReader()
        self._finishing = False
        self._ended = False
        self._how = "ended"
        self.gone: asyncio.Future[None] = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)

    # ------------------------------------------------------------------ requests

    def append(self, writes: Sequence[tuple[LogRecord, DoneCallback]]) -> None:
        rows = [
            (r.revision, r.key, int(r.created), int(r.deleted), r.create_revision, r.prev_revision, r.value)
            for r, _done in writes
        ]
        self.pending.append(_Append(writes))
        self.appends_in_flight += 1
        self._send(frame(("append", rows)))

    async def call(self, request: tuple[object, ...]) -> object:
        answer: asyncio.Future[object] = self.loop.create_future()
        self.pending.append(_Call(answer))
        self._send(frame(request))
        return await answer

    def _send(self, data: bytes) -> None:
        if self._ended:
            self._answer_unanswered()  # it died with this request queued: answer it at once
            return
        if self._unsent:
            self._unsent += data
            return
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            return  # the writer has gone: its end-of-file comes to the reader
        if sent < len(data):
            self._unsent += data[sent:]
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self._unsent)
        except BlockingIOError:
            return
        except OSError:
            sent = len(self._unsent)
        del self._unsent[:sent]
        if not self._unsent:
            self.loop.remove_writer(self.sock.fileno())
            if self._finishing:
                self._shut_down_sending()

    # ------------------------------------------------------------------ answers

    def _readable(self) -> None:
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._end()
            return
        if self.log._retired:
            self.log._writer_answered()
        for answer in self._frames.feed(data):
            entry = self.pending.popleft()
            if isinstance(entry, _Append):
                self.appends_in_flight -= 1
                _deliver(
                    [
                        (on_done, None if result is None else StorageError(result[1], reason=result[0]))
                        for (_record, on_done), result in zip(entry.writes, answer, strict=True)
                    ]
                )
            elif answer[0] == "ok":
                _settle(entry.answer, None, answer[1])
            else:
                _settle(entry.answer, StorageError(answer[2], reason=answer[1]))

    def _end(self) -> None:
        """The writer's end closed: it exited. Each write it did not answer is settled by what
        the log holds (a commit it made before it died is durable), and the next request starts
        another writer."""
        self._ended = True
        fd = self.sock.fileno()
        self.loop.remove_reader(fd)
        if self._unsent:
            self.loop.remove_writer(fd)
            self._unsent.clear()
        self.log._retire(self.sock)
        try:
            # Its socket closes last, as it exits; one that lingers is killed. No commit can come
            # after this: each unanswered write is settled against the log as it now is.
            try:
                code = self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                code = self.process.wait()
            self._how = f"signal {-code}" if code < 0 else f"exit code {code}"
            self._answer_unanswered()
        finally:
            # Whatever failed above, the next request starts another writer: a log left holding
            # this one would fail (or, worse, never answer) every later write.
            self.log._writer_gone(self)
            if not self.gone.done():
                self.gone.set_result(None)

    def _answer_unanswered(self) -> None:
        message = f"the storage writer process ended ({self._how}) before it answered"
        while self.pending:
            entry = self.pending.popleft()
            if isinstance(entry, _Call):
                _settle(entry.answer, StorageError(message, reason="io"))
                continue
            self.appends_in_flight -= 1
            records = [record for record, _done in entry.writes]
            error = StorageError(message, reason="io")
            try:
                durable = self.log.committed(records)
            except sqlite3.Error as exc:
                # The log cannot say (it stays unreadable past the retries): the writes fail, and
                # the error says their outcome is unknown, as etcd's timeouts do. They must be
                # answered all the same: the store applies writes in revision order, and one
                # never answered would hold every later write back.
                durable = set()
                error = StorageError(f"{message}, and whether it committed is unknown: {exc}", reason="io")
            _deliver([(on_done, None if r.revision in durable else error) for r, on_done in entry.writes])

    # ------------------------------------------------------------------ ending

    async def finish(self) -> None:
        """Let the writer answer what it was sent, then exit."""
        if not self._ended:
            self._finishing = True
            if not self._unsent:
                self._shut_down_sending()
        await self.gone

    def _shut_down_sending(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)  # end-of-file: it answers, then exits

    def abandon(self) -> None:
        """Its loop has gone: end the writer without waiting for answers nobody can receive."""
        if self._ended:
            return
        self._ended = True
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.sock.fileno())
            self.loop.remove_writer(self.sock.fileno())
        self.sock.close()  # end-of-file: it commits what it read whole and exits
        self.process.wait()
        self.pending.clear()
        self.appends_in_flight = 0
        self.log._writer_gone(self)


def _hold_lock(path: pathlib.Path, wait: float) -> int:
    """An exclusive ``flock`` on ``path``, waited for up to ``wait`` seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise StorageError(
                    f"{path} is held by another process (a server on this log, or its writer still "
                    f"finishing) after {wait:g}s",
                    reason="busy",
                ) from None
            time.sleep(0.02)


def _deliver(results: list[tuple[DoneCallback, StorageError | None]]) -> None:
    for on_done, error in results:
        try:
            on_done(error)
        except Exception:  # the others are answered all the same
            log.exception("a storage write's callback failed")


def _settle(done: asyncio.Future[object], error: BaseException | None, value: object = None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(value)
    else:
        done.set_exception(error)
