"""The event recorder: core/v1 Events about objects, as ``kubectl describe`` shows them
(client-go's ``record.EventRecorder`` as controller-runtime hands it out per controller).

``event(obj, type, reason, message)`` returns at once; a task the recorder owns writes the Event.
What it remembers is bounded, as client-go's ``EventCorrelator`` bounds it:

- a repeat of the same event (same object, type, reason and message) is not a new object: the
  existing Event's ``count`` goes up and its ``lastTimestamp`` moves. The Events it may bump are
  the 4096 used last (an LRU); an older repeat starts a new Event, as client-go's does;
- a spam filter: each source and object (and type) gets a token bucket of 25 events refilled at
  one every 5 minutes, so a reconcile that fails in a hot loop cannot flood the server. An event
  refused is dropped at once (``dropped`` counts them) and logged at debug level. The buckets are
  an LRU of 4096 objects too.

An event may be about a part of an object: ``event()`` also takes an ``ObjectReference``
(a mapping with ``kind`` and ``name`` and no ``metadata``), ``fieldPath`` included, as the
kubelet names a pod's container (``spec.containers{web}``); ``object_reference`` makes one.

``stop()`` writes what is pending, then ends the task.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.model import KubeModel, as_dict
from kubeloop.client.rest import APIClient
from kubeloop.manager.fencedqueue import FencedQueue

log = logging.getLogger("kubeloop.recorder")

EVENT = kinds.Event
NORMAL = "Normal"
WARNING = "Warning"

#: client-go's ``maxLruCacheEntries``: how many events (and objects) the recorder remembers.
CACHE_SIZE = 4096
#: client-go's ``defaultSpamBurst`` and ``defaultSpamQPS``: 25 events per source and object,
#: then one more every 5 minutes.
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0

_Key = tuple[str, str, str, str, str, str, str]
_SpamKey = tuple[str, str, str, str, str, str]
K = TypeVar("K")
V = TypeVar("V")


#: An ObjectReference's fields, as events name the objects they are about.
REFERENCE_FIELDS = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath")


def object_reference(obj: Mapping[str, Any] | KubeModel, field_path: str = "") -> dict[str, str]:
    """The ``ObjectReference`` of ``obj`` (a dict or a model): the fields it has; with
    ``field_path``, of that part of it (``spec.containers{web}``). An ObjectReference (a
    mapping with ``kind`` and ``name`` and no ``metadata``) is its own, as client-go's
    ``GetReference`` has it."""
    data = as_dict(obj)
    if "metadata" not in data and data.get("kind") and data.get("name"):
        found = {field: data.get(field) for field in REFERENCE_FIELDS}
    else:
        meta = data.get("metadata") or {}
        found = {"apiVersion": data.get("apiVersion"), "kind": data.get("kind"),
                 **{field: meta.get(field) for field in REFERENCE_FIELDS[2:6]}}  # fmt: skip
    if field_path:
        found["fieldPath"] = field_path
    return {field: str(value) for field, value in found.items() if value}


class _LRU(Generic[K, V]):
    """A mapping of at most ``size`` entries; the one used least recently goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class _TokenBucket:
    """A passive token bucket (client-go's ``TokenBucketPassiveRateLimiter``): ``burst`` tokens,
    refilled at ``qps``; ``try_accept`` takes one if there is one."""

    __slots__ = ("burst", "last", "qps", "tokens")

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def try_accept(self, now: float) -> bool:
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class EventRecorder:
    """Writes core/v1 Events about objects, as ``kubectl describe`` shows them.

    Get one with ``manager.event_recorder(component)``. Events are written by a task of the
    recorder, so ``event()`` never blocks a reconcile; repeats of the same event raise its
    ``count``. The manager flushes what is pending when it stops. ``instance`` is the host the
    component runs on (the Event's ``source.host`` and ``reportingInstance``; a kubelet's node).
    """

    def __init__(
        self,
        client: APIClient,
        component: str,
        *,
        instance: str = "",
        cache_size: int = CACHE_SIZE,
        spam_burst: int = SPAM_BURST,
        spam_qps: float = SPAM_QPS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``cache_size``, ``spam_burst`` and ``spam_qps`` are client-go's ``CorrelatorOptions``
        (``LRUCacheSize``, ``BurstSize``, ``QPS``), with its defaults; ``clock`` is for tests."""
        self.client = client
        self.component = component
        self.instance = instance
        self.cache_size = cache_size
        self.spam_burst = spam_burst
        self.spam_qps = spam_qps
        self._clock = clock
        # Each event is written under the write fence of the code that recorded it.
        self._queue: FencedQueue[tuple[_Key, dict[str, Any]]] = FencedQueue(
            f"event recorder {component}", self._write_item, self._not_written
        )
        #: key → (namespace, event name, count) of the Events written last.
        self._written: _LRU[_Key, tuple[str, str, int]] = _LRU(cache_size)
        #: (kind, namespace, name, uid, apiVersion, type) → its spam filter's bucket.
        self._buckets: _LRU[_SpamKey, _TokenBucket] = _LRU(cache_size)
        #: Events the spam filter refused.
        self.dropped = 0

    @property
    def remembered(self) -> int:
        """How many written Events the recorder remembers (to bump their count); at most
        ``cache_size``."""
        return len(self._written)

    @property
    def pending(self) -> int:
        """Events recorded and not written yet (being written included)."""
        return self._queue.pending

    def event(self, obj: Mapping[str, Any] | KubeModel, event_type: str, reason: str, message: str) -> None:
        """Record an event about ``obj`` (a dict, a model or an ObjectReference; ``NORMAL`` or
        ``WARNING``); never blocks.

        Raises only for an event type that is neither.
        """
        if event_type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be {NORMAL} or {WARNING}, not {event_type!r}")
        involved = {field: "" for field in REFERENCE_FIELDS} | object_reference(obj)
        key: _Key = (
            str(involved["kind"]),
            str(involved["namespace"]),
            str(involved["name"]),
            event_type,
            reason,
            message,
            str(involved["fieldPath"]),
        )
        if not self._accept(involved, event_type):
            self.dropped += 1
            log.debug(
                "%s: event %s %s about %s dropped: too many events about it",
                self.component,
                event_type,
                reason,
                key[2],
            )
            return
        self._queue.put((key, {k: v for k, v in involved.items() if v}))

    def _accept(self, involved: Mapping[str, Any], event_type: str) -> bool:
        """The spam filter (client-go's ``EventSourceObjectSpamFilter``): does this source's
        bucket for the object still hold a token?"""
        spam_key: _SpamKey = (
            str(involved["kind"]),
            str(involved["namespace"]),
            str(involved["name"]),
            str(involved["uid"]),
            str(involved["apiVersion"]),
            event_type,
        )
        now = self._clock()
        bucket = self._buckets.get(spam_key)
        if bucket is None:
            bucket = _TokenBucket(self.spam_qps, self.spam_burst, now)
        self._buckets.put(spam_key, bucket)
        return bucket.try_accept(now)

    async def flush(self) -> None:
        """Wait until every event recorded so far has been written (or failed to be)."""
        await self._queue.flush()

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is pending (up to ``timeout`` seconds), then end the writer task."""
        unwritten = self._queue.pending
        if not await self._queue.stop(timeout):
            log.warning("%s: events not written (of %d pending)", self.component, unwritten)

    def _not_written(self, item: tuple[_Key, dict[str, Any]], exc: BaseException) -> None:
        log.warning("%s: could not record event %s: %s", self.component, item[0][4], exc)

    async def _write_item(self, item: tuple[_Key, dict[str, Any]]) -> None:
        await self._write(*item)

    async def _write(self, key: _Key, involved: dict[str, Any]) -> None:
        now = timestamps.now()
        namespace = involved.get("namespace") or "default"
        seen = self._written.get(key)
        if seen is not None:
            event_namespace, name, count = seen
            try:
                await self.client.patch(
                    EVENT, name, {"count": count + 1, "lastTimestamp": now}, namespace=event_namespace
                )
                self._written.put(key, (event_namespace, name, count + 1))
                return
            except errors.NotFound:
                pass  # deleted (events expire): write a new one
        # client-go names events <object name>.<hex nanoseconds>.
        name = f"{involved.get('name', 'event')}.{time.time_ns():x}"
        await self.client.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": involved,
                "type": key[3],
                "reason": key[4],
                "message": key[5],
                "source": {"component": self.component, **({"host": self.instance} if self.instance else {})},
                "reportingComponent": self.component,
                "reportingInstance": self.instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )
        self._written.put(key, (namespace, name, 1))
