"""The object store: the watch cache of the process that orders writes and owns the log.

Every write goes through :meth:`ObjectStore.write`, which waits for any write of the same key
still in flight, checks the compare-and-swap precondition against the committed object, takes
the next revision, hands the row to the durable :class:`~kubeloop.apiserver.storage.log.Log`
and — once the row is on disk — applies it to the cache (objects, history, commit hooks,
watchers: :class:`~kubeloop.apiserver.storage.watchcache.WatchCache`) strictly in revision
order, and tells its change listeners (the feed to other processes' caches). As etcd never shows an uncommitted write,
nothing reads a write before it is durable. A write the log could not make durable fails alone:
nothing of it was applied, its revision is never shown to anyone, and the next write tries the
storage again.

It also keeps what only the ordering process may decide: the claims of unique values
(:mod:`~kubeloop.apiserver.storage.claims`), the log's compaction and the storage's health.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from dataclasses import dataclass
from typing import Protocol

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.claims import Claims, ClaimsOf, Reservation
from kubeloop.apiserver.storage.log import DoneCallback, Log, LogRecord, StorageError
from kubeloop.apiserver.storage.store import Store
from kubeloop.apiserver.storage.watchcache import (
    DEFAULT_HISTORY_BYTES,
    DEFAULT_HISTORY_EVENTS,
    Change,
    Event,
    StoredObject,
    _settle,
)

log = logging.getLogger("kubeloop.apiserver.storage.log")

#: The largest object stored, as JSON (etcd's default request limit, --max-request-bytes).
MAX_OBJECT_BYTES = 1536 * 1024


class ChangeListener(Protocol):
    """Told of every committed change, in revision order, of every compaction of the history and
    of every change of the storage's health (the feed to other processes' watch caches)."""

    def committed(self, change: Change) -> None: ...

    def compacted(self, revision: int) -> None: ...

    def health(self, error: StorageError | None) -> None: ...


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A write :meth:`ObjectStore.begin_write` took: its event, and what settles it (None: it is
    durable and applied; else the storage's error, which :func:`storage_failure` words)."""

    event: Event
    outcome: asyncio.Future[StorageError | None]


@dataclass(slots=True, eq=False)
class _InFlight:
    """A write handed to the log and not yet settled."""

    event: Event
    change: Change
    #: Resolved with None (durable and applied) or the storage error; only its writer awaits it
    #: (a writer cancelled meanwhile cancels it: the write goes on regardless).
    outcome: asyncio.Future[StorageError | None]
    appended: bool = False
    error: StorageError | None = None
    #: Other requests waiting for the key to settle (see ``ObjectStore.settled``).
    waiters: list[asyncio.Future[None]] | None = None
    #: The values the write takes and gives up (see ``storage.claims``), when a rule covers its key.
    claims: Reservation | None = None


class ObjectStore(Store):
    """The watch cache that orders writes: revisions, compare-and-swap, claims, the log."""

    def __init__(
        self,
        log: Log,
        *,
        history_window: int = DEFAULT_HISTORY_EVENTS,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        watcher_buffer: int = 10_000,
    ) -> None:
        super().__init__(history_window=history_window, history_bytes=history_bytes, watcher_buffer=watcher_buffer)
        self._log = log
        #: The newest revision handed out (also to writes still in flight or that failed).
        self._allocated = 0
        self._log_compacted = 0
        self._queue: collections.deque[_InFlight] = collections.deque()
        self._inflight: dict[str, _InFlight] = {}
        self._unsubmitted: list[tuple[LogRecord, DoneCallback]] = []
        #: Bytes of history dropped from memory since the log was last compacted.
        self._dropped_bytes = 0
        #: Set when enough history was dropped that the log should be compacted now.
        self.compaction_due = asyncio.Event()
        self._claims = Claims()
        self._listeners: list[ChangeListener] = []

    # ----------------------------------------------------------------- start-up

    def load(self) -> None:
        """Rebuild memory from the log (current objects and the history after compaction)."""
        state = self._log.load()
        self.load_state(state)
        self._allocated = self._committed
        self._log_compacted = state.compacted
        if self._compacted > self._log_compacted:  # history beyond the bounds was dropped
            self.compaction_due.set()

    def add_change_listener(self, listener: ChangeListener) -> None:
        """Tell ``listener`` of every change committed from now on, of every compaction and of
        every change of the storage's health. It must not block; an exception it raises is
        logged, and the write it was told of stays committed."""
        self._listeners.append(listener)

    def remove_change_listener(self, listener: ChangeListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    # ----------------------------------------------------------------- writes

    def add_claims(self, prefix: str, claims_of: ClaimsOf) -> None:
        """Objects under ``prefix`` hold the values ``claims_of(obj)`` alone: a write claiming a
        value another key holds, committed or in flight, fails with :class:`ClaimTaken`."""
        self._claims.add_rule(prefix, claims_of, self.items(prefix))

    def claim_holder(self, claim: str) -> str | None:
        """The key holding ``claim`` (committed, or in a write in flight), or None."""
        return self._claims.holder(claim)

    async def settled(self, key: str) -> None:
        """Wait until no write of ``key`` is in flight (so a read of it is not about to be stale)."""
        if (home := self._home()) is not None:
            return await self._at_home(self.settled(key), home)
        while (inflight := self._inflight.get(key)) is not None:
            waiter: asyncio.Future[None] = self._home_loop().create_future()
            if inflight.waiters is None:
                inflight.waiters = []
            inflight.waiters.append(waiter)
            await waiter

    async def sync(self) -> None:
        """Nothing to wait for: this cache is where writes are committed."""

    def _may_reach(self, revision: int) -> bool:
        return revision <= self._allocated  # a write in flight has it; no other will come soon

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
            return await self._at_home(self.write(key, obj, expected_revision=expected_revision), home)
        if key in self._inflight:
            await self.settled(key)
        entry = self._start(key, obj, expected_revision)
        # Awaited bare (a shield would cost every write): nobody else awaits this future.
        error = await entry.outcome
        if error is not None:
            raise storage_failure(error)
        return entry.event

    def begin_write(self, key: str, obj: Obj | None, *, expected_revision: int) -> PendingWrite | None:
        """:meth:`write` without a coroutine (a front-end's write, served with no task of its
        own): the write taken, raising as ``write`` raises, and what settles it; None when a
        write of ``key`` is in flight or the caller is on another loop (await ``write`` then)."""
        if key in self._inflight or self._home() is not None:
            return None
        entry = self._start(key, obj, expected_revision)
        return PendingWrite(entry.event, entry.outcome)

    def _start(self, key: str, obj: Obj | None, expected_revision: int) -> _InFlight:
        """Check, take and queue a write (no write of ``key`` is in flight)."""
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
            entry.change.create_revision,
            # A create names the revision before it (kine's rule without a tombstone at hand): no
            # earlier row of this key can carry it, so re-creating a deleted key never collides.
            current.revision if current is not None else revision - 1,
            entry.change.value,
        )
        # Every write of this loop tick goes to the log as one job (one transaction): submitted
        # one by one, the storage writer would wake at the first and commit smaller groups.
        self._unsubmitted.append((record, lambda error: self._appended(entry, error)))
        if len(self._unsubmitted) == 1:
            self._home_loop().call_soon(self._submit)
        return entry

    def _submit(self) -> None:
        writes, self._unsubmitted = self._unsubmitted, []
        self._log.submit(writes)

    def _prepare(self, key: str, obj: Obj | None, current: StoredObject | None, revision: int) -> _InFlight:
        outcome: asyncio.Future[StorageError | None] = self._home_loop().create_future()
        if obj is None:
            assert current is not None
            final = _with_revision(current.obj, revision)
            value = orjson.dumps(final)
            event = Event(revision, "DELETED", key, final, current.obj, value)
            change = Change(revision, "DELETED", key, value, _encoded(current), current.create_revision)
            return _InFlight(event, change, outcome)
        obj = _with_revision(obj, revision)
        value = orjson.dumps(obj)
        if current is None:
            event = Event(revision, "ADDED", key, obj, None, value)
            return _InFlight(event, Change(revision, "ADDED", key, value, None, revision), outcome)
        event = Event(revision, "MODIFIED", key, obj, current.obj, value)
        change = Change(revision, "MODIFIED", key, value, _encoded(current), current.create_revision)
        return _InFlight(event, change, outcome)

    def _appended(self, entry: _InFlight, error: StorageError | None) -> None:
        entry.appended = True
        entry.error = error
        # Apply and fan out strictly in revision order, whatever order appends finish in.
        while self._queue and self._queue[0].appended:
            head = self._queue.popleft()
            try:
                self._conclude(head)
            except Exception as exc:  # a bug: answered all the same, or every later write would wait
                log.exception("applying the write at revision %d failed", head.change.revision)
                head.error = StorageError(f"applying the write failed: {exc!r}", reason="other")
            finally:
                _settle(head.outcome, head.error)
                for waiter in head.waiters or ():
                    _settle(waiter, None)

    def _conclude(self, head: _InFlight) -> None:
        """A write the log has answered: its claims settled, and applied when it committed."""
        key = head.event.key
        if self._inflight.get(key) is head:
            del self._inflight[key]
        if head.claims is not None:
            self._claims.settle(head.claims, committed=head.error is None)
        if head.error is None:
            self._commit(head)
            if self.storage_error is not None:
                self._storage_health(None)
        elif head.error.reason == "constraint":
            log.error("storage refused a write: %s", head.error)  # that write's fault, not the storage's
        else:
            if self.storage_error is None:
                log.error("storage write failed: %s", head.error)
            self._storage_health(head.error)

    def _commit(self, entry: _InFlight) -> None:
        self._apply(entry.event, entry.change)
        for listener in self._listeners:
            try:
                listener.committed(entry.change)
            except Exception:
                log.exception("a change listener failed at revision %d", entry.change.revision)

    # ----------------------------------------------------------------- history and compaction

    def _trim(self, through: int) -> int:
        dropped = super()._trim(through)
        self._dropped_bytes += dropped
        if self._dropped_bytes > self._history_bytes:
            self.compaction_due.set()
        return dropped

    def compact_history(self, revision: int) -> None:
        super().compact_history(revision)
        for listener in self._listeners:
            try:
                listener.compacted(revision)
            except Exception:
                log.exception("a change listener failed at compaction to revision %d", revision)

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
            self._storage_health(error)
            raise
        self._storage_health(None)

    def _storage_health(self, error: StorageError | None) -> None:
        """Keep the storage's last error (None: it accepts writes) and tell the listeners of a change."""
        if error is self.storage_error:
            return
        self.storage_error = error
        for listener in self._listeners:
            try:
                listener.health(error)
            except Exception:
                log.exception("a change listener failed on the storage's health")


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


def _encoded(stored: StoredObject) -> bytes:
    """A stored object's JSON: the bytes it was written as while the history holds them (the
    change records them as its previous value, sharing them), else encoded again."""
    return stored.value if stored.value is not None else orjson.dumps(stored.obj)
