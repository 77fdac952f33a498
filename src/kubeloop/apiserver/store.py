"""The in-memory object store: current objects, a window of recent events, and watch fan-out.

It is the server's watch cache. Reads (get, list, list at an older revision, watch start) are
served from memory; every write goes through :meth:`ObjectStore.write`, which checks the
compare-and-swap precondition, assigns the next global revision, updates memory, appends the row
to the durable :class:`~kubeloop.apiserver.storage.Log` and — once the row is durable — fans the
event out to watchers in revision order.

Stored objects are plain dicts that nobody mutates after they are stored (copy-on-write):
readers may serialise them without copying.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from kubeloop.apiserver import errors
from kubeloop.apiserver.storage import Log, LogRecord

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Obj = dict[str, Any]


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


class Watcher:
    """A registered watch on keys under one prefix; receives raw events in revision order."""

    def __init__(self, prefix: str, *, after_revision: int, limit: int) -> None:
        self.prefix = prefix
        self.after_revision = after_revision
        self.limit = limit
        self.events: collections.deque[Event] = collections.deque()
        self.overflowed = False
        self.closed = False
        self._wakeup = asyncio.Event()

    def offer(self, event: Event) -> None:
        if self.closed or event.revision <= self.after_revision:
            return
        if len(self.events) >= self.limit:
            # Too far behind: never slow the writers; the client gets 410 and relists.
            self.overflowed = True
            self.events.clear()
        else:
            self.events.append(event)
        self._wakeup.set()

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()

    async def wait(self, timeout: float | None) -> None:
        """Wait until an event is queued, the watcher is closed, or the timeout passes."""
        if self.events or self.closed or self.overflowed:
            return
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            return

    def drain(self) -> list[Event]:
        out = list(self.events)
        self.events.clear()
        return out


class ObjectStore:
    """Current objects by key, the recent-event history, and the watchers."""

    def __init__(self, log: Log, *, history_window: int = 100_000, watcher_buffer: int = 10_000) -> None:
        self._log = log
        self._objects: dict[str, StoredObject] = {}
        self._sorted_keys: list[str] = []
        self._history: collections.deque[Event] = collections.deque()
        self._history_window = history_window
        self._watcher_buffer = watcher_buffer
        self._revision = 0
        self._compacted = 0
        self._broadcast_revision = 0
        self._watchers: set[Watcher] = set()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._failed: BaseException | None = None

    # ----------------------------------------------------------------- start-up

    def load(self) -> None:
        """Rebuild memory from the log (current objects and the history after compaction)."""
        current, history, compacted = self._log.load()
        for record in current:
            assert record.value is not None
            self._objects[record.key] = StoredObject(
                orjson.loads(record.value), record.revision, record.create_revision
            )
        self._sorted_keys = sorted(self._objects)
        for record in history:
            obj = orjson.loads(record.value) if record.value is not None else {}
            prev = orjson.loads(record.old_value) if record.old_value is not None else None
            kind: EventType = "DELETED" if record.deleted else ("ADDED" if record.created else "MODIFIED")
            self._history.append(Event(record.revision, kind, record.key, obj, prev))
        top = max([compacted, *(r.revision for r in current), *(r.revision for r in history)], default=0)
        self._revision = top
        self._broadcast_revision = top
        self._compacted = compacted
        self._trim_history()

    # ----------------------------------------------------------------- reads

    @property
    def revision(self) -> int:
        """The newest revision (includes writes whose durable commit is still in flight)."""
        return self._revision

    @property
    def compacted_revision(self) -> int:
        """Resource versions at or below this one are gone (410)."""
        return self._compacted

    def get(self, key: str) -> StoredObject | None:
        return self._objects.get(key)

    def keys_with_prefix(self, prefix: str, start: str = "") -> Iterator[str]:
        keys = self._sorted_keys
        i = bisect.bisect_left(keys, max(prefix, start))
        while i < len(keys) and keys[i].startswith(prefix):
            yield keys[i]
            i += 1

    def items(self, prefix: str, *, start: str = "") -> Iterator[tuple[str, Obj]]:
        """Current objects under a prefix in key order, from key ``start`` on."""
        for key in self.keys_with_prefix(prefix, start):
            yield key, self._objects[key].obj

    def count_with_prefix(self, prefix: str, start: str = "") -> int:
        """How many keys under ``prefix`` sort at or after ``start`` (two bisections)."""
        keys = self._sorted_keys
        low = bisect.bisect_left(keys, max(prefix, start))
        if not prefix:
            return len(keys) - low
        high = bisect.bisect_left(keys, prefix[:-1] + chr(ord(prefix[-1]) + 1))
        return max(0, high - low)

    def list_at(self, prefix: str, revision: int, *, start: str = "") -> Iterable[tuple[str, Obj]]:
        """The objects under a prefix as they were at ``revision`` (a consistent snapshot).

        At the current revision the answer is lazy (a page reads only what it returns): consume
        it before the store changes, that is before the caller next awaits.
        """
        if revision >= self._revision:
            return self.items(prefix, start=start)
        if revision < self._compacted:
            raise errors.expired(revision, self._compacted + 1)
        state: dict[str, Obj | None] = {key: obj for key, obj in self.items(prefix, start=start)}
        for event in reversed(self._history):
            if event.revision <= revision:
                break
            if not event.key.startswith(prefix) or event.key < start:
                continue
            state[event.key] = event.prev if event.type != "ADDED" else None
        return [(key, state[key]) for key in sorted(state) if state[key] is not None]  # type: ignore[misc]

    def events_after(self, prefix: str, revision: int) -> list[Event]:
        """Broadcast events under a prefix with revision in (revision, broadcast revision]."""
        if revision < self._compacted:
            raise errors.expired(revision, self._compacted + 1)
        out: list[Event] = []
        for event in reversed(self._history):
            if event.revision <= revision:
                break
            if event.revision <= self._broadcast_revision and event.key.startswith(prefix):
                out.append(event)
        out.reverse()
        return out

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        key: str,
        obj: Obj | None,
        *,
        expected_revision: int | None,
        prepare: Callable[[Obj | None, int], Obj | None] | None = None,
    ) -> Event:
        """Create (expected 0), update (expected = current revision) or delete (obj None) one key.

        ``expected_revision`` None skips the compare-and-swap check (the caller checked already).
        ``prepare(current, new_revision)`` may finish the object (it sets metadata.resourceVersion
        otherwise). Raises :class:`errors.Conflict`-free ``LookupError``/``ValueError`` on a failed
        precondition; the registry turns those into Status errors with the right names.
        """
        if self._failed is not None:
            raise errors.InternalError(f"storage failed: {self._failed}")
        current = self._objects.get(key)
        if expected_revision is not None:
            actual = current.revision if current else 0
            if actual != expected_revision:
                raise PreconditionFailed(actual)
        if obj is None and current is None:
            raise PreconditionFailed(0)
        revision = self._revision + 1
        if prepare is not None:
            obj = prepare(current.obj if current else None, revision)
        event, record = self._apply(key, obj, current, revision)
        self._revision = revision
        loop = asyncio.get_running_loop()
        durable: asyncio.Future[None] = loop.create_future()
        entry = _Pending(event, durable)
        self._pending.append(entry)
        task = asyncio.ensure_future(self._log.append((record,)))
        task.add_done_callback(lambda t: self._on_durable(entry, t))
        await durable
        return event

    def _apply(
        self, key: str, obj: Obj | None, current: StoredObject | None, revision: int
    ) -> tuple[Event, LogRecord]:
        if obj is None:
            assert current is not None
            final = _with_revision(current.obj, revision)
            del self._objects[key]
            i = bisect.bisect_left(self._sorted_keys, key)
            del self._sorted_keys[i]
            event = Event(revision, "DELETED", key, final, current.obj)
            value = orjson.dumps(final)
            record = LogRecord(
                revision,
                key,
                False,
                True,
                current.create_revision,
                current.revision,
                value,
                orjson.dumps(current.obj),
            )
        else:
            obj = _with_revision(obj, revision)
            value = orjson.dumps(obj)
            if current is None:
                self._objects[key] = StoredObject(obj, revision, revision)
                bisect.insort(self._sorted_keys, key)
                event = Event(revision, "ADDED", key, obj, None)
                record = LogRecord(revision, key, True, False, revision, 0, value, None)
            else:
                self._objects[key] = StoredObject(obj, revision, current.create_revision)
                event = Event(revision, "MODIFIED", key, obj, current.obj)
                record = LogRecord(
                    revision,
                    key,
                    False,
                    False,
                    current.create_revision,
                    current.revision,
                    value,
                    orjson.dumps(current.obj),
                )
        self._history.append(event)
        self._trim_history()
        return event, record

    def _on_durable(self, entry: _Pending, task: asyncio.Future[None]) -> None:
        error = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if error is not None:
            self._failed = error
        entry.error = error
        entry.settled = True
        # Acknowledge and fan out strictly in revision order, whatever order appends finish in.
        while self._pending and self._pending[0].settled:
            head = self._pending.popleft()
            if head.error is None:
                self._broadcast(head.event)
                if not head.durable.done():
                    head.durable.set_result(None)
            elif not head.durable.done():
                head.durable.set_exception(errors.InternalError(f"storage write failed: {head.error}"))

    def _broadcast(self, event: Event) -> None:
        self._broadcast_revision = event.revision
        for watcher in self._watchers:
            if event.key.startswith(watcher.prefix):
                watcher.offer(event)

    def _trim_history(self) -> None:
        while len(self._history) > self._history_window:
            dropped = self._history.popleft()
            self._compacted = dropped.revision

    async def compact(self) -> None:
        """Drop superseded log rows at or below the compacted revision."""
        await self._log.compact(self._compacted)

    # ----------------------------------------------------------------- watch

    def watch(self, prefix: str, after_revision: int) -> tuple[list[Event], Watcher]:
        """Backlog after ``after_revision`` plus a live watcher, with no gap and no duplicate."""
        backlog = self.events_after(prefix, after_revision)
        start_after = max(after_revision, self._broadcast_revision)
        watcher = Watcher(prefix, after_revision=start_after, limit=self._watcher_buffer)
        self._watchers.add(watcher)
        return backlog, watcher

    def snapshot_and_watch(self, prefix: str) -> tuple[int, list[tuple[str, Obj]], Watcher]:
        """Current objects (for synthetic ADDED events) and a watcher for everything after them."""
        revision = self._revision
        objects = list(self.items(prefix))
        watcher = Watcher(prefix, after_revision=revision, limit=self._watcher_buffer)
        self._watchers.add(watcher)
        return revision, objects, watcher

    @property
    def broadcast_revision(self) -> int:
        return self._broadcast_revision

    def stop_watch(self, watcher: Watcher) -> None:
        watcher.close()
        self._watchers.discard(watcher)

    def close_all_watchers(self) -> None:
        for watcher in list(self._watchers):
            self.stop_watch(watcher)


@dataclass(slots=True)
class _Pending:
    event: Event
    durable: asyncio.Future[None]
    settled: bool = False
    error: BaseException | None = None


class PreconditionFailed(Exception):
    """The key's revision was not the expected one (``actual`` 0: it does not exist)."""

    def __init__(self, actual: int) -> None:
        super().__init__(actual)
        self.actual = actual


def _with_revision(obj: Obj, revision: int) -> Obj:
    metadata = dict(obj.get("metadata") or {})
    metadata["resourceVersion"] = str(revision)
    out = dict(obj)
    out["metadata"] = metadata
    return out
