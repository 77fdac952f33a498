"""A stand-in for an MCP server that runs elsewhere (a hosted tool service a test cannot reach):
the official ``mcp`` SDK's server in the test's process, on a local port, serving streamable
HTTP at ``/mcp`` and SSE at ``/sse``, that answers only requests whose ``Authorization`` header
is the one it was given (401 otherwise). It notes each ``Authorization`` it was sent.

Its one tool, ``deploy_status(service)``, says at which version a service is deployed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class RemoteMCP:
    def __init__(self, authorization: str) -> None:
        self.authorization = authorization
        #: The Authorization header of each request, as sent ("" when none was).
        self.seen: list[str] = []
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"

    def _app(self) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
        mcp = MCPServer(name="hosted-tools")

        @mcp.tool()
        async def deploy_status(service: str) -> str:
            """At which version a service is deployed."""
            return f"{service}: deployed at v42"

        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        streamable = mcp.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True, transport_security=security
        )
        sse = mcp.sse_app(transport_security=security)
        app = Starlette(routes=[Mount("/", routes=[*streamable.routes, *sse.routes])], lifespan=streamable.router.lifespan_context)

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                given = dict(scope["headers"]).get(b"authorization", b"").decode()
                self.seen.append(given)
                if given != self.authorization:
                    await send({"type": "http.response.start", "status": 401,
                                "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
                    await send({"type": "http.response.body", "body": b"unauthorized"})
                    return
            await app(scope, receive, send)

        return guarded

    async def start(self) -> RemoteMCP:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", lifespan="on"))
        self._task = asyncio.create_task(self._server.serve(sockets=[listener]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # it failed to start: say why
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
