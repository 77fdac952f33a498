"""``kubeloop run --console HOST:PORT``: a live web console of a running operator.

``GET /`` is the page; it asks ``GET /api/state`` every second and redraws what changed. The
state is also served in parts, each a JSON document:

- ``/api/controllers``: one object per controller — its ``name``, ``reconciles``, ``errors``,
  ``requeues``, ``queue`` depth, ``busy`` workers, ``median_ms`` over its latest reconciles and
  its ``last`` reconcile;
- ``/api/reconciles``: the latest reconciles of every controller, newest first, with what each
  wrote and, for one that failed, what it raised (``Controller.recent``): a read the server
  refused shows there in its words;
- ``/api/events``: the cluster's events, warnings first, newest first (listed once a second by
  the console, not once per page);
- ``/api/objects``: on the embedded server, the cluster's objects counted by kind and their
  owner trees (a Deployment, its ReplicaSets, their Pods); ``null`` on another cluster, whose
  objects the operator may not read;
- ``/api/series``: per controller, its reconciles and errors per second and its queue depth,
  one sample a second over the last 15 minutes, and its reconcile-time distribution over the
  same window (``controllerseries``): what the page's charts draw, as SVG, with no script or
  font from anywhere else (the page works offline).

It listens on 127.0.0.1 unless told a host, and answers only requests addressed to it by an IP
address, ``localhost``, the host it was told or this machine's name: a page of another site
whose name an attacker points at 127.0.0.1 (DNS rebinding) gets 403, not the events' messages.

The console only reads: the manager's counters, the controllers' rings of recent reconciles,
the events, and with ``--embedded`` the server's own store. It runs as a runnable of the manager
(on every replica, leader or not), so it starts and stops with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import ipaddress
import json
import socket
import statistics
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from kubeloop import errors, kinds
from kubeloop.api.object import Obj
from kubeloop.cli.controllerseries import ControllerSeries
from kubeloop.client.rest import APIClient
from kubeloop.controller.controller import Controller
from kubeloop.httpguard import GuardedSite, guarded_runner
from kubeloop.manager.manager import Manager

EVENT = kinds.Event

#: What the page and /api/reconciles and /api/events show at most.
LATEST = 50
#: Owner trees shown at most (the largest first), and how deep.
TREES = 100
MAX_TREE_DEPTH = 16


def controller_summary(name: str, controller: Controller) -> dict[str, Any]:
    """One controller's counters as the console and the terminal view show them."""
    results = controller.results
    recent = list(controller.recent)
    last = recent[-1] if recent else None
    return {
        "name": name,
        "reconciles": sum(results.values()),
        "errors": results.get("error", 0),
        "requeues": results.get("requeue", 0) + results.get("requeue_after", 0),
        "queue": len(controller.queue),
        "busy": controller.active_workers,
        "median_ms": round(statistics.median(r.took_ms for r in recent), 1) if recent else None,
        "last": {"result": last.outcome, "took_ms": round(last.took_ms, 1)} if last else None,
    }


def controllers_of(manager: Manager) -> list[dict[str, Any]]:
    return [controller_summary(name, controller) for name, controller in sorted(manager.controllers.items())]


def latest_reconciles(manager: Manager, limit: int = LATEST) -> list[dict[str, Any]]:
    records = [
        (name, record) for name, controller in manager.controllers.items() for record in controller.recent
    ]
    records.sort(key=lambda item: item[1].finished, reverse=True)
    return [
        {
            "controller": name,
            "namespace": record.request.namespace,
            "name": record.request.name,
            "result": record.outcome,
            "took_ms": round(record.took_ms, 1),
            "finished": record.finished.isoformat(),
            "writes": list(record.writes),
            "error": record.error,
        }
        for name, record in records[:limit]
    ]


def _stamp(event: Obj) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def ordered_events(events: Iterable[Obj]) -> list[Obj]:
    """Warnings first, then the rest; newest first within each."""
    ordered = sorted(events, key=_stamp, reverse=True)
    ordered.sort(key=lambda event: event.get("type") != "Warning")
    return ordered


def event_summaries(events: Iterable[Obj], limit: int = LATEST) -> list[dict[str, Any]]:
    summaries = []
    for event in ordered_events(events)[:limit]:
        involved = event.get("involvedObject") or {}
        summaries.append(
            {
                "type": event.get("type") or "",
                "reason": event.get("reason") or "",
                "object": {
                    "kind": involved.get("kind") or "",
                    "namespace": involved.get("namespace") or "",
                    "name": involved.get("name") or "",
                },
                "message": event.get("message") or "",
                "count": event.get("count") or 1,
                "last": _stamp(event),
            }
        )
    return summaries


def _state_of(obj: Obj) -> str:
    """A word for how the object is doing: its phase, or its Ready/Available condition."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return ""
    if isinstance(status.get("phase"), str):
        return str(status["phase"])
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") in ("Ready", "Available"):
            return f"{condition['type']}={condition.get('status')}"
    return ""


def object_summary(objects: Iterable[Obj], trees: int = TREES) -> dict[str, Any]:
    """The objects counted by kind, and the owner trees: each object owning others and owned by
    none of the objects listed, with what it owns beneath it, the largest trees first.

    Each object shows once (under the first owner that reaches it), so owner references that
    form a cycle, or an object owned twice, cannot repeat a branch; trees stop at
    ``MAX_TREE_DEPTH``.
    """
    counts: dict[tuple[str, str], int] = {}
    described: dict[str, dict[str, Any]] = {}
    owners: dict[str, list[str]] = {}
    for obj in objects:
        kind, api_version = str(obj.get("kind") or ""), str(obj.get("apiVersion") or "")
        counts[(api_version, kind)] = counts.get((api_version, kind), 0) + 1
        metadata = obj.get("metadata") or {}
        uid = metadata.get("uid")
        if not isinstance(uid, str) or not uid:
            continue
        described[uid] = {
            "kind": kind,
            "namespace": metadata.get("namespace") or "",
            "name": metadata.get("name") or "",
            "state": _state_of(obj),
        }
        owners[uid] = [
            ref["uid"] for ref in metadata.get("ownerReferences") or () if isinstance(ref.get("uid"), str)
        ]
    owned: dict[str, list[str]] = {}
    for uid, owned_by in owners.items():
        for owner in dict.fromkeys(owned_by):
            if owner in described and owner != uid:
                owned.setdefault(owner, []).append(uid)

    def order(uid: str) -> tuple[str, str, str]:
        return (described[uid]["kind"], described[uid]["namespace"], described[uid]["name"])

    shown: set[str] = set()

    def tree(uid: str, depth: int) -> tuple[dict[str, Any], int]:
        shown.add(uid)
        children, size = [], 1
        if depth < MAX_TREE_DEPTH:
            for child in sorted(owned.get(uid, ()), key=order):
                if child not in shown:
                    node, child_size = tree(child, depth + 1)
                    children.append(node)
                    size += child_size
        return {**described[uid], "children": children}, size

    roots = [uid for uid in owned if not any(owner in described and owner != uid for owner in owners[uid])]
    built = [(node, size) for node, size in (tree(uid, 1) for uid in sorted(roots, key=order)) if size > 1]
    built.sort(key=lambda item: -item[1])  # stable: by kind, namespace and name among equals
    kinds = [
        {"apiVersion": api_version, "kind": kind, "count": count}
        for (api_version, kind), count in sorted(counts.items(), key=lambda item: (item[0][1], item[0][0]))
    ]
    return {"kinds": kinds, "trees": [node for node, _ in built[:trees]]}


class Console:
    """The web console of ``manager``: add :meth:`run` to the manager (``kubeloop run --console``
    does), or use :meth:`state` for the same document without serving it.

    ``objects`` lists every object of the cluster (the embedded server's store); without it the
    console shows no objects. Events are listed through ``client`` (in ``namespace``, or all).
    """

    def __init__(
        self,
        manager: Manager,
        client: APIClient,
        *,
        address: str,
        title: str,
        namespace: str | None = None,
        objects: Callable[[], Iterable[Obj]] | None = None,
        on_serving: Callable[[str], object] | None = None,
    ) -> None:
        self.manager = manager
        self.client = client
        self.address = address
        self.title = title
        self.namespace = namespace
        self.objects = objects
        self.on_serving = on_serving
        self.url = ""
        self._events: list[Obj] = []
        self._events_error: str | None = None
        #: The controllers' counters, sampled once a second while the console runs.
        self.series = ControllerSeries(manager)

    def state(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "now": datetime.now(UTC).isoformat(),
            "controllers": controllers_of(self.manager),
            "reconciles": latest_reconciles(self.manager),
            "events": event_summaries(self._events),
            "events_error": self._events_error,
            "objects": object_summary(self.objects()) if self.objects is not None else None,
        }

    def application(self) -> web.Application:
        def document(produce: Callable[[], Any]) -> Callable[[web.Request], Awaitable[web.Response]]:
            async def handler(request: web.Request) -> web.Response:
                return web.json_response(
                    produce(), dumps=lambda value: json.dumps(value, separators=(",", ":"))
                )

            return handler

        async def page(request: web.Request) -> web.Response:
            return web.Response(text=PAGE, content_type="text/html", charset="utf-8")

        app = web.Application(middlewares=[self._host_check])
        app.router.add_get("/", page)
        app.router.add_get("/api/state", document(self.state))
        app.router.add_get("/api/controllers", document(lambda: controllers_of(self.manager)))
        app.router.add_get("/api/reconciles", document(lambda: latest_reconciles(self.manager)))
        app.router.add_get("/api/events", document(lambda: event_summaries(self._events)))
        app.router.add_get(
            "/api/objects",
            document(lambda: object_summary(self.objects()) if self.objects is not None else None),
        )
        app.router.add_get("/api/series", document(self.series.document))
        return app

    def _allowed_host(self, host: str) -> bool:
        """Whether a request's Host names this console (DNS rebinding: a name that is not)."""
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
        name = name.strip("[]").lower()
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(name)
            return True
        bound = self.address.rpartition(":")[0].strip("[]").lower()
        return name in {"localhost", bound, socket.gethostname().lower(), socket.getfqdn().lower()} - {""}

    @web.middleware
    async def _host_check(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not self._allowed_host(request.host):
            return web.Response(status=403, text=f"the console does not answer for Host {request.host}\n")
        return await handler(request)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, listing the events once a second."""
        host, _, port = self.address.rpartition(":")
        runner = guarded_runner(self.application())
        await runner.setup()
        try:
            await GuardedSite(runner, host or "127.0.0.1", int(port)).start()
            bound = runner.addresses[0]
            shown_host = host if host and host not in ("0.0.0.0", "::") else "127.0.0.1"
            self.url = f"http://{'[' + shown_host + ']' if ':' in shown_host else shown_host}:{bound[1]}/"
            if self.on_serving is not None:
                self.on_serving(self.url)
            while not stop.is_set():
                self.series.sample()
                await self._list_events()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
        finally:
            await runner.cleanup()

    async def _list_events(self) -> None:
        try:
            self._events = (await self.client.list(EVENT, namespace=self.namespace)).items
            self._events_error = None
        except errors.APIError as error:  # shown on the page; the operator keeps running
            self._events_error = str(error)


PAGE = importlib.resources.files("kubeloop.cli").joinpath("console.html").read_text(encoding="utf-8")
