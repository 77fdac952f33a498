"""Write fences: a write made on behalf of a leader that may no longer lead is never sent.

A leader elected on a Lease acts only while its lease holds; a process paused past its lease (a
stopped container, a long GC pause, a suspended VM) resumes believing it leads while another
replica already does. controller-runtime leaves that gap open; kubeloop closes it in the client: the
manager sets :data:`current_write_fence` in the tasks that act for the leader (controller workers,
leader-only runnables; an event is written under the fence of the code that recorded it), and :class:`~kubeloop.client.rest.Client` checks it
immediately before sending any request that is not a read. A fenced write raises
:class:`WriteFenced` instead of reaching the server.
"""

from __future__ import annotations

import contextvars
from typing import Protocol

from kubeloop.client.errors import ApiError


class WriteFence(Protocol):
    def writes_allowed(self) -> bool:
        """Whether writes may be sent now (the lease is held, as this process's clock tells)."""

    def describe(self) -> str:
        """Why writes are not allowed (for the error message)."""

    async def wait_until_allowed(self) -> bool:
        """Wait until writes are allowed (True), or will never be again (False)."""


#: The fence of the task making requests (None: not acting for a leader; nothing is fenced).
current_write_fence: contextvars.ContextVar[WriteFence | None] = contextvars.ContextVar(
    "kubeloop_write_fence", default=None
)


class WriteFenced(ApiError):
    """A write refused on this side: the leader's lease may have passed to another replica."""

    reason_name = "WriteFenced"

    def __init__(self, method: str, path: str, why: str) -> None:
        super().__init__({"reason": "WriteFenced", "message": f"{method} {path} not sent: {why}"}, code=0)


def check_write(method: str, path: str) -> None:
    """Raise :class:`WriteFenced` when this task's fence forbids writes now."""
    fence = current_write_fence.get()
    if fence is not None and method not in ("GET", "HEAD", "OPTIONS") and not fence.writes_allowed():
        raise WriteFenced(method, path, fence.describe())
