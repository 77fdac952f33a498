"""Cache options of one kind (controller-runtime's client ``Cache.DisableFor`` and
``ByObject.SyncPeriod``), in a manager against the embedded server."""

from __future__ import annotations

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually


async def test_a_kind_disabled_for_the_cache_is_read_from_the_server(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    """Secrets are never cached: no informer is made for them (every Secret of the cluster would
    be held), and a Secret just written is read at once; ConfigMaps still come from the cache."""
    manager = kubeloop.Manager(kube_client, cache=kubeloop.CacheOptions(disable_for=[kinds.Secret]))
    async with manager:
        await kube_client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": kube_namespace},
                                  "stringData": {"k": "v"}})  # fmt: skip
        found = await manager.client.get(kinds.Secret, "s", namespace=kube_namespace)  # no wait: no cache
        assert found["data"] == {"k": "dg=="}
        listed = await manager.client.list(kinds.Secret, namespace=kube_namespace)
        assert [s["metadata"]["name"] for s in listed] == ["s"]
        await kube_client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": kube_namespace}})
        await eventually(lambda: manager.client.get(kinds.ConfigMap, "c", namespace=kube_namespace))
        cached = {gvk.kind for gvk, _ in manager.cache.informers}
        assert "ConfigMap" in cached and "Secret" not in cached


async def test_a_kinds_own_sync_period_resyncs_it_and_no_other(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    """ConfigMaps resync every 0.2 s (ByObject.sync_period), the rest at the cache's 10 hours:
    an unchanged ConfigMap is reconciled again and again, an unchanged Secret once."""
    reconciled: dict[str, int] = {"ConfigMap": 0, "Secret": 0}
    options = kubeloop.CacheOptions(by_object={kinds.ConfigMap: kubeloop.ByObject(sync_period=0.2)})
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace, cache=options)
    for kind in (kinds.ConfigMap, kinds.Secret):

        def count(request: kubeloop.Request, kind: str = kind.kind) -> None:
            reconciled[kind] += 1

        kubeloop.Builder(manager).named(kind.kind.lower()).for_(kind).complete(count)
    await kube_client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": kube_namespace}})
    await kube_client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": kube_namespace}})
    async with manager:
        await eventually(lambda: reconciled["Secret"] == 1 and reconciled["ConfigMap"] >= 4)
    assert reconciled["Secret"] == 1
