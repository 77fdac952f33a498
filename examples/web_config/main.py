"""A ConfigMap-driven Deployment: each ConfigMap labelled web.example.com/deploy=true gets a
Deployment of its name (image and replicas from its data) that it owns; the operator records an
Event when it creates or changes the Deployment and reports the rollout in an annotation.

    kubeloop run examples/web_config --embedded
"""

import kubeloop
from kubeloop import kinds
from kubeloop.models import core_v1

SELECT = kubeloop.predicate.LabelSelectorPredicate("web.example.com/deploy=true")
STATUS = "web.example.com/status"


def setup(manager: kubeloop.Manager) -> None:
    recorder = manager.event_recorder("web-config")

    async def reconcile(request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            config = await manager.client.get(core_v1.ConfigMap, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # deleted: its Deployment goes with it (owner reference)
        data, labels = config.data or {}, {"app": request.name}
        replicas = data.get("replicas", "1")
        if not (replicas.isascii() and replicas.isdigit() and int(replicas) < 2**31):  # an int32
            # Retrying cannot fix it: say so where `kubectl describe` shows it, and stop.
            recorder.event(config, kubeloop.WARNING, "InvalidReplicas", f"replicas {replicas[:50]!r}")
            raise kubeloop.TerminalError(f"replicas is not a count: {replicas[:50]!r}")

        def mutate(deployment: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(config, deployment)
            spec = deployment.setdefault("spec", {})
            spec["replicas"] = int(replicas)
            spec["selector"] = {"matchLabels": labels}
            template = spec.setdefault("template", {})
            template.setdefault("metadata", {})["labels"] = labels
            pod = template.setdefault("spec", {})
            pod.setdefault("containers", [{"name": "web"}])[0]["image"] = data.get("image", "nginx")

        name = {"name": request.name, "namespace": request.namespace}
        wanted: kubeloop.Obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": name}
        result, deployment = await kubeloop.create_or_update(manager.client, wanted, mutate)
        if result != kubeloop.OperationResult.UNCHANGED:
            recorder.event(config, kubeloop.NORMAL, result.title(), f"Deployment {request.name} {result}")
        ready = (deployment.get("status") or {}).get("readyReplicas", 0)
        status = f"{ready}/{deployment['spec']['replicas']} ready"
        if (config.metadata.annotations or {}).get(STATUS) != status:
            await manager.client.patch(config, None, {"metadata": {"annotations": {STATUS: status}}})
        return None

    kubeloop.Builder(manager).for_(core_v1.ConfigMap, SELECT).owns(kinds.Deployment).complete(reconcile)
