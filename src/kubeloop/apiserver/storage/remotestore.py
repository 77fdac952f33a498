"""A front-end process's store: a watch cache fed by the store process, its writes sent there.

With front-end processes (``--workers``) serving HTTP over one process that orders writes and
owns the log (its :class:`~kubeloop.apiserver.storage.objectstore.ObjectStore`), as
kube-apiservers sit over etcd: :class:`StoreService` serves one front-end's connection in the
store process, feeding the front-end's cache (:mod:`~kubeloop.apiserver.storage.feed`) and
taking its writes; :class:`RemoteStore` is what a front-end's registry uses in place of an
``ObjectStore``: reads and watches from its own watch cache, writes sent to the store process.
The write contract is the ``ObjectStore``'s:

- a write returns once it is durable *and* applied to this process's cache (the answer carries
  its revision, and the front-end waits for its cache to reach it), so a read after it sees it;
- a refused compare-and-swap (:class:`~kubeloop.apiserver.storage.objectstore.PreconditionFailed`)
  is raised once the cache has reached the store's revision at the refusal, so a retry that
  reads the object again sees the one that won, instead of spending its tries on a stale copy;
- a claim another key holds, an object too large and a storage failure are raised as the store
  raised them;
- :meth:`RemoteStore.sync` waits until the cache has the store's current revision: what a
  consistent read (a get or list without a resourceVersion) waits for, as upstream's consistent
  reads from the watch cache wait for etcd's revision.

Claims (:mod:`~kubeloop.apiserver.storage.claims`) are decided by the store process, whose
``ObjectStore`` must have the rules; a front-end's ``claim_holder`` answers from the committed
objects its cache holds. When the store process goes away, every write and wait in flight fails
with :class:`~kubeloop.apiserver.storage.feed.FeedLost`, as does every later one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.claims import Claims, ClaimsOf, ClaimTaken
from kubeloop.apiserver.storage.feed import FeedLost, FeedPublisher, follow
from kubeloop.apiserver.storage.log import StorageError
from kubeloop.apiserver.storage.objectstore import ObjectStore, PreconditionFailed, storage_failure
from kubeloop.apiserver.storage.store import Store
from kubeloop.apiserver.storage.watchcache import (
    DEFAULT_HISTORY_BYTES,
    DEFAULT_HISTORY_EVENTS,
    Change,
    Event,
    _settle,
)
from kubeloop.apiserver.storage.writer import FrameReader, frame

log = logging.getLogger("kubeloop.apiserver.storage.remotestore")


async def _read(reader: asyncio.StreamReader) -> bytes:
    """The next bytes a front-end sent; none when it has gone (a reset included)."""
    try:
        return await reader.read(1 << 20)
    except (ConnectionError, OSError):
        return b""


class StoreService:
    """Serves front-end connections in the store process: the feed, and their writes."""

    def __init__(self, store: ObjectStore, publisher: FeedPublisher) -> None:
        self._store = store
        self._publisher = publisher

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one front-end until it disconnects. Its writes still in flight then complete
        (a write the store has taken commits whoever waits for it) and are awaited here."""
        self._publisher.attach(writer)
        connection = _FrontEndConnection(self._store, writer)
        frames = FrameReader()
        try:
            while data := await _read(reader):
                for message in frames.feed(data):
                    if message[0] == "write":
                        connection.write(*message[1:])
                    elif message[0] == "revision":
                        connection.answer(message[1], ("revision", self._store.revision))
                    else:
                        log.error("a front-end sent %r: its connection is closed", message[0])
                        return
        finally:
            await connection.finish()
            writer.close()


class _FrontEndConnection:
    """One front-end's writes in the store process, and the answers to its requests: sent
    together once per loop tick (one frame each, one send for all)."""

    def __init__(self, store: ObjectStore, writer: asyncio.StreamWriter) -> None:
        self._store = store
        self._writer = writer
        self._answers: list[bytes] = []
        #: Writes taken and not yet settled (each answered when it is).
        self._pending: set[asyncio.Future[StorageError | None]] = set()
        #: Writes of a key that had a write in flight: they wait for it, in a task of their own.
        self._waiting: set[asyncio.Task[None]] = set()

    def write(self, request: int, key: str, value: bytes | None, expected_revision: int) -> None:
        """Take a front-end's write; its answer is sent once it is settled."""
        try:
            obj = orjson.loads(value) if value is not None else None
            pending = self._store.begin_write(key, obj, expected_revision=expected_revision)
        except Exception as error:
            self.answer(request, _refusal(key, error, self._store))
            return
        if pending is None:  # a write of the key is in flight: this one waits for it
            task = asyncio.create_task(self._write_after(request, key, obj, expected_revision))
            self._waiting.add(task)
            task.add_done_callback(self._waiting.discard)
            return
        revision = pending.event.revision
        outcome = pending.outcome
        self._pending.add(outcome)

        def settled(done: asyncio.Future[StorageError | None]) -> None:
            self._pending.discard(done)
            if done.cancelled():  # nobody cancels it here; were it cancelled, its end is unknown
                self.answer(request, _refusal(key, RuntimeError("the write was cancelled"), self._store))
            elif (error := done.result()) is None:
                self.answer(request, ("ok", revision))
            else:
                self.answer(request, _refusal(key, storage_failure(error), self._store))

        outcome.add_done_callback(settled)

    async def _write_after(self, request: int, key: str, obj: Obj | None, expected_revision: int) -> None:
        try:
            event = await self._store.write(key, obj, expected_revision=expected_revision)
        except Exception as error:
            self.answer(request, _refusal(key, error, self._store))
        else:
            self.answer(request, ("ok", event.revision))

    def answer(self, request: int, outcome: tuple[Any, ...]) -> None:
        self._answers.append(frame(("answer", request, outcome)))
        if len(self._answers) == 1:
            asyncio.get_running_loop().call_soon(self._send)

    def _send(self) -> None:
        answers, self._answers = self._answers, []
        if not self._writer.is_closing():
            self._writer.write(b"".join(answers))

    async def finish(self) -> None:
        """Wait for the writes still in flight (the front-end has gone; they commit anyway)."""
        waits: list[asyncio.Future[Any]] = [*self._pending, *self._waiting]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)


def _refusal(key: str, error: Exception, store: ObjectStore) -> tuple[Any, ...]:
    """The answer to a write the store refused, as the front-end raises it again."""
    if isinstance(error, PreconditionFailed):
        return ("precondition", error.actual, store.revision)
    if isinstance(error, ClaimTaken):
        return ("claim", error.claim, error.holder)
    if isinstance(error, errors.APIError):
        return ("status", error.code, error.to_status())
    log.error("a front-end's write of %s failed", key, exc_info=error)
    failure = errors.internal_error(f"{type(error).__name__}: {error}")
    return ("status", failure.code, failure.to_status())


@dataclass(eq=False)
class _RemoteWrite:
    """This front-end's write of one key, on its way to the store process."""

    #: The events the cache applied to the key meanwhile, by revision (the write's own among them).
    events: dict[int, Event] = field(default_factory=dict)
    #: Other requests waiting for the key to settle (see ``RemoteStore.settled``).
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


class RemoteStore(Store):
    """A front-end's store: a watch cache following the store process, which takes its writes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        history_window: int = DEFAULT_HISTORY_EVENTS,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        watcher_buffer: int = 10_000,
    ) -> None:
        super().__init__(history_window=history_window, history_bytes=history_bytes, watcher_buffer=watcher_buffer)
        self._reader = reader
        self._writer = writer
        self._requests = itertools.count(1)
        self._answers: dict[int, asyncio.Future[tuple[Any, ...]]] = {}
        self._inflight: dict[str, _RemoteWrite] = {}
        self._claims = Claims()
        self._following: asyncio.Task[None] | None = None
        #: Why the store can no longer be reached (every request fails with it), or None.
        self.lost: FeedLost | None = None
        self._lost = asyncio.Event()

    @property
    def requests_in_flight(self) -> int:
        """Requests sent to the store process and not answered yet (writes, and syncs)."""
        return len(self._answers)

    async def start(self) -> None:
        """Follow the store process's feed; returns once the cache holds its snapshot."""
        loaded = asyncio.get_running_loop().create_future()
        self._live_on(asyncio.get_running_loop())
        self._following = asyncio.create_task(
            follow(self, self._reader, loaded=lambda: _settle(loaded, None), other=self._answered)
        )
        self._following.add_done_callback(self._feed_ended)
        await asyncio.wait({loaded, self._following}, return_when=asyncio.FIRST_COMPLETED)
        if not loaded.done():
            raise self.lost or FeedLost("the store's feed ended before its snapshot")

    async def close(self) -> None:
        """Stop following the store (its requests in flight fail) and close the connection."""
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # its end was reported
                await self._following
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    # ----------------------------------------------------------------- writes

    async def write(self, key: str, obj: Obj | None, *, expected_revision: int) -> Event:
        """As :meth:`ObjectStore.write <kubeloop.apiserver.storage.objectstore.ObjectStore.write>`,
        the store process deciding; returns once this process's cache has applied the write."""
        if (home := self._home()) is not None:
            return await self._at_home(self.write(key, obj, expected_revision=expected_revision), home)
        while key in self._inflight:
            await self.settled(key)
        entry = self._inflight[key] = _RemoteWrite()
        try:
            value = orjson.dumps(obj) if obj is not None else None
            outcome = await self._ask(("write", key, value, expected_revision))
            if outcome[0] == "ok":
                await self.wait_for_revision(outcome[1])
                return entry.events[outcome[1]]
            if outcome[0] == "precondition":
                await self.wait_for_revision(outcome[2])  # the retry reads what won
                raise PreconditionFailed(outcome[1])
            if outcome[0] == "claim":
                raise ClaimTaken(outcome[1], outcome[2])
            raise errors.error_from_status(outcome[1], outcome[2])
        finally:
            del self._inflight[key]
            for waiter in entry.waiters:
                _settle(waiter, None)

    async def settled(self, key: str) -> None:
        """Wait until no write of ``key`` by this process is in flight."""
        if (home := self._home()) is not None:
            return await self._at_home(self.settled(key), home)
        while (entry := self._inflight.get(key)) is not None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry.waiters.append(waiter)
            await waiter

    async def sync(self) -> None:
        """Wait until the cache has applied everything the store had committed when asked: a
        consistent read's wait."""
        if (home := self._home()) is not None:
            return await self._at_home(self.sync(), home)
        outcome = await self._ask(("revision",))
        await self.wait_for_revision(outcome[1])

    def add_claims(self, prefix: str, claims_of: ClaimsOf) -> None:
        """Index what the committed objects under ``prefix`` claim (the store process decides)."""
        self._claims.add_rule(prefix, claims_of, self.items(prefix))

    def claim_holder(self, claim: str) -> str | None:
        """The key holding ``claim`` among the committed objects this cache has applied, or None."""
        return self._claims.holder(claim)

    # ----------------------------------------------------------------- the connection

    async def _ask(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.lost is not None:
            raise self.lost
        number = next(self._requests)
        answer: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
        self._answers[number] = answer
        self._writer.write(frame((request[0], number, *request[1:])))
        try:
            return await answer
        finally:
            self._answers.pop(number, None)

    def _answered(self, message: tuple[Any, ...]) -> None:
        if message[0] != "answer":
            raise FeedLost(f"the store sent an unknown message {message[0]!r}")
        answer = self._answers.get(message[1])
        if answer is not None and not answer.done():
            answer.set_result(message[2])

    def _feed_ended(self, task: asyncio.Task[None]) -> None:
        """The store can no longer be reached: fail every request and wait in flight."""
        if task.cancelled():
            lost = FeedLost("the front-end stopped following the store")
        else:
            error = task.exception()
            lost = error if isinstance(error, FeedLost) else FeedLost(f"following the store failed: {error!r}")
        if not task.cancelled() and not isinstance(task.exception(), FeedLost):
            log.error("following the store failed", exc_info=task.exception())
        self.lost = lost
        self._lost.set()
        # Not ready, and nothing more served from a cache nobody feeds: watches end, reads and
        # writes are 503s (``unavailable``).
        self.storage_error = StorageError(lost.message, reason="other")
        self.close_all_watchers()
        for answer in self._answers.values():
            if not answer.done():
                answer.set_exception(lost)
        waiters, self._revision_waiters = self._revision_waiters, []
        for _, _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(lost)

    async def wait_for_revision(self, revision: int) -> None:
        if self.lost is not None and revision > self._committed:
            raise self.lost
        await super().wait_for_revision(revision)

    def unavailable(self) -> None:
        if self.lost is not None:
            raise self.lost

    async def wait_lost(self) -> None:
        """Wait until the store can no longer be reached (:attr:`lost` says why)."""
        await self._lost.wait()

    # ----------------------------------------------------------------- applying changes

    def _apply(self, event: Event, change: Change) -> None:
        super()._apply(event, change)
        entry = self._inflight.get(event.key)
        if entry is not None:
            entry.events[event.revision] = event
        try:
            self._claims.record(event.key, event.obj if event.type != "DELETED" else None)
        except Exception:  # a rule's fault: the change stays applied
            log.exception("indexing the claims of %s at revision %d failed", event.key, event.revision)
