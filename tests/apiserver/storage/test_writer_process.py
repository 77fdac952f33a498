"""The storage writer, a process of its own: what a dead, stopped or interrupted writer leaves
behind. A write it did not answer is settled by the log itself; a server started again waits
until the previous one's writer has gone; Ctrl-C to the process group is the server's to handle."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import pathlib
import signal
import sqlite3
import time

import pytest
import requests

from kubeloop import errors
from kubeloop.apiserver.storage.log import SQLiteLog, StorageError
from kubeloop.apiserver.storage.objectstore import ObjectStore
from kubeloop.testing import eventually
from tests.apiserver.storage.test_durability import apiserver, server_stacks, session_for


def obj(name: str, value: str = "") -> dict[str, object]:
    return {"kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


def opened(path: pathlib.Path) -> tuple[SQLiteLog, ObjectStore]:
    log = SQLiteLog(path / "state.db")
    store = ObjectStore(log)
    store.load()
    return log, store


async def test_a_writer_killed_before_it_commits_fails_the_write_and_the_next_starts_another(
    tmp_path: pathlib.Path,
) -> None:
    log, store = opened(tmp_path)
    await store.write("/r/a", obj("a"), expected_revision=0)
    first = log.writer_pid
    assert first is not None and log._writer is not None
    first_socket = log._writer.sock
    os.kill(first, signal.SIGSTOP)  # it reads nothing more: the next write waits, uncommitted
    pending = asyncio.ensure_future(store.write("/r/b", obj("b"), expected_revision=0))
    await eventually(lambda: log.appends_in_flight == 1)
    os.kill(first, signal.SIGKILL)
    with pytest.raises(errors.InternalError) as failed:
        await pending
    assert "the storage writer process ended (signal 9) before it answered" in failed.value.message
    assert store.get("/r/b") is None and store.revision == 1
    # The dead writer's socket stays open meanwhile: the next writer's cannot take its number.
    dead_number = first_socket.fileno()
    assert dead_number != -1
    # The next write starts another writer, and the log holds what was acknowledged.
    written = await store.write("/r/b", obj("b"), expected_revision=0)
    assert log.writer_pid not in (None, first) and log._writer is not None
    assert log._writer.sock.fileno() != dead_number
    assert first_socket.fileno() == -1  # closed once the new writer had answered
    assert written.revision == 3
    await log.close()
    log, again = opened(tmp_path)
    assert sorted(k for k, _ in again.items("/r/")) == ["/r/a", "/r/b"]
    assert [row[0] for row in log.rows()] == [1, 3]
    await log.close()


async def test_a_write_the_dead_writer_had_committed_is_acknowledged(tmp_path: pathlib.Path) -> None:
    """A writer can die between its commit and its answer: the row is in the log, and the write
    is reported done (failing it would leave the store and the log disagreeing on that key)."""
    log, store = opened(tmp_path)
    await store.write("/r/a", obj("a"), expected_revision=0)
    pid = log.writer_pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    pending = asyncio.ensure_future(store.write("/r/a", obj("a", "changed"), expected_revision=1))
    await eventually(lambda: log.appends_in_flight == 1)
    # What the writer would have committed, committed for it; then it dies unanswered.
    value = b'{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"2"},"data":{"v":"changed"}}'
    with sqlite3.connect(tmp_path / "state.db") as other:
        other.execute(
            "INSERT INTO kine (id, name, created, deleted, create_revision, prev_revision, value) "
            "VALUES (2, '/r/a', 0, 0, 1, 1, ?)",
            (value,),
        )
    os.kill(pid, signal.SIGKILL)
    written = await pending
    assert written.revision == 2 and store.get("/r/a").obj["data"] == {"v": "changed"}  # type: ignore[union-attr]
    # The store and the log agree: the next update of the key commits.
    await store.write("/r/a", obj("a", "again"), expected_revision=2)
    await log.close()


class _BusyReads:
    """The server's connection to the log, answering its first ``busy`` reads "database is
    locked" (as SQLite does while a dead writer's WAL index waits to be rebuilt under a lock)."""

    def __init__(self, conn: sqlite3.Connection, busy: int) -> None:
        self._conn = conn
        self.busy = busy
        self.reads = 0

    def execute(self, sql: str, parameters: object = ()) -> sqlite3.Cursor:
        self.reads += 1
        if self.reads <= self.busy:
            raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql, parameters)  # type: ignore[arg-type]

    def close(self) -> None:
        self._conn.close()


async def _killed_with_a_write_pending(tmp_path: pathlib.Path, busy: int) -> tuple[SQLiteLog, ObjectStore, _BusyReads, BaseException]:
    log, store = opened(tmp_path)
    await store.write("/r/a", obj("a"), expected_revision=0)
    pid = log.writer_pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    pending = asyncio.ensure_future(store.write("/r/b", obj("b"), expected_revision=0))
    await eventually(lambda: log.appends_in_flight == 1)
    reads = _BusyReads(log._conn, busy)
    log._conn = reads  # type: ignore[assignment]
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(errors.InternalError) as failed:
        await pending
    return log, store, reads, failed.value


async def test_a_dead_writers_writes_are_settled_once_the_log_reads_again(tmp_path: pathlib.Path) -> None:
    log, store, reads, failed = await _killed_with_a_write_pending(tmp_path, busy=2)
    assert reads.reads == 3  # two busy answers, then the read that settled it
    assert "the storage writer process ended (signal 9) before it answered" in str(failed)
    assert "unknown" not in str(failed)
    assert (await store.write("/r/c", obj("c"), expected_revision=0)).revision == 3
    await log.close()


async def test_a_dead_writers_write_the_log_cannot_settle_fails_and_later_writes_go_on(
    tmp_path: pathlib.Path,
) -> None:
    """The log stays unreadable past every retry: the write is answered (a 500 saying its
    outcome is unknown) rather than left waiting, which would hold every later write back."""
    log, store, reads, failed = await _killed_with_a_write_pending(tmp_path, busy=SQLiteLog.read_attempts)
    assert reads.reads == SQLiteLog.read_attempts
    assert "and whether it committed is unknown: database is locked" in str(failed)
    assert (await store.write("/r/c", obj("c"), expected_revision=0)).revision == 3
    assert (await store.write("/r/b", obj("b"), expected_revision=0)).revision == 4
    await log.close()


async def test_ctrl_c_to_the_process_group_leaves_the_writer_to_the_server(tmp_path: pathlib.Path) -> None:
    log, store = opened(tmp_path)
    await store.write("/r/a", obj("a"), expected_revision=0)
    pid = log.writer_pid
    assert pid is not None
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)
    await store.write("/r/b", obj("b"), expected_revision=0)
    assert log.writer_pid == pid  # the same writer answered
    await log.close()
    with pytest.raises(ProcessLookupError):  # closing the log ended its writer, and reaped it
        os.kill(pid, 0)


def test_a_server_started_again_waits_for_the_last_ones_writer(tmp_path: pathlib.Path) -> None:
    """The server is SIGKILLed while its writer is stopped: the log stays locked (the writer
    inherited the lock) and opening it fails as busy, until the writer has gone; then every
    acknowledged write is there."""
    data = tmp_path / "data"
    with apiserver(data) as (server, url):
        session = session_for(data)
        created = session.post(
            url + "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "acked"}}, timeout=30
        )
        assert created.status_code == 201, created.text
        (writer_pid,) = (
            int(pid) for pid in pathlib.Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        )
        os.kill(writer_pid, signal.SIGSTOP)
        server.kill()
        server.wait(10)
    SQLiteLog.lock_wait_seconds, wait = 0.2, SQLiteLog.lock_wait_seconds
    try:
        with pytest.raises(StorageError) as held:
            SQLiteLog(data / "state.db")
        assert held.value.reason == "busy" and "state.db.lock is held by another process" in held.value.message
    finally:
        SQLiteLog.lock_wait_seconds = wait
    os.kill(writer_pid, signal.SIGCONT)  # it reads the end of its socket and exits
    log = SQLiteLog(data / "state.db")  # waits for that
    store = ObjectStore(log)
    store.load()
    assert store.get("/registry/configmaps/default/acked") is not None
    asyncio.run(log.close())


def _names(session: requests.Session, url: str) -> set[str]:
    return {item["metadata"]["name"] for item in session.get(url, timeout=30).json()["items"]}


def _writer_of(server_pid: int) -> int:
    (pid,) = (int(p) for p in pathlib.Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split())
    return pid


def test_a_writer_killed_mid_burst_loses_and_invents_nothing_and_the_server_goes_on(
    tmp_path: pathlib.Path,
) -> None:
    """Over HTTPS, with creates racing: the storage writer is SIGKILLed. Every create answered
    201 is there, then and after a restart; a create answered 500 (the writer ended before it
    answered) is not; the server goes on writing with a new writer."""
    data = tmp_path / "data"
    configmaps = "/api/v1/namespaces/default/configmaps"
    acknowledged: list[str] = []
    refused: list[str] = []
    unexpected: list[str] = []
    with apiserver(data) as (server, url):
        session = session_for(data)
        writer = _writer_of(server.pid)

        def create(name: str) -> None:
            if unexpected:
                return  # the burst is over: the test fails with what went wrong first
            try:
                answer = session.post(url + configmaps, json={"metadata": {"name": name}}, timeout=30)
            except requests.RequestException as error:
                unexpected.append(f"{name}: {error!r}")
                return
            if answer.status_code == 201:
                acknowledged.append(name)
            elif answer.status_code == 500 and "the storage writer process ended (signal 9) before it answered" in (
                answer.text
            ):
                refused.append(name)
            else:
                unexpected.append(f"{name}: {answer.status_code} {answer.text}")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            burst = [pool.submit(create, f"c{i}") for i in range(300)]
            while len(acknowledged) < 50 and not unexpected:  # mid-burst
                time.sleep(0.005)
            os.kill(writer, signal.SIGKILL)
            concurrent.futures.wait(burst)
        # A server that stopped answering shows what it was doing (its threads' stacks).
        assert not unexpected, (unexpected, server_stacks(server))
        assert len(acknowledged) + len(refused) == 300
        created = session.post(url + configmaps, json={"metadata": {"name": "after"}}, timeout=30)
        assert created.status_code == 201, created.text
        assert _writer_of(server.pid) != writer

        now = _names(session, url + configmaps)
        assert now >= {*acknowledged, "after"} and not now & set(refused)
        server.kill()
        server.wait(10)
    with apiserver(data) as (server, url):
        after_restart = _names(session_for(data), url + configmaps)
    assert after_restart >= {*acknowledged, "after"} and not after_restart & set(refused)
