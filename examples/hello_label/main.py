"""controller-runtime's seed example (pkg/doc.go), in kubeloop: a controller for ReplicaSets that
also watches the Pods they own, and makes sure every ReplicaSet carries the label hello=world.

    kubeloop run examples/hello_label --kubeconfig ~/.kube/config
    kubeloop run examples/hello_label --embedded
"""

import kubeloop
from kubeloop import kinds


def setup(manager: kubeloop.Manager) -> None:
    async def reconcile(request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            replica_set = await manager.client.get(
                kinds.ReplicaSet, request.name, namespace=request.namespace
            )
        except kubeloop.errors.NotFound:
            return None  # deleted meanwhile: nothing to do
        if (replica_set["metadata"].get("labels") or {}).get("hello") == "world":
            return None
        await manager.client.patch(
            kinds.ReplicaSet,
            request.name,
            {"metadata": {"labels": {"hello": "world"}}},
            namespace=request.namespace,
        )
        return None

    kubeloop.Builder(manager).for_(kinds.ReplicaSet).owns(kinds.Pod).complete(reconcile)
