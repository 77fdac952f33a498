"""The console's charts: each controller's reconciles, errors and queue depth over the last 15
minutes, and its reconcile-time distribution over the same window.

``ControllerSeries.sample(manager)`` is called once a second (by the console's loop); it keeps,
per controller, a ring of samples of the cumulative counters (reconciles, errors), the queue's
depth and the reconcile-time histogram's bucket counts
(``controller_runtime_reconcile_time_seconds``). ``document()`` turns the ring into what the page
draws: per second rates (the difference between neighbouring samples), the depths, and the
histogram of the window (the newest counts less the oldest).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Any

from kubeloop.manager.manager import Manager

#: How much history the charts show, in samples of one second.
WINDOW = 15 * 60


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    reconciles: int
    errors: int
    queue: int
    #: The reconcile-time histogram's bucket counts (cumulative since the start, per bucket).
    times: tuple[int, ...]


class ControllerSeries:
    """Samples of every controller of a manager, the last ``window`` of them."""

    def __init__(self, manager: Manager, window: int = WINDOW) -> None:
        self.manager = manager
        self.window = window
        self._samples: dict[str, collections.deque[Sample]] = {}

    def sample(self, now: float | None = None) -> None:
        """Record each controller's counters now."""
        at = time.monotonic() if now is None else now
        histograms = self.manager.metrics.reconcile_times
        for name, controller in self.manager.controllers.items():
            histogram = histograms.get(name)
            ring = self._samples.setdefault(name, collections.deque(maxlen=self.window))
            ring.append(
                Sample(
                    at,
                    sum(controller.results.values()),
                    controller.results.get("error", 0),
                    len(controller.queue),
                    tuple(histogram.counts) if histogram is not None else (),
                )
            )

    def document(self) -> list[dict[str, Any]]:
        """Per controller: ``seconds`` (each sample's age, oldest first), ``reconciles_per_s``,
        ``errors_per_s`` (since the sample before; the first sample's are 0), ``queue``, and
        ``reconcile_time``: the window's histogram (``bounds`` in seconds, the last one +Inf, and
        ``counts``)."""
        out = []
        histograms = self.manager.metrics.reconcile_times
        for name in sorted(self._samples):
            ring = list(self._samples[name])
            if not ring:
                continue
            newest = ring[-1].at
            seconds, reconciles, failures = [], [], []
            previous = ring[0]
            for sample in ring:
                elapsed = sample.at - previous.at
                seconds.append(round(newest - sample.at, 1))
                reconciles.append(
                    round((sample.reconciles - previous.reconciles) / elapsed, 3) if elapsed else 0.0
                )
                failures.append(round((sample.errors - previous.errors) / elapsed, 3) if elapsed else 0.0)
                previous = sample
            first, last = ring[0].times, ring[-1].times
            counts = [now - (first[i] if i < len(first) else 0) for i, now in enumerate(last)]
            histogram = histograms.get(name)
            bounds: list[float | str] = [*(histogram.bounds if histogram is not None else ()), "+Inf"]
            out.append(
                {
                    "name": name,
                    "seconds": seconds,
                    "reconciles_per_s": reconciles,
                    "errors_per_s": failures,
                    "queue": [sample.queue for sample in ring],
                    "reconcile_time": {"bounds": bounds[: len(counts)], "counts": counts},
                }
            )
        return out
