"""``MCPServer``: a tool server → an owned Deployment and Service; its URL in status."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn
from kubeloop.models import core_v1

from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name, name_rule


class MCPServerSpec(kubeloop.KubeModel):
    image: Name
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    #: Where it serves MCP on its port: streamable HTTP, or SSE for a path ending in ``/sse``.
    path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9._~/-]*$", max_length=253)] = "/mcp"
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    replicas: Annotated[int, Field(ge=0)] = 1
    #: The ServiceAccount its pods run as, with its API token: for a server that acts on the
    #: cluster (``mcp-kubernetes``), bind what it may do to this account. Without it, an account
    #: of the server's own with no token.
    service_account_name: Name | None = None
    #: The tools of this server agents may offer their models, by name or shell-style pattern
    #: (empty: all it declares); ``denyTools`` wins. An agent's own lists apply too.
    allow_tools: Annotated[list[Annotated[str, Field(min_length=1, max_length=128)]], ListType("set")] = []
    deny_tools: Annotated[list[Annotated[str, Field(min_length=1, max_length=128)]], ListType("set")] = []


class MCPServerStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    url: str | None = None
    ready_replicas: int | None = None


class MCPServer(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("mcp",),
    categories=CATEGORIES,
    rules=(name_rule("MCPServer", 63, "the server's Service"),),
    printer_columns=(
        PrinterColumn("URL", ".status.url"),
        PrinterColumn("Ready", ".status.readyReplicas", type="integer"),
        AGE,
    ),
):
    """A Model Context Protocol server: a Deployment and a Service agents reach it by."""

    spec: MCPServerSpec
    status: MCPServerStatus | None = None
