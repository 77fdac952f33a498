"""``kubeloop.testing.intercepted``: a reconciler meets injected conflicts and outages while the
rest runs against the embedded server; the injected Conflict is worded as the server words a
real one."""

from __future__ import annotations

from typing import Any

import pytest

import kubeloop
from kubeloop.client.rest import APIClient
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import conflict, eventually, intercepted, settled, unavailable


async def test_an_injected_conflict_is_a_requeue_and_an_outage_a_retry(
    kube_client: APIClient, kube_namespace: str
) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    updates = gets = 0

    async def update(client: Any, obj: Any, **options: Any) -> Any:
        nonlocal updates
        updates += 1
        if updates == 1:
            raise conflict(obj)
        return await client.update(obj, **options)

    async def get(client: Any, kind: Any, name: str, **options: Any) -> Any:
        nonlocal gets
        gets += 1
        if gets <= 2:
            raise unavailable()
        return await client.get(kind, name, **options)

    manager.client = intercepted(manager.client, update=update, get=get)

    async def reconcile(request: kubeloop.Request) -> None:
        config_map = await manager.client.get(core_v1.ConfigMap, request.name, namespace=request.namespace)
        if (config_map.metadata.labels or {}).get("seen") != "yes":
            config_map.metadata.labels = {"seen": "yes"}
            await manager.client.update(config_map)

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
    async with manager:
        await kube_client.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="c", namespace=kube_namespace)))

        async def labelled() -> None:
            found = await kube_client.get(core_v1.ConfigMap, "c", namespace=kube_namespace)
            assert (found.metadata.labels or {}).get("seen") == "yes"

        await eventually(labelled)
        await settled(manager)
    results = manager.controllers["configmap"].results
    assert (results["error"], results["requeue"]) == (2, 1)  # two outages retried, one conflict requeued
    assert manager.client.cache is not None  # the rest of the wrapped client is its own


async def test_the_injected_conflict_reads_as_the_servers(kube_client: APIClient, kube_namespace: str) -> None:
    made = await kube_client.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="real", namespace=kube_namespace)))  # fmt: skip
    await kube_client.update(made.model_copy(update={"data": {"a": "1"}}))
    with pytest.raises(kubeloop.errors.Conflict) as real:
        await kube_client.update(made.model_copy(update={"data": {"a": "2"}}))
    assert str(conflict(made)) == str(real.value)
    policy = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}}
    assert 'on poddisruptionbudgets.policy "p"' in str(conflict(policy))


def test_only_verbs_are_intercepted(kube_client: APIClient) -> None:
    with pytest.raises(TypeError, match="no such verb to intercept: fetch"):
        intercepted(kube_client, fetch=lambda client: None)
