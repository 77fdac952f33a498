"""The ``events.k8s.io/v1`` event recorder (client-go's ``tools/events``, what controller-runtime's
``GetEventRecorder`` hands out): an event says what a controller did (``action``) about an
object (``regarding``), perhaps with another (``related``), why (``reason``), and a ``note``.

``eventf(regarding, related, type, reason, action, note)`` returns at once; a task the recorder
owns writes. Repeats are a series, as client-go's broadcaster makes them: events alike (same
type, action, reason, reporting controller and instance, regarding and related objects; the note
may differ) are one Event. The first is created; the second patches it with ``series: {count: 2,
lastObservedTime}``; later ones count in memory, written every ``refresh_seconds`` (client-go:
30 minutes), when the series has been quiet for ``finish_seconds`` (6 minutes; then it is
forgotten, and the next one starts a new Event), and when the recorder stops. An Event deleted
meanwhile (they expire) is created again. ``reportingController`` is the recorder's name,
``reportingInstance`` that name and the host's.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeModel
from kubeloop.client.rest import APIClient
from kubeloop.client.restclient import REQUEST_ERRORS
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.manager.fencedqueue import FencedQueue
from kubeloop.manager.recorder import NORMAL, WARNING, object_reference

log = logging.getLogger("kubeloop.recorder")

EVENT_V1 = GroupVersionKind("events.k8s.io", "v1", "Event")
#: client-go's ``refreshTime`` and ``finishTime``.
REFRESH_SECONDS = 30 * 60.0
FINISH_SECONDS = 6 * 60.0
#: The most of a note the API server takes (events.k8s.io/v1 validation: 1 kB).
MAX_NOTE_BYTES = 1024

_Key = tuple[str, str, str, str, str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


@dataclass
class _Series:
    """An Event as the recorder knows it: where it is, and the count not written yet."""

    namespace: str
    name: str
    body: dict[str, Any]
    count: int = 1
    written_count: int = 1
    last_observed: str = ""
    last_seen: float = field(default_factory=time.monotonic)


class EventsV1Recorder:
    """Writes ``events.k8s.io/v1`` Events, repeats as series (see the module's docs). Get one
    with ``manager.events_v1_recorder(name)``; the manager stops it (writing what is pending)."""

    def __init__(
        self,
        client: APIClient,
        reporting_controller: str,
        *,
        reporting_instance: str | None = None,
        refresh_seconds: float = REFRESH_SECONDS,
        finish_seconds: float = FINISH_SECONDS,
    ) -> None:
        self.client = client
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance or f"{reporting_controller}-{socket.gethostname()}"
        self.refresh_seconds = refresh_seconds
        self.finish_seconds = finish_seconds
        # Each event is recorded under the write fence of the code that recorded it.
        self._queue: FencedQueue[tuple[_Key, dict[str, Any]]] = FencedQueue(
            f"events recorder {reporting_controller}", self._record_item, self._not_recorded
        )
        self._series: dict[_Key, _Series] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._refreshed = time.monotonic()

    def eventf(
        self,
        regarding: Mapping[str, Any] | KubeModel,
        related: Mapping[str, Any] | KubeModel | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        """Record that the controller did ``action`` about ``regarding`` (and ``related``);
        ``NORMAL`` or ``WARNING``; never blocks. ValueError for another type, or no reason or
        action (the API server requires both)."""
        if event_type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be {NORMAL} or {WARNING}, not {event_type!r}")
        if not reason or not action:
            raise ValueError("an events.k8s.io/v1 Event needs a reason and an action")
        regarding_ref = object_reference(regarding)
        related_ref = object_reference(related) if related is not None else None
        key: _Key = (
            event_type,
            action,
            reason,
            self.reporting_controller,
            self.reporting_instance,
            _identity(regarding_ref),
            _identity(related_ref or {}),
        )
        encoded = note.encode()
        if len(encoded) > MAX_NOTE_BYTES:
            note = encoded[: MAX_NOTE_BYTES - 3].decode(errors="ignore") + "..."
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "regarding": regarding_ref,
            "type": event_type,
            "reason": reason,
            "action": action,
            "note": note,
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
        }
        if related_ref:
            body["related"] = related_ref
        self._queue.put((key, body))
        if self._ticker is None:
            self._ticker = asyncio.create_task(self._tick(), name=f"events series {self.reporting_controller}")

    @property
    def pending(self) -> int:
        """Events recorded and not handled yet (written, or counted in their series)."""
        return self._queue.pending

    async def flush(self) -> None:
        """Wait until every event recorded so far has been handled (written, or counted)."""
        await self._queue.flush()

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is pending and every series' count, then end the tasks."""
        if not self._queue.started:
            return
        done = await self._queue.stop(timeout)
        try:
            await asyncio.wait_for(self._write_series(everything=True), timeout)
        except TimeoutError:
            done = False
        if not done:
            log.warning("%s: events not written", self.reporting_controller)
        ticker, self._ticker = self._ticker, None
        await cancel_and_wait([ticker] if ticker is not None else [])

    def _not_recorded(self, item: tuple[_Key, dict[str, Any]], exc: BaseException) -> None:
        log.warning("%s: could not record event %s: %s", self.reporting_controller, item[1]["reason"], exc)

    async def _record_item(self, item: tuple[_Key, dict[str, Any]]) -> None:
        await self._record(*item)

    async def _record(self, key: _Key, body: dict[str, Any]) -> None:
        now = timestamps.now(micro=True)
        series = self._series.get(key)
        if series is None:  # the first of its kind: created
            namespace = body["regarding"].get("namespace") or "default"
            name = f"{body['regarding'].get('name') or 'event'}.{time.time_ns():x}"
            body = {**body, "metadata": {"name": name, "namespace": namespace}, "eventTime": now}
            self._series[key] = _Series(namespace, name, body)
            await self.client.create(body)
            return
        series.count += 1
        series.last_observed = now
        series.last_seen = time.monotonic()
        if series.count == 2:  # the second: a series now, written at once
            await self._write(series)

    async def _write(self, series: _Series) -> None:
        patch = {"series": {"count": series.count, "lastObservedTime": series.last_observed}}
        try:
            await self.client.patch(EVENT_V1, series.name, patch, namespace=series.namespace)
        except errors.NotFound:  # expired meanwhile: made again, with its series
            await self.client.create({**series.body, **patch})
        series.written_count = series.count

    async def _write_series(self, *, everything: bool = False) -> None:
        """Write the counts not written yet: of the series quiet for ``finish_seconds`` (then
        forgotten), of every series once ``refresh_seconds`` have passed, or (``everything``)
        of every series now."""
        now = time.monotonic()
        refresh = everything or now - self._refreshed >= self.refresh_seconds
        if refresh:
            self._refreshed = now
        for key, series in list(self._series.items()):
            finished = now - series.last_seen >= self.finish_seconds
            if series.count > series.written_count and (refresh or finished):
                try:
                    await self._write(series)
                except REQUEST_ERRORS as exc:
                    log.warning("%s: could not write a series: %s", self.reporting_controller, exc)
            if finished:
                del self._series[key]

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(min(self.refresh_seconds, self.finish_seconds))
            await self._write_series()


def _identity(ref: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What makes two references the same object (not its resourceVersion)."""
    return tuple(sorted((k, v) for k, v in ref.items() if k != "resourceVersion"))
