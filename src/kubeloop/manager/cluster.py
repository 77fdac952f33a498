"""Another cluster, as one operator sees it (controller-runtime's ``cluster.Cluster``): its own
API client, informer cache, cached client and REST mapper, started and stopped with the manager
it is added to.

An operator that watches one cluster's objects and writes to another adds the first as a
``Cluster`` and watches its cache as a source::

    remote = kubeloop.Cluster(kubeloop.APIClient(load_config(context="edge")))
    manager.add_cluster(remote)
    kubeloop.Builder(manager).named("mirror").watches_raw_source(
        remote.source(kinds.ConfigMap, kubeloop.handler.EnqueueRequestForObject())
    ).complete(reconcile)  # reconcile reads remote.client, writes manager.client

A cluster's cache runs on every replica (as the manager's own does, ready for a new leader), and
is synced before the manager's controllers start.
"""

from __future__ import annotations

from dataclasses import replace
from types import TracebackType
from typing import Self

from kubeloop.cache.cache import Cache
from kubeloop.cache.informer import Informer
from kubeloop.cache.options import CacheOptions
from kubeloop.client.interface import KindRef
from kubeloop.client.rest import APIClient
from kubeloop.client.restmapper import RESTMapper
from kubeloop.controller.handler import EventHandler
from kubeloop.controller.predicate import Predicate
from kubeloop.controller.source import Kind
from kubeloop.manager.cachedclient import CachedClient
from kubeloop.manager.recorder import EventRecorder


class Cluster:
    """A cluster's client, cache and REST mapper (controller-runtime's ``cluster.Cluster``).

    ``client`` is the API client of the cluster (``load_config`` with another kubeconfig or
    context); ``cache`` (:class:`CacheOptions`) and ``namespace`` shape its cache as the
    manager's are shaped. ``name`` names it in errors and in the manager (default: the API
    server's address).
    """

    def __init__(
        self,
        client: APIClient,
        *,
        name: str | None = None,
        namespace: str | None = None,
        cache: CacheOptions | None = None,
        cache_sync_timeout: float = 120.0,
    ) -> None:
        options = cache or CacheOptions()
        if namespace is not None:
            options = replace(options, default_namespaces=[namespace])
        self.name = name or client.config.server
        #: The cluster's informer cache (``GetCache()``).
        self.cache = Cache(client, options, sync_timeout=cache_sync_timeout)
        #: Reads from the cache, writes to the cluster's API server (``GetClient()``).
        self.client = CachedClient(self.cache, client)
        #: Reads (and writes) straight from its API server (``GetAPIReader()``).
        self.api_reader = client
        #: Kinds to resources, from its discovery (``GetRESTMapper()``).
        self.rest_mapper: RESTMapper = client.mapper
        self.cache_sync_timeout = cache_sync_timeout
        self._recorders: dict[str, EventRecorder] = {}
        self._started = False

    def informer_for(self, kind: KindRef, *, metadata_only: bool = False) -> Informer:
        """The shared informer of ``kind`` in this cluster (started with the cluster)."""
        return self.cache.informer_for(kind, metadata_only=metadata_only)

    def source(
        self, kind: KindRef, handler: EventHandler, *predicates: Predicate, only_metadata: bool = False
    ) -> Kind:
        """A source of ``kind``'s events in this cluster, for ``Builder.watches_raw_source``
        (controller-runtime's ``source.Kind(cluster.GetCache(), ...)``)."""
        return Kind(self.informer_for(kind, metadata_only=only_metadata), handler, *predicates)

    def event_recorder(self, component: str) -> EventRecorder:
        """An event recorder writing to this cluster (flushed when the cluster stops)."""
        recorder = self._recorders.get(component)
        if recorder is None:
            recorder = self._recorders[component] = EventRecorder(self.api_reader, component)
        return recorder

    def unsynced(self) -> list[str]:
        """The kinds whose informers have not synced yet, as ``group/version, Kind=...`` text."""
        return [f"{kind} in {self.name}" for kind in self.cache.unsynced()]

    async def start(self) -> None:
        """Start the cache and wait until it has synced (a ``TimeoutError`` naming the kinds
        that have not, after ``cache_sync_timeout``)."""
        self._started = True
        self.cache.start()
        unsynced = await self.cache.wait_for_sync(self.cache_sync_timeout)
        if unsynced:
            kinds = ", ".join(map(str, unsynced))
            raise TimeoutError(
                f"the cache of {kinds} in {self.name} did not sync within {self.cache_sync_timeout}s"
            )

    async def stop(self) -> None:
        """Write the events still pending, then stop the cache."""
        for recorder in self._recorders.values():
            await recorder.stop()
        await self.cache.stop()
        self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.stop()
