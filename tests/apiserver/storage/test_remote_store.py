"""Front-ends' stores over the store process's service: two RemoteStores, each on a real socket
to a StoreService over one ObjectStore, keep the ObjectStore's write contract."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.claims import ClaimTaken
from kubeloop.apiserver.storage.feed import FeedLost, FeedPublisher
from kubeloop.apiserver.storage.log import MemoryLog, SQLiteLog
from kubeloop.apiserver.storage.objectstore import MAX_OBJECT_BYTES, ObjectStore, PreconditionFailed
from kubeloop.apiserver.storage.remotestore import RemoteStore, StoreService
from kubeloop.apiserver.storage.writer import FrameReader, frame
from kubeloop.testing import eventually
from tests.apiserver.storage.test_store import HeldLog


def obj(name: str, value: str = "", **extra: Any) -> dict[str, Any]:
    return {"kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}, **extra}


def ips(o: Obj) -> Iterator[str]:
    if ip := (o.get("spec") or {}).get("ip"):
        yield f"ip/{ip}"


class StoreProcess:
    """The store process's side, in this process: an ObjectStore, its feed and its service, and
    the connections it serves (each task owned and awaited here)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.publisher = FeedPublisher(store)
        self.service = StoreService(store, self.publisher)
        self.serving: list[asyncio.Task[None]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.transports: dict[RemoteStore, asyncio.WriteTransport] = {}

    async def front_end(self) -> RemoteStore:
        theirs, ours = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=theirs)
        self.writers.append(writer)
        self.serving.append(asyncio.create_task(self.service.serve(reader, writer)))
        front_reader, front_writer = await asyncio.open_connection(sock=ours)
        remote = RemoteStore(front_reader, front_writer)
        await remote.start()
        self.transports[remote] = front_writer.transport
        return remote

    @contextlib.contextmanager
    def unfed(self, remote: RemoteStore) -> Iterator[None]:
        """Nothing the store sends reaches ``remote`` (neither its feed nor its answers) inside."""
        transport = self.transports[remote]
        transport.pause_reading()
        try:
            yield
        finally:
            transport.resume_reading()

    async def stop(self) -> None:
        for task in self.serving:
            task.cancel()
        for task in self.serving:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.publisher.close()


@contextlib.asynccontextmanager
async def two_front_ends(
    store: ObjectStore | None = None,
) -> AsyncIterator[tuple[StoreProcess, RemoteStore, RemoteStore]]:
    if store is None:
        store = ObjectStore(MemoryLog())
        store.load()
    process = StoreProcess(store)
    one, two = await process.front_end(), await process.front_end()
    try:
        yield process, one, two
    finally:
        await one.close()
        await two.close()
        await process.stop()


async def test_a_write_is_read_at_once_where_it_was_made_and_after_a_sync_elsewhere() -> None:
    async with two_front_ends() as (process, one, two):
        created = await one.write("/r/a", obj("a", "1"), expected_revision=0)
        assert (created.revision, created.type, created.prev) == (1, "ADDED", None)
        assert created.obj["metadata"]["resourceVersion"] == "1"
        stored = one.get("/r/a")  # no wait: the write returned once applied here
        assert stored is not None and stored.obj == created.obj and stored.create_revision == 1
        updated = await one.write("/r/a", obj("a", "2"), expected_revision=1)
        assert updated.type == "MODIFIED" and updated.prev == created.obj
        await two.sync()
        there = two.get("/r/a")
        assert there is not None and there.obj == updated.obj
        deleted = await two.write("/r/a", None, expected_revision=updated.revision)
        assert deleted.type == "DELETED" and deleted.obj["metadata"]["resourceVersion"] == "3"
        assert two.get("/r/a") is None and process.store.get("/r/a") is None


async def test_a_write_of_a_key_another_front_end_is_writing_waits_for_it_then_is_judged() -> None:
    """The store takes a front-end's write at once unless a write of that key is in flight;
    then it waits until that one settles and is judged against it: a create of the same key
    is refused as existing, an update at the winner's revision succeeds."""
    log = HeldLog()
    store = ObjectStore(log)
    store.load()
    async with two_front_ends(store) as (_process, one, two):
        first = asyncio.ensure_future(one.write("/r/a", obj("a", "one"), expected_revision=0))
        await eventually(lambda: len(log.held) == 1)
        racing = asyncio.ensure_future(two.write("/r/a", obj("a", "two"), expected_revision=0))
        await eventually(lambda: two.requests_in_flight == 1)
        assert len(log.held) == 1  # held at the store behind the first, not taken
        log.release()
        assert (await first).revision == 1
        with pytest.raises(PreconditionFailed) as refused:
            await racing
        assert refused.value.actual == 1
        update = asyncio.ensure_future(one.write("/r/a", obj("a", "again"), expected_revision=1))
        await eventually(lambda: len(log.held) == 1)
        following = asyncio.ensure_future(two.write("/r/a", obj("a", "after"), expected_revision=2))
        await eventually(lambda: two.requests_in_flight == 1)
        log.release()
        assert (await update).revision == 2
        await eventually(lambda: len(log.held) == 1)
        log.release()
        written = await following
        assert written.revision == 3 and two.get("/r/a").obj["data"] == {"v": "after"}  # type: ignore[union-attr]


async def test_concurrent_updates_from_two_front_ends_lose_none_and_a_refusal_shows_the_winner() -> None:
    """Read-modify-write loops of one counter from both front-ends, as a registry's update retries
    them: every increment lands once, and when the store refuses a stale write the refusal comes
    only once the front-end's cache holds the winning write (the retry reads it, instead of
    spending its tries on a stale copy)."""
    async with two_front_ends() as (process, one, two):
        await one.write("/r/counter", obj("counter", "0"), expected_revision=0)
        await two.sync()
        refusals = 0

        async def increment(front: RemoteStore) -> None:
            nonlocal refusals
            while True:
                current = front.get("/r/counter")
                assert current is not None
                value = int(current.obj["data"]["v"]) + 1
                try:
                    await front.write("/r/counter", obj("counter", str(value)), expected_revision=current.revision)
                    return
                except PreconditionFailed as refused:
                    refusals += 1
                    now = front.get("/r/counter")
                    assert now is not None and now.revision >= refused.actual

        await asyncio.gather(*(increment(front) for _ in range(60) for front in (one, two)))
        final = process.store.get("/r/counter")
        assert final is not None and final.obj["data"]["v"] == "120"
        assert refusals > 0  # the loops did contend


async def test_sync_reaches_what_the_store_had_committed_when_it_was_called() -> None:
    async with two_front_ends() as (process, one, two):

        async def writes() -> None:
            for i in range(200):
                await one.write(f"/r/{i}", obj(str(i)), expected_revision=0)

        async def reads() -> None:
            for _ in range(200):
                committed = process.store.revision
                await two.sync()
                assert two.revision >= committed
                await asyncio.sleep(0)

        await asyncio.gather(writes(), reads())


async def test_the_stores_refusals_reach_the_front_end_as_the_store_raised_them() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    store.add_claims("/services/", ips)
    async with two_front_ends(store) as (_, one, two):
        two.add_claims("/services/", ips)
        await one.write("/services/a", obj("a", spec={"ip": "10.96.0.1"}), expected_revision=0)
        with pytest.raises(ClaimTaken) as taken:
            await two.write("/services/b", obj("b", spec={"ip": "10.96.0.1"}), expected_revision=0)
        assert (taken.value.claim, taken.value.holder) == ("ip/10.96.0.1", "/services/a")
        assert two.claim_holder("ip/10.96.0.1") == "/services/a"  # its cache's index of committed claims
        with pytest.raises(PreconditionFailed) as exists:
            await two.write("/services/a", obj("a"), expected_revision=0)
        assert exists.value.actual == 1
        with pytest.raises(errors.RequestEntityTooLarge) as too_large:
            await one.write("/r/big", obj("big", "x" * (MAX_OBJECT_BYTES + 1)), expected_revision=0)
        assert too_large.value.code == 413 and "storage takes" in too_large.value.message
        released = one.get("/services/a")
        assert released is not None
        await one.write("/services/a", None, expected_revision=released.revision)
        await two.sync()
        assert two.claim_holder("ip/10.96.0.1") is None
        await two.write("/services/b", obj("b", spec={"ip": "10.96.0.1"}), expected_revision=0)


async def test_a_storage_failure_reaches_the_front_end_with_its_status(tmp_path: pathlib.Path) -> None:
    log = SQLiteLog(tmp_path / "db", durable=False)
    store = ObjectStore(log)
    store.load()
    async with two_front_ends(store) as (_, one, _two):
        await one.write("/r/small", obj("small"), expected_revision=0)
        pages = int(await log.pragma("page_count"))  # type: ignore[call-overload]
        await log.pragma("max_page_count", pages + 2)
        with pytest.raises(errors.InternalError) as full:
            await one.write("/r/big", obj("big", "x" * 200_000), expected_revision=0)
        assert full.value.code == 500 and "database or disk is full" in full.value.message
        assert one.get("/r/big") is None
    await log.close()


async def test_a_front_end_whose_store_goes_away_fails_its_requests_with_feed_lost() -> None:
    """Writes and waits in flight fail, and so do later ones: nothing hangs, nothing is
    answered from a cache nobody feeds any more."""
    async with two_front_ends() as (process, one, _two):
        await one.write("/r/a", obj("a"), expected_revision=0)
        _, watcher = one.watch("/r/", 1)
        waiting = asyncio.ensure_future(one.wait_for_revision(100))
        syncing = asyncio.ensure_future(one.sync())
        await asyncio.sleep(0)
        for writer in process.writers:  # the store process's ends of the connections
            writer.transport.abort()
        with pytest.raises(FeedLost):
            await waiting
        with pytest.raises(FeedLost):
            await syncing
        with pytest.raises(FeedLost):
            await one.write("/r/b", obj("b"), expected_revision=0)
        # Its watches end, it says it is not ready, and reads are refused with a 503.
        assert watcher.closed
        assert one.storage_error is not None and "cannot be reached" in one.storage_error.message
        with pytest.raises(errors.ServiceUnavailable) as refused:
            one.unavailable()
        assert refused.value.code == 503


async def test_a_write_from_another_loop_is_made_on_the_stores_loop() -> None:
    """The server's worker loop (large requests) writes through the same RemoteStore."""
    async with two_front_ends() as (_, one, _two):
        result: list[Any] = []

        def worker() -> None:
            async def write() -> None:
                result.append(await one.write("/r/big", obj("big", "y"), expected_revision=0))
                await one.settled("/r/big")
                await one.sync()

            asyncio.run(write())

        thread = threading.Thread(target=worker)
        thread.start()
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
        assert len(result) == 1 and result[0].revision == 1
        assert one.get("/r/big") is not None


async def test_a_write_waits_for_this_front_ends_earlier_write_of_the_key() -> None:
    """``settled`` waits for this front-end's write of a key in flight; a second write of the
    key waits for the first, so the two are taken in the order they were made."""
    async with two_front_ends() as (_, one, _two):
        first = asyncio.ensure_future(one.write("/r/a", obj("a", "1"), expected_revision=0))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(one.write("/r/a", obj("a", "2"), expected_revision=1))
        await one.settled("/r/a")
        assert first.done()
        done = await second
        assert done.revision == 2 and done.prev is not None and done.prev["data"] == {"v": "1"}


class ScriptedStore:
    """The store process's end of a front-end's connection, played by the test: it sends what
    it is told when it is told, so an answer can overtake the change it answers for (the feed
    and the answers are written by different parts of the store process)."""

    async def start(self) -> RemoteStore:
        theirs, ours = socket.socketpair()
        self.reader, self.writer = await asyncio.open_connection(sock=theirs)
        self.frames = FrameReader()
        self.send(("snapshot", [], [], 0, 0, None))
        front_reader, front_writer = await asyncio.open_connection(sock=ours)
        self.front = RemoteStore(front_reader, front_writer)
        await self.front.start()
        return self.front

    def send(self, message: tuple[Any, ...]) -> None:
        self.writer.write(frame(message))

    async def request(self) -> tuple[Any, ...]:
        messages: list[Any] = []
        while not messages:
            messages = self.frames.feed(await self.reader.read(1 << 20))
        assert len(messages) == 1
        return tuple(messages[0])

    async def answered(self, number: int, outcome: tuple[Any, ...]) -> None:
        """Send the answer and wait until the front-end has taken it and its requester has had
        its chances to go on: a requester still pending then waits for something else."""
        self.send(("answer", number, outcome))
        while number in self.front._answers:  # noqa: ASYNC110 (taken a step at a time)
            await asyncio.sleep(0)
        for _ in range(5):
            await asyncio.sleep(0)

    async def close(self) -> None:
        await self.front.close()
        self.writer.close()


def change(revision: int, kind: str, name: str, value: str, prev: str | None = None) -> tuple[Any, ...]:
    def encoded(v: str) -> bytes:
        return orjson.dumps({**obj(name, v), "metadata": {"name": name, "resourceVersion": str(revision)}})

    return (revision, kind, f"/r/{name}", encoded(value), encoded(prev) if prev is not None else None, revision)


async def test_a_write_whose_answer_overtakes_its_change_returns_once_the_change_is_here() -> None:
    store = ScriptedStore()
    front = await store.start()
    try:
        write = asyncio.ensure_future(front.write("/r/a", obj("a", "1"), expected_revision=0))
        request = await store.request()
        assert request[0] == "write" and request[2:] == ("/r/a", orjson.dumps(obj("a", "1")), 0)
        await store.answered(request[1], ("ok", 1))
        assert not write.done()  # its change is not here yet
        store.send(("changes", [change(1, "ADDED", "a", "1")]))
        event = await write
        assert (event.revision, event.type, event.obj["data"]) == (1, "ADDED", {"v": "1"})
        assert front.get("/r/a") is not None
    finally:
        await store.close()


async def test_a_refusal_that_overtakes_the_winning_change_is_raised_once_the_winner_is_here() -> None:
    store = ScriptedStore()
    front = await store.start()
    try:
        store.send(("changes", [change(1, "ADDED", "a", "1")]))
        await front.wait_for_revision(1)
        write = asyncio.ensure_future(front.write("/r/a", obj("a", "mine"), expected_revision=1))
        request = await store.request()
        # Another front-end's update won at revision 2; the refusal names it and the store's revision 3.
        await store.answered(request[1], ("precondition", 2, 3))
        assert not write.done()
        store.send(("changes", [change(2, "MODIFIED", "a", "theirs", "1"), change(3, "ADDED", "b", "")]))
        with pytest.raises(PreconditionFailed) as refused:
            await write
        assert refused.value.actual == 2
        stored = front.get("/r/a")
        assert stored is not None and stored.obj["data"] == {"v": "theirs"} and front.revision == 3
    finally:
        await store.close()


async def test_a_sync_whose_answer_overtakes_the_changes_waits_for_them() -> None:
    store = ScriptedStore()
    front = await store.start()
    try:
        sync = asyncio.ensure_future(front.sync())
        request = await store.request()
        assert request[0] == "revision"
        await store.answered(request[1], ("revision", 4))
        store.send(("changes", [change(3, "ADDED", "a", "")]))
        await front.wait_for_revision(3)
        assert not sync.done()  # at 3, short of the 4 the store had
        store.send(("changes", [change(4, "ADDED", "b", "")]))
        await sync
        assert front.revision == 4
    finally:
        await store.close()
