"""``assert_converged``: a reconciler that sets only the fields it owns passes; one that sets a
whole spec the server defaults writes on every pass, and is named with what it wrote."""

from __future__ import annotations

import pytest

import kubeloop
from kubeloop.client.rest import APIClient
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import assert_converged, eventually


def setup(manager: kubeloop.Manager, *, whole_spec: bool) -> None:
    async def reconcile(request: kubeloop.Request) -> None:
        try:
            source = await manager.client.get(core_v1.ConfigMap, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return
        labels = {"app": request.name}

        def mutate(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(source, obj)
            container = {"name": "web", "image": "nginx:1.27"}
            if whole_spec:  # the server adds defaults to this spec: it differs every time
                obj["spec"] = {"replicas": 1, "selector": {"matchLabels": labels},
                               "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}  # fmt: skip
                return
            spec = obj.setdefault("spec", {})
            spec["replicas"] = 1
            spec["selector"] = {"matchLabels": labels}
            template = spec.setdefault("template", {})
            template.setdefault("metadata", {})["labels"] = labels
            containers = template.setdefault("spec", {}).setdefault("containers", [])
            if not containers:
                containers.append({"name": "web"})
            containers[0]["image"] = "nginx:1.27"

        wanted = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": request.name, "namespace": request.namespace}}  # fmt: skip
        await kubeloop.create_or_update(manager.client, wanted, mutate)

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).owns(kubeloop.kinds.Deployment).complete(reconcile)


@pytest.mark.parametrize("whole_spec", [False, True])
async def test_assert_converged(kube_client: APIClient, kube_namespace: str, whole_spec: bool) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    setup(manager, whole_spec=whole_spec)
    async with manager:
        await kube_client.create(
            core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="web", namespace=kube_namespace))
        )
        await eventually(lambda: kube_client.get(kubeloop.kinds.Deployment, "web", namespace=kube_namespace))
        if not whole_spec:
            await assert_converged(manager)
            return
        with pytest.raises(AssertionError) as refused:
            await assert_converged(manager)
    assert str(refused.value) == (
        "not converged: reconciled again, with nothing changed:\n"
        f"configmap: reconcile {kube_namespace}/web wrote Deployment/web updated"
    )


async def test_requests_from_watches_are_checked_and_a_requeue_is_not_converged(
    kube_client: APIClient, kube_namespace: str
) -> None:
    """A controller built with ``named().watches(...)`` has no ``for_``: its requests come from a
    map function. One that writes on every pass, or asks to be requeued, is caught; nothing to
    check is a failure, not a pass."""
    behaviour = {"write": True, "requeue": False}

    def setup(manager: kubeloop.Manager) -> None:
        async def to_summary(obj: kubeloop.Obj) -> list[kubeloop.Request]:
            return [kubeloop.Request(obj["metadata"]["namespace"], "summary")]

        async def reconcile(request: kubeloop.Request) -> kubeloop.Result | None:
            if behaviour["write"]:
                stamp = {"metadata": {"name": "summary", "namespace": request.namespace},
                         "apiVersion": "v1", "kind": "Secret", "stringData": {"at": str(id(object()))}}  # fmt: skip
                await kubeloop.create_or_update(manager.client, stamp, lambda obj: obj.update(stamp))
            return kubeloop.Result(requeue=True) if behaviour["requeue"] else None

        handler = kubeloop.handler.EnqueueRequestsFromMapFunc(to_summary)
        kubeloop.Builder(manager).named("summaries").watches(core_v1.ConfigMap, handler).complete(reconcile)

    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    setup(manager)
    async with manager:
        with pytest.raises(AssertionError, match="assert_converged checked nothing"):
            await assert_converged(manager)
        for name in ("a", "b"):
            await kube_client.create(
                core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name=name, namespace=kube_namespace))
            )
        with pytest.raises(AssertionError) as wrote:
            await assert_converged(manager)
        assert str(wrote.value) == (
            "not converged: reconciled again, with nothing changed:\n"
            f"summaries: reconcile {kube_namespace}/summary wrote Secret/summary updated"
        )
        behaviour.update(write=False, requeue=True)
        with pytest.raises(AssertionError) as requeued:
            await assert_converged(manager)
        assert str(requeued.value).endswith(
            f"summaries: reconcile {kube_namespace}/summary asked to be requeued"
        )
        behaviour.update(requeue=False)
        await assert_converged(manager)
