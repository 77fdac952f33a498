"""Cache options (controller-runtime's client ``Cache.DisableFor``, ``ByObject.SyncPeriod``,
``DefaultNamespaces`` with a config per namespace, ``DefaultWatchErrorHandler``), in a manager
against the embedded server."""

from __future__ import annotations

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.cache.cache import Cache, OutOfScope
from kubeloop.testing import eventually
from tests.accounts import account_token


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
        await kube_client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": kube_namespace}}
        )
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
    await kube_client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": kube_namespace}}
    )
    await kube_client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": kube_namespace}}
    )
    async with manager:
        await eventually(lambda: reconciled["Secret"] == 1 and reconciled["ConfigMap"] >= 4)
    assert reconciled["Secret"] == 1


async def test_each_namespace_caches_what_its_own_selectors_select(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    """``default_namespaces`` as a mapping (upstream's ``DefaultNamespaces map[string]Config``):
    the web tier of one namespace, everything of another, nothing of a third."""
    web, other, unwatched = kube_namespace, f"{kube_namespace}-b", f"{kube_namespace}-c"
    for name in (other, unwatched):
        await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    for namespace, name, tier in [
        (web, "front", "web"),
        (web, "store", "db"),
        (other, "any", "db"),
        (unwatched, "x", "web"),
    ]:
        await kube_client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": name, "namespace": namespace, "labels": {"tier": tier}}})  # fmt: skip
    options = kubeloop.CacheOptions(
        default_namespaces={
            web: kubeloop.NamespaceConfig(label_selector="tier=web"),
            other: kubeloop.NamespaceConfig(),
        }
    )
    manager = kubeloop.Manager(kube_client, cache=options)
    manager.informer_for(kinds.ConfigMap)
    async with manager:
        listed = await manager.client.list(kinds.ConfigMap)
        assert sorted((c["metadata"]["namespace"], c["metadata"]["name"]) for c in listed) == sorted(
            [(other, "any"), (web, "front")]
        )
        with pytest.raises(kubeloop.errors.NotFound):
            await manager.client.get(kinds.ConfigMap, "store", namespace=web)  # not of the web tier
        with pytest.raises(OutOfScope):
            await manager.client.get(kinds.ConfigMap, "x", namespace=unwatched)
        # The namespace's watch carries its selector: relabelled into the web tier, it comes in.
        await kube_client.patch(
            kinds.ConfigMap, "store", {"metadata": {"labels": {"tier": "web"}}}, namespace=web
        )
        await eventually(lambda: manager.client.get(kinds.ConfigMap, "store", namespace=web))


async def test_the_watch_error_handler_is_told_of_each_failed_list_and_the_informer_goes_on(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    """client-go's ``WatchErrorHandler``: an account that may not list ConfigMaps yet; the
    handler hears of the refusals (the first call raises, which does not stop the informer),
    and once the account may, the cache syncs."""
    token = await account_token(kube_client, "lister", kube_namespace, [])
    told: list[tuple[kubeloop.GroupVersionKind, BaseException]] = []

    def handler(kind: kubeloop.GroupVersionKind, error: BaseException) -> None:
        told.append((kind, error))
        if len(told) == 1:
            raise RuntimeError("a handler with a bug of its own")

    async with kubeloop.APIClient(kube_client.config.with_token(token)) as lister:
        cache = Cache(
            lister, kubeloop.CacheOptions(default_namespaces=[kube_namespace], watch_error_handler=handler)
        )
        informer = cache.informer_for(kinds.ConfigMap)
        cache.start()
        try:
            await eventually(lambda: len(told) >= 2)
            assert {kind for kind, _ in told} == {kinds.ConfigMap}
            assert all(isinstance(error, kubeloop.errors.Forbidden) for _, error in told)
            assert "configmaps" in str(told[0][1])
            await kube_client.patch(
                kinds.Role, "lister", {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]},
                namespace=kube_namespace,
            )  # fmt: skip
            await eventually(lambda: informer.has_synced, timeout=30)
        finally:
            await cache.stop()
