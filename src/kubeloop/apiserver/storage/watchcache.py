"""The watch cache: committed objects, a window of recent changes, and watch fan-out.

Reads (get, list, list at an older revision, watch start) are served from it, as kube-apiserver
serves them from its watch cache in front of etcd, and it shows **only committed changes**, which
it is handed in revision order: by the :class:`~kubeloop.apiserver.storage.objectstore.ObjectStore`
that orders writes (a watch cache itself, in the process that owns the log) once the log made them
durable, or by that store's feed (:mod:`~kubeloop.apiserver.storage.feed`) in another process.
Each applied change updates the objects and the key index, is recorded in the history, is passed
to the commit hooks and is fanned out to watchers; :meth:`WatchCache.wait_for_revision` waits for
a revision to be applied.

The history of changes is bounded by count, by bytes and by compaction (kube-apiserver compacts
every five minutes); a watch or list from a revision older than it gets 410 Expired. Changes in the
history are kept as the JSON bytes the log wrote, decoded only when an old revision is asked for.

Stored objects are plain dicts that nobody mutates after they are stored (copy-on-write):
readers may serialise them without copying. Being acyclic and immutable, they are kept out of
the cyclic GC's sight (:mod:`kubeloop.gcuntrack`), and so is the history.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.log import LoadedState, LogRecord, StorageError
from kubeloop.apiserver.storage.sortedkeys import SortedKeys
from kubeloop.gcpause import waited
from kubeloop.gcuntrack import untrack, untrack_json

log = logging.getLogger("kubeloop.apiserver.storage.log")
T = TypeVar("T")

EventType = Literal["ADDED", "MODIFIED", "DELETED"]

#: Defaults: changes kept for watches and lists from an older resourceVersion.
DEFAULT_HISTORY_EVENTS = 100_000
DEFAULT_HISTORY_BYTES = 128 * 1024 * 1024
_LAST_CHARACTER = chr(0x10FFFF)


@dataclass(slots=True)
class StoredObject:
    obj: Obj
    revision: int
    create_revision: int
    #: ``obj`` as the store encoded it, while the change that wrote it is in the history (which
    #: holds those bytes anyway; None once the change is trimmed): the next write of the key
    #: records it as its previous value without encoding the object again.
    value: bytes | None = None


@dataclass(slots=True)
class Event:
    """One change of one key; ``prev`` is the object before the change (None for ADDED)."""

    revision: int
    type: EventType
    key: str
    obj: Obj
    prev: Obj | None
    #: ``obj`` as the store encoded it (for the log or the feed): what an answer or a watch line
    #: showing the object as stored is made of, without encoding it again.
    value: bytes | None = None
    #: Serialised forms, cached per watcher variant, so fan-out to many watchers encodes once.
    encoded: dict[str, bytes] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Change:
    """A committed change as the history keeps it and the feed carries it: the JSON of the new
    state (a delete's: the object's last state at the delete's revision) and of the previous one."""

    revision: int
    type: EventType
    key: str
    value: bytes
    prev_value: bytes | None
    create_revision: int

    @property
    def size(self) -> int:
        return len(self.value) + (len(self.prev_value) if self.prev_value is not None else 0)

    def event(self) -> Event:
        prev = orjson.loads(self.prev_value) if self.prev_value is not None else None
        return Event(self.revision, self.type, self.key, orjson.loads(self.value), prev, self.value)


class ReplicaDiverged(Exception):
    """A change that cannot follow what the cache holds (out of order, or of a key it lacks)."""


class EventBatch(list[Event]):
    """The events of one flush under one prefix, in revision order, handed to every sink watching
    that prefix. ``encoded`` keeps what a sink made of them (a watch stream's chunk per API
    version), so that a thousand watchers of one kind encode a tick's events once."""

    __slots__ = ("encoded",)

    def __init__(self, events: Iterable[Event] = ()) -> None:
        super().__init__(events)
        self.encoded: dict[str, bytes] = {}


#: Delivers a flush's events at once (see ``Watcher.sink``): True when it took them all, False
#: when it took none and the stream's own task must write them.
EventSink = Callable[[EventBatch], bool]


class Watcher:
    """A registered watch on keys under one prefix; receives raw events in revision order.

    Events queue here for the stream's task, woken per batch; or, while the stream has set a
    ``sink``, the cache hands them to the sink once per loop tick, with no task woken and nothing
    queued per watcher: one batch of the tick's events per prefix, shared by every sink watching
    it — what makes a thousand watchers of one write affordable. One writer at a time: the
    stream detaches its sink before its task writes anything itself, and the events of the tick
    not yet handed to the sink are queued for the task then.
    """

    def __init__(
        self, prefix: str, *, after_revision: int, limit: int, cache: WatchCache | None = None
    ) -> None:
        self.prefix = prefix
        #: The newest revision this watcher has taken (queued or handed to its sink).
        self.after_revision = after_revision
        self.limit = limit
        self.events: collections.deque[Event] = collections.deque()
        self.overflowed = False
        self.closed = False
        self._sink: EventSink | None = None
        #: The cache whose fan-out this watcher is in; told when a sink is set or removed.
        self._cache = cache
        #: What ``wait`` waits on (a bare future and a timer: ``asyncio.wait_for`` of an Event
        #: starts a task per wait, and a busy watch waits once per batch of events).
        self._waiter: asyncio.Future[None] | None = None

    @property
    def sink(self) -> EventSink | None:
        """Where the cache hands this watcher's events each tick instead of queuing them; None
        while the stream's task writes them itself."""
        return self._sink

    @sink.setter
    def sink(self, sink: EventSink | None) -> None:
        attached = self._sink is not None
        self._sink = sink
        if attached != (sink is not None) and self._cache is not None:
            self._cache._sink_changed(self)

    def offer(self, event: Event) -> None:
        """Queue ``event`` for the stream's task and wake it."""
        if self.closed or event.revision <= self.after_revision:
            return
        self.after_revision = event.revision
        if len(self.events) >= self.limit:
            self._overflow()
            return
        self.events.append(event)
        self._wake()

    def take(self, events: Sequence[Event]) -> None:
        """Queue ``events`` (in revision order, newer than any taken) for the stream's task."""
        if self.closed or not events:
            return
        self.after_revision = events[-1].revision
        if len(self.events) + len(events) > self.limit:
            self._overflow()
            return
        self.events.extend(events)
        self._wake()

    def deliver(self, batch: EventBatch) -> None:
        """Hand the tick's events under this watcher's prefix to the sink (those it has not taken
        yet); when it cannot take them, detach it and queue them for the stream's task."""
        sink = self._sink
        if sink is None or self.closed or self.overflowed or not batch:
            return
        if batch[0].revision <= self.after_revision:
            batch = EventBatch(event for event in batch if event.revision > self.after_revision)
            if not batch:
                return
        self.after_revision = batch[-1].revision
        try:
            took = sink(batch)
        except Exception:  # the task meets the same failure and reports it on the stream
            log.exception("writing a watch's events failed")
            took = False
        if not took:
            self.take(batch)
            self.sink = None

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _overflow(self) -> None:
        # Too far behind: never slow the writers; the client gets 410 and relists.
        self.overflowed = True
        self.events.clear()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            _settle(self._waiter, None)

    async def wait(self, timeout: float | None) -> None:
        """Wait until an event is queued for the task (not for a sink), the watcher is closed, or
        the timeout passes."""
        if (self.events and self._sink is None) or self.closed or self.overflowed:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _settle, waiter, None) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def drain(self) -> list[Event]:
        out = list(self.events)
        self.events.clear()
        return out


def _settle(future: asyncio.Future[T], result: T) -> None:
    """Resolve ``future`` unless it is done already (its awaiter was cancelled, or woken before)."""
    if not future.done():
        future.set_result(result)


class WatchCache:
    """Committed objects by key, the recent history and the watchers, fed committed changes."""

    def __init__(
        self,
        *,
        history_window: int = DEFAULT_HISTORY_EVENTS,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        watcher_buffer: int = 10_000,
    ) -> None:
        self._objects: dict[str, StoredObject] = {}
        self._keys = SortedKeys()
        self._history: collections.deque[Change] = collections.deque()
        self._history_size = 0
        self._history_window = history_window
        self._history_bytes = history_bytes
        self._watcher_buffer = watcher_buffer
        #: The newest committed revision applied: what reads are served at.
        self._committed = 0
        self._compacted = 0
        self._watchers: set[Watcher] = set()
        #: The watchers offered each event as it is applied (their streams' tasks write) and
        #: those with sinks, handed the events of a tick together (see ``Watcher``).
        self._queued: set[Watcher] = set()
        self._streaming: set[Watcher] = set()
        #: Events applied since the last flush while a watcher had a sink, in revision order.
        self._tick: list[Event] = []
        #: When the next flush may run (see ``_schedule_flush``).
        self._next_flush_at = 0.0
        self._commit_hooks: list[Callable[[Event], None]] = []
        #: (revision, tie-breaker, future) of ``wait_for_revision``, lowest revision first.
        self._revision_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._waiter_count = itertools.count()
        #: The storage's last error, until a write or a probe succeeds again (``readyz``): the
        #: ordering store's own, or the one its feed reports.
        self.storage_error: StorageError | None = None
        #: The loop the cache lives on; writes from another loop (the worker loop that handles
        #: large requests) are forwarded to it.
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The thread that runs ``_loop``: telling a caller on it apart by thread costs ~40 ns,
        #: by ``asyncio.get_running_loop`` ~200 (CPython 3.11 asks the kernel for the process
        #: id at every call), and every write asks.
        self._loop_thread: int | None = None
        with contextlib.suppress(RuntimeError):
            self._live_on(asyncio.get_running_loop())

    # ----------------------------------------------------------------- start-up

    def load_state(self, state: LoadedState) -> None:
        """Fill the cache from a log's state (at start-up) or the store's snapshot (a replica's)."""
        for record in state.current:
            self._objects[record.key] = _stored(orjson.loads(record.value), record.revision, record.create_revision)
        self._keys = SortedKeys(self._objects)
        self._compacted = state.compacted
        top = state.top
        for record, prev_value in state.history:
            kind: EventType = "DELETED" if record.deleted else ("ADDED" if record.created else "MODIFIED")
            self._remember(Change(record.revision, kind, record.key, record.value, prev_value, record.create_revision))
            top = max(top, record.revision)
        self._committed = top
        self._revision_reached()

    def snapshot(self) -> LoadedState:
        """What the cache holds, as a log's state: a replica's start (:meth:`load_state`)."""
        current = [
            LogRecord(stored.revision, key, False, False, stored.create_revision, 0, orjson.dumps(stored.obj))
            for key, stored in self._objects.items()
        ]
        history = [
            (
                LogRecord(
                    change.revision, change.key, change.type == "ADDED", change.type == "DELETED",
                    change.create_revision, 0, change.value,
                ),
                change.prev_value,
            )
            for change in self._history
        ]  # fmt: skip
        return LoadedState(current, iter(history), self._compacted, self._committed)

    # ----------------------------------------------------------------- reads

    @property
    def revision(self) -> int:
        """The newest committed revision: lists are read at it, and nothing newer has been shown."""
        return self._committed

    @property
    def compacted_revision(self) -> int:
        """Resource versions below this one are gone (410)."""
        return self._compacted

    @property
    def history_size(self) -> tuple[int, int]:
        """(changes, bytes) the history holds."""
        return len(self._history), self._history_size

    def get(self, key: str) -> StoredObject | None:
        return self._objects.get(key)

    def keys_with_prefix(self, prefix: str, start: str = "") -> Iterator[str]:
        low, high = self._key_range(prefix, start)
        return iter([key for part in self._keys.slices_between(low, high) for key in part])  # as of now

    def items(self, prefix: str, *, start: str = "") -> Iterator[tuple[str, Obj]]:
        """Current objects under a prefix in key order, from key ``start`` on."""
        objects = self._objects
        low, high = self._key_range(prefix, start)
        for key in self._keys.between(low, high):
            yield key, objects[key].obj

    def objects_under(self, prefix: str) -> list[Obj]:
        """Current objects under a prefix in key order, at once: a watch from 0 of 20,000 took
        17–23 ms through ``items`` (a tuple and a generator step each, and the GC passes the
        tuples set off), the loop held all along."""
        low, high = self._key_range(prefix, "")
        objects = self._objects
        return [objects[key].obj for part in self._keys.slices_between(low, high) for key in part]

    def count_with_prefix(self, prefix: str, start: str = "") -> int:
        """How many keys under ``prefix`` sort at or after ``start``."""
        low, high = self._key_range(prefix, start)
        return self._keys.count_between(low, high)

    @staticmethod
    def _key_range(prefix: str, start: str) -> tuple[str, str | None]:
        """The bounds of the keys under ``prefix`` from ``start`` on: at or after the greater of
        the two, and before the prefix's successor (None: no key sorts after every such key)."""
        end = prefix.rstrip(_LAST_CHARACTER)  # no successor past the last code point
        return max(prefix, start), (end[:-1] + chr(ord(end[-1]) + 1)) if end else None

    def list_at(self, prefix: str, revision: int, *, start: str = "") -> Iterable[tuple[str, Obj]]:
        """The objects under a prefix as they were at ``revision`` (a consistent snapshot).

        At the current revision the answer is lazy (a page reads only what it returns): consume
        it before the store changes, that is before the caller next awaits.
        """
        if revision >= self._committed:
            return self.items(prefix, start=start)
        if revision < self._compacted:
            raise errors.expired(revision, self._compacted + 1)
        changed: dict[str, bytes | None] = {}
        for change in reversed(self._history):
            if change.revision <= revision:
                break
            if not change.key.startswith(prefix) or change.key < start:
                continue
            changed[change.key] = change.prev_value if change.type != "ADDED" else None
        state: dict[str, Obj] = {
            key: obj for key, obj in self.items(prefix, start=start) if key not in changed
        }
        for key, value in changed.items():
            if value is not None:
                state[key] = orjson.loads(value)
        return [(key, state[key]) for key in sorted(state)]

    def events_after(self, prefix: str, revision: int) -> list[Event]:
        """Committed events under a prefix with revision in (revision, current revision]."""
        if revision < self._compacted:
            raise errors.expired(revision, self._compacted + 1)
        out: list[Change] = []
        for change in reversed(self._history):
            if change.revision <= revision:
                break
            if change.key.startswith(prefix):
                out.append(change)
        out.reverse()
        return [change.event() for change in out]

    # ----------------------------------------------------------------- applying changes

    def add_commit_hook(self, hook: Callable[[Event], None]) -> None:
        """Call ``hook`` with every committed change, in revision order, as it is applied to
        memory: before its writer is answered and before any watcher is sent it, whichever
        loop or task made the write (a cancelled request's write included). It runs on the
        cache's loop and must neither block nor raise: a hook's exception is logged, and the
        change stays committed."""
        self._commit_hooks.append(hook)

    def _live_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make ``loop``, which the calling thread runs, the cache's own."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def _home(self) -> asyncio.AbstractEventLoop | None:
        """The cache's own loop when the caller runs on another one (a thread runs one loop at
        a time), else None; the first caller's loop is the cache's if it has none yet."""
        if threading.get_ident() == self._loop_thread:
            return None
        if self._loop is None:
            self._live_on(asyncio.get_running_loop())
            return None
        return self._loop

    def _home_loop(self) -> asyncio.AbstractEventLoop:
        """The cache's loop, for a caller on it (``_home`` answered None)."""
        loop = self._loop
        assert loop is not None
        return loop

    async def _at_home(self, call: Coroutine[Any, Any, T], home: asyncio.AbstractEventLoop) -> T:
        """Run ``call`` on the cache's own loop (from the worker loop, which handles large
        requests) and wait for it there; the worker loop's GC pause is kept for a short wait
        only (``gcpause.waited``)."""
        return await waited(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, home)))

    async def wait_for_revision(self, revision: int) -> None:
        """Wait until the change at ``revision`` (or a later one) has been applied."""
        if revision <= self._committed:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (revision, next(self._waiter_count), waiter)
        heapq.heappush(self._revision_waiters, entry)
        try:
            await waiter
        except asyncio.CancelledError:
            waiters = self._revision_waiters
            if entry in waiters:  # a revision that may never come (a read timed out): let it go
                waiters.remove(entry)
                heapq.heapify(waiters)
            raise

    def apply(self, change: Change) -> Event:
        """Apply a change committed by the store in another process (its feed), in revision order."""
        current = self._objects.get(change.key)
        if change.revision <= self._committed:
            raise ReplicaDiverged(f"change at revision {change.revision} after revision {self._committed}")
        if (current is None) != (change.type == "ADDED"):
            raise ReplicaDiverged(f"{change.type} of {change.key} at revision {change.revision}: "
                                  f"{'absent' if current is None else 'present'} here")  # fmt: skip
        event = Event(
            change.revision, change.type, change.key, orjson.loads(change.value),
            current.obj if current is not None else None, change.value,
        )  # fmt: skip
        self._apply(event, change)
        return event

    def _apply(self, event: Event, change: Change) -> None:
        key = event.key
        if event.type == "DELETED":
            del self._objects[key]
            self._keys.discard(key)
        else:
            if event.type == "ADDED":
                self._keys.add(key)
            self._objects[key] = _stored(event.obj, event.revision, change.create_revision, change.value)
        self._committed = event.revision
        self._remember(change)
        for hook in self._commit_hooks:
            try:
                hook(event)
            except Exception:
                log.exception("a commit hook failed on %s at revision %d", key, event.revision)
        for watcher in self._queued:
            if key.startswith(watcher.prefix):
                watcher.offer(event)
        if self._streaming:
            if not self._tick:
                self._schedule_flush()
            self._tick.append(event)
        if self._revision_waiters:
            self._revision_reached()

    def _revision_reached(self) -> None:
        """End the waits for revisions the cache has reached."""
        waiters = self._revision_waiters
        while waiters and waiters[0][0] <= self._committed:
            _settle(heapq.heappop(waiters)[2], None)

    def _schedule_flush(self) -> None:
        """The next flush: this tick, or once the loop has had as long for other work as the
        last flush took. A flush costs a send per watcher whatever it carries (~2.5 µs over
        TLS); with a thousand watchers, flushing each write on its own would leave the loop
        little else, while waiting as long as the last flush took lets the events of that time
        share the sends, and adds at most that long to their delivery."""
        loop = asyncio.get_running_loop()
        delay = self._next_flush_at - time.perf_counter()
        if delay > 0:
            loop.call_later(delay, self._flush_watchers)
        else:
            loop.call_soon(self._flush_watchers)

    def _flush_watchers(self) -> None:
        """Watchers with sinks get the events since the last flush: one batch per prefix, shared
        by every watcher of that prefix, and one write each."""
        started = time.perf_counter()
        events, self._tick = self._tick, []
        batches: dict[str, EventBatch] = {}
        for watcher in list(self._streaming):
            prefix = watcher.prefix
            batch = batches.get(prefix)
            if batch is None:
                batch = batches[prefix] = EventBatch(
                    event for event in events if event.key.startswith(prefix)
                )
            watcher.deliver(batch)
        finished = time.perf_counter()
        self._next_flush_at = finished + (finished - started)

    # ----------------------------------------------------------------- history and compaction

    def _remember(self, change: Change) -> None:
        untrack(change)  # plain values: no GC pass needs to walk the history
        self._history.append(change)
        self._history_size += change.size
        self._trim(0)

    def _trim(self, through: int) -> int:
        """Drop changes beyond the count and byte bounds, and those at or below ``through``;
        the bytes dropped."""
        history = self._history
        dropped_bytes = 0
        while history and (
            len(history) > self._history_window
            or self._history_size > self._history_bytes
            or history[0].revision <= through
        ):
            dropped = history.popleft()
            stored = self._objects.get(dropped.key)
            if stored is not None and stored.value is dropped.value:
                stored.value = None  # the object's bytes go with the change
            self._history_size -= dropped.size
            dropped_bytes += dropped.size
            self._compacted = max(self._compacted, dropped.revision)
        if through > self._compacted:
            self._compacted = min(through, self._committed)
        return dropped_bytes

    def compact_history(self, revision: int) -> None:
        """Forget changes at or below ``revision``: watches and lists from older revisions get 410."""
        self._trim(revision)

    # ----------------------------------------------------------------- watch

    def watch(self, prefix: str, after_revision: int) -> tuple[list[Event], Watcher]:
        """Backlog after ``after_revision`` plus a live watcher, with no gap and no duplicate."""
        backlog = self.events_after(prefix, after_revision)
        start_after = max(after_revision, self._committed)
        watcher = Watcher(prefix, after_revision=start_after, limit=self._watcher_buffer, cache=self)
        self._watchers.add(watcher)
        self._queued.add(watcher)
        return backlog, watcher

    def snapshot_and_watch(self, prefix: str) -> tuple[int, list[Obj], Watcher]:
        """Current objects in key order (for synthetic ADDED events) and a watcher for everything
        after them."""
        revision = self._committed
        objects = self.objects_under(prefix)
        watcher = Watcher(prefix, after_revision=revision, limit=self._watcher_buffer, cache=self)
        self._watchers.add(watcher)
        self._queued.add(watcher)
        return revision, objects, watcher

    @property
    def broadcast_revision(self) -> int:
        """The newest revision watchers have been sent (the committed revision)."""
        return self._committed

    def stop_watch(self, watcher: Watcher) -> None:
        watcher.close()
        self._watchers.discard(watcher)
        self._queued.discard(watcher)
        self._streaming.discard(watcher)

    def _sink_changed(self, watcher: Watcher) -> None:
        """Move ``watcher`` between the two fan-outs; one whose sink was removed is queued the
        events of this tick it has not been handed, which its task writes next."""
        if watcher not in self._watchers:
            return
        if watcher.sink is not None:
            self._queued.discard(watcher)
            self._streaming.add(watcher)
            return
        self._streaming.discard(watcher)
        self._queued.add(watcher)
        prefix, after = watcher.prefix, watcher.after_revision
        watcher.take(
            [event for event in self._tick if event.revision > after and event.key.startswith(prefix)]
        )

    def close_all_watchers(self) -> None:
        for watcher in list(self._watchers):
            self.stop_watch(watcher)


def _stored(obj: Obj, revision: int, create_revision: int, value: bytes | None = None) -> StoredObject:
    """A committed object as the store keeps it: out of the cyclic GC's sight (``gcuntrack``),
    which would otherwise walk every stored object's dicts and lists at every full pass."""
    untrack_json(obj)
    stored = StoredObject(obj, revision, create_revision, value)
    untrack(stored)
    return stored
