"""Watch streams: events after a resourceVersion, synthetic initial state, bookmarks, selectors.

A watch is a chunked HTTP/1.1 response of newline-separated ``{"type": ..., "object": ...}``
documents. Rules (REFERENCE.md §A): RV unset or "0" starts with ADDED events for the current
state; RV=N sends what happened strictly after N; a compacted N gets HTTP 200 and an ERROR event
(410 Expired); with selectors, an object that starts matching is ADDED and one that stops matching
is DELETED (carrying its previous state at the event's revision); bookmarks only when asked;
``sendInitialEvents=true`` ends the initial state with a BOOKMARK annotated
``k8s.io/initial-events-end``; a watcher that falls too far behind is closed with a 410 ERROR.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from kubeloop import errors
from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.listing import list_options_invalid, parse_resource_version
from kubeloop.apiserver.storage.watchcache import Event, EventBatch, Watcher
from kubeloop.jitter import uniform

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: Objects of the initial state encoded per chunk of the stream.
_SNAPSHOT_SLICE = 500


class ChunkWriter(Protocol):
    """The stream's connection, written from the store's fan-out without waking the stream's
    task (see ``Watcher.sink``)."""

    #: What :meth:`frame` makes of a chunk (writers of one framing can share framed bytes).
    framing: str

    def write_now(self, chunk: bytes) -> bool:
        """Send ``chunk`` as the stream's next part; False when the connection is closing and
        nothing was sent."""
        ...

    def frame(self, chunk: bytes) -> bytes:
        """``chunk`` as :meth:`write_now` sends it (HTTP/1.1: one chunk of the chunked body)."""
        ...

    def write_framed(self, framed: bytes) -> bool:
        """Send what :meth:`frame` made, as :meth:`write_now` sends a chunk."""
        ...

    def has_room(self) -> bool:
        """Whether the connection's send buffer is below its high-water mark."""
        ...


@dataclass(frozen=True)
class WatchOptions:
    label_selector: LabelSelector | None = None
    field_selector: FieldSelector | None = None
    resource_version: str = ""
    resource_version_match: str = ""
    allow_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: float | None = None


@dataclass(frozen=True)
class WatchSettings:
    """Server-wide watch behaviour (upstream: ~1 bookmark a minute, 30–60 min request timeout)."""

    bookmark_interval: float = 60.0
    min_request_timeout: float = 1800.0


#: A watch line's start for each event type: the line of an object served as stored is this, the
#: stored JSON and ``}\n`` (what ``orjson.dumps({"type": ..., "object": obj})`` would write).
_EVENT_HEADS = {kind: b'{"type":"%s","object":' % kind.encode() for kind in ("ADDED", "MODIFIED", "DELETED")}


def validate_watch_options(options: WatchOptions) -> None:
    if options.send_initial_events is not None:
        if options.resource_version_match != "NotOlderThan":
            raise list_options_invalid(
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                "sendInitialEvents",
            )
        if options.send_initial_events and not options.allow_bookmarks:
            raise list_options_invalid(
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires allowWatchBookmarks=true",
                "allowWatchBookmarks",
            )
    elif options.resource_version_match:
        raise list_options_invalid(
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            "resourceVersionMatch",
        )


class WatchStream:
    """Produces the encoded lines of one watch; created after the options are validated."""

    def __init__(
        self,
        registry: Registry,
        resource: ResourceType,
        namespace: str | None,
        options: WatchOptions,
        settings: WatchSettings,
        *,
        encode: Callable[[str, Obj], bytes] | None = None,
        writer: ChunkWriter | None = None,
    ) -> None:
        validate_watch_options(options)
        self._writer = writer
        #: Where a batch keeps the framed lines plain streams of this version and framing share.
        self._shared_key = f"{resource.group_version} {writer.framing}" if writer is not None else ""
        self._registry = registry
        self._store = registry.store
        self._resource = resource
        self._namespace = namespace
        self._options = options
        self._settings = settings
        self._match = registry.matcher(resource, options.label_selector, options.field_selector)
        self._prefix = resource.key_prefix(namespace)
        self._encode_custom = encode
        self._initial: list[bytes] = []
        #: Events after the requested resourceVersion, encoded when the stream starts (their
        #: objects may need a conversion webhook first).
        self._backlog: list[Event] = []
        self._snapshot: list[Obj] = []
        self._snapshot_end = b""
        self._watcher: Watcher | None = None
        self._start()

    def _start(self) -> None:
        options = self._options
        rv = options.resource_version
        revision = parse_resource_version(rv) if rv else 0
        if revision > self._store.revision:
            raise errors.Timeout(
                f"Too large resource version: {revision}, current: {self._store.revision}",
                retry_after_seconds=1,
            )
        synthetic = options.send_initial_events is True or (
            options.send_initial_events is None and revision == 0
        )
        if synthetic:
            # The current state is sent as ADDED events from ``lines()``, a slice at a time, so
            # that a watch of 100,000 objects does not hold the event loop while it encodes them.
            snapshot_rv, self._snapshot, watcher = self._store.snapshot_and_watch(self._prefix)
            if options.send_initial_events:
                self._snapshot_end = self._bookmark(snapshot_rv, initial_end=True)
            self._watcher = watcher
            return
        if options.send_initial_events is False and revision == 0:
            revision = self._store.broadcast_revision
        try:
            backlog, watcher = self._store.watch(self._prefix, revision)
        except errors.ResourceExpired as gone:
            self._initial.append(self._line("ERROR", gone.to_status()))
            return
        self._watcher = watcher
        self._backlog = list(backlog)

    def _line(self, kind: str, obj: Obj) -> bytes:
        if self._encode_custom is not None:
            return self._encode_custom(kind, obj)
        return orjson.dumps({"type": kind, "object": obj}) + b"\n"

    def _bookmark(self, revision: int, *, initial_end: bool = False) -> bytes:
        metadata: Obj = {"resourceVersion": str(revision)}
        if initial_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": self._resource.kind, "apiVersion": self._resource.api_version, "metadata": metadata}
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

    def _event_line(self, event: Event) -> bytes | None:
        resource = self._resource
        if self._match is None:
            cache_key = resource.group_version if self._encode_custom is None else ""
            if cache_key:
                cached = event.encoded.get(cache_key)
                if cached is None:
                    served = self._registry.to_served(resource, event.obj)
                    if served is event.obj and event.value is not None:  # as stored: its JSON is made
                        cached = _EVENT_HEADS[event.type] + event.value + b"}\n"
                    else:
                        cached = self._line(event.type, served)
                    event.encoded[cache_key] = cached
                return cached
            return self._line(event.type, self._registry.to_served(resource, event.obj))
        new = self._registry.to_served(resource, event.obj)
        new_matches = self._match(new)
        if event.type == "ADDED":
            return self._line("ADDED", new) if new_matches else None
        if event.type == "DELETED":
            return self._line("DELETED", new) if new_matches else None
        old = self._registry.to_served(resource, event.prev) if event.prev is not None else None
        old_matches = old is not None and self._match(old)
        if new_matches and old_matches:
            return self._line("MODIFIED", new)
        if new_matches:
            return self._line("ADDED", new)
        if old_matches and old is not None:
            # Upstream: the previous state, stamped with the revision of the change that unmatched it.
            gone = dict(old)
            gone["metadata"] = {**(old.get("metadata") or {}), "resourceVersion": str(event.revision)}
            return self._line("DELETED", gone)
        return None

    def _converts_in_process(self) -> bool:
        """Whether every line can be encoded now (no conversion webhook to wait for)."""
        return self._registry.strategy(self._resource).converter is None

    def _attach_sink(self, watcher: Watcher) -> None:
        """Let the store write the events straight to the connection, while the queue is empty
        and the client keeps up (else the task writes, waiting for the client between writes)."""
        writer = self._writer
        if writer is not None and not watcher.events and writer.has_room() and self._converts_in_process():
            watcher.sink = self._write_now

    def _write_now(self, events: EventBatch) -> bool:
        """The watcher's sink: the events' lines in one write. Streams with neither selectors nor
        an encoding of their own write the same bytes for the same batch: the first checks the
        kind converts in process, encodes the lines and frames them as one chunk, the others
        (a thousand, for a popular kind) write that chunk as it is."""
        writer = self._writer
        if writer is None:
            return False
        if self._match is None and self._encode_custom is None:
            shared_key = self._shared_key
            framed = events.encoded.get(shared_key)
            if framed is None:
                if not self._converts_in_process():
                    return False
                chunk = self._joined_lines(events)
                framed = events.encoded[shared_key] = writer.frame(chunk) if chunk else b""
            if not framed:
                return True
            if not writer.write_framed(framed):
                return False
        else:
            if not self._converts_in_process():
                return False
            chunk = self._joined_lines(events)
            if not chunk:
                return True
            if not writer.write_now(chunk):
                return False
        if not writer.has_room() and self._watcher is not None:
            self._watcher.sink = None  # the client is behind: the task writes, waiting for it
        return True

    def _joined_lines(self, events: Sequence[Event]) -> bytes:
        return b"".join([line for event in events if (line := self._event_line(event)) is not None])

    async def _converted(self, objects: list[Obj]) -> bytes:
        """Convert by webhook what the kind needs before its lines are encoded; an ERROR event
        with the failure when the conversion fails (b"" when it did not)."""
        try:
            for start in range(0, len(objects), _SNAPSHOT_SLICE):  # a review of bounded size each
                await self._registry.prepare_served(self._resource, objects[start : start + _SNAPSHOT_SLICE])
        except errors.APIError as failed:
            return self._line("ERROR", failed.to_status())
        return b""

    async def lines(self) -> AsyncIterator[bytes]:
        """Encoded chunks until the timeout, a 410 for a lagging watcher, or the store closes."""
        try:
            snapshot, self._snapshot = self._snapshot, []
            for start in range(0, len(snapshot), _SNAPSHOT_SLICE):
                failed = await self._converted(snapshot[start : start + _SNAPSHOT_SLICE])
                if failed:
                    yield failed
                    return
                lines = []
                for stored in snapshot[start : start + _SNAPSHOT_SLICE]:
                    obj = self._registry.to_served(self._resource, stored)
                    if self._match is None or self._match(obj):
                        lines.append(self._line("ADDED", obj))
                if lines:
                    yield b"".join(lines)
                await asyncio.sleep(0)  # let the loop serve others between slices
            if self._snapshot_end:
                yield self._snapshot_end
            backlog, self._backlog = self._backlog, []
            failed = await self._converted(_objects_of(backlog))
            if failed:
                yield failed
                return
            self._initial.extend(line for event in backlog if (line := self._event_line(event)) is not None)
            if self._initial:
                yield b"".join(self._initial)
                self._initial = []
            watcher = self._watcher
            if watcher is None:
                return
            timeout = self._options.timeout_seconds
            if timeout is None:
                base = self._settings.min_request_timeout
                timeout = base * uniform(1.0, 2.0)
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self._settings.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return
                wait_for = deadline - now
                if self._options.allow_bookmarks:
                    wait_for = min(wait_for, max(0.0, next_bookmark - now))
                self._attach_sink(watcher)
                await watcher.wait(wait_for)
                watcher.sink = None  # the task writes from here until it waits again
                if watcher.overflowed:
                    yield self._line(
                        "ERROR",
                        errors.ResourceExpired(
                            "watch of this resource fell too far behind; please relist"
                        ).to_status(),
                    )
                    return
                out = []
                events = watcher.drain()
                failed = await self._converted(_objects_of(events))
                if failed:
                    yield failed
                    return
                for event in events:
                    line = self._event_line(event)
                    if line is not None:
                        out.append(line)
                if out:
                    yield b"".join(out)
                if watcher.closed:
                    return
                if self._options.allow_bookmarks and time.monotonic() >= next_bookmark:
                    yield self._bookmark(self._store.broadcast_revision)
                    next_bookmark = time.monotonic() + self._settings.bookmark_interval
        finally:
            self.close()

    def close(self) -> None:
        if self._watcher is not None:
            self._store.stop_watch(self._watcher)
            self._watcher = None


def _objects_of(events: list[Event]) -> list[Obj]:
    """The objects, old and new, the lines of ``events`` show."""
    objects = [event.obj for event in events]
    objects.extend(event.prev for event in events if event.prev is not None)
    return objects
