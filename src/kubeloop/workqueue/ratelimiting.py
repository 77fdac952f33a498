"""The queue a controller uses: delaying, plus per-key retry back-off from a rate limiter."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from kubeloop.workqueue.delaying import DelayingQueue
from kubeloop.workqueue.queue import NO_METRICS, QueueMetrics
from kubeloop.workqueue.ratelimiter import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """The delaying queue with back-off (client-go's ``RateLimitingInterface``): a failed key is
    queued again with ``add_rate_limited`` after its limiter's wait, and ``forget`` once it succeeds.
    """

    __slots__ = ("rate_limiter",)

    def __init__(self, rate_limiter: RateLimiter | None = None, metrics: QueueMetrics = NO_METRICS) -> None:
        super().__init__(metrics)
        self.rate_limiter = rate_limiter or default_controller_rate_limiter()

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` once the rate limiter allows (after a failure: its back-off grows)."""
        self.metrics.retried()
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """The key succeeded: its back-off starts over."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` was retried since it was last forgotten."""
        return self.rate_limiter.num_requeues(item)
