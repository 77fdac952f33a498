"""The object store and the SQLite log: revisions, CAS, history, compaction, recovery."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from kubeloop.apiserver import errors
from kubeloop.apiserver.storage import MemoryLog, SQLiteLog
from kubeloop.apiserver.store import ObjectStore, PreconditionFailed


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
    with pytest.raises(errors.Gone):
        store.list_at("/r/", 2)
    with pytest.raises(errors.Gone):
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
    with pytest.raises(errors.Gone):
        again.events_after("/r/", 3)
    await reopened.close()
