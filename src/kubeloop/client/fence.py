"""Write fences: a write made on behalf of a leader that may no longer lead is never sent.

A leader elected on a Lease acts only while its lease holds; a process paused past its lease (a
stopped container, a long GC pause, a suspended VM) resumes believing it leads while another
replica already does. controller-runtime leaves that gap open; kubeloop closes it in the client: the
manager sets :data:`current_write_fence` in the tasks that act for the leader (controller workers,
leader-only runnables; an event is written under the fence of the code that recorded it), and
:class:`~kubeloop.client.rest.APIClient` checks it before sending any request that is not a read,
and again as the request is handed to the socket: the connection pool (``http1``) checks it and
writes the whole request without yielding; on aiohttp (with a proxy) :class:`FencedBody` does,
aiohttp holding the headers back until the body goes out. A process paused anywhere before
that moment (waiting for a connection, say) cannot send the write once it resumes. A
fenced write raises :class:`WriteFenced` instead of reaching the server.
"""

from __future__ import annotations

import contextvars
from typing import Any, Protocol

from aiohttp.payload import BytesPayload

from kubeloop.errors import APIError


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


class WriteFenced(APIError):
    """A write refused on this side (never sent, so code 0): the lease may have passed on."""

    default_code = 0
    default_reason = "WriteFenced"

    def __init__(self, method: str, path: str, why: str) -> None:
        super().__init__(f"{method} {path} not sent: {why}")


_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def check_write(method: str, path: str) -> None:
    """Raise :class:`WriteFenced` when this task's fence forbids writes now."""
    fence = current_write_fence.get()
    if fence is not None and method not in _READS and not fence.writes_allowed():
        raise WriteFenced(method, path, fence.describe())


def fenced_body(method: str, path: str, body: bytes | None, content_type: str | None) -> Any:
    """What to send as the body: a write's body under this task's fence is a :class:`FencedBody`."""
    fence = current_write_fence.get()
    if fence is None or body is None or method in _READS:
        return body
    return FencedBody(body, fence, method, path, content_type or "application/json")


class FencedBody(BytesPayload):
    """A write's body that checks its fence at the last moment before it is written."""

    def __init__(self, body: bytes, fence: WriteFence, method: str, path: str, content_type: str) -> None:
        super().__init__(body, content_type=content_type)
        self._fence = fence
        self._request = (method, path)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        if not self._fence.writes_allowed():
            raise WriteFenced(*self._request, self._fence.describe())
        await super().write_with_length(writer, content_length)
