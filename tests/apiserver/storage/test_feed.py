"""The store's feed: a watch cache in another process's place, fed over a real socket, holds
what the store holds, and its watchers, hooks and waits see what the store's see."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.storage.feed import FeedLost, FeedPublisher, follow
from kubeloop.apiserver.storage.log import MemoryLog, SQLiteLog
from kubeloop.apiserver.storage.objectstore import ObjectStore, PreconditionFailed
from kubeloop.apiserver.storage.watchcache import Change, Event, ReplicaDiverged, WatchCache
from kubeloop.testing import eventually


def obj(name: str, value: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": {"v": value}}


class Follower:
    """A watch cache fed by ``publisher`` over a socket pair, its task owned here."""

    def __init__(self, publisher: FeedPublisher, **options: int) -> None:
        self.cache = WatchCache(**options)
        self._publisher = publisher
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def start(self, *, read: bool = True) -> None:
        ours, theirs = socket.socketpair()
        _, self.writer = await asyncio.open_connection(sock=ours)
        reader, self._theirs = await asyncio.open_connection(sock=theirs)
        self._publisher.attach(self.writer)
        self.reader = reader
        if read:
            self.task = asyncio.create_task(follow(self.cache, reader))

    async def caught_up(self, revision: int) -> None:
        """Wait until the cache has applied ``revision``; a follow that failed meanwhile fails here."""
        assert self.task is not None
        waiting = asyncio.ensure_future(self.cache.wait_for_revision(revision))
        await asyncio.wait({waiting, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            waiting.cancel()
            self.task.result()
            raise AssertionError("the follow task ended without an error")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, FeedLost):
                await self.task
        self._theirs.close()
        if self.writer is not None:
            self.writer.close()


@contextlib.asynccontextmanager
async def fed(store: ObjectStore, **options: int) -> AsyncIterator[tuple[FeedPublisher, Follower]]:
    publisher = FeedPublisher(store)
    follower = Follower(publisher, **options)
    await follower.start()
    try:
        yield publisher, follower
    finally:
        await follower.stop()
        await publisher.close()


def event_tuple(event: Event) -> tuple[Any, ...]:
    return (event.revision, event.type, event.key, event.obj, event.prev)


def assert_holds_the_same(cache: WatchCache, store: ObjectStore) -> None:
    """Everything a read can ask of a cache: current objects and their revisions, the history
    from its start, the objects at each revision the history covers, and its bounds."""
    assert cache.revision == store.revision
    assert cache.compacted_revision == store.compacted_revision
    assert cache.history_size == store.history_size
    assert list(cache.items("")) == list(store.items(""))
    for key, _ in store.items(""):
        ours, theirs = cache.get(key), store.get(key)
        assert ours is not None and theirs is not None
        assert (ours.revision, ours.create_revision) == (theirs.revision, theirs.create_revision)
    since = store.compacted_revision
    assert [event_tuple(e) for e in cache.events_after("", since)] == [
        event_tuple(e) for e in store.events_after("", since)
    ]
    for revision in range(since, store.revision + 1):
        assert list(cache.list_at("/r/", revision)) == list(store.list_at("/r/", revision))


# A write: (key index, None for a delete or the value to write).
writes = st.lists(st.tuples(st.integers(0, 4), st.one_of(st.none(), st.text(max_size=5))), max_size=40)


async def apply_writes(store: ObjectStore, ops: list[tuple[int, str | None]]) -> None:
    for index, value in ops:
        key = f"/r/{index}"
        current = store.get(key)
        expected = current.revision if current is not None else 0
        if value is None and current is None:
            continue
        await store.write(key, None if value is None else obj(str(index), value), expected_revision=expected)


@settings(max_examples=40, deadline=None)
@given(before=writes, after=writes, compact_at=st.integers(0, 80))
def test_a_follower_holds_what_the_store_holds(
    before: list[tuple[int, str | None]], after: list[tuple[int, str | None]], compact_at: int
) -> None:
    """Writes before the follower attaches reach it in the snapshot (objects and history),
    writes after it in the stream; a compaction of the history reaches it in its place. The
    history is bounded (8 changes) so that bounds drop changes on both sides alike."""

    async def scenario() -> None:
        store = ObjectStore(MemoryLog(), history_window=8)
        store.load()
        await apply_writes(store, before)
        async with fed(store, history_window=8) as (_, follower):
            await apply_writes(store, after[: len(after) // 2])
            store.compact_history(min(compact_at, store.revision))
            await apply_writes(store, after[len(after) // 2 :])
            marker = await store.write("/s/marker", obj("marker"), expected_revision=0)
            await follower.caught_up(marker.revision)
            assert_holds_the_same(follower.cache, store)

    asyncio.run(scenario())


async def test_a_follower_of_a_durable_store_holds_what_a_reload_holds(tmp_path: pathlib.Path) -> None:
    """On the SQLite log, with writes group-committed by the writer process: the follower's cache
    equals the store's, and the store reloaded from disk equals both."""
    log = SQLiteLog(tmp_path / "db", durable=False)
    store = ObjectStore(log)
    store.load()
    async with fed(store) as (_, follower):
        await asyncio.gather(*(store.write(f"/r/{i}", obj(str(i)), expected_revision=0) for i in range(50)))
        for i in range(0, 50, 3):
            await store.write(f"/r/{i}", None, expected_revision=store.get(f"/r/{i}").revision)  # type: ignore[union-attr]
        await follower.caught_up(store.revision)
        assert_holds_the_same(follower.cache, store)
    await log.close()
    reloaded_log = SQLiteLog(tmp_path / "db", durable=False)
    reloaded = ObjectStore(reloaded_log)
    reloaded.load()
    assert list(reloaded.items("")) == list(follower.cache.items(""))
    assert reloaded.revision == follower.cache.revision
    await reloaded_log.close()


async def test_a_follower_attached_between_commits_of_one_tick_gets_each_change_once() -> None:
    """Writes committed together (one group commit) with a follower attached between two of
    them, from a commit hook: the changes before it and its own are in its snapshot, those
    after in its feed, none twice (a change twice would not follow the cache: ReplicaDiverged)."""
    store = ObjectStore(MemoryLog())
    store.load()
    publisher = FeedPublisher(store)
    follower = Follower(publisher)
    ours, theirs = socket.socketpair()
    _, writer = await asyncio.open_connection(sock=ours)
    reader, follower._theirs = await asyncio.open_connection(sock=theirs)
    follower.writer, follower.reader = writer, reader
    store.add_commit_hook(lambda event: publisher.attach(writer) if event.revision == 2 else None)
    try:
        await asyncio.gather(*(store.write(f"/r/{i}", obj(str(i)), expected_revision=0) for i in range(4)))
        assert store.revision == 4 and publisher.followers == 1
        follower.task = asyncio.create_task(follow(follower.cache, reader))
        await follower.caught_up(4)
        assert_holds_the_same(follower.cache, store)
    finally:
        await follower.stop()
        await publisher.close()


async def test_a_followers_watchers_see_what_the_stores_watchers_see() -> None:
    """Same events in the same order, each with the object before it (what tells a selector's
    watch that an object left it), from a live watch and from a backlog."""
    store = ObjectStore(MemoryLog())
    store.load()
    await store.write("/r/a", obj("a", "0", {"tier": "web"}), expected_revision=0)
    async with fed(store) as (_, follower):
        await follower.caught_up(store.revision)
        _, on_store = store.watch("/r/", store.revision)
        _, on_cache = follower.cache.watch("/r/", store.revision)
        a = await store.write("/r/a", obj("a", "1", {"tier": "db"}), expected_revision=1)
        await store.write("/r/b", obj("b"), expected_revision=0)
        await store.write("/x/other", obj("other"), expected_revision=0)
        await store.write("/r/a", None, expected_revision=a.revision)
        await follower.caught_up(store.revision)
        seen = [event_tuple(e) for e in on_cache.drain()]
        assert seen == [event_tuple(e) for e in on_store.drain()]
        assert [(revision, kind) for revision, kind, *_ in seen] == [(2, "MODIFIED"), (3, "ADDED"), (5, "DELETED")]
        assert seen[0][4]["metadata"]["labels"] == {"tier": "web"}  # the object before the change
        backlog, _ = follower.cache.watch("/r/", 1)
        assert [event_tuple(e) for e in backlog] == seen


async def test_a_followers_commit_hooks_see_every_change_in_order() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    async with fed(store) as (_, follower):
        seen: list[tuple[int, str, Any]] = []
        follower.cache.add_commit_hook(lambda e: seen.append((e.revision, e.type, e.prev and e.prev["data"])))
        first = await store.write("/r/a", obj("a", "1"), expected_revision=0)
        second = await store.write("/r/a", obj("a", "2"), expected_revision=first.revision)
        await store.write("/r/a", None, expected_revision=second.revision)
        await follower.caught_up(store.revision)
        assert seen == [(1, "ADDED", None), (2, "MODIFIED", {"v": "1"}), (3, "DELETED", {"v": "2"})]


async def test_compaction_reaches_the_follower_and_old_revisions_expire_there() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    async with fed(store) as (_, follower):
        for i in range(5):
            await store.write(f"/r/{i}", obj(str(i)), expected_revision=0)
        store.compact_history(3)
        marker = await store.write("/r/marker", obj("marker"), expected_revision=0)
        await follower.caught_up(marker.revision)
        assert follower.cache.compacted_revision == 3
        with pytest.raises(errors.APIError) as expired:
            follower.cache.events_after("/r/", 2)
        assert expired.value.code == 410
        assert [e.revision for e in follower.cache.events_after("/r/", 3)] == [4, 5, 6]


async def test_wait_for_revision_waits_for_that_change_and_no_longer() -> None:
    """A wait for an applied revision returns at once; one for a later revision returns when a
    change at or after it is applied, and not before (shown by a change before it that does not
    end the wait); a cancelled wait leaves the others working."""
    store = ObjectStore(MemoryLog())
    store.load()
    async with fed(store) as (_, follower):
        cache = follower.cache
        await store.write("/r/a", obj("a"), expected_revision=0)
        await follower.caught_up(1)
        await cache.wait_for_revision(0)
        cancelled = asyncio.ensure_future(cache.wait_for_revision(3))
        waiting = asyncio.ensure_future(cache.wait_for_revision(3))
        at_two = asyncio.ensure_future(cache.wait_for_revision(2))
        await asyncio.sleep(0)
        cancelled.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cancelled
        assert len(cache._revision_waiters) == 2  # the cancelled wait is let go at once
        await store.write("/r/b", obj("b"), expected_revision=0)
        await at_two
        assert cache.revision == 2 and not waiting.done()
        await store.write("/r/c", obj("c"), expected_revision=0)
        await waiting
        assert cache.revision == 3 and cancelled.cancelled()


def test_a_change_that_cannot_follow_the_cache_is_refused() -> None:
    cache = WatchCache()
    cache.apply(Change(2, "ADDED", "/r/a", b'{"metadata":{"resourceVersion":"2"}}', None, 2))
    with pytest.raises(ReplicaDiverged):  # a revision already passed
        cache.apply(Change(2, "MODIFIED", "/r/a", b"{}", b"{}", 2))
    with pytest.raises(ReplicaDiverged):  # a create of a key it holds
        cache.apply(Change(3, "ADDED", "/r/a", b"{}", None, 3))
    with pytest.raises(ReplicaDiverged):  # an update of a key it lacks
        cache.apply(Change(3, "MODIFIED", "/r/b", b"{}", b"{}", 1))
    with pytest.raises(ReplicaDiverged):
        cache.apply(Change(3, "DELETED", "/r/b", b"{}", b"{}", 1))
    assert cache.revision == 2 and [key for key, _ in cache.items("")] == ["/r/a"]


async def test_a_follower_that_falls_too_far_behind_is_cut_off_and_says_so() -> None:
    """A follower that stops reading while writes go on: once more than ``max_unsent`` bytes wait
    for it, the store cuts it off (its memory does not grow without bound) and keeps serving its
    other followers; the cut-off follower, reading again, fails with FeedLost."""
    store = ObjectStore(MemoryLog())
    store.load()
    publisher = FeedPublisher(store, max_unsent=256 * 1024)
    stalled, live = Follower(publisher), Follower(publisher)
    await stalled.start(read=False)
    await live.start()
    try:
        big = "x" * 64 * 1024
        for i in range(200):
            await store.write(f"/r/{i}", obj(str(i), big), expected_revision=0)
            if publisher.followers == 1:
                break
        assert publisher.followers == 1
        marker = await store.write("/r/marker", obj("marker"), expected_revision=0)
        await live.caught_up(marker.revision)
        assert_holds_the_same(live.cache, store)
        with pytest.raises(FeedLost, match="ended"):
            await follow(stalled.cache, stalled.reader)
    finally:
        await stalled.stop()
        await live.stop()
        await publisher.close()


async def test_a_follower_whose_store_goes_away_fails_with_feed_lost() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    publisher = FeedPublisher(store)
    follower = Follower(publisher)
    await follower.start()
    await store.write("/r/a", obj("a"), expected_revision=0)
    await follower.caught_up(1)
    await publisher.close()
    assert follower.task is not None
    with pytest.raises(FeedLost):
        await follower.task
    await follower.stop()


async def test_writes_refused_by_the_store_never_reach_the_follower() -> None:
    """A refused compare-and-swap takes no revision: the follower's next change is the next
    accepted write, and it never sees the refused value."""
    store = ObjectStore(MemoryLog())
    store.load()
    async with fed(store) as (_, follower):
        seen: list[Event] = []
        follower.cache.add_commit_hook(seen.append)
        await store.write("/r/a", obj("a", "1"), expected_revision=0)
        with pytest.raises(PreconditionFailed):
            await store.write("/r/a", obj("a", "refused"), expected_revision=0)
        await store.write("/r/a", obj("a", "2"), expected_revision=1)
        await follower.caught_up(store.revision)
        assert [(e.revision, e.obj["data"]["v"]) for e in seen] == [(1, "1"), (2, "2")]


async def test_the_storages_health_reaches_followers(tmp_path: pathlib.Path) -> None:
    """A full disk: a follower's cache reports the storage's error (what its ``readyz`` says), a
    follower attached meanwhile learns it from its snapshot, and both hear of the recovery."""
    log = SQLiteLog(tmp_path / "db", durable=False)
    store = ObjectStore(log)
    store.load()
    publisher = FeedPublisher(store)
    first, later = Follower(publisher), Follower(publisher)
    await first.start()
    try:
        await store.write("/r/small", obj("small"), expected_revision=0)
        pages = int(await log.pragma("page_count"))  # type: ignore[call-overload]
        await log.pragma("max_page_count", pages + 2)  # SQLite reports SQLITE_FULL beyond this size
        with pytest.raises(errors.InternalError):
            await store.write("/r/big", obj("big", "x" * 200_000), expected_revision=0)
        await eventually(lambda: first.cache.storage_error is not None)
        assert first.cache.storage_error is not None and first.cache.storage_error.reason == "full"
        assert "database or disk is full" in first.cache.storage_error.message
        await later.start()
        await later.caught_up(store.revision)
        assert later.cache.storage_error is not None and later.cache.storage_error.reason == "full"
        await log.pragma("max_page_count", 1_000_000)
        await store.probe()
        for follower in (first, later):
            await eventually(lambda f=follower: f.cache.storage_error is None)  # type: ignore[misc]
        assert first.task is not None and not first.task.done()
    finally:
        await first.stop()
        await later.stop()
        await publisher.close()
        await log.close()


async def test_a_snapshot_larger_than_the_bound_does_not_cut_its_follower_off() -> None:
    """The bound on unsent bytes counts what falls behind after the snapshot: a follower whose
    snapshot alone is larger than ``max_unsent`` stays attached and follows on."""
    store = ObjectStore(MemoryLog())
    store.load()
    for i in range(40):
        await store.write(f"/r/{i}", obj(str(i), "x" * 64 * 1024), expected_revision=0)
    publisher = FeedPublisher(store, max_unsent=256 * 1024)  # the snapshot is ~5 MB
    follower = Follower(publisher)
    await follower.start()
    try:
        marker = await store.write("/r/marker", obj("marker"), expected_revision=0)
        assert publisher.followers == 1
        await follower.caught_up(marker.revision)
        assert_holds_the_same(follower.cache, store)
    finally:
        await follower.stop()
        await publisher.close()


async def test_a_change_listener_that_fails_is_logged_and_the_writes_stand(caplog: pytest.LogCaptureFixture) -> None:
    """A listener's exception (it runs in the log's callback, among other writes' settling) is
    logged; every write of the batch is still answered and applied."""

    class Failing:
        def committed(self, change: Change) -> None:
            raise RuntimeError("listener broke")

        def compacted(self, revision: int) -> None:
            raise RuntimeError("listener broke")

        def health(self, error: object) -> None:
            raise RuntimeError("listener broke")

    store = ObjectStore(MemoryLog())
    store.load()
    store.add_change_listener(Failing())
    events = await asyncio.gather(*(store.write(f"/r/{i}", obj(str(i)), expected_revision=0) for i in range(3)))
    store.compact_history(1)
    assert [e.revision for e in events] == [1, 2, 3] and store.revision == 3
    assert caplog.text.count("a change listener failed") == 4
