"""The object store and the SQLite log: revisions, CAS, history, compaction, recovery."""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.storage.log import LogRecord, MemoryLog, SQLiteLog, StorageError
from kubeloop.apiserver.storage.objectstore import ObjectStore, PreconditionFailed
from kubeloop.apiserver.storage.watchcache import Event
from kubeloop.testing import eventually


def obj(name: str, value: str = "") -> dict[str, object]:
    return {"kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


async def test_revisions_are_global_and_cas_guards_writes() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    a = await store.write("/registry/configmaps/ns/a", obj("a"), expected_revision=0)
    b = await store.write("/registry/configmaps/ns/b", obj("b"), expected_revision=0)
    assert (a.revision, b.revision) == (1, 2)
    assert a.obj["metadata"]["resourceVersion"] == "1"  # type: ignore[index]
    with pytest.raises(PreconditionFailed):
        await store.write("/registry/configmaps/ns/a", obj("a", "x"), expected_revision=0)
    with pytest.raises(PreconditionFailed):
        await store.write("/registry/configmaps/ns/a", obj("a", "x"), expected_revision=2)
    updated = await store.write("/registry/configmaps/ns/a", obj("a", "x"), expected_revision=1)
    assert updated.type == "MODIFIED" and updated.prev is not None
    deleted = await store.write("/registry/configmaps/ns/a", None, expected_revision=3)
    assert deleted.type == "DELETED"
    assert deleted.obj["metadata"]["resourceVersion"] == "4"  # type: ignore[index]
    assert store.get("/registry/configmaps/ns/a") is None


async def test_a_write_that_fails_to_apply_is_answered_and_the_writes_after_it_go_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes are applied in revision order: one whose apply raised (a bug) must still be
    answered and let the next go, or every later write would wait for it forever."""
    store = ObjectStore(MemoryLog())
    store.load()
    apply = store._apply

    def failing_for_a(event: Event, change: object) -> None:
        if event.key.endswith("/a"):
            raise RuntimeError("broken on purpose")
        apply(event, change)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_apply", failing_for_a)
    a, b = await asyncio.gather(
        store.write("/registry/configmaps/ns/a", obj("a"), expected_revision=0),
        store.write("/registry/configmaps/ns/b", obj("b"), expected_revision=0),
        return_exceptions=True,
    )
    assert isinstance(a, errors.InternalError) and "applying the write failed" in a.message, a
    assert isinstance(b, Event) and b.revision == 2
    assert "applying the write at revision 1 failed" in caplog.text
    assert (await store.write("/registry/configmaps/ns/c", obj("c"), expected_revision=0)).revision == 3


async def test_prefix_listing_is_sorted_and_scoped() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    for key in (
        "/registry/configmaps/b/x",
        "/registry/configmaps/a/y",
        "/registry/configmaps/a/x",
        "/registry/configmapsx/a/z",
    ):
        await store.write(key, obj(key), expected_revision=0)
    assert [k for k, _ in store.items("/registry/configmaps/")] == [
        "/registry/configmaps/a/x",
        "/registry/configmaps/a/y",
        "/registry/configmaps/b/x",
    ]
    assert [k for k, _ in store.items("/registry/configmaps/a/", start="/registry/configmaps/a/y")] == [
        "/registry/configmaps/a/y"
    ]
    # Counting by bisection agrees with walking the keys (remainingItemCount).
    for prefix in (
        "/registry/configmaps/",
        "/registry/configmaps/a/",
        "/registry/configmapsx/",
        "/nothing/",
        "",
    ):
        for start in ("", "/registry/configmaps/a/y", "/registry/configmaps/b/x", "/zzz"):
            assert store.count_with_prefix(prefix, start) == sum(
                1 for _ in store.keys_with_prefix(prefix, start)
            )


async def test_list_at_old_revision_and_expiry() -> None:
    store = ObjectStore(MemoryLog(), history_window=3)
    store.load()
    await store.write("/r/a", obj("a", "1"), expected_revision=0)
    await store.write("/r/b", obj("b", "1"), expected_revision=0)
    snapshot = [(k, o["data"]) for k, o in store.list_at("/r/", 2)]
    await store.write("/r/a", obj("a", "2"), expected_revision=1)
    await store.write("/r/b", None, expected_revision=2)
    assert (
        [(k, o["data"]) for k, o in store.list_at("/r/", 2)]
        == snapshot
        == [("/r/a", {"v": "1"}), ("/r/b", {"v": "1"})]
    )
    await store.write("/r/c", obj("c"), expected_revision=0)
    await store.write("/r/d", obj("d"), expected_revision=0)
    with pytest.raises(errors.ResourceExpired):
        store.list_at("/r/", 2)
    with pytest.raises(errors.ResourceExpired):
        store.watch("/r/", 1)


async def test_watch_backlog_then_live_without_gap_or_duplicate() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    await store.write("/r/a", obj("a"), expected_revision=0)
    backlog, watcher = store.watch("/r/", 0)
    assert [e.revision for e in backlog] == [1]
    await store.write("/r/b", obj("b"), expected_revision=0)
    await store.write("/x/c", obj("c"), expected_revision=0)
    await watcher.wait(1)
    assert [e.key for e in watcher.drain()] == ["/r/b"]
    store.stop_watch(watcher)


async def test_a_sink_gets_the_events_of_a_tick_in_one_call_in_order_without_a_wake() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    _backlog, watcher = store.watch("/r/", 0)
    calls: list[list[int]] = []

    def sink(events: Sequence[Event]) -> bool:
        calls.append([event.revision for event in events])
        return True

    watcher.sink = sink
    waiting = asyncio.ensure_future(watcher.wait(None))
    await asyncio.gather(*(store.write(f"/r/{i}", obj(str(i)), expected_revision=0) for i in range(5)))
    await store.write("/x/other", obj("other"), expected_revision=0)
    await store.write("/r/5", obj("5"), expected_revision=0)
    # One call for the five writes committed together, one for the next under the prefix.
    assert calls == [[1, 2, 3, 4, 5], [7]]
    assert not watcher.events and not waiting.done()  # the stream's task slept through it all
    store.stop_watch(watcher)
    await waiting


async def test_a_sink_that_cannot_take_events_leaves_them_queued_and_wakes_the_task() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    _backlog, watcher = store.watch("/r/", 0)
    watcher.sink = lambda events: False
    waiting = asyncio.ensure_future(watcher.wait(None))
    await store.write("/r/a", obj("a"), expected_revision=0)
    await waiting  # woken: the task writes from here
    assert watcher.sink is None
    await store.write("/r/b", obj("b"), expected_revision=0)
    assert [event.key for event in watcher.drain()] == ["/r/a", "/r/b"]
    store.stop_watch(watcher)


async def test_a_failing_sink_leaves_the_events_to_the_task(caplog: pytest.LogCaptureFixture) -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    _backlog, watcher = store.watch("/r/", 0)

    def sink(events: Sequence[Event]) -> bool:
        raise ValueError("cannot encode")

    watcher.sink = sink
    await store.write("/r/a", obj("a"), expected_revision=0)
    await watcher.wait(None)
    assert watcher.sink is None and [event.key for event in watcher.drain()] == ["/r/a"]
    assert "writing a watch's events failed" in caplog.text
    store.stop_watch(watcher)


async def test_lagging_watcher_overflows_instead_of_blocking() -> None:
    store = ObjectStore(MemoryLog(), watcher_buffer=2)
    store.load()
    _backlog, watcher = store.watch("/r/", 0)
    for i in range(5):
        await store.write(f"/r/{i}", obj(str(i)), expected_revision=0)
    assert watcher.overflowed


async def test_sqlite_log_recovers_state_and_history(tmp_path: pathlib.Path) -> None:
    log = SQLiteLog(tmp_path / "state.db")
    store = ObjectStore(log)
    store.load()
    await asyncio.gather(*(store.write(f"/r/{i}", obj(str(i)), expected_revision=0) for i in range(50)))
    await store.write("/r/0", obj("0", "changed"), expected_revision=1)
    await store.write("/r/1", None, expected_revision=2)
    await log.close()

    reopened = SQLiteLog(tmp_path / "state.db")
    again = ObjectStore(reopened)
    again.load()
    assert again.revision == 52
    assert again.get("/r/0") is not None and again.get("/r/0").obj["data"] == {"v": "changed"}  # type: ignore[union-attr]
    assert again.get("/r/1") is None
    events = again.events_after("/r/", 50)
    assert [(e.type, e.key) for e in events] == [("MODIFIED", "/r/0"), ("DELETED", "/r/1")]
    await reopened.close()


async def submitted(log: SQLiteLog, records: list[LogRecord]) -> list[StorageError | None]:
    """Each record's outcome, the records submitted as one job (one transaction)."""
    loop = asyncio.get_running_loop()
    outcomes: list[asyncio.Future[StorageError | None]] = [loop.create_future() for _ in records]
    log.submit([(record, outcome.set_result) for record, outcome in zip(records, outcomes, strict=True)])
    return list(await asyncio.gather(*outcomes))


def create_record(revision: int, name: str) -> LogRecord:
    return LogRecord(revision, f"/r/{name}", True, False, revision, revision - 1, b'{"v": 1}')


@pytest.mark.parametrize("count", [5, 300])
async def test_a_batch_commits_whole_and_a_row_that_breaks_the_guard_fails_alone(
    tmp_path: pathlib.Path, count: int
) -> None:
    """Small batches are one INSERT, large ones several in one transaction; either way every row
    is durable, and a row the compare-and-swap guard refuses fails alone."""
    log = SQLiteLog(tmp_path / "state.db")
    assert await submitted(log, [create_record(i, f"a{i}") for i in range(1, count + 1)]) == [None] * count
    # The second row names the same (key, previous revision) as a committed one: refused alone.
    clash = LogRecord(count + 2, "/r/a1", False, False, 1, 0, b'{"v": 2}')
    batch = [
        create_record(count + 1, "b1"),
        clash,
        *(create_record(i, f"c{i}") for i in range(count + 3, 2 * count + 3)),
    ]
    outcomes = await submitted(log, batch)
    assert outcomes[0] is None and all(outcome is None for outcome in outcomes[2:])
    assert outcomes[1] is not None and outcomes[1].reason == "constraint"
    await log.close()
    reopened = SQLiteLog(tmp_path / "state.db")
    revisions = [row[0] for row in reopened.rows()]
    assert revisions == [r for r in range(1, 2 * count + 3) if r != count + 2]
    await reopened.close()


async def test_compaction_removes_superseded_rows(tmp_path: pathlib.Path) -> None:
    log = SQLiteLog(tmp_path / "state.db")
    store = ObjectStore(log, history_window=2)
    store.load()
    await store.write("/r/a", obj("a", "1"), expected_revision=0)
    for revision in range(1, 6):
        await store.write("/r/a", obj("a", str(revision)), expected_revision=revision)
    await store.write("/r/b", obj("b"), expected_revision=0)
    await store.write("/r/b", None, expected_revision=7)
    assert store.compacted_revision == 6
    await store.compact()
    rows = list(log.rows())
    assert [r[0] for r in rows] == [6, 7, 8]
    await log.close()
    reopened = SQLiteLog(tmp_path / "state.db")
    again = ObjectStore(reopened)
    again.load()
    assert again.compacted_revision == 6
    assert again.get("/r/a").obj["data"] == {"v": "5"}  # type: ignore[union-attr]
    with pytest.raises(errors.ResourceExpired):
        again.events_after("/r/", 3)
    await reopened.close()


# ----------------------------------------------------------------- durable storage semantics


def sqlite_store(path: pathlib.Path, **options: int) -> tuple[SQLiteLog, ObjectStore]:
    log = SQLiteLog(path / "state.db")
    store = ObjectStore(log, **options)
    store.load()
    return log, store


async def test_recreate_after_delete_on_sqlite_across_compaction_and_restart(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path, history_window=3)
    key = "/registry/configmaps/default/x"
    for round_ in range(6):
        created = await store.write(key, obj("x", str(round_)), expected_revision=0)
        updated = await store.write(key, obj("x", f"{round_}b"), expected_revision=created.revision)
        await store.write(key, None, expected_revision=updated.revision)
        if round_ % 2:
            await store.compact()
    await store.write(key, obj("x", "last"), expected_revision=0)
    # Other keys are untouched by the re-creates: nothing latched.
    await store.write("/registry/configmaps/default/y", obj("y"), expected_revision=0)
    top = store.revision
    await log.close()

    log, again = sqlite_store(tmp_path)
    assert again.revision == top
    assert again.get(key).obj["data"] == {"v": "last"}  # type: ignore[union-attr]
    await again.write(key, None, expected_revision=again.get(key).revision)  # type: ignore[union-attr]
    recreated = await again.write(key, obj("x", "after restart"), expected_revision=0)
    assert recreated.revision == top + 2
    await log.close()


class LockHolder:
    """Another process's connection holding the database's write lock (a real SQLITE_BUSY)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)

    def __enter__(self) -> LockHolder:
        self.conn.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


async def test_a_write_is_invisible_until_durable(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path)
    await store.write("/r/a", obj("a"), expected_revision=0)
    _backlog, watcher = store.watch("/r/", store.revision)
    with LockHolder(tmp_path / "state.db"):
        pending = asyncio.ensure_future(store.write("/r/b", obj("b"), expected_revision=0))
        # The write is in flight: sent to the log's writer, which waits for the database lock
        # another process holds.
        await eventually(lambda: "/r/b" in store._inflight and log.appends_in_flight == 1)
        assert not pending.done()
        # Not durable yet: no read, list, revision or watch shows it.
        assert store.get("/r/b") is None
        assert [k for k, _ in store.list_at("/r/", store.revision)] == ["/r/a"]
        assert store.revision == 1
        assert not watcher.events
        snapshot_rv, objects, live = store.snapshot_and_watch("/r/")
        assert snapshot_rv == 1 and [o["metadata"]["name"] for o in objects] == ["a"]
    event = await asyncio.wait_for(pending, 10)
    assert event.revision == 2 and store.get("/r/b") is not None and store.revision == 2
    await watcher.wait(1)
    assert [e.key for e in watcher.drain()] == ["/r/b"]
    assert [e.key for e in live.drain()] == ["/r/b"]
    await log.close()


async def test_a_failed_write_fails_alone_and_the_next_succeeds(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path)
    log.busy_timeout_seconds = 0.2
    await log.pragma("busy_timeout", 200)
    await store.write("/r/a", obj("a"), expected_revision=0)
    with LockHolder(tmp_path / "state.db"):
        with pytest.raises(errors.ServiceUnavailable) as failed:
            await store.write("/r/b", obj("b"), expected_revision=0)
        assert "database is locked" in failed.value.message and failed.value.retry_after_seconds == 1
        with pytest.raises(errors.ServiceUnavailable):
            await store.write("/r/a", obj("a", "changed"), expected_revision=1)
        # Nothing of them was applied: not readable, the revision not shown.
        assert store.get("/r/b") is None and store.get("/r/a").obj["data"] == {"v": ""}  # type: ignore[union-attr]
        assert store.revision == 1 and store.storage_error is not None
        with pytest.raises(StorageError):
            await store.probe()
    # The storage is back: no restart needed.
    written = await store.write("/r/b", obj("b"), expected_revision=0)
    assert store.storage_error is None
    # Revisions handed to the failed writes are never reused for another write.
    assert written.revision == 4 and store.revision == 4
    assert [e.revision for e in store.events_after("/r/", 0)] == [1, 4]
    await log.close()
    log, again = sqlite_store(tmp_path)
    assert sorted(k for k, _ in again.items("/r/")) == ["/r/a", "/r/b"]
    assert again.revision == 4
    await log.close()


async def test_a_full_disk_fails_writes_with_its_cause_and_recovers(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path)
    await store.write("/r/small", obj("small"), expected_revision=0)
    pages = int(await log.pragma("page_count"))  # type: ignore[call-overload]
    await log.pragma("max_page_count", pages + 2)  # SQLite reports SQLITE_FULL beyond this size
    big = {"kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"v": "x" * 200_000}}
    with pytest.raises(errors.InternalError) as full:
        await store.write("/r/big", big, expected_revision=0)
    assert full.value.code == 500 and "database or disk is full" in full.value.message
    assert store.get("/r/big") is None and store.storage_error is not None
    assert store.storage_error.reason == "full"
    await log.pragma("max_page_count", 1_000_000)
    await store.probe()
    assert store.storage_error is None
    await store.write("/r/big", big, expected_revision=0)
    await store.write("/r/small", obj("small", "2"), expected_revision=1)
    await log.close()


async def test_concurrent_writes_of_one_key_are_serialised_and_checked(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path)
    first = await store.write("/r/a", obj("a"), expected_revision=0)
    # Two updates read the same revision: exactly one wins, the other sees the new revision.
    results = await asyncio.gather(
        store.write("/r/a", obj("a", "1"), expected_revision=first.revision),
        store.write("/r/a", obj("a", "2"), expected_revision=first.revision),
        return_exceptions=True,
    )
    wins = [r for r in results if not isinstance(r, BaseException)]
    losses = [r for r in results if isinstance(r, PreconditionFailed)]
    assert len(wins) == 1 and len(losses) == 1 and losses[0].actual == wins[0].revision  # type: ignore[union-attr]
    # Creates racing on one key: one AlreadyExists-style failure.
    results = await asyncio.gather(
        *(store.write("/r/new", obj("new", str(i)), expected_revision=0) for i in range(3)),
        return_exceptions=True,
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    await log.close()


async def test_history_is_bounded_by_bytes_and_compacts_the_log(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path, history_bytes=2_000_000)
    big = "y" * 200_000
    first = await store.write("/r/a", obj("a", big), expected_revision=0)
    revision = first.revision
    for i in range(20):
        revision = (await store.write("/r/a", obj("a", big + str(i)), expected_revision=revision)).revision
    changes, size = store.history_size
    assert size <= 2_000_000 and changes < 10
    with pytest.raises(errors.ResourceExpired):
        store.watch("/r/", first.revision)
    # Enough was dropped that the log wants compacting now, not in five minutes.
    assert store.compaction_due.is_set()
    await store.compact()
    assert len(log.rows()) <= changes + 1
    await log.close()


async def test_time_based_compaction_expires_old_resource_versions() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    old = await store.write("/r/a", obj("a"), expected_revision=0)
    await store.write("/r/b", obj("b"), expected_revision=0)
    store.compact_history(old.revision)
    assert store.compacted_revision == old.revision
    assert [e.key for e in store.events_after("/r/", old.revision)] == ["/r/b"]
    store.compact_history(store.revision)
    with pytest.raises(errors.ResourceExpired):
        store.watch("/r/", old.revision)
    # A watch from the current revision is fine, and so are new writes.
    _backlog, watcher = store.watch("/r/", store.revision)
    await store.write("/r/c", obj("c"), expected_revision=0)
    assert [e.key for e in watcher.drain()] == ["/r/c"]


def disk_bytes(folder: pathlib.Path) -> bytes:
    """Everything SQLite keeps on disk: the database, its WAL and shared-memory files."""
    return b"".join(p.read_bytes() for p in folder.glob("state.db*"))


async def test_compaction_removes_deleted_and_rotated_secret_values_from_disk(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path, history_window=2)
    secret = b"s3cr3t-rotated-away-" * 50
    deleted = b"s3cr3t-deleted-" * 50

    def blob(value: bytes) -> dict[str, object]:
        return {"kind": "Secret", "metadata": {"name": "s"}, "data": {"v": value.hex()}}

    first = await store.write("/r/rotated", blob(secret), expected_revision=0)
    await store.write("/r/rotated", blob(b"new value" * 10), expected_revision=first.revision)
    gone = await store.write("/r/deleted", blob(deleted), expected_revision=0)
    await store.write("/r/deleted", None, expected_revision=gone.revision)
    on_disk = disk_bytes(tmp_path)
    assert secret.hex().encode() in on_disk  # still history, as it should be
    for i in range(3):
        await store.write(f"/r/other{i}", obj(str(i)), expected_revision=0)
    await store.compact()
    on_disk = disk_bytes(tmp_path)
    assert secret.hex().encode() not in on_disk
    assert deleted.hex().encode() not in on_disk
    assert b"new value".hex().encode() in on_disk
    await log.close()


def test_storage_files_are_private(tmp_path: pathlib.Path) -> None:
    async def main() -> None:
        log, store = sqlite_store(tmp_path / "data")
        await store.write("/r/a", obj("a"), expected_revision=0)
        for path in (tmp_path / "data").glob("state.db*"):
            assert path.stat().st_mode & 0o777 == 0o600, path
        assert await log.pragma("journal_mode") == "wal"
        assert await log.pragma("synchronous") == 2  # FULL: every commit fsyncs the WAL
        assert await log.pragma("secure_delete") == 1
        await log.close()

    asyncio.run(main())


async def test_compaction_gives_the_space_back_to_the_file_system(tmp_path: pathlib.Path) -> None:
    log, store = sqlite_store(tmp_path, history_window=5)
    value = "z" * 100_000
    for i in range(50):
        await store.write(f"/r/{i}", obj(str(i), value), expected_revision=0)
    for i in range(50):
        await store.write(f"/r/{i}", None, expected_revision=store.get(f"/r/{i}").revision)  # type: ignore[union-attr]
    for i in range(10):
        await store.write(f"/r/small{i}", obj("small"), expected_revision=0)
    big = (tmp_path / "state.db").stat().st_size
    store.compact_history(store.revision)
    await store.compact()
    assert await log.pragma("freelist_count") == 0
    assert (tmp_path / "state.db").stat().st_size < big / 4
    assert (tmp_path / "state.db-wal").stat().st_size == 0
    await log.close()


def test_a_database_from_before_incremental_vacuum_is_converted(tmp_path: pathlib.Path) -> None:
    old = sqlite3.connect(tmp_path / "state.db")
    old.execute(
        "CREATE TABLE kine (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, created INTEGER NOT NULL, "
        "deleted INTEGER NOT NULL, create_revision INTEGER NOT NULL, prev_revision INTEGER NOT NULL, "
        "lease INTEGER NOT NULL DEFAULT 0, value BLOB, old_value BLOB)"
    )
    old.execute(
        "INSERT INTO kine VALUES (1, '/r/a', 1, 0, 1, 0, 0, ?, NULL)",
        (b'{"metadata":{"name":"a","resourceVersion":"1"}}',),
    )
    old.commit()
    assert old.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    old.close()

    async def main() -> None:
        log, store = sqlite_store(tmp_path)
        assert await log.pragma("auto_vacuum") == 2
        assert store.get("/r/a") is not None and store.revision == 1
        await store.write("/r/a", None, expected_revision=1)
        await store.write("/r/a", obj("a"), expected_revision=0)  # the old create row had prev 0
        await log.close()

    asyncio.run(main())


async def test_stored_objects_and_the_history_are_out_of_the_gcs_sight(tmp_path: pathlib.Path) -> None:
    """Stored objects are acyclic and never mutated: a GC pass walking them finds nothing, so
    none walks them (a full pass over 20,000 ConfigMaps held the server up for ~55 ms)."""
    import gc

    def tracked_parts(value: object) -> list[object]:
        found, stack = [], [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict | list):
                if gc.is_tracked(item):
                    found.append(item)
                stack.extend(item.values() if isinstance(item, dict) else item)
        return found

    body = {"kind": "ConfigMap", "metadata": {"name": "a", "finalizers": ["x"], "managedFields": [{"fieldsV1": {"f:data": {}}}]}}
    log = SQLiteLog(tmp_path / "state.db")
    store = ObjectStore(log)
    store.load()
    await store.write("/registry/configmaps/ns/a", body, expected_revision=0)
    await store.write("/registry/configmaps/ns/a", {**body, "data": {"k": "v"}}, expected_revision=1)
    stored = store.get("/registry/configmaps/ns/a")
    assert stored is not None and stored.obj["data"] == {"k": "v"}
    assert not gc.is_tracked(stored) and tracked_parts(stored.obj) == []
    assert not any(gc.is_tracked(change) for change in store._history)
    await log.close()

    reloaded = ObjectStore(SQLiteLog(tmp_path / "state.db"))
    reloaded.load()  # and so are the objects a restart reads back
    again = reloaded.get("/registry/configmaps/ns/a")
    assert again is not None and again.obj == stored.obj
    assert not gc.is_tracked(again) and tracked_parts(again.obj) == []
    assert not any(gc.is_tracked(change) for change in reloaded._history)


_KEY_TEXT = st.text(alphabet=["a", "b", "/", "0", "\U0010ffff"], max_size=4)


@settings(max_examples=60, deadline=None)
@given(keys=st.sets(_KEY_TEXT, max_size=12), prefix=_KEY_TEXT, start=_KEY_TEXT)
def test_a_prefix_range_holds_exactly_the_keys_under_the_prefix_from_start(
    keys: set[str], prefix: str, start: str
) -> None:
    """Listing by two bisections (the keys from the prefix to its successor) agrees with
    filtering every key, for any prefix: ending in the last code point, which has no successor,
    or empty, and any start."""

    async def listed() -> tuple[list[str], list[str], int]:
        store = ObjectStore(MemoryLog())
        store.load()
        for key in keys:
            await store.write(key, obj(key), expected_revision=0)
        return (
            [key for key, _ in store.items(prefix, start=start)],
            list(store.keys_with_prefix(prefix, start)),
            store.count_with_prefix(prefix, start),
        )

    expected = sorted(key for key in keys if key.startswith(prefix) and key >= start)
    items, keys_found, count = asyncio.run(listed())
    assert items == keys_found == expected
    assert count == len(expected)


class HeldLog(MemoryLog):
    """A memory log whose appends complete only when the test releases them."""

    def __init__(self) -> None:
        self.held: list[tuple[LogRecord, Callable[[StorageError | None], None]]] = []

    def submit(self, writes: Sequence[tuple[LogRecord, Callable[[StorageError | None], None]]]) -> None:
        self.held.extend(writes)

    def release(self) -> None:
        held, self.held = self.held, []
        for _record, done in held:
            done(None)


async def test_commit_hooks_see_every_change_in_order_whoever_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What keeps the server's caches (served CRDs, webhook and policy configurations) current:
    a hook sees each change as it is applied, in revision order, before its writer resumes —
    also when the writer was cancelled while its write was in flight; a failing hook is logged
    and changes nothing of the write or of the other hooks."""
    log = HeldLog()
    store = ObjectStore(log)
    store.load()
    seen: list[tuple[int, str, str]] = []

    def failing(event: Event) -> None:
        raise RuntimeError("a broken hook")

    store.add_commit_hook(failing)
    store.add_commit_hook(lambda event: seen.append((event.revision, event.type, event.key)))
    first = asyncio.ensure_future(store.write("/r/a", obj("a"), expected_revision=0))
    second = asyncio.ensure_future(store.write("/r/b", obj("b"), expected_revision=0))
    await eventually(lambda: len(log.held) == 2)
    first.cancel()  # its request went away; the write is already on its way to the log
    with pytest.raises(asyncio.CancelledError):
        await first
    log.release()
    written = await second
    assert written.revision == 2
    assert seen == [(1, "ADDED", "/r/a"), (2, "ADDED", "/r/b")]
    assert store.get("/r/a") is not None
    assert "a commit hook failed on /r/a at revision 1" in caplog.text

    deleting = asyncio.ensure_future(store.write("/r/a", None, expected_revision=1))
    await eventually(lambda: len(log.held) == 1)
    assert seen[-1][0] == 2  # not applied, not seen, until durable
    log.release()
    await deleting
    assert seen[-1] == (3, "DELETED", "/r/a")


async def test_a_change_records_its_previous_value_as_the_bytes_it_was_written_as() -> None:
    """An update or delete records the object's previous JSON: the bytes of the change that
    wrote it (the same bytes object, not an encoding of its own) while the history holds that
    change, an encoding of the object once the history has dropped it; either way what a list
    at the older revision and the event's previous object show."""
    store = ObjectStore(MemoryLog(), history_window=2)
    store.load()
    key = "/registry/configmaps/ns/a"
    created = await store.write(key, obj("a", "1"), expected_revision=0)
    updated = await store.write(key, obj("a", "2"), expected_revision=created.revision)
    history = list(store._history)
    assert history[-1].prev_value is history[-2].value is created.value
    assert [o["data"] for _, o in store.list_at("/registry/configmaps/", created.revision)] == [{"v": "1"}]
    # Two changes of another key push both out of the window of two: the bytes go with them.
    await store.write("/registry/configmaps/ns/b", obj("b"), expected_revision=0)
    await store.write("/registry/configmaps/ns/c", obj("c"), expected_revision=0)
    stored = store.get(key)
    assert stored is not None and stored.value is None
    deleted = await store.write(key, None, expected_revision=updated.revision)
    assert store._history[-1].prev_value == updated.value
    assert deleted.prev is not None and deleted.prev["data"] == {"v": "2"}
    assert [o["data"] for _, o in store.list_at("/registry/configmaps/", updated.revision + 2)] == [
        {"v": "2"},
        {"v": ""},
        {"v": ""},
    ]


def test_a_store_made_outside_a_loop_lives_on_the_first_that_writes_to_it() -> None:
    """A store made before any loop runs takes the first loop that uses it as its own; a write
    from another thread's loop is then made there (the worker loop's large requests), and one
    from the store's own thread is made at once."""
    import threading

    store = ObjectStore(MemoryLog())
    made_on: list[int] = []

    async def main() -> None:
        assert store._home() is None  # adopts this loop
        assert store._home() is None  # and knows it from then on
        await store.write("/r/a", obj("a"), expected_revision=0)
        made_on.append(threading.get_ident())
        loop = asyncio.get_running_loop()

        def worker() -> None:
            async def write() -> None:
                event = await store.write("/r/b", obj("b"), expected_revision=0)
                assert event.revision == 2

            asyncio.run(write())

        thread = threading.Thread(target=worker)
        thread.start()
        await loop.run_in_executor(None, thread.join)
        assert [store.get(k) is not None for k in ("/r/a", "/r/b")] == [True, True]
        assert store.revision == 2

    asyncio.run(main())
    assert made_on == [threading.get_ident()]
