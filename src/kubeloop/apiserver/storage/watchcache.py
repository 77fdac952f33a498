"""The in-memory object store: committed objects, a window of recent changes, and watch fan-out.

It is the server's watch cache. Reads (get, list, list at an older revision, watch start) are
served from memory and see **only durable writes**, as etcd never shows an uncommitted one: every
write goes through :meth:`ObjectStore.write`, which waits for any write of the same key still in
flight, checks the compare-and-swap precondition against the committed object, takes the next
revision, hands the row to the durable :class:`~kubeloop.apiserver.storage.Log` and — once the row
is on disk — applies it to memory, records it in the history and fans it out to watchers, strictly
in revision order. A write the log could not make durable fails alone: nothing of it was applied,
its revision is never shown to anyone, and the next write tries the storage again.

The history of changes is bounded by count, by bytes and by compaction (kube-apiserver compacts
every five minutes); a watch or list from a revision older than it gets 410 Expired. Changes in the
history are kept as the JSON bytes the log wrote, decoded only when an old revision is asked for.

Stored objects are plain dicts that nobody mutates after they are stored (copy-on-write):
readers may serialise them without copying. Being acyclic and immutable, they are kept out of
the cyclic GC's sight (:mod:`kubeloop.gcuntrack`), and so is the history.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.claims import Claims, ClaimsOf, Reservation
from kubeloop.apiserver.storage.log import DoneCallback, Log, LogRecord, StorageError
from kubeloop.gcpause import waited
from kubeloop.gcuntrack import untrack, untrack_json

log = logging.getLogger("kubeloop.apiserver.storage.log")
T = TypeVar("T")

EventType = Literal["ADDED", "MODIFIED", "DELETED"]

#: The largest object stored, as JSON (etcd's default request limit, --max-request-bytes).
MAX_OBJECT_BYTES = 1536 * 1024
#: Defaults: changes kept for watches and lists from an older resourceVersion.
DEFAULT_HISTORY_EVENTS = 100_000
DEFAULT_HISTORY_BYTES = 128 * 1024 * 1024
_LAST_CHARACTER = chr(0x10FFFF)


@dataclass(slots=True)
class StoredObject:
    obj: Obj
    revision: int
    create_revision: int


@dataclass(slots=True)
class Event:
    """One change of one key; ``prev`` is the object before the change (None for ADDED)."""

    revision: int
    type: EventType
    key: str
    obj: Obj
    prev: Obj | None
    #: Serialised forms, cached per watcher variant, so fan-out to many watchers encodes once.
    encoded: dict[str, bytes] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class _Change:
    """A committed change as the history keeps it: the JSON of the new and the previous state."""

    revision: int
    type: EventType
    key: str
    value: bytes
    prev_value: bytes | None

    @property
    def size(self) -> int:
        return len(self.value) + (len(self.prev_value) if self.prev_value is not None else 0)

    def event(self) -> Event:
        prev = orjson.loads(self.prev_value) if self.prev_value is not None else None
        return Event(self.revision, self.type, self.key, orjson.loads(self.value), prev)


#: Delivers a watcher's queued events at once (see ``Watcher.sink``): True when it took them all,
#: False when it took none and the stream's own task must write them.
EventSink = Callable[[Sequence[Event]], bool]


class Watcher:
    """A registered watch on keys under one prefix; receives raw events in revision order.

    Events queue here for the stream's task, woken per batch; or, while the stream has set a
    ``sink``, the store hands them to the sink once per loop tick (``flush``), with no task woken
    at all — what makes a thousand watchers of one write affordable. One writer at a time: the
    stream detaches its sink before its task writes anything itself.
    """

    def __init__(self, prefix: str, *, after_revision: int, limit: int) -> None:
        self.prefix = prefix
        self.after_revision = after_revision
        self.limit = limit
        self.events: collections.deque[Event] = collections.deque()
        self.overflowed = False
        self.closed = False
        self.sink: EventSink | None = None
        #: What ``wait`` waits on (a bare future and a timer: ``asyncio.wait_for`` of an Event
        #: starts a task per wait, and a busy watch waits once per batch of events).
        self._waiter: asyncio.Future[None] | None = None

    def offer(self, event: Event) -> bool:
        """Queue ``event``; True when the watcher has a sink and now needs a ``flush``."""
        if self.closed or event.revision <= self.after_revision:
            return False
        if len(self.events) >= self.limit:
            # Too far behind: never slow the writers; the client gets 410 and relists.
            self.overflowed = True
            self.events.clear()
            self._wake()
            return False
        self.events.append(event)
        if self.sink is not None:
            return len(self.events) == 1
        self._wake()
        return False

    def flush(self) -> None:
        """Hand the queued events to the sink; when it cannot take them, detach it and wake the
        stream's task, which writes them itself."""
        sink = self.sink
        if sink is None or not self.events or self.closed or self.overflowed:
            return
        try:
            took = sink(self.events)
        except Exception:  # the task meets the same failure and reports it on the stream
            log.exception("writing a watch's events failed")
            took = False
        if took:
            self.events.clear()
        else:
            self.sink = None
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            _settle(self._waiter, None)

    async def wait(self, timeout: float | None) -> None:
        """Wait until an event is queued for the task (not for a sink), the watcher is closed, or
        the timeout passes."""
        if (self.events and self.sink is None) or self.closed or self.overflowed:
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


@dataclass(slots=True, eq=False)
class _InFlight:
    """A write handed to the log and not yet settled."""

    event: Event
    change: _Change
    create_revision: int
    #: Resolved with None (durable and applied) or the storage error; only its writer awaits it
    #: (a writer cancelled meanwhile cancels it: the write goes on regardless).
    outcome: asyncio.Future[StorageError | None]
    appended: bool = False
    error: StorageError | None = None
    #: Other requests waiting for the key to settle (see ``ObjectStore.settled``).
    waiters: list[asyncio.Future[None]] | None = None
    #: The values the write takes and gives up (see ``storage.claims``), when a rule covers its key.
    claims: Reservation | None = None


class ObjectStore:
    """Committed objects by key, the recent history, the watchers, and the writes in flight."""

    def __init__(
        self,
        log: Log,
        *,
        history_window: int = DEFAULT_HISTORY_EVENTS,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        watcher_buffer: int = 10_000,
    ) -> None:
        self._log = log
        self._objects: dict[str, StoredObject] = {}
        self._sorted_keys: list[str] = []
        self._history: collections.deque[_Change] = collections.deque()
        self._history_size = 0
        self._history_window = history_window
        self._history_bytes = history_bytes
        self._watcher_buffer = watcher_buffer
        #: The newest revision handed out (also to writes still in flight or that failed).
        self._allocated = 0
        #: The newest durable revision: what reads are served at.
        self._committed = 0
        self._compacted = 0
        self._log_compacted = 0
        self._watchers: set[Watcher] = set()
        #: Watchers with sinks that have events queued since the last flush.
        self._unflushed: list[Watcher] = []
        #: When the next flush may run (see ``_schedule_flush``).
        self._next_flush_at = 0.0
        self._queue: collections.deque[_InFlight] = collections.deque()
        self._inflight: dict[str, _InFlight] = {}
        self._unsubmitted: list[tuple[LogRecord, DoneCallback]] = []
        #: Bytes of history dropped from memory since the log was last compacted.
        self._dropped_bytes = 0
        #: Set when enough history was dropped that the log should be compacted now.
        self.compaction_due = asyncio.Event()
        #: The last storage error, until a write or a probe succeeds again.
        self.storage_error: StorageError | None = None
        self._commit_hooks: list[Callable[[Event], None]] = []
        self._claims = Claims()
        #: The loop the store lives on; writes from another loop (the worker loop that handles
        #: large requests) are forwarded to it.
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # ----------------------------------------------------------------- start-up

    def load(self) -> None:
        """Rebuild memory from the log (current objects and the history after compaction)."""
        state = self._log.load()
        for record in state.current:
            self._objects[record.key] = _stored(orjson.loads(record.value), record.revision, record.create_revision)
        self._sorted_keys = sorted(self._objects)
        self._compacted = self._log_compacted = state.compacted
        top = state.top
        for record, prev_value in state.history:
            kind: EventType = "DELETED" if record.deleted else ("ADDED" if record.created else "MODIFIED")
            self._remember(_Change(record.revision, kind, record.key, record.value, prev_value))
            top = max(top, record.revision)
        self._allocated = self._committed = top
        if self._compacted > self._log_compacted:
            self.compaction_due.set()

    # ----------------------------------------------------------------- reads

    @property
    def revision(self) -> int:
        """The newest durable revision: lists are read at it, and nothing newer has been shown."""
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
        return iter(self._sorted_keys[low:high])

    def items(self, prefix: str, *, start: str = "") -> Iterator[tuple[str, Obj]]:
        """Current objects under a prefix in key order, from key ``start`` on."""
        keys, objects = self._sorted_keys, self._objects
        low, high = self._key_range(prefix, start)
        for index in range(low, high):
            key = keys[index]
            yield key, objects[key].obj

    def count_with_prefix(self, prefix: str, start: str = "") -> int:
        """How many keys under ``prefix`` sort at or after ``start`` (two bisections)."""
        low, high = self._key_range(prefix, start)
        return max(0, high - low)

    def _key_range(self, prefix: str, start: str) -> tuple[int, int]:
        """Where the sorted keys under ``prefix`` from ``start`` on begin and end (two bisections:
        the keys under a prefix are those at or after it and before its successor)."""
        keys = self._sorted_keys
        low = bisect.bisect_left(keys, max(prefix, start))
        end = prefix.rstrip(_LAST_CHARACTER)  # no successor past the last code point
        if not end:
            return low, len(keys)
        return low, max(low, bisect.bisect_left(keys, end[:-1] + chr(ord(end[-1]) + 1)))

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
        out: list[_Change] = []
        for change in reversed(self._history):
            if change.revision <= revision:
                break
            if change.key.startswith(prefix):
                out.append(change)
        out.reverse()
        return [change.event() for change in out]

    # ----------------------------------------------------------------- writes

    def add_claims(self, prefix: str, claims_of: ClaimsOf) -> None:
        """Objects under ``prefix`` hold the values ``claims_of(obj)`` alone: a write claiming a
        value another key holds, committed or in flight, fails with :class:`ClaimTaken`."""
        self._claims.add_rule(prefix, claims_of, self.items(prefix))

    def claim_holder(self, claim: str) -> str | None:
        """The key holding ``claim`` (committed, or in a write in flight), or None."""
        return self._claims.holder(claim)

    def add_commit_hook(self, hook: Callable[[Event], None]) -> None:
        """Call ``hook`` with every committed change, in revision order, as it is applied to
        memory: before its writer is answered and before any watcher is sent it, whichever
        loop or task made the write (a cancelled request's write included). It runs on the
        store's loop and must neither block nor raise: a hook's exception is logged, and the
        change stays committed."""
        self._commit_hooks.append(hook)

    def _home(self) -> asyncio.AbstractEventLoop | None:
        """The store's own loop when the caller runs on another one, else None."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        return self._loop if loop is not self._loop else None

    async def settled(self, key: str) -> None:
        """Wait until no write of ``key`` is in flight (so a read of it is not about to be stale)."""
        if (home := self._home()) is not None:
            # The worker loop's GC pause is kept for a short wait only (gcpause.waited).
            await waited(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.settled(key), home)))
            return
        while (inflight := self._inflight.get(key)) is not None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if inflight.waiters is None:
                inflight.waiters = []
            inflight.waiters.append(waiter)
            await waiter

    async def write(self, key: str, obj: Obj | None, *, expected_revision: int) -> Event:
        """Create (expected 0), update (expected = the committed revision) or delete (obj None) a key.

        Returns once the write is durable and visible. Raises :class:`PreconditionFailed` when the
        committed object's revision is not ``expected_revision`` (the registry turns that into a
        Status error with the right names), :class:`~kubeloop.apiserver.storage.claims.ClaimTaken`
        when the object claims a value another key holds (``add_claims``), and a Status error
        (500, or 503 when another process holds the database) when the storage could not make
        the write durable.
        """
        if (home := self._home()) is not None:
            forwarded = self.write(key, obj, expected_revision=expected_revision)
            # The worker loop's GC pause is kept for a short wait only (gcpause.waited).
            return await waited(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(forwarded, home)))
        if key in self._inflight:
            await self.settled(key)
        current = self._objects.get(key)
        actual = current.revision if current is not None else 0
        if actual != expected_revision or (obj is None and current is None):
            raise PreconditionFailed(actual)
        revision = self._allocated + 1
        entry = self._prepare(key, obj, current, revision)
        if len(entry.change.value) > MAX_OBJECT_BYTES:
            raise errors.RequestEntityTooLarge(
                f"Request entity too large: the object is {len(entry.change.value)} bytes, more than the "
                f"{MAX_OBJECT_BYTES} bytes storage takes"
            )
        entry.claims = self._claims.reserve(key, obj)  # ClaimTaken: nothing of the write was taken
        self._allocated = revision
        self._inflight[key] = entry
        self._queue.append(entry)
        record = LogRecord(
            revision,
            key,
            entry.event.type == "ADDED",
            entry.event.type == "DELETED",
            entry.create_revision,
            # A create names the revision before it (kine's rule without a tombstone at hand): no
            # earlier row of this key can carry it, so re-creating a deleted key never collides.
            current.revision if current is not None else revision - 1,
            entry.change.value,
        )
        # Every write of this loop tick goes to the log as one job (one transaction): submitted
        # one by one, the storage writer would wake at the first and commit smaller groups.
        self._unsubmitted.append((record, lambda error: self._appended(entry, error)))
        if len(self._unsubmitted) == 1:
            asyncio.get_running_loop().call_soon(self._submit)
        # Awaited bare (a shield would cost every write): nobody else awaits this future.
        error = await entry.outcome
        if error is not None:
            raise storage_failure(error)
        return entry.event

    def _submit(self) -> None:
        writes, self._unsubmitted = self._unsubmitted, []
        self._log.submit(writes)

    def _prepare(self, key: str, obj: Obj | None, current: StoredObject | None, revision: int) -> _InFlight:
        outcome: asyncio.Future[StorageError | None] = asyncio.get_running_loop().create_future()
        if obj is None:
            assert current is not None
            final = _with_revision(current.obj, revision)
            event = Event(revision, "DELETED", key, final, current.obj)
            change = _Change(revision, "DELETED", key, orjson.dumps(final), orjson.dumps(current.obj))
            return _InFlight(event, change, current.create_revision, outcome)
        obj = _with_revision(obj, revision)
        value = orjson.dumps(obj)
        if current is None:
            event = Event(revision, "ADDED", key, obj, None)
            return _InFlight(event, _Change(revision, "ADDED", key, value, None), revision, outcome)
        event = Event(revision, "MODIFIED", key, obj, current.obj)
        change = _Change(revision, "MODIFIED", key, value, orjson.dumps(current.obj))
        return _InFlight(event, change, current.create_revision, outcome)

    def _appended(self, entry: _InFlight, error: StorageError | None) -> None:
        entry.appended = True
        entry.error = error
        # Apply and fan out strictly in revision order, whatever order appends finish in.
        while self._queue and self._queue[0].appended:
            head = self._queue.popleft()
            key = head.event.key
            if self._inflight.get(key) is head:
                del self._inflight[key]
            if head.claims is not None:
                self._claims.settle(head.claims, committed=head.error is None)
            if head.error is None:
                self._commit(head)
                self.storage_error = None
            elif head.error.reason == "constraint":
                log.error("storage refused a write: %s", head.error)  # that write's fault, not the storage's
            else:
                if self.storage_error is None:
                    log.error("storage write failed: %s", head.error)
                self.storage_error = head.error
            _settle(head.outcome, head.error)
            for waiter in head.waiters or ():
                _settle(waiter, None)

    def _commit(self, entry: _InFlight) -> None:
        event = entry.event
        key = event.key
        if event.type == "DELETED":
            del self._objects[key]
            del self._sorted_keys[bisect.bisect_left(self._sorted_keys, key)]
        else:
            if event.type == "ADDED":
                bisect.insort(self._sorted_keys, key)
            self._objects[key] = _stored(event.obj, event.revision, entry.create_revision)
        self._committed = event.revision
        self._remember(entry.change)
        for hook in self._commit_hooks:
            try:
                hook(event)
            except Exception:
                log.exception("a commit hook failed on %s at revision %d", key, event.revision)
        for watcher in self._watchers:
            if key.startswith(watcher.prefix) and watcher.offer(event):
                if not self._unflushed:
                    self._schedule_flush()
                self._unflushed.append(watcher)

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
        """Watchers with sinks get the events since the last flush: one write each."""
        started = time.perf_counter()
        unflushed, self._unflushed = self._unflushed, []
        for watcher in unflushed:
            watcher.flush()
        finished = time.perf_counter()
        self._next_flush_at = finished + (finished - started)

    # ----------------------------------------------------------------- history and compaction

    def _remember(self, change: _Change) -> None:
        untrack(change)  # plain values: no GC pass needs to walk the history
        self._history.append(change)
        self._history_size += change.size
        self._trim(0)

    def _trim(self, through: int) -> None:
        """Drop changes beyond the count and byte bounds, and those at or below ``through``."""
        history = self._history
        while history and (
            len(history) > self._history_window
            or self._history_size > self._history_bytes
            or history[0].revision <= through
        ):
            dropped = history.popleft()
            self._history_size -= dropped.size
            self._dropped_bytes += dropped.size
            self._compacted = max(self._compacted, dropped.revision)
        if through > self._compacted:
            self._compacted = min(through, self._committed)
        if self._dropped_bytes > self._history_bytes:
            self.compaction_due.set()

    def compact_history(self, revision: int) -> None:
        """Forget changes at or below ``revision``: watches and lists from older revisions get 410."""
        self._trim(revision)

    async def compact(self) -> None:
        """Remove the log rows superseded at or below the compacted revision (and their values)."""
        self.compaction_due.clear()
        target = self._compacted
        if target <= self._log_compacted:
            return
        dropped, self._dropped_bytes = self._dropped_bytes, 0
        try:
            await self._log.compact(target)
        except BaseException:
            self._dropped_bytes += dropped
            if self._dropped_bytes > self._history_bytes:
                self.compaction_due.set()
            raise
        self._log_compacted = target

    async def probe(self) -> None:
        """Try a small write; clears :attr:`storage_error` when the storage accepts writes again."""
        try:
            await self._log.probe()
        except StorageError as error:
            self.storage_error = error
            raise
        self.storage_error = None

    # ----------------------------------------------------------------- watch

    def watch(self, prefix: str, after_revision: int) -> tuple[list[Event], Watcher]:
        """Backlog after ``after_revision`` plus a live watcher, with no gap and no duplicate."""
        backlog = self.events_after(prefix, after_revision)
        start_after = max(after_revision, self._committed)
        watcher = Watcher(prefix, after_revision=start_after, limit=self._watcher_buffer)
        self._watchers.add(watcher)
        return backlog, watcher

    def snapshot_and_watch(self, prefix: str) -> tuple[int, list[tuple[str, Obj]], Watcher]:
        """Current objects (for synthetic ADDED events) and a watcher for everything after them."""
        revision = self._committed
        objects = list(self.items(prefix))
        watcher = Watcher(prefix, after_revision=revision, limit=self._watcher_buffer)
        self._watchers.add(watcher)
        return revision, objects, watcher

    @property
    def broadcast_revision(self) -> int:
        """The newest revision watchers have been sent (the committed revision)."""
        return self._committed

    def stop_watch(self, watcher: Watcher) -> None:
        watcher.close()
        self._watchers.discard(watcher)

    def close_all_watchers(self) -> None:
        for watcher in list(self._watchers):
            self.stop_watch(watcher)


def _stored(obj: Obj, revision: int, create_revision: int) -> StoredObject:
    """A committed object as the store keeps it: out of the cyclic GC's sight (``gcuntrack``),
    which would otherwise walk every stored object's dicts and lists at every full pass."""
    untrack_json(obj)
    stored = StoredObject(obj, revision, create_revision)
    untrack(stored)
    return stored


class PreconditionFailed(Exception):
    """The key's revision was not the expected one (``actual`` 0: it does not exist)."""

    def __init__(self, actual: int) -> None:
        super().__init__(actual)
        self.actual = actual


def storage_failure(error: StorageError) -> errors.APIError:
    """The Status error for a write the storage refused: 503 when it is busy, else 500."""
    message = f"storage write failed: {error.message}"
    if error.reason == "busy":
        return errors.ServiceUnavailable(message, retry_after_seconds=1)
    return errors.InternalError(message)


def _with_revision(obj: Obj, revision: int) -> Obj:
    metadata = dict(obj.get("metadata") or {})
    metadata["resourceVersion"] = str(revision)
    out = dict(obj)
    out["metadata"] = metadata
    return out
