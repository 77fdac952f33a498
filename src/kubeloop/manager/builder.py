"""The builder: a controller wired to its watches in one expression (controller-runtime's
``builder``)::

    Builder(manager).for_(REPLICASET).owns(POD).complete(reconcile)

``for_`` enqueues the object itself, ``owns`` the controller owner of the owned object,
``watches`` any handler, ``watches_raw_source`` any source (a ``Channel`` of events from outside
the cluster); ``only_metadata=True`` on ``for_``/``owns``/``watches`` watches through a
metadata-only informer (controller-runtime's ``builder.OnlyMetadata``: handlers and predicates see
``apiVersion``, ``kind`` and ``metadata`` only). ``with_event_filter`` adds a predicate to every
watch; the name defaults to the lower-cased kind of ``for_`` and must be unique in the manager.
"""

from __future__ import annotations

from typing import Self

from kubeloop.cache.informer import Informer
from kubeloop.client.interface import KindRef, gvk_of
from kubeloop.controller.controller import Controller, Source
from kubeloop.controller.handler import EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler
from kubeloop.controller.predicate import Predicate
from kubeloop.controller.reconcile import ReconcileFunc
from kubeloop.controller.source import Kind
from kubeloop.manager.manager import Manager
from kubeloop.manager.permissions import READ, WRITE
from kubeloop.workqueue.ratelimiter import RateLimiter


class Builder:
    """A controller and its watches, in one expression (controller-runtime's ``builder``).

    For example, a controller of ConfigMaps that owns Deployments::

        kubeloop.Builder(manager).for_(kinds.ConfigMap).owns(kinds.Deployment).complete(reconcile)
    """

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self._for: tuple[KindRef, tuple[Predicate, ...], bool] | None = None
        self._watches: list[tuple[KindRef, EventHandler | None, tuple[Predicate, ...], bool]] = []
        self._raw_sources: list[Source] = []
        self._filters: list[Predicate] = []
        self._name: str | None = None
        self._max_concurrent = 1
        self._rate_limiter: RateLimiter | None = None
        self._timeout: float | None = None
        self._need_leader_election = True
        self._priority: bool | None = None  # the manager's default
        manager.incomplete_builders[id(self)] = "a controller"

    def _describe(self, kind: KindRef) -> None:
        self.manager.incomplete_builders[id(self)] = gvk_of(kind).kind

    def for_(self, kind: KindRef, *predicates: Predicate, only_metadata: bool = False) -> Self:
        """The kind the controller reconciles: each of its events enqueues the object itself.

        ``predicates`` filter the events of this watch; ``only_metadata`` watches through a
        metadata-only informer (handlers and predicates see apiVersion, kind and metadata).
        """
        if self._for is not None:
            raise ValueError("for_ may be called only once")
        self._describe(kind)
        self._for = (kind, predicates, only_metadata)
        return self

    def owns(self, kind: KindRef, *predicates: Predicate, only_metadata: bool = False) -> Self:
        """A kind the controller creates: its events enqueue the ``for_`` object that is its
        controller owner (``set_controller_reference``)."""
        # The owner handler needs for_'s kind: it is built in complete().
        gvk_of(kind)  # a kind that names nothing is refused here, where it was written
        self._watches.append((kind, None, predicates, only_metadata))
        return self

    def watches(
        self, kind: KindRef, handler: EventHandler, *predicates: Predicate, only_metadata: bool = False
    ) -> Self:
        """Any other kind, mapped to requests by ``handler`` (e.g.
        ``handler.EnqueueRequestsFromMapFunc``)."""
        gvk_of(kind)
        self._watches.append((kind, handler, predicates, only_metadata))
        return self

    def watches_raw_source(self, source: Source) -> Self:
        """Watch a source as it is (``with_event_filter`` predicates do not apply to it)."""
        self._raw_sources.append(source)
        return self

    def with_event_filter(self, predicate: Predicate) -> Self:
        """A predicate applied to every watch of the controller (not to raw sources)."""
        self._filters.append(predicate)
        return self

    def named(self, name: str) -> Self:
        """The controller's name (default: the lower-cased kind of ``for_``), unique in the
        manager; it labels the controller's metrics and logs."""
        self._name = name
        return self

    def with_options(
        self,
        *,
        max_concurrent_reconciles: int | None = None,
        rate_limiter: RateLimiter | None = None,
        reconcile_timeout: float | None = None,
        use_priority_queue: bool | None = None,
        need_leader_election: bool | None = None,
    ) -> Self:
        """How the controller works: ``max_concurrent_reconciles`` workers (default 1), the
        back-off ``rate_limiter`` (default, as controller-runtime's: per-item exponential
        5 ms → 1000 s, with an overall 10 qps bucket only without the priority queue), a
        ``reconcile_timeout`` in seconds (default none; a reconcile past it is cancelled, or
        told through its blocking client if it runs in a thread, and its key is requeued only
        once it has returned), ``use_priority_queue`` (default the manager's, True: initial
        lists and resyncs wait behind live changes; False: a plain FIFO), and whether
        it runs only on the elected leader (``need_leader_election``, default True; False runs
        it on every replica, for work that is safe to do twice or is each replica's own)."""
        if need_leader_election is not None:
            self._need_leader_election = need_leader_election
        if use_priority_queue is not None:
            self._priority = use_priority_queue
        if max_concurrent_reconciles is not None:
            self._max_concurrent = max_concurrent_reconciles
        if rate_limiter is not None:
            self._rate_limiter = rate_limiter
        if reconcile_timeout is not None:
            self._timeout = reconcile_timeout
        return self

    def complete(self, reconcile: ReconcileFunc) -> Controller:
        """Build the controller with ``reconcile`` and add it to the manager.

        ``reconcile(request)`` is an async function, or a plain one (run in a thread); it returns
        None or a :class:`~kubeloop.Result`, and an exception requeues the request with back-off
        (a :class:`~kubeloop.TerminalError` does not).
        """
        if self._for is None:
            # controller-runtime's rule: without For, a name and something to watch.
            if self._name is None:
                raise ValueError(
                    "for_ must name the kind the controller reconciles (or named() a controller of sources)"
                )
            if any(handler is None for _, handler, _, _ in self._watches):
                raise ValueError("owns needs for_: it maps an owned object to its owner of the for_ kind")
            if not self._watches and not self._raw_sources:
                raise ValueError(
                    f"controller {self._name} watches nothing: give it for_, watches or a raw source"
                )
        if self._name is not None:
            name = self._name
        else:
            assert self._for is not None
            name = gvk_of(self._for[0]).kind.lower()
        controller = Controller(
            name,
            reconcile,
            max_concurrent_reconciles=self._max_concurrent,
            rate_limiter=self._rate_limiter,
            reconcile_timeout=self._timeout,
            queue_metrics=self.manager.metrics.queue_metrics(name),
            on_reconciled=self.manager.metrics.reconcile_observer(name),
            use_priority_queue=self.manager.use_priority_queue if self._priority is None else self._priority,
            reconcile_logger=self.manager.reconcile_logger,
            need_leader_election=self._need_leader_election,
        )
        self.manager.add_controller(controller)
        for_informer = None
        if self._for is not None:
            for_kind, for_predicates, for_metadata_only = self._for
            self.manager.permissions.reconciles(for_kind)
            for_informer = self.manager.informer_for(for_kind, metadata_only=for_metadata_only)
            controller.watch(Kind(for_informer, EnqueueRequestForObject(), *self._filters, *for_predicates))
        for kind, handler, predicates, metadata_only in self._watches:
            self.manager.permissions.allow(kind, *READ)
            if handler is None:  # owns: checked above that there is a for_ kind
                self.manager.permissions.allow(kind, *WRITE)
                assert self._for is not None and for_informer is not None
                handler = _owner_handler(self._for[0], for_informer)
            chosen = handler
            informer = self.manager.informer_for(kind, metadata_only=metadata_only)
            controller.watch(Kind(informer, chosen, *self._filters, *predicates))
        for source in self._raw_sources:
            controller.watch(source)
        self.manager.incomplete_builders.pop(id(self), None)
        return controller


def _owner_handler(owner: KindRef, informer: Informer) -> EventHandler:
    """Owned objects map to their controller of the ``owner`` kind (its scope: the informer's)."""
    return EnqueueRequestForOwner(gvk_of(owner), owner_namespaced=lambda: informer.namespaced)
