"""``LocalHistogram``: observations counted per bucket in plain Python numbers, turned into a
Prometheus histogram family only when scraped. ``prometheus_client``'s own Histogram takes a lock
per observation, which would multiply the cost of a work queue's add+get+done (benchmark B1);
this is a bisection and two additions."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import HistogramMetricFamily


class LocalHistogram:
    """Observations counted per bucket (upper bounds inclusive, as Prometheus's ``le``)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def __call__(self, value: float) -> None:
        self.observe(value)

    def add_to(self, family: HistogramMetricFamily, labels: list[str]) -> None:
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
        family.add_metric(labels, buckets, self.total)
