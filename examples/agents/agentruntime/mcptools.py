"""The tools of an agent's MCP servers, through the official ``mcp`` SDK: each server named in
``MCP_SERVERS`` (a URL; streamable HTTP, or SSE when its path ends in ``/sse``) is connected at
the run's start, its tools listed and offered to the model as they declare themselves (name,
description, input schema); a call goes to the server that declared it. A tool whose name an
earlier one took is offered as ``<server>_<tool>`` (the server: its host's first label).

A server still starting (its Deployment just rolled out) is tried again for
``MCP_CONNECT_SECONDS`` (30); one that cannot be reached then ends the run (MCPUnreachable).
A tool's error (``isError``) is the tool's failure (ToolFailed).
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
from mcp.types import TextContent

from agentruntime.runinput import passes
from agentruntime.tools import Tool, ToolError

CONNECT_SECONDS = 30.0
CALL_SECONDS = 120.0


class MCPUnreachable(Exception):
    """A server named in MCP_SERVERS could not be reached (the message says which, and why)."""


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[ClientSession]:
    transport = sse_client(url) if urlsplit(url).path.rstrip("/").endswith("/sse") else streamable_http_client(url)
    async with transport as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def mcp_tools(
    urls: list[str],
    filters: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    connect_seconds: float = CONNECT_SECONDS,
) -> AsyncIterator[list[Tool]]:
    """The tools of the servers at ``urls`` that their ``filters`` (URL → ``allow``/``deny``
    lists) let through, usable until the block ends (then disconnected)."""
    async with contextlib.AsyncExitStack() as stack:
        tools: list[Tool] = []
        taken: set[str] = set()
        for url in urls:
            session = await _connect(stack, url, connect_seconds)
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


async def _connect(stack: contextlib.AsyncExitStack, url: str, connect_seconds: float) -> ClientSession:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + connect_seconds
    delay = 0.2
    while True:
        attempt = contextlib.AsyncExitStack()
        try:
            session = await attempt.enter_async_context(_session(url))
        except Exception as exc:  # the SDK raises what its transport meets (connection, HTTP status)
            await attempt.aclose()
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
