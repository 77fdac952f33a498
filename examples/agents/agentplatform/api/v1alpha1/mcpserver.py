"""``MCPServer``: a tool server, either run by the platform (``image`` → an owned Deployment and
Service) or reached where it runs (``url``); its URL in status, and the headers from Secrets its
callers send."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn, Rule
from kubeloop.models import core_v1

from .agent import SecretKeyRef
from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name, name_rule

#: An http(s) URL: a host name or address (IPv6 in brackets), a port perhaps, a path perhaps.
URL_PATTERN = r"^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/[^\s#,]*)?$"


class MCPHeader(kubeloop.KubeModel):
    """An HTTP header every request to the server carries (``Authorization: Bearer ...``, an API
    key), its whole value the Secret's key: mounted as a file in the pods that call the server,
    never in their environment or the run's snapshot."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$", max_length=128)]
    secret_key_ref: SecretKeyRef


class MCPServerSpec(kubeloop.KubeModel):
    #: The image the platform runs the server from (a Deployment and a Service); or
    image: Name | None = None
    #: where a server that runs elsewhere serves MCP: streamable HTTP, or SSE for a path ending
    #: in ``/sse``. Exactly one of the two.
    url: Annotated[str | None, Field(pattern=URL_PATTERN, max_length=2048)] = None
    #: Headers sent with every request to it, each from a Secret its creator may read.
    headers: Annotated[list[MCPHeader], ListType("map", keys=("name",)), Field(max_length=16)] = []
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
    """A Model Context Protocol server: one the platform runs (a Deployment and a Service agents
    reach it by), or one at a URL."""

    spec: Annotated[
        MCPServerSpec,
        # Run here or reached there, not both; and what only a server run here has.
        Rule(
            "has(self.image) != has(self.url)",
            message="exactly one of image (a server the platform runs) and url (a server that runs elsewhere)",
        ),
        Rule(
            "!has(self.url) || (!has(self.env) && !has(self.serviceAccountName))",
            message="env and serviceAccountName are for a server the platform runs (image), not one at a url",
        ),
    ]
    status: MCPServerStatus | None = None
