"""The tools of an agent's MCP servers, through the official ``mcp`` SDK: each server named in
``MCP_SERVERS`` (a URL; streamable HTTP, or SSE when its path ends in ``/sse``) is connected at
the run's start, its tools listed and offered to the model as they declare themselves (name,
description, input schema); a call goes to the server that declared it. A tool whose name an
earlier one took is offered as ``<server>_<tool>`` (the server: its host's first label).

Requests to a server carry its headers (``MCP_HEADERS``: a token from a Secret, for a server at
a URL that asks for one). A server still starting (its Deployment just rolled out) is tried
again for ``MCP_CONNECT_SECONDS`` (30); one that cannot be reached then ends the run
(MCPUnreachable); one that refuses the headers (401, 403) ends it at once (MCPRefused). A
tool's error (``isError``) is the tool's failure (ToolFailed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import McpHttpClientFactory, create_mcp_http_client
from mcp.types import TextContent

from agentruntime.runinput import passes
from agentruntime.tools import Tool, ToolError

CONNECT_SECONDS = 30.0
CALL_SECONDS = 120.0


class MCPUnreachable(Exception):
    """A server named in MCP_SERVERS could not be reached (the message says which, and why)."""

    reason = "MCPUnreachable"


class MCPRefused(MCPUnreachable):
    """A server refused the run's requests (401, 403): its headers are missing or wrong, and
    asking again would not change that."""

    reason = "MCPRefused"


def _noting_refusals(refusals: list[str]) -> McpHttpClientFactory:
    """The SDK's HTTP client, noting each 401 or 403 a server answers (its transports keep only
    "an error response")."""

    def make(
        headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
    ) -> Any:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)

        async def note(response: Any) -> None:
            if response.status_code in (401, 403):
                refusals.append(f"{response.status_code} {response.reason_phrase}")

        client.event_hooks["response"].append(note)
        return client

    return make


@contextlib.asynccontextmanager
async def _session(url: str, headers: Mapping[str, str], refusals: list[str]) -> AsyncIterator[ClientSession]:
    """A session with the server at ``url``, every request carrying ``headers``."""
    client = _noting_refusals(refusals)
    async with contextlib.AsyncExitStack() as stack:
        if urlsplit(url).path.rstrip("/").endswith("/sse"):
            transport = sse_client(url, headers=dict(headers), httpx_client_factory=client)
        else:
            http = await stack.enter_async_context(client(headers=dict(headers)))
            transport = streamable_http_client(url, http_client=http)
        streams = await stack.enter_async_context(transport)
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def mcp_tools(
    urls: list[str],
    filters: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    connect_seconds: float = CONNECT_SECONDS,
    headers: Mapping[str, Mapping[str, str]] | None = None,
) -> AsyncIterator[list[Tool]]:
    """The tools of the servers at ``urls`` that their ``filters`` (URL → ``allow``/``deny``
    lists) let through, usable until the block ends (then disconnected); the requests to each
    carry its ``headers`` (URL → header → value)."""
    async with contextlib.AsyncExitStack() as stack:
        tools: list[Tool] = []
        taken: set[str] = set()
        for url in urls:
            session = await _connect(stack, url, (headers or {}).get(url, {}), connect_seconds)
            listed = await session.list_tools()
            chosen = (filters or {}).get(url, {})
            for declared in listed.tools:
                if not passes(declared.name, chosen.get("allow", ()), chosen.get("deny", ())):
                    continue  # the MCPServer's own allowTools/denyTools
                name = declared.name
                if name in taken:
                    name = f"{urlsplit(url).hostname or 'server'}".split(".")[0] + f"_{declared.name}"
                taken.add(name)
                tools.append(
                    Tool(name, declared.description or "", dict(declared.input_schema), _caller(session, declared.name))
                )
        yield tools


async def _connect(
    stack: contextlib.AsyncExitStack, url: str, headers: Mapping[str, str], connect_seconds: float
) -> ClientSession:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + connect_seconds
    delay = 0.2
    while True:
        attempt = contextlib.AsyncExitStack()
        refusals: list[str] = []
        try:
            session = await attempt.enter_async_context(_session(url, headers, refusals))
        except Exception as exc:  # the SDK raises what its transport meets (connection, HTTP status)
            await attempt.aclose()
            if refusals:
                given = f"with the headers {', '.join(sorted(headers))}" if headers else "without headers"
                raise MCPRefused(f"the MCP server at {url} refused the run ({refusals[0]}), {given}") from None
            if loop.time() + delay > deadline:
                raise MCPUnreachable(f"the MCP server at {url} cannot be reached: {_reason(exc)}") from None
            await asyncio.sleep(delay)  # starting, perhaps: its Deployment may have just rolled out
            delay = min(delay * 2, 2.0)
            continue
        stack.push_async_callback(attempt.aclose)
        return session


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def _caller(session: ClientSession, name: str) -> Any:
    async def call(arguments: dict[str, Any]) -> str:
        try:
            result = await session.call_tool(name, arguments, read_timeout_seconds=CALL_SECONDS)
        except Exception as exc:  # a dropped connection, a timeout, a protocol error
            raise ToolError(f"the MCP call failed: {_reason(exc)}") from None
        text = "\n".join(part.text for part in result.content if isinstance(part, TextContent))
        if result.is_error:
            raise ToolError(text or "the MCP server reported an error")
        return text

    return call
