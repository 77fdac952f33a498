"""Greeters that really run: each ConfigMap labelled ``greeter.example.com/deploy=true`` gets a
Deployment of the image ``example.com/greeter`` (its greeting from the ConfigMap) and a Service;
once the Deployment is ready the operator asks the Service, as any pod of the cluster would, and
writes what it answered into the ConfigMap's ``greeter.example.com/answer`` annotation.

On kubeloop's process node both the operator and the greeter run as processes, the operator
as the pod of its own Deployment (``deploy.yaml``), reaching the Service through the node's
proxy::

    kubeloop apiserver --simulate --data-dir ./cluster \\
      --local-image "example.com/greeter=python examples/local_service/greeter.py" \\
      --local-image "example.com/greeter-operator=kubeloop run examples/local_service/main.py"
    kubectl apply -f examples/local_service/deploy.yaml
    kubectl create configmap hello --from-literal=greeting=hi
    kubectl label configmap hello greeter.example.com/deploy=true
    kubectl get configmap hello -o jsonpath='{.metadata.annotations}'
"""

import asyncio
import urllib.request

import kubeloop
from kubeloop import kinds
from kubeloop.models import core_v1

SELECT = kubeloop.predicate.LabelSelectorPredicate("greeter.example.com/deploy=true")
ANSWER = "greeter.example.com/answer"
IMAGE = "example.com/greeter"


def ask(url: str) -> str:
    """What the Service answers (through the proxy the node gives this pod)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode().strip())


def setup(manager: kubeloop.Manager) -> None:
    async def reconcile(request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            config = await manager.client.get(core_v1.ConfigMap, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # deleted: its Deployment and Service go with it (owner references)
        labels = {"app": request.name}
        greeting = (config.data or {}).get("greeting", "hello")
        name = {"name": request.name, "namespace": request.namespace}

        def deployment(wanted: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(config, wanted)
            wanted["spec"] = {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "greeter",
                                "image": IMAGE,
                                "env": [
                                    {"name": "GREETING", "value": greeting},
                                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                ],
                                "ports": [{"name": "http", "containerPort": 8080}],
                                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                            }
                        ]
                    },
                },
            }

        def service(wanted: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(config, wanted)
            spec = wanted.setdefault("spec", {})
            spec["selector"] = labels
            spec["ports"] = [{"name": "http", "port": 80, "targetPort": "http"}]

        wanted_deployment: kubeloop.Obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": name}
        wanted_service: kubeloop.Obj = {"apiVersion": "v1", "kind": "Service", "metadata": name}
        _, made = await kubeloop.create_or_update(manager.client, wanted_deployment, deployment)
        await kubeloop.create_or_update(manager.client, wanted_service, service)
        status = made.get("status") or {}
        if status.get("observedGeneration") != made["metadata"].get("generation") or not status.get("readyReplicas"):
            return kubeloop.Result(requeue_after=1.0)  # a rollout on its way: look again
        answer = await asyncio.to_thread(ask, f"http://{request.name}.{request.namespace}/")
        if not answer.startswith(greeting):
            return kubeloop.Result(requeue_after=1.0)  # the old greeting's pod still answers
        if (config.metadata.annotations or {}).get(ANSWER) != answer:
            await manager.client.patch(config, None, {"metadata": {"annotations": {ANSWER: answer}}})
        return None

    kubeloop.Builder(manager).for_(core_v1.ConfigMap, SELECT).owns(kinds.Deployment).complete(reconcile)
