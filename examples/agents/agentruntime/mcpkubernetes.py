"""``mcp-kubernetes``: a Model Context Protocol server of read-only Kubernetes tools, acting as
its pod's ServiceAccount (what RBAC grants that account is all it can read).

``python -m agentruntime.mcpkubernetes`` serves MCP's streamable HTTP at ``/mcp`` on ``PORT``
(8080) of ``POD_IP`` (else every address), with the official ``mcp`` SDK. Its tools:

- ``list_objects(kind, namespace)``: the names of the objects of a kind, with their phase or
  readiness where the kind has one;
- ``get_object(kind, name, namespace)``: one object as JSON, without its managedFields;
- ``namespace_events(namespace, limit)``: the namespace's latest events, newest first.

Secrets are never read. A kind is named as kubectl takes it (``pods``, ``pod``, ``Pod``,
``deploy``...) among the common built-in kinds. What the API server refuses (403, 404) comes
back to the caller as the tool's error, in the server's words.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

import kubeloop
from agentruntime import kubernetesreads as reads

DEFAULT_PORT = 8080
PATH = "/mcp"


def server(client: kubeloop.APIClient) -> MCPServer:
    """The MCP server, its tools reading through ``client``."""
    mcp = MCPServer(name="mcp-kubernetes", instructions="Read-only tools over the Kubernetes API.")

    async def refused_as_error(read: Awaitable[str]) -> str:
        try:
            return await read
        except reads.ReadRefused as refused:
            raise ToolError(str(refused)) from None

    @mcp.tool()
    async def list_objects(kind: str, namespace: str = "") -> str:
        """List the objects of a kind (pods, deployments, services, configmaps, jobs, events,
        nodes...) in a namespace, with their phase or readiness."""
        return await refused_as_error(reads.list_objects(client, kind, namespace))

    @mcp.tool()
    async def get_object(kind: str, name: str, namespace: str = "") -> str:
        """Read one object of a kind, by name, as JSON."""
        return await refused_as_error(reads.get_object(client, kind, name, namespace))

    @mcp.tool()
    async def namespace_events(namespace: str, limit: int = 20) -> str:
        """The latest events of a namespace, newest first: why pods fail, what controllers did."""
        return await refused_as_error(reads.namespace_events(client, namespace, limit))

    return mcp


async def serve(host: str, port: int) -> None:
    """Serve until SIGTERM (uvicorn's signal handling ends the serve)."""
    async with kubeloop.APIClient(kubeloop.load_config()) as client:
        # Reached by its Service's name: the Host header is a cluster name, not localhost.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app = server(client).streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True, transport_security=security, host=host
        )
        await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def main() -> int:
    port = int(os.environ.get("PORT", DEFAULT_PORT))
    host = os.environ.get("BIND_ADDRESS") or os.environ.get("POD_IP") or "0.0.0.0"
    asyncio.run(serve(host, port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
