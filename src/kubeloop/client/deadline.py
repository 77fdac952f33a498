"""A deadline for the calls one piece of work makes: Go's ``context.WithTimeout``, for threads.

A controller with a ``reconcile_timeout`` puts a :class:`Deadline` around each reconcile
(controller-runtime's ``ReconciliationTimeout``). An async reconcile is simply cancelled when it
passes. A sync reconcile runs in a thread, which nothing can stop from outside; so the deadline
travels with it in a context variable, and the blocking client honours it as a Go client honours
its context: a call made after the deadline raises :class:`DeadlineExceeded` at once, and a call in
flight when it passes stops being waited for. The reconcile then returns (raises) soon after, and
the worker, which waits for it whatever the timeout, releases the key only then. A sync reconcile
that loops without calling the client asks ``time_left()`` itself.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass


class DeadlineExceeded(TimeoutError):
    """The work ran past its deadline (Go's ``context.DeadlineExceeded``)."""


@dataclass(frozen=True)
class Deadline:
    """``timeout`` seconds from ``started`` (``time.monotonic()``), for work named ``what``."""

    timeout: float
    what: str = "the reconcile"
    started: float = 0.0

    @classmethod
    def after(cls, timeout: float, what: str = "the reconcile") -> Deadline:
        """A deadline ``timeout`` seconds from now, for ``what`` (named in its error)."""
        return cls(timeout, what, time.monotonic())

    def remaining(self) -> float:
        """Seconds left; zero or less once it has passed."""
        return self.started + self.timeout - time.monotonic()

    def exceeded(self) -> DeadlineExceeded:
        """The error that says ``what`` ran past its timeout."""
        return DeadlineExceeded(f"{self.what} ran past its timeout of {self.timeout:g}s")

    def check(self) -> None:
        """Raise :class:`DeadlineExceeded` if the deadline has passed."""
        if self.remaining() <= 0:
            raise self.exceeded()


#: The deadline of the work running in this context (None: none).
current_deadline: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "current_deadline", default=None
)


def time_left() -> float | None:
    """Seconds left before the current reconcile's deadline (None when it has none); a
    long-running sync reconcile checks it between steps, as Go code checks ``ctx.Err()``."""
    deadline = current_deadline.get()
    return None if deadline is None else max(0.0, deadline.remaining())
