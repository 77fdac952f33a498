"""Client-side request rate limiting: a token bucket (client-go's ``flowcontrol`` QPS/burst).

Off unless the configuration sets ``qps``; the embedded server and most clusters' priority and
fairness make it unnecessary, but it keeps a runaway loop from flooding a shared API server.
"""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved up; ``acquire`` waits for one."""

    def __init__(self, qps: float, burst: int) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Take a token, waiting (in turn with other callers) until one is there."""
        async with self._lock:  # waiters are served in order
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
            self._updated = now
            if self._tokens < 1:
                wait = (1 - self._tokens) / self.qps
                await asyncio.sleep(wait)
                self._tokens = 1.0
                self._updated = time.monotonic()
            self._tokens -= 1
