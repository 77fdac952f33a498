"""The Manager: shared informers, controllers, start-up order and graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.cache.informer import Informer
from kubeloop.cache.store import NAMESPACE_INDEX, IndexFunc
from kubeloop.client.rest import Client, KindRef, gvk_of
from kubeloop.controller.controller import Controller
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.manager.leaderelection import LeaderElectionConfig, LeaderElector
from kubeloop.manager.metrics import Metrics
from kubeloop.manager.recorder import EventRecorder

log = logging.getLogger("kubeloop.manager")


class LeaderElectionLost(Exception):
    """This manager was the leader and could not renew its lease: the process must end."""


class Manager:
    def __init__(
        self,
        client: Client,
        *,
        namespace: str | None = None,
        cache_sync_timeout: float = 120.0,
        graceful_shutdown_timeout: float = 30.0,
        sync_period: float | None = 10 * 60 * 60,
        leader_election: LeaderElectionConfig | None = None,
        metrics_bind_address: str | None = None,
        health_probe_bind_address: str | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.cache_sync_timeout = cache_sync_timeout
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.sync_period = sync_period
        self.controllers: dict[str, Controller] = {}
        self._informers: dict[GroupVersionKind, Informer] = {}
        self._started = False
        self._stopping = asyncio.Event()
        self.elector = LeaderElector(client, leader_election) if leader_election is not None else None
        self._election: list[asyncio.Task[None]] = []
        self.lost_leadership = False
        self.metrics = Metrics(self)
        self._recorders: dict[str, EventRecorder] = {}
        self.metrics_bind_address = metrics_bind_address
        self.health_probe_bind_address = health_probe_bind_address
        self._servers: list[web.AppRunner] = []
        #: Where the metrics and health servers listen once started ("host:port").
        self.metrics_address = ""
        self.health_address = ""

    # ------------------------------------------------------------------ parts

    def informer_for(self, kind: KindRef) -> Informer:
        """The shared informer of ``kind`` (created on first use; started with the manager)."""
        gvk = gvk_of(kind)
        informer = self._informers.get(gvk)
        if informer is None:
            informer = Informer(self.client, gvk, namespace=self.namespace, resync_period=self.sync_period)
            self._informers[gvk] = informer
            if self._started:
                informer.start()
        return informer

    def add_index(self, kind: KindRef, name: str, index: IndexFunc) -> None:
        """Index ``kind``'s cached objects by ``index(obj)`` (controller-runtime's IndexField)."""
        self.informer_for(kind).store.add_indexers({name: index})

    def event_recorder(self, component: str) -> EventRecorder:
        """The event recorder of ``component`` (one per name; flushed when the manager stops)."""
        recorder = self._recorders.get(component)
        if recorder is None:
            recorder = self._recorders[component] = EventRecorder(self.client, component)
        return recorder

    def add_controller(self, controller: Controller) -> None:
        if controller.name in self.controllers:
            raise ValueError(f'a controller named "{controller.name}" already exists; names must be unique')
        self.controllers[controller.name] = controller

    def get_cached(self, kind: KindRef, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """An object from the cache (a copy: the cache's own objects are shared), or None."""
        informer = self.informer_for(kind)
        key = f"{namespace}/{name}" if namespace else name
        obj = informer.store.get(key)
        return _copy(obj) if obj is not None else None

    def list_cached(self, kind: KindRef, namespace: str | None = None) -> list[dict[str, Any]]:
        store = self.informer_for(kind).store
        objects = store.by_index(NAMESPACE_INDEX, namespace) if namespace is not None else store.objects()
        return [_copy(obj) for obj in objects]

    @staticmethod
    def copy(obj: dict[str, Any]) -> dict[str, Any]:
        """A deep copy of a cached object (the cache's own objects are shared by all readers)."""
        return _copy(obj)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the HTTP servers, the caches, wait until they are synced, then the controllers."""
        if self.metrics_bind_address:
            self.metrics_address = await self._serve(self.metrics_bind_address, {"/metrics": self._metrics})
        if self.health_probe_bind_address:
            self.health_address = await self._serve(
                self.health_probe_bind_address, {"/healthz": self._healthz, "/readyz": self._readyz}
            )
        self._started = True
        for informer in self._informers.values():
            informer.start()
        for gvk, informer in list(self._informers.items()):
            if not await informer.wait_for_sync(self.cache_sync_timeout):
                raise TimeoutError(f"the cache of {gvk} did not sync within {self.cache_sync_timeout}s")
        if self.elector is None:
            await self._start_controllers()
        else:
            # Caches run on every replica (ready to take over); controllers only on the leader.
            self._election.append(
                asyncio.create_task(
                    self.elector.run(self._start_controllers, self._lost), name="leader election"
                )
            )

    async def _start_controllers(self) -> None:
        for controller in self.controllers.values():
            await controller.start()
        log.info("manager started: %d controllers, %d informers", len(self.controllers), len(self._informers))

    async def _lost(self) -> None:
        self.lost_leadership = True
        self._stopping.set()

    async def stop(self) -> None:
        """Stop in reverse order: leader election, controllers (in-flight reconciles get the grace
        period), then caches."""
        election, self._election = self._election, []
        await cancel_and_wait(election)
        for controller in reversed(list(self.controllers.values())):
            await controller.stop(timeout=self.graceful_shutdown_timeout)
        for recorder in self._recorders.values():
            await recorder.stop()
        for informer in reversed(list(self._informers.values())):
            await informer.stop()
        servers, self._servers = self._servers, []
        for runner in reversed(servers):
            await runner.cleanup()
        self._started = False

    # ------------------------------------------------------------------ HTTP: metrics and probes

    async def _serve(
        self, address: str, routes: dict[str, Callable[[web.Request], Awaitable[web.Response]]]
    ) -> str:
        host, _, port = address.rpartition(":")
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host or "0.0.0.0", int(port))
        await site.start()
        self._servers.append(runner)
        bound = runner.addresses[0]
        return f"{bound[0]}:{bound[1]}"

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        unsynced = [str(gvk) for gvk, informer in self._informers.items() if not informer.has_synced]
        if not self._started or unsynced:
            return web.Response(status=503, text="caches not synced: " + ", ".join(unsynced))
        return web.Response(text="ok")

    def request_stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT (a second one exits at once), then stop gracefully."""
        loop = asyncio.get_running_loop()
        signals = 0

        def on_signal() -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                log.warning("second signal: exiting now")
                os._exit(1)
            log.info("stopping (signal); a second signal exits at once")
            self._stopping.set()

        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
        try:
            await self.start()
            await self._stopping.wait()
        finally:
            await self.stop()
            for sig in installed:
                loop.remove_signal_handler(sig)
        if self.lost_leadership:
            raise LeaderElectionLost(
                f"lost the lease {self.elector.config.lease_name if self.elector else ''}"
            )


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return copied
