"""Rate limiters: how long a key waits before it is retried (client-go ``default_rate_limiters``).

- ``ItemExponentialFailureRateLimiter``: base × 2^(failures − 1) per key, capped (5 ms → 1000 s by
  default); ``forget`` resets the key.
- ``BucketRateLimiter``: a token bucket over all keys (10 qps, burst 100 by default): each
  ``when`` reserves a token and answers how long until it is available.
- ``MaxOfRateLimiter``: the longest wait of several.

``default_controller_rate_limiter()`` is controller-runtime's: the max of the first two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol


class RateLimiter(Protocol):
    """How long a key waits before its retry (client-go's ``workqueue.RateLimiter``)."""

    def when(self, item: Hashable) -> float:
        """Seconds ``item`` waits before its next retry (each call counts one more failure)."""

    def forget(self, item: Hashable) -> None:
        """Reset ``item``'s failures (it succeeded)."""

    def num_requeues(self, item: Hashable) -> int:
        """How many failures of ``item`` are counted now."""


class ItemExponentialFailureRateLimiter:
    """Per key: ``base_delay`` doubled on each failure, at most ``max_delay`` (5 ms → 1000 s by
    default, controller-runtime's).
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        """``base_delay × 2^failures`` (at most ``max_delay``), counting this failure."""
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        if failures >= 64:  # 2**64 × base overflows any sensible cap
            return self.max_delay
        return float(min(self.max_delay, self.base_delay * (2**failures)))

    def forget(self, item: Hashable) -> None:
        """Reset ``item``'s failures."""
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        """How many failures of ``item`` are counted now."""
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all keys (golang.org/x/time/rate's reservation semantics)."""

    def __init__(
        self, qps: float = 10.0, burst: int = 100, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()

    def when(self, item: Hashable) -> float:
        """Seconds until the bucket has a token for this retry (reserving it)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now
        self._tokens -= 1  # the reservation is taken even when it has to wait
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        """Nothing to forget: the bucket is shared by all keys."""
        return None

    def num_requeues(self, item: Hashable) -> int:
        """Always 0: the bucket counts no key's failures."""
        return 0


class MaxOfRateLimiter:
    """The longest wait of several limiters (client-go's ``MaxOfRateLimiter``): the default
    controller limiter is per-key exponential back-off and an overall bucket together.
    """

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        """The longest of the limiters' waits (each counts this failure)."""
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        """Reset ``item`` in every limiter."""
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        """The most failures any limiter counts for ``item``."""
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter() -> MaxOfRateLimiter:
    """Per-key exponential 5 ms → 1000 s, and 10 qps with a burst of 100 overall."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100))


def priority_queue_rate_limiter() -> ItemExponentialFailureRateLimiter:
    """Per-key exponential 5 ms → 1000 s, no overall bucket: controller-runtime's default with
    its priority queue (a burst of changes is reconciled as fast as the workers go; a key that
    keeps failing still backs off)."""
    return ItemExponentialFailureRateLimiter(0.005, 1000.0)
