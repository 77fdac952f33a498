"""Prometheus metrics with controller-runtime's names, so existing dashboards work.

Counters and gauges that the controllers and queues already keep (reconcile results, errors,
active workers, queue depth, leadership) are read at scrape time by a collector; durations are
observed into histograms as they happen (reconcile time, queue wait, work time).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from kubeloop.controller.controller import Controller
    from kubeloop.manager.manager import Manager

_QUEUE_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0)  # client-go's 10ns … 10s
_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
                      0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
                      20, 25, 30, 40, 50, 60)  # fmt: skip


class QueuePrometheusMetrics:
    """A ``QueueMetrics`` reporting one controller's queue (labels name and controller)."""

    def __init__(self, metrics: Metrics, name: str) -> None:
        self._adds = metrics.adds.labels(name=name, controller=name)
        self._retries = metrics.retries.labels(name=name, controller=name)
        self._wait = metrics.queue_duration.labels(name=name, controller=name)
        self._work = metrics.work_duration.labels(name=name, controller=name)

    def added(self, depth: int) -> None:
        self._adds.inc()

    def handed_out(self, waited: float, depth: int) -> None:
        self._wait.observe(waited)

    def finished(self, worked: float) -> None:
        self._work.observe(worked)

    def retried(self) -> None:
        self._retries.inc()


class Metrics:
    def __init__(self, manager: Manager) -> None:
        self.registry = CollectorRegistry()
        labels = ["name", "controller"]
        self.adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            labels,
            registry=self.registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            labels,
            registry=self.registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested",
            labels, buckets=_QUEUE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes",
            labels, buckets=_QUEUE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
            ["controller"], buckets=_RECONCILE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.registry.register(_StateCollector(manager))

    def queue_metrics(self, controller: str) -> QueuePrometheusMetrics:
        return QueuePrometheusMetrics(self, controller)

    def reconcile_observer(self, controller: str) -> _Observer:
        return _Observer(self.reconcile_time.labels(controller=controller))


class _Observer:
    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram

    def __call__(self, seconds: float) -> None:
        self._histogram.observe(seconds)


class _StateCollector(Collector):
    """Counters and gauges read from the controllers, queues and elector at scrape time."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        controllers: list[Controller] = list(self.manager.controllers.values())
        total = CounterMetricFamily(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            labels=["controller", "result"],
        )
        errors = CounterMetricFamily(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            labels=["controller"],
        )
        terminal = CounterMetricFamily(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            labels=["controller"],
        )
        panics = CounterMetricFamily(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            labels=["controller"],
        )
        workers = GaugeMetricFamily(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            labels=["controller"],
        )
        maximum = GaugeMetricFamily(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            labels=["controller"],
        )
        depth = GaugeMetricFamily(
            "workqueue_depth", "Current depth of workqueue", labels=["name", "controller"]
        )
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress",
            labels=["name", "controller"],
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor been running",
            labels=["name", "controller"],
        )
        now = time.perf_counter()
        for c in controllers:
            for result in ("success", "error", "requeue", "requeue_after"):
                total.add_metric([c.name, result], c.results[result])
            errors.add_metric([c.name], c.results["error"] - c.terminal_errors)
            terminal.add_metric([c.name], c.terminal_errors)
            panics.add_metric([c.name], c.exceptions)
            workers.add_metric([c.name], c.active_workers)
            maximum.add_metric([c.name], c.max_concurrent_reconciles)
            depth.add_metric([c.name, c.name], len(c.queue))
            running = [now - since for since in c.queue.processing_since()]
            unfinished.add_metric([c.name, c.name], sum(running))
            longest.add_metric([c.name, c.name], max(running, default=0.0))
        yield from (total, errors, terminal, panics, workers, maximum, depth, unfinished, longest)
        leader = GaugeMetricFamily(
            "leader_election_master_status",
            "Whether this process is the leader (1) or not (0)",
            labels=["name"],
        )
        elector = self.manager.elector
        if elector is not None:
            leader.add_metric([elector.config.lease_name], 1.0 if elector.is_leader else 0.0)
        yield leader
