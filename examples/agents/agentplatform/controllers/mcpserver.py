"""MCPServer → an owned Deployment and ClusterIP Service of its name; its URL and ready replicas
in status."""

from __future__ import annotations

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import MCPServer
from .builders import (
    deployment_ready,
    env_list,
    http_port,
    labels,
    named,
    set_deployment,
    set_service,
    url_of,
    write_status,
)


class MCPServerReconciler:
    """Reconciles MCPServers."""

    def __init__(self, manager: kubeloop.Manager) -> None:
        self.manager = manager
        self.client = manager.client

    def setup(self) -> None:
        builder = kubeloop.Builder(self.manager).named("mcpserver").for_(MCPServer)
        builder.owns(kinds.Deployment).owns(kinds.Service).complete(self.reconcile)

    async def reconcile(self, request: kubeloop.Request) -> None:
        try:
            server = await self.client.get(MCPServer, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return  # its Deployment and Service go with it
        selector = labels("mcp-server", request.name)
        container = {
            "name": "server",
            "image": server.spec.image,
            "ports": http_port(server.spec.port),
            "env": env_list(var.to_dict() for var in server.spec.env or ()),
        }

        def deployment(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(server, obj)
            obj["metadata"]["labels"] = selector
            set_deployment(
                obj,
                replicas=server.spec.replicas,
                selector=selector,
                annotations={},
                container=container,
                volumes=[],
            )

        def service(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(server, obj)
            obj["metadata"]["labels"] = selector
            set_service(obj, selector, server.spec.port)

        namespace = request.namespace
        _, made = await kubeloop.create_or_update(
            self.client, named(kinds.Deployment, request.name, namespace), deployment
        )
        await kubeloop.create_or_update(self.client, named(kinds.Service, request.name, namespace), service)
        _, ready, _ = deployment_ready(made)
        status = {
            "observedGeneration": server.metadata.generation,
            "url": url_of(server),
            "readyReplicas": ready,
        }
        await write_status(self.client, server, status)


def setup(manager: kubeloop.Manager) -> MCPServerReconciler:
    reconciler = MCPServerReconciler(manager)
    reconciler.setup()
    return reconciler
