"""controller-runtime's seed example (pkg/doc.go), in kubeloop: a controller for ReplicaSets that
also watches the Pods they own, and makes sure every ReplicaSet carries the label hello=world.

    kubeloop run examples/hello_label --kubeconfig ~/.kube/config
    kubeloop run examples/hello_label --embedded
"""

from __future__ import annotations

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client import errors
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

REPLICASET = GroupVersionKind("apps", "v1", "ReplicaSet")
POD = GroupVersionKind("", "v1", "Pod")


def setup(manager: Manager) -> None:
    async def reconcile(request: Request) -> Result | None:
        try:
            replica_set = await manager.client.get(REPLICASET, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None  # deleted meanwhile: nothing to do
        labels = replica_set["metadata"].get("labels") or {}
        if labels.get("hello") == "world":
            return None
        await manager.client.patch(
            REPLICASET,
            request.name,
            {"metadata": {"labels": {"hello": "world"}}},
            namespace=request.namespace,
        )
        return None

    Builder(manager).for_(REPLICASET).owns(POD).complete(reconcile)
