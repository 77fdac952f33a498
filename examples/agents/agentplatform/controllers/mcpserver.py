"""MCPServer → an owned Deployment and ClusterIP Service of its name, its pods running as a
ServiceAccount of that name with no API token mounted; its URL and ready replicas in status. A
Deployment or Service of that name it does not control is left alone: a Warning Event
(NameConflict) says so, and the server is looked at again every 10 s.

A server at a ``url`` runs elsewhere: nothing is made for it (what an earlier ``image`` made goes),
and its status holds that URL."""

from __future__ import annotations

import contextlib

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import MCPServer
from .builders import (
    deployment_ready,
    env_list,
    http_port,
    labels,
    named,
    no_api_account,
    run_as_own_account,
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
        self.recorder = manager.event_recorder("mcpserver")

    def setup(self) -> None:
        builder = kubeloop.Builder(self.manager).named("mcpserver").for_(MCPServer)
        builder.owns(kinds.Deployment).owns(kinds.Service).owns(kinds.ServiceAccount).complete(self.reconcile)

    async def reconcile(self, request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            server = await self.client.get(MCPServer, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # its Deployment and Service go with it
        try:
            await self._converge(request, server)
        except kubeloop.NotControlledError as conflict:
            self.recorder.event(server, kubeloop.WARNING, "NameConflict", str(conflict))
            return kubeloop.Result(requeue_after=10)  # no watch says when it goes
        return None

    async def _converge(self, request: kubeloop.Request, server: MCPServer) -> None:
        if server.spec.url:
            await self._remove_workload(request, server)
            status = {"observedGeneration": server.metadata.generation, "url": server.spec.url, "readyReplicas": None}
            await write_status(self.client, server, status)
            return
        selector = labels("mcp-server", request.name)
        container = {
            "name": "server",
            "image": server.spec.image,
            "ports": http_port(server.spec.port),
            # Its port and address (a process node's pods share the machine's ports), then its own.
            "env": env_list(
                [
                    {"name": "PORT", "value": str(server.spec.port)},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                ],
                [var.to_dict() for var in server.spec.env or ()],
            ),
            # Ready once it listens (a Deployment that just rolled out is not yet serving).
            "readinessProbe": {
                "tcpSocket": {"port": server.spec.port},
                "periodSeconds": 2, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3,
            },
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
            pod = obj["spec"]["template"]["spec"]
            if server.spec.service_account_name:  # it acts on the cluster as that account
                pod["serviceAccountName"] = server.spec.service_account_name
                pod["automountServiceAccountToken"] = True
            else:
                run_as_own_account(pod, request.name)

        def account(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(server, obj)
            obj["metadata"]["labels"] = selector
            no_api_account(obj)

        def service(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(server, obj)
            obj["metadata"]["labels"] = selector
            set_service(obj, selector, server.spec.port)

        namespace = request.namespace
        await kubeloop.create_or_update(
            self.client, named(kinds.ServiceAccount, request.name, namespace), account, controlled_by=server
        )
        _, made = await kubeloop.create_or_update(
            self.client, named(kinds.Deployment, request.name, namespace), deployment, controlled_by=server
        )
        await kubeloop.create_or_update(
            self.client, named(kinds.Service, request.name, namespace), service, controlled_by=server
        )
        _, ready, _ = deployment_ready(made)
        status = {
            "observedGeneration": server.metadata.generation,
            "url": url_of(server),
            "readyReplicas": ready,
        }
        await write_status(self.client, server, status)


    async def _remove_workload(self, request: kubeloop.Request, server: MCPServer) -> None:
        """Delete the Deployment, Service and ServiceAccount the server's image had (its own only)."""
        for kind in (kinds.Deployment, kinds.Service, kinds.ServiceAccount):
            with contextlib.suppress(kubeloop.errors.NotFound):
                found = await self.client.get(kind, request.name, namespace=request.namespace)
                if kubeloop.is_controlled_by(found, server):
                    await self.client.delete(found)


def setup(manager: kubeloop.Manager) -> MCPServerReconciler:
    reconciler = MCPServerReconciler(manager)
    reconciler.setup()
    return reconciler
