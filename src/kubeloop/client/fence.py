"""Write fences: a write made on behalf of a leader that may no longer lead is never sent.

A leader elected on a Lease acts only while its lease holds; a process paused past its lease (a
stopped container, a long GC pause, a suspended VM) resumes believing it leads while another
replica already does. controller-runtime leaves that gap open; kubeloop closes it in the client: the
manager sets :data:`current_write_fence` in the tasks that act for the leader (controller workers,
leader-only runnables; an event is written under the fence of the code that recorded it), and
:class:`~kubeloop.client.rest.APIClient` checks it before sending any request that is not a read,
and again as the request is handed to the socket: the connection pool (``http1``) checks it and
writes the whole request without yielding; through a proxy (``proxied``, on aiohttp) the body
checks it as it goes out, aiohttp holding the headers back until then. A process paused anywhere before
that moment (waiting for a connection, say) cannot send the write once it resumes. A
fenced write raises :class:`WriteFenced` instead of reaching the server.

What a client alone cannot close is the few instructions between that last check and the send
system call: a pause landing exactly there sends that one write as the process resumes, built
before the pause. Every write built after resuming is refused.
"""

from __future__ import annotations

import contextvars
from typing import Protocol

from kubeloop.errors import APIError


class WriteFence(Protocol):
    """What may stop a write from being sent: a leader's lease, as its own clock tells."""

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


class WriteFenced(APIError):
    """A write refused on this side (never sent, so code 0): the lease may have passed on."""

    default_code = 0
    default_reason = "WriteFenced"

    def __init__(self, method: str, path: str, why: str) -> None:
        super().__init__(f"{method} {path} not sent: {why}")


_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def write_fence(method: str) -> WriteFence | None:
    """This task's fence when ``method`` writes; None for a read or a task acting for no leader."""
    return None if method in _READS else current_write_fence.get()


def check_write(method: str, path: str) -> None:
    """Raise :class:`WriteFenced` when this task's fence forbids writes now."""
    fence = write_fence(method)
    if fence is not None and not fence.writes_allowed():
        raise WriteFenced(method, path, fence.describe())
