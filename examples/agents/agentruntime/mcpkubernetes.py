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
import json
import os
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

import kubeloop

DEFAULT_PORT = 8080
PATH = "/mcp"
#: The kinds the tools read: (group, version, kind) by every name kubectl takes for them.
KINDS: dict[str, tuple[str, str, str]] = {}
for _group, _version, _kind, _names in (
    ("", "v1", "Pod", ("pods", "pod", "po")),
    ("", "v1", "Service", ("services", "service", "svc")),
    ("", "v1", "ConfigMap", ("configmaps", "configmap", "cm")),
    ("", "v1", "Event", ("events", "event", "ev")),
    ("", "v1", "Namespace", ("namespaces", "namespace", "ns")),
    ("", "v1", "Node", ("nodes", "node", "no")),
    ("", "v1", "ServiceAccount", ("serviceaccounts", "serviceaccount", "sa")),
    ("", "v1", "PersistentVolumeClaim", ("persistentvolumeclaims", "persistentvolumeclaim", "pvc")),
    ("apps", "v1", "Deployment", ("deployments", "deployment", "deploy")),
    ("apps", "v1", "ReplicaSet", ("replicasets", "replicaset", "rs")),
    ("apps", "v1", "StatefulSet", ("statefulsets", "statefulset", "sts")),
    ("apps", "v1", "DaemonSet", ("daemonsets", "daemonset", "ds")),
    ("batch", "v1", "Job", ("jobs", "job")),
    ("batch", "v1", "CronJob", ("cronjobs", "cronjob", "cj")),
):
    for _name in (*_names, _kind.lower()):
        KINDS[_name] = (_group, _version, _kind)
_SECRETS = {"secret", "secrets"}


def kind_of(name: str) -> kubeloop.GroupVersionKind:
    wanted = name.strip().lower()
    if wanted in _SECRETS:
        raise ToolError("Secrets are not read by this server")
    found = KINDS.get(wanted)
    if found is None:
        raise ToolError(f"unknown kind {name!r}: one of {', '.join(sorted({k[2] for k in KINDS.values()}))}")
    return kubeloop.GroupVersionKind(*found)


def _summary(obj: kubeloop.Obj) -> str:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    line = str(meta.get("name"))
    if status.get("phase"):
        line += f" ({status['phase']})"
    elif "replicas" in (obj.get("spec") or {}):
        line += f" ({status.get('readyReplicas', 0)}/{obj['spec']['replicas']} ready)"
    return line


def server(client: kubeloop.APIClient) -> MCPServer:
    """The MCP server, its tools reading through ``client``."""
    mcp = MCPServer(name="mcp-kubernetes", instructions="Read-only tools over the Kubernetes API.")

    async def read(call: Any) -> Any:
        try:
            return await call
        except kubeloop.errors.APIError as refused:
            raise ToolError(f"the API server answered {refused.code}: {refused}") from None

    @mcp.tool()
    async def list_objects(kind: str, namespace: str = "") -> str:
        """List the objects of a kind (pods, deployments, services, configmaps, jobs, events,
        nodes...) in a namespace, with their phase or readiness."""
        found = await read(client.list(kind_of(kind), namespace=namespace or None))
        return "\n".join(_summary(obj) for obj in found.items) or f"no {kind} in {namespace or 'the cluster'}"

    @mcp.tool()
    async def get_object(kind: str, name: str, namespace: str = "") -> str:
        """Read one object of a kind, by name, as JSON."""
        obj = await read(client.get(kind_of(kind), name, namespace=namespace or None))
        obj.get("metadata", {}).pop("managedFields", None)
        return json.dumps(obj, indent=1, sort_keys=True)

    @mcp.tool()
    async def namespace_events(namespace: str, limit: int = 20) -> str:
        """The latest events of a namespace, newest first: why pods fail, what controllers did."""
        found = await read(client.list(kind_of("events"), namespace=namespace))

        def when(event: kubeloop.Obj) -> str:
            return str(event.get("lastTimestamp") or event.get("eventTime") or "")

        events = sorted(found.items, key=when, reverse=True)[: max(1, min(limit, 200))]
        return "\n".join(
            f"{when(e)} {e.get('type', '')} {e.get('reason', '')} "
            f"{(e.get('involvedObject') or {}).get('kind', '')}/{(e.get('involvedObject') or {}).get('name', '')}: "
            f"{e.get('message', '')}"
            for e in events
        ) or f"no events in {namespace}"

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
