"""The manager's metrics as Prometheus families, made at scrape time from the plain numbers the
controllers, queues and elector keep (``metrics.Metrics``); loaded when a registry is first
asked for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kubeloop.webhook.processcounts import process_counts

if TYPE_CHECKING:
    from kubeloop.manager.metrics import Metrics


def registry_of(metrics: Metrics) -> CollectorRegistry:
    """A registry whose collectors read ``metrics`` at each scrape."""
    registry = CollectorRegistry()
    registry.register(_StateCollector(metrics))
    registry.register(_DurationCollector(metrics))
    return registry


class _DurationCollector(Collector):
    """The queues' counters and every histogram, as Prometheus families at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        labels = ["name", "controller"]
        adds = CounterMetricFamily(
            "workqueue_adds", "Total number of adds handled by workqueue", labels=labels
        )
        retries = CounterMetricFamily(
            "workqueue_retries", "Total number of retries handled by workqueue", labels=labels
        )
        waits = HistogramMetricFamily(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels=labels,
        )
        works = HistogramMetricFamily(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            labels=labels,
        )
        for name, queue in self.metrics.queues.items():
            adds.add_metric([name, name], queue.adds)
            retries.add_metric([name, name], queue.retries)
            queue.queue_duration.add_to(waits, [name, name])
            queue.work_duration.add_to(works, [name, name])
        reconcile = HistogramMetricFamily(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            labels=["controller"],
        )
        for name, histogram in self.metrics.reconcile_times.items():
            histogram.add_to(reconcile, [name])
        yield from (adds, retries, waits, works, reconcile)


class _StateCollector(Collector):
    """Counters and gauges read from the controllers, queues and elector at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        controllers = list(self.metrics.controllers.values())
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
        timeouts = CounterMetricFamily(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
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
            "workqueue_depth", "Current depth of workqueue", labels=["name", "controller", "priority"]
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
            errors.add_metric([c.name], c.results["error"])  # terminal ones too, as upstream
            terminal.add_metric([c.name], c.terminal_errors)
            panics.add_metric([c.name], c.panics)
            timeouts.add_metric([c.name], c.timeouts)
            workers.add_metric([c.name], c.active_workers)
            maximum.add_metric([c.name], c.max_concurrent_reconciles)
            by_priority = getattr(c.queue, "depth_by_priority", None)
            if by_priority is None:
                depth.add_metric([c.name, c.name, ""], len(c.queue))  # "": a queue without priorities
            else:  # the priority queue's, per priority as upstream's (0 always, the rest when present)
                for priority, count in sorted({0: 0, **by_priority()}.items()):
                    depth.add_metric([c.name, c.name, str(priority)], count)
            running = [now - since for since in c.queue.processing_since()]
            unfinished.add_metric([c.name, c.name], sum(running))
            longest.add_metric([c.name, c.name], max(running, default=0.0))
        yield from (total, errors, terminal, panics, timeouts, workers, maximum, depth, unfinished, longest)
        leader = GaugeMetricFamily(
            "leader_election_master_status",
            "Whether this process is the leader (1) or not (0)",
            labels=["name"],
        )
        slow_path = CounterMetricFamily(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            labels=["name"],
        )
        elector = self.metrics.elector
        if elector is not None:
            leader.add_metric([elector.config.lease_name], 1.0 if elector.is_leader else 0.0)
            slow_path.add_metric([elector.config.lease_name], elector.slow_path)
        yield leader
        yield slow_path
        counts = process_counts
        for name, help_text, value in (
            ("controller_runtime_webhook_panics", "Total number of webhook panics", counts.admission_panics),
            ("controller_runtime_conversion_webhook_panics", "Total number of conversion webhook panics",
             counts.conversion_panics),
            ("certwatcher_read_certificate", "Total number of certificate reads", counts.certificate_reads),
            ("certwatcher_read_certificate_errors", "Total number of certificate read errors",
             counts.certificate_read_errors),
        ):  # fmt: skip
            yield CounterMetricFamily(name, help_text, value=value)
        requests = CounterMetricFamily(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            labels=["code", "method", "host"],
        )
        api = self.metrics.client
        for (method, code), count in sorted(api.requests.items()):
            requests.add_metric([code, method, api.config.server], count)
        yield requests
