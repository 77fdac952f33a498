"""The event recorder: core/v1 Events about objects, as ``kubectl describe`` shows them
(client-go's ``record.EventRecorder`` as controller-runtime hands it out per controller).

``event(obj, type, reason, message)`` returns at once; a task the recorder owns writes the Event.
A repeat of the same event (same object, type, reason and message) is not a new object: the
existing Event's ``count`` goes up and its ``lastTimestamp`` moves, as client-go's correlator
does. ``stop()`` writes what is pending, then ends the task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeModel, as_dict
from kubeloop.client.fence import WriteFence, current_write_fence
from kubeloop.client.rest import REQUEST_ERRORS, APIClient
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.recorder")

EVENT = GroupVersionKind("", "v1", "Event")
NORMAL = "Normal"
WARNING = "Warning"

_Key = tuple[str, str, str, str, str, str]


class EventRecorder:
    """Writes core/v1 Events about objects, as ``kubectl describe`` shows them.

    Get one with ``manager.event_recorder(component)``. Events are written by a task of the
    recorder, so ``event()`` never blocks a reconcile; repeats of the same event raise its
    ``count``. The manager flushes what is pending when it stops.
    """

    def __init__(self, client: APIClient, component: str, *, instance: str = "") -> None:
        self.client = client
        self.component = component
        self.instance = instance
        # Each event carries the write fence of the code that recorded it (a leader's reconcile: its
        # lease; a runnable on every replica: none), and is written under that fence.
        self._pending: asyncio.Queue[tuple[_Key, dict[str, Any], WriteFence | None]] = asyncio.Queue()
        self._written: dict[_Key, tuple[str, str, int]] = {}  # key → (namespace, event name, count)
        self._worker: asyncio.Task[None] | None = None
        self._unwritten = 0

    @property
    def pending(self) -> int:
        """Events recorded and not written yet (being written included)."""
        return self._unwritten

    def event(self, obj: Mapping[str, Any] | KubeModel, event_type: str, reason: str, message: str) -> None:
        """Record an event about ``obj`` (a dict or a model; ``NORMAL`` or ``WARNING``); never blocks.

        Raises only for an event type that is neither.
        """
        if event_type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be {NORMAL} or {WARNING}, not {event_type!r}")
        obj = as_dict(obj)
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        key: _Key = (
            str(involved["kind"]),
            str(involved["namespace"]),
            str(involved["name"]),
            event_type,
            reason,
            message,
        )
        self._pending.put_nowait((key, {k: v for k, v in involved.items() if v}, current_write_fence.get()))
        self._unwritten += 1
        if self._worker is None:
            self._worker = asyncio.create_task(self._write_events(), name=f"event recorder {self.component}")

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is pending (up to ``timeout`` seconds), then end the writer task."""
        if self._worker is None:
            return
        try:
            await asyncio.wait_for(self._pending.join(), timeout)
        except TimeoutError:
            log.warning("%s: %d events not written", self.component, self._pending.qsize())
        worker, self._worker = self._worker, None
        await cancel_and_wait([worker])

    async def _write_events(self) -> None:
        while True:
            key, involved, fence = await self._pending.get()
            token = current_write_fence.set(fence)
            try:
                await self._write(key, involved)
            except REQUEST_ERRORS as exc:
                log.warning("%s: could not record event %s: %s", self.component, key[4], exc)
            finally:
                current_write_fence.reset(token)
                self._unwritten -= 1
                self._pending.task_done()

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
                self._written[key] = (event_namespace, name, count + 1)
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
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )
        self._written[key] = (namespace, name, 1)
