"""Prometheus metrics with controller-runtime's names, so existing dashboards work.

Everything is kept in plain Python numbers on the hot path and turned into Prometheus families
only at scrape time, by the collectors of ``metricscollectors``: counters and gauges the
controllers and queues keep anyway (reconcile results, errors, active workers, queue depth,
leadership), and ``LocalHistogram``s — a bucket index found by bisection and two additions per
observation — for the reconcile time, queue wait and work time. ``prometheus_client``'s own Counter/Histogram take a lock per update,
which would multiply the cost of a queue's add+get+done (benchmark B1).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from kubeloop.histogram import LocalHistogram

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubeloop.client.rest import APIClient
    from kubeloop.controller.controller import Controller
    from kubeloop.manager.leaderelection import LeaderElector

_QUEUE_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0)  # client-go's 10ns … 10s
_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
                      0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
                      20, 25, 30, 40, 50, 60)  # fmt: skip


class QueuePrometheusMetrics:
    """A ``QueueMetrics`` reporting one controller's queue (labels name and controller)."""

    __slots__ = ("adds", "name", "queue_duration", "retries", "work_duration")

    def __init__(self, name: str) -> None:
        self.name = name
        self.adds = 0
        self.retries = 0
        self.queue_duration = LocalHistogram(_QUEUE_BUCKETS)
        self.work_duration = LocalHistogram(_QUEUE_BUCKETS)

    def added(self) -> None:
        """An item was added (workqueue_adds_total)."""
        self.adds += 1

    # The two observations below inline LocalHistogram.observe: they run for every item.

    def handed_out(self, waited: float) -> None:
        """An item left the queue after ``waited`` seconds (workqueue_queue_duration_seconds)."""
        histogram = self.queue_duration
        histogram.counts[bisect_left(histogram.bounds, waited)] += 1
        histogram.total += waited

    def finished(self, worked: float) -> None:
        """An item's work took ``worked`` seconds (workqueue_work_duration_seconds)."""
        histogram = self.work_duration
        histogram.counts[bisect_left(histogram.bounds, worked)] += 1
        histogram.total += worked

    def retried(self) -> None:
        """An item was added again after a back-off (workqueue_retries_total)."""
        self.retries += 1


class Metrics:
    """A manager's metrics: what its ``controllers`` (read at each scrape), its ``elector`` and
    its ``client`` count, and the queues' and reconciles' durations they report here."""

    def __init__(
        self, controllers: Mapping[str, Controller], elector: LeaderElector | None, client: APIClient
    ) -> None:
        self.controllers = controllers
        self.elector = elector
        self.client = client
        self.queues: dict[str, QueuePrometheusMetrics] = {}
        self.reconcile_times: dict[str, LocalHistogram] = {}

    @cached_property
    def registry(self) -> CollectorRegistry:
        """The Prometheus registry ``/metrics`` serves, where an operator registers its own
        collectors too. Made on first use: a manager that serves no metrics loads no Prometheus
        client (~4 MiB)."""
        from kubeloop.manager.metricscollectors import registry_of

        return registry_of(self)

    def queue_metrics(self, controller: str) -> QueuePrometheusMetrics:
        """The work-queue metrics of ``controller`` (made on first use)."""
        metrics = self.queues.get(controller)
        if metrics is None:
            metrics = self.queues[controller] = QueuePrometheusMetrics(controller)
        return metrics

    def reconcile_observer(self, controller: str) -> LocalHistogram:
        """The reconcile-time histogram of ``controller`` (controller_runtime_reconcile_time_seconds)."""
        histogram = self.reconcile_times.get(controller)
        if histogram is None:
            histogram = self.reconcile_times[controller] = LocalHistogram(_RECONCILE_BUCKETS)
        return histogram
