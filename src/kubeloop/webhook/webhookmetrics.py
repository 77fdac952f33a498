"""The webhook server's metrics, with controller-runtime's names (``pkg/webhook/internal/metrics``):
``controller_runtime_webhook_requests_total{webhook,code}``,
``controller_runtime_webhook_requests_in_flight{webhook}`` and
``controller_runtime_webhook_latency_seconds{webhook}``, labelled by the webhook's path. Kept as
plain numbers and turned into Prometheus families when scraped, as the manager's own metrics."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kubeloop.histogram import LocalHistogram

if TYPE_CHECKING:
    from aiohttp import web


#: Prometheus's default buckets, which controller-runtime's webhook histogram uses.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WebhookMetrics(Collector):
    """Requests by webhook path and HTTP code, those in flight, and their latency."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()
        self.in_flight: Counter[str] = Counter()
        self.latency: dict[str, LocalHistogram] = {}

    def started(self, path: str) -> None:
        self.in_flight[path] += 1

    def finished(self, path: str, code: int, seconds: float) -> None:
        self.in_flight[path] -= 1
        self.requests[path, str(code)] += 1
        histogram = self.latency.get(path)
        if histogram is None:
            histogram = self.latency[path] = LocalHistogram(_LATENCY_BUCKETS)
        histogram.observe(seconds)

    def collect(self) -> Iterator[Metric]:
        total = CounterMetricFamily(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code.",
            labels=["webhook", "code"],
        )
        for (path, code), count in sorted(self.requests.items()):
            total.add_metric([path, code], count)
        yield total
        in_flight = GaugeMetricFamily(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            labels=["webhook"],
        )
        for path, count in sorted(self.in_flight.items()):
            in_flight.add_metric([path], count)
        yield in_flight
        latency = HistogramMetricFamily(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            labels=["webhook"],
        )
        for path, histogram in sorted(self.latency.items()):
            histogram.add_to(latency, [path])
        yield latency


async def measured_response(
    metrics: WebhookMetrics | None, path: str, answer: Awaitable[tuple[int, bytes]]
) -> web.Response:
    """A webhook endpoint's JSON answer (``answer``: its status and body), counted in ``metrics``:
    in flight while it is computed, then by its code with its latency."""
    from aiohttp import web

    started = time.perf_counter()
    if metrics is not None:
        metrics.started(path)
    status = 500
    try:
        status, body = await answer
    finally:
        if metrics is not None:
            metrics.finished(path, status, time.perf_counter() - started)
    return web.Response(status=status, body=body, content_type="application/json")
