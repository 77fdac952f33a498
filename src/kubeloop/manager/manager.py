"""The Manager: the cache, controllers, runnables, start-up order and graceful shutdown.

Start order (upstream's): the metrics and health servers, the webhook server (when webhooks are
registered: a conversion webhook must answer before a cache of its kind can sync), the caches (waited for until
synced), runnables that need no leader election, then — at once, or once this replica holds the
lease — the controllers and the runnables that need it. Stop goes in reverse, each part with the
graceful-shutdown timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import signal
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Self

from kubeloop.api.crdgen import custom_resources_in
from kubeloop.api.model import KubeObject
from kubeloop.cache.cache import Cache
from kubeloop.cache.informer import Informer
from kubeloop.cache.options import CacheOptions
from kubeloop.cache.store import IndexFunc
from kubeloop.client.interface import KindRef, model_class
from kubeloop.client.rest import APIClient
from kubeloop.client.sync import BlockingClient
from kubeloop.controller.controller import Controller
from kubeloop.controller.reconcilelog import RECONCILE_LOG
from kubeloop.lifecycle import cancel_and_wait, start_or_stop
from kubeloop.manager.cachedclient import CachedClient
from kubeloop.manager.cluster import Cluster
from kubeloop.manager.eventsrecorder import EventsV1Recorder
from kubeloop.manager.healthz import Check, Checks
from kubeloop.manager.leaderelection import LeaderElectionConfig, LeaderElector, LeaderFence
from kubeloop.manager.metrics import Metrics
from kubeloop.manager.metricsserver import MetricsServerOptions
from kubeloop.manager.permissions import EVENTS, LEASE, READ, Permissions
from kubeloop.manager.recorder import EventRecorder
from kubeloop.manager.runnable import Runnable, RunnableGroup

if TYPE_CHECKING:
    from aiohttp import web

    from kubeloop.webhook.server import WebhookServer

log = logging.getLogger("kubeloop.manager")


class LeaderElectionLost(Exception):
    """This manager was the leader and could not renew its lease: the process must end."""


class RunnableFailed(Exception):
    """A runnable added to the manager raised: the manager stopped."""


class IncompleteBuilder(Exception):
    """A Builder of the manager's was never completed."""


class Manager:
    """What the controllers of a process share (controller-runtime's ``manager.Manager``).

    ``client`` is the API client of the cluster; ``namespace`` limits the cache to one namespace
    (a shorthand for ``cache=CacheOptions(default_namespaces=[namespace])``). ``leader_election``
    runs the controllers only while this replica holds a Lease, through ``leader_election_client``
    when the Lease lives elsewhere (another cluster, another account). ``metrics_bind_address`` and
    ``health_probe_bind_address`` ("host:port", ":0" for a free port) serve ``/metrics`` and
    ``/healthz``, ``/readyz``; ``metrics`` (:class:`MetricsServerOptions`) serves ``/metrics``
    over HTTPS, its callers authenticated and authorized by the API server
    (``with_authentication_and_authorization``), as kubebuilder v4 deploys it. ``webhook_server`` serves the webhooks ``WebhookBuilder`` registers
    (default: ``WebhookServer()``, port 9443 with a development certificate); it starts only when
    a webhook is registered, and then ``/readyz`` includes ``webhook``. ``logger`` takes the manager's own messages (default:
    ``kubeloop.manager``), ``reconcile_logger`` its controllers' line per reconcile (default
    ``kubeloop.reconcile``). ``use_priority_queue`` (default True, as controller-runtime since
    v0.23) gives every controller the priority queue unless its builder says otherwise: after a
    restart or a leader change, the initial list's objects wait behind live changes. ``run()``
    serves until a signal; in tests, ``async with manager:`` starts it and stops it at the end of
    the block.
    """

    def __init__(
        self,
        client: APIClient,
        *,
        namespace: str | None = None,
        cache: CacheOptions | None = None,
        cache_sync_timeout: float = 120.0,
        graceful_shutdown_timeout: float = 30.0,
        leader_election: LeaderElectionConfig | None = None,
        leader_election_client: APIClient | None = None,
        metrics_bind_address: str | None = None,
        metrics: MetricsServerOptions | None = None,
        health_probe_bind_address: str | None = None,
        webhook_server: WebhookServer | None = None,
        logger: logging.Logger | None = None,
        reconcile_logger: logging.Logger | None = None,
        use_priority_queue: bool = True,
    ) -> None:
        options = cache or CacheOptions()
        #: Whether controllers queue requests in the priority queue unless their builder says
        #: otherwise (controller-runtime's ``Controller.UsePriorityQueue``, on by default).
        self.use_priority_queue = use_priority_queue
        #: Where the manager's own messages go (controller-runtime's ``Options.Logger``).
        self.log = logger or log
        #: Where its controllers log a line per reconcile (default ``kubeloop.reconcile``).
        self.reconcile_logger = reconcile_logger or RECONCILE_LOG
        if namespace is not None:
            options = replace(options, default_namespaces=[namespace])
        #: The shared informer cache (controller-runtime's ``GetCache()``).
        self.cache = Cache(client, options, sync_timeout=cache_sync_timeout)
        #: What reconcilers read (from the cache) and write (to the server) through
        #: (controller-runtime's ``GetClient()``).
        self.client: CachedClient = CachedClient(self.cache, client)
        #: Reads (and writes) straight from the API server (``GetAPIReader()``).
        self.api_reader: APIClient = client
        #: ``client`` for sync reconcilers (they run in a thread): each call runs on the manager's
        #: event loop, bound when the manager starts.
        self.blocking_client = BlockingClient(self.client, None)
        self.cache_sync_timeout = cache_sync_timeout
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.controllers: dict[str, Controller] = {}
        #: Other clusters the operator watches or writes (``add_cluster``), by name.
        self.clusters: dict[str, Cluster] = {}
        #: What the operator needs RBAC to allow (``kubeloop rbac`` prints it as a ClusterRole).
        self.permissions = Permissions()
        #: The custom resource models the operator's setup watches, owns or admits (``uses``).
        self.custom_resources: list[type[KubeObject]] = []
        if leader_election is not None:
            self.permissions.allow(LEASE, "get", "create", "update")
        self._started = False
        self._stopping = asyncio.Event()
        self._cancel_reconciles = False
        # The Lease may live elsewhere (controller-runtime's LeaderElectionConfig: another
        # cluster's, or another account's client); by default the manager's own.
        election_client = leader_election_client or client
        self.elector = LeaderElector(election_client, leader_election) if leader_election is not None else None
        #: Shuts the leader's writes and reconciles the moment its lease may have passed on.
        self.fence = LeaderFence(self.elector) if self.elector is not None else None
        self._election: list[asyncio.Task[None]] = []
        self.lost_leadership = False
        self.metrics = Metrics(self.controllers, self.elector, self.api_reader)
        self._recorders: dict[str, EventRecorder] = {}
        self._events_v1_recorders: dict[str, EventsV1Recorder] = {}
        if metrics is not None and metrics_bind_address is not None:
            raise ValueError("give metrics_bind_address or metrics (MetricsServerOptions), not both")
        #: How ``/metrics`` is served (``metrics_bind_address`` is a shorthand for its address).
        self.metrics_options = metrics or MetricsServerOptions(bind_address=metrics_bind_address or "0")
        for group, resource, verb in getattr(self.metrics_options.filter_provider, "permissions", ()):
            self.permissions.allow_resource(group, resource, verb)
        #: Tasks the servers own (a certificate's reloads), cancelled when they stop.
        self._server_tasks: list[asyncio.Task[None]] = []
        self.health_probe_bind_address = health_probe_bind_address
        self._servers: list[web.AppRunner] = []
        #: Where the metrics and health servers listen once started ("host:port").
        self.metrics_address = ""
        self.health_address = ""
        self.healthz = Checks("healthz")
        self.readyz = Checks("readyz")
        self.healthz.add("ping", lambda: None)
        self.readyz.add("caches", self._caches_synced)
        self._runnables = RunnableGroup(self._runnable_failed)
        self._leader_runnables = RunnableGroup(self._runnable_failed, fence=self.fence)
        self._failure: tuple[str, BaseException] | None = None
        self._webhook_server = webhook_server
        self._webhook_metrics = False
        #: Builders made for this manager and not completed yet (by what they were for).
        self.incomplete_builders: dict[int, str] = {}

    # ------------------------------------------------------------------ parts

    @property
    def webhook_server(self) -> WebhookServer:
        """The server of the operator's webhooks (controller-runtime's ``GetWebhookServer()``)."""
        if self._webhook_server is None:
            from kubeloop.webhook.server import WebhookServer  # loaded when an operator has webhooks

            self._webhook_server = WebhookServer()
        return self._webhook_server

    def informer_for(self, kind: KindRef, *, metadata_only: bool = False) -> Informer:
        """The shared informer of ``kind`` (created on first use; started with the manager)."""
        self.uses(kind)
        return self.cache.informer_for(kind, metadata_only=metadata_only)

    def uses(self, kind: KindRef) -> None:
        """Note that the operator uses ``kind``: a custom resource model among them joins
        ``custom_resources`` (what ``kubeloop run --install-crds`` and the test kit install).
        Builders and informers call it; call it for a kind only a reconciler touches."""
        for model in custom_resources_in([model_class(kind)]):
            if model not in self.custom_resources:
                self.custom_resources.append(model)

    def add_index(self, kind: KindRef, field: str, index: IndexFunc) -> None:
        """Index ``kind``'s cached objects by ``index(obj)`` under ``field`` (IndexField)."""
        self.permissions.allow(kind, *READ)
        self.cache.add_index(kind, field, index)

    def event_recorder(self, component: str, *, host: str = "") -> EventRecorder:
        """The event recorder of ``component`` (one per name and ``host``, the machine it says
        it runs on, as a kubelet names its node; flushed when the manager stops)."""
        name = f"{component} on {host}" if host else component
        recorder = self._recorders.get(name)
        if recorder is None:
            self.permissions.allow(EVENTS[0], "create", "patch")
            recorder = self._recorders[name] = EventRecorder(self.api_reader, component, instance=host)
        return recorder

    def events_v1_recorder(self, name: str) -> EventsV1Recorder:
        """The ``events.k8s.io/v1`` recorder whose ``reportingController`` is ``name``
        (controller-runtime's ``GetEventRecorder``; one per name; stopped with the manager,
        writing what is pending). ``event_recorder`` writes core/v1 Events instead."""
        recorder = self._events_v1_recorders.get(name)
        if recorder is None:
            self.permissions.allow(EVENTS[1], "create", "patch")
            recorder = self._events_v1_recorders[name] = EventsV1Recorder(self.api_reader, name)
        return recorder

    def busy(self) -> list[str]:
        """What the manager has left to do now, one phrase each (empty: idle): caches not yet
        synced, controllers' queued requests and running reconciles, events not yet written.
        ``kubeloop.testing.settled`` waits for this to be empty and the caches to be current."""
        reasons = [f"cache of {kind} not synced" for kind in self.cache.unsynced()]
        for cluster in self.clusters.values():
            reasons.extend(f"cache of {kind} not synced" for kind in cluster.unsynced())
        for controller in self.controllers.values():
            reasons.extend(controller.busy())
        pending = [(name, recorder.pending) for name, recorder in self._recorders.items()]
        pending += [(f"{name} (events.k8s.io)", r.pending) for name, r in self._events_v1_recorders.items()]
        reasons.extend(f"event recorder {name}: {count} events to write" for name, count in pending if count)
        return reasons

    def add_cluster(self, cluster: Cluster) -> None:
        """Run ``cluster`` (another cluster's client and cache) with the manager, as
        controller-runtime's ``mgr.Add(cluster)``: its cache starts with the manager's, on every
        replica, and has synced before any controller starts; it stops with the manager's."""
        if cluster.name in self.clusters:
            raise ValueError(f"a cluster named {cluster.name} is added already")
        if self._started:
            raise RuntimeError(f"add the cluster {cluster.name} before the manager starts")
        self.clusters[cluster.name] = cluster

    def add(self, runnable: Runnable, *, name: str | None = None, need_leader_election: bool = True) -> None:
        """Run ``runnable(stop)`` with the manager; it should return once ``stop`` is set.

        With ``need_leader_election`` (the default, as for controllers) it runs only while this
        replica leads; without, on every replica as soon as the caches have synced.
        """
        label = name or str(getattr(runnable, "__qualname__", None) or repr(runnable))
        group = (
            self._leader_runnables if need_leader_election and self.elector is not None else self._runnables
        )
        group.add(label, runnable)

    def add_healthz_check(self, name: str, check: Check) -> None:
        """A liveness check served on /healthz (returns when healthy, raises when not)."""
        self.healthz.add(name, check)

    def add_readyz_check(self, name: str, check: Check) -> None:
        """A readiness check served on /readyz (``caches`` — all synced — is built in)."""
        self.readyz.add(name, check)

    def add_controller(self, controller: Controller) -> None:
        """Run ``controller`` with the manager (``Builder.complete`` calls this)."""
        if controller.name in self.controllers:
            raise ValueError(f'a controller named "{controller.name}" already exists; names must be unique')
        # Only a controller that runs for the leader is held back when the lease may have passed.
        controller.fence = self.fence if controller.need_leader_election else None
        self.controllers[controller.name] = controller

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the HTTP servers, the caches, wait until they are synced, then the controllers.

        A Builder made for the manager and never completed is a mistake: its controller would
        silently not exist. Start refuses with :class:`IncompleteBuilder`."""
        if self.incomplete_builders:
            described = ", ".join(sorted(self.incomplete_builders.values()))
            raise IncompleteBuilder(
                f"the Builder for {described} was never completed: end it with .complete(reconcile)"
            )
        if self.metrics_options.serves:
            self.metrics_address = await self._serve_metrics(self.metrics_options)
        if self.health_probe_bind_address:
            self.health_address = await self._serve(
                self.health_probe_bind_address,
                {
                    "/healthz": self.healthz.handle,
                    "/healthz/{name}": self.healthz.handle,
                    "/readyz": self.readyz.handle,
                    "/readyz/{name}": self.readyz.handle,
                },
            )
        webhooks = self._webhook_server
        if webhooks is not None and webhooks.webhooks and not webhooks.started:
            await webhooks.start()
            if not self._webhook_metrics:
                self.metrics.registry.register(webhooks.metrics)
                self.readyz.add("webhook", webhooks.started_check())
                self._webhook_metrics = True
        self._started = True
        self.blocking_client.loop = asyncio.get_running_loop()
        self.cache.start()
        unsynced = await self.cache.wait_for_sync(self.cache_sync_timeout)
        if unsynced:
            kinds = ", ".join(map(str, unsynced))
            raise TimeoutError(f"the cache of {kinds} did not sync within {self.cache_sync_timeout}s")
        for cluster in self.clusters.values():
            await cluster.start()
        self._runnables.start()
        if self.elector is None:
            await self._start_controllers()
        else:
            # Caches run on every replica (ready to take over), and the controllers that do not
            # need the lease; the others only on the leader.
            for controller in self.controllers.values():
                if not controller.need_leader_election:
                    await controller.start()
            self._election.append(
                asyncio.create_task(
                    self.elector.run(self._start_controllers, self._lost), name="leader election"
                )
            )

    async def _start_controllers(self) -> None:
        for controller in self.controllers.values():
            if controller.need_leader_election or self.elector is None:
                await controller.start()
        self._leader_runnables.start()
        self.log.info(
            "manager started: %d controllers, %d informers", len(self.controllers), len(self.cache.informers)
        )

    async def _lost(self) -> None:
        self.lost_leadership = True
        self._stopping.set()

    def _runnable_failed(self, name: str, error: BaseException) -> None:
        if self._failure is None:
            self._failure = (name, error)
        self._stopping.set()

    async def stop(self, *, cancel_reconciles: bool = False) -> None:
        """Stop in reverse order: leader election, the leader's runnables and controllers
        (in-flight reconciles get the grace period, or are cancelled with ``cancel_reconciles``:
        they are idempotent, and reconcile again once the operator is back), the lease released
        with ``release_on_cancel``, the other runnables, then caches."""
        election, self._election = self._election, []
        await cancel_and_wait(election)
        await self._leader_runnables.stop(self.graceful_shutdown_timeout)
        grace = 0.0 if cancel_reconciles or self._cancel_reconciles else self.graceful_shutdown_timeout
        for controller in reversed(list(self.controllers.values())):
            await controller.stop(timeout=grace)
        if self.elector is not None and self.elector.config.release_on_cancel and not self.lost_leadership:
            await self.elector.release()  # nothing of the leader's runs any more: the next may lead
        await self._runnables.stop(self.graceful_shutdown_timeout)
        for recorder in self._recorders.values():
            await recorder.stop()
        for events_recorder in self._events_v1_recorders.values():
            await events_recorder.stop()
        for cluster in reversed(list(self.clusters.values())):
            await cluster.stop()
        await self.cache.stop()
        if self._webhook_server is not None:
            await self._webhook_server.stop()
        tasks, self._server_tasks = self._server_tasks, []
        await cancel_and_wait(tasks)
        servers, self._servers = self._servers, []
        for runner in reversed(servers):
            await runner.cleanup()
        self._started = False

    async def __aenter__(self) -> Self:
        """Start the manager (as ``start()``); the end of the ``async with`` block stops it."""
        await start_or_stop(self.start, self.stop)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ HTTP: metrics and probes

    async def _serve_metrics(self, options: MetricsServerOptions) -> str:
        """Serve ``/metrics`` as ``options`` say: HTTPS with a reloaded or a made certificate,
        each request judged by the filter first."""
        context = None
        if options.secure_serving:
            from kubeloop import certs
            from kubeloop.webhook.certwatcher import CertWatcher

            if options.cert_dir is not None:
                folder = pathlib.Path(options.cert_dir)
                watcher = CertWatcher(folder / options.cert_name, folder / options.key_name)
                context = watcher.context
                # Reloads until stop() cancels it.
                reloads = watcher.run(asyncio.Event())
                self._server_tasks.append(asyncio.create_task(reloads, name="metrics certificate"))
            else:  # made for this process, as controller-runtime's self-signed one
                issued = certs.issue_serving_certificate(certs.DEFAULT_HOSTS)
                context = certs.serving_context()
                certs.load_pair(context, issued.cert_pem, issued.key_pem)
        routes = {"/metrics": self._metrics, **options.extra_handlers}
        if options.filter_provider is not None:
            judge = options.filter_provider(self.api_reader)
            routes = {path: _judged_by(judge, handler) for path, handler in routes.items()}
        return await self._serve(options.bind_address, routes, ssl_context=context)

    async def _serve(
        self,
        address: str,
        routes: dict[str, Callable[[web.Request], Awaitable[web.Response]]],
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> str:
        from aiohttp import web  # only a manager that serves metrics or probes loads aiohttp

        from kubeloop.httpguard import GuardedSite, guarded_runner

        host, _, port = address.rpartition(":")
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        runner = guarded_runner(app)
        await runner.setup()
        site = GuardedSite(runner, host or "0.0.0.0", int(port), ssl_context=ssl_context)
        await site.start()
        self._servers.append(runner)
        bound = runner.addresses[0]
        return f"{bound[0]}:{bound[1]}"

    async def _metrics(self, request: web.Request) -> web.Response:
        from aiohttp import web
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _caches_synced(self) -> None:
        unsynced = self.cache.unsynced()
        for cluster in self.clusters.values():
            unsynced.extend(cluster.unsynced())
        if not self._started or unsynced:
            raise RuntimeError("caches not synced: " + ", ".join(unsynced))

    def request_stop(self, *, cancel_reconciles: bool = False) -> None:
        """Make ``run()`` stop gracefully, as a signal would; with ``cancel_reconciles``, the
        reconciles in flight are cancelled rather than waited for (``kubeloop run --reload``
        does so on a code change)."""
        self._cancel_reconciles = self._cancel_reconciles or cancel_reconciles
        self._stopping.set()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Start, serve until SIGTERM/SIGINT (a second one exits at once), then stop gracefully.
        Without ``handle_signals`` the caller owns the signals and calls ``request_stop``."""
        loop = asyncio.get_running_loop()
        signals = 0

        def on_signal() -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                self.log.warning("second signal: exiting now")
                os._exit(1)
            self.log.info("stopping (signal); a second signal exits at once")
            self._stopping.set()

        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT) if handle_signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
        starting = asyncio.create_task(self.start(), name="manager start")
        stopping = asyncio.create_task(self._stopping.wait(), name="manager stop requested")
        try:
            # A signal while the caches sync (a kind the server lacks never does) stops at once.
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if starting.done():
                starting.result()  # start's own failure
                await stopping
        finally:
            try:
                await cancel_and_wait([starting, stopping])
            finally:
                await self.stop()
                for sig in installed:
                    loop.remove_signal_handler(sig)
        if self.lost_leadership:
            raise LeaderElectionLost(
                f"lost the lease {self.elector.config.lease_name if self.elector else ''}"
            )
        if self._failure is not None:
            name, error = self._failure
            raise RunnableFailed(f"runnable {name} failed: {error}") from error


def _judged_by(
    judge: Callable[[web.Request], Awaitable[web.Response | None]],
    handler: Callable[[web.Request], Awaitable[web.Response]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``handler``, each request judged first (its refusal answered instead)."""

    async def judged(request: web.Request) -> web.Response:
        refused = await judge(request)
        return refused if refused is not None else await handler(request)

    return judged
