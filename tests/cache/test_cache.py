"""The cache and its reader against the embedded server: per-kind scopes (namespaces, label and
field selectors, transforms), cluster-scoped kinds, label-selector strings, field selectors on
indexes, metadata-only informers, and the errors for reads the cache cannot answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.cache.cache import Cache, NotCached, OutOfScope
from kubeloop.cache.options import ByObject, CacheOptions
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.client.restmapper import NoKindMatch
from kubeloop.errors import InvalidSelector
from tests.conftest import Client as HttpClient
from tests.conftest import ServerThread, eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
SECRET = GroupVersionKind("", "v1", "Secret")
NAMESPACE = GroupVersionKind("", "v1", "Namespace")


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


def configmap(name: str, namespace: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": data,
    }


def extra_namespace(api: HttpClient, name: str) -> str:
    response = api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert response.status_code == 201, response.text
    return name


def names(objects: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objects]


async def test_namespaces_scope_the_cache(client: APIClient, api: HttpClient, namespace: str) -> None:
    second = extra_namespace(api, f"{namespace}-b")
    outside = extra_namespace(api, f"{namespace}-c")
    for ns in (namespace, second, outside):
        await client.create(configmap(f"in-{ns}", ns))
    cache = Cache(client, CacheOptions(default_namespaces=[namespace, second]), sync_timeout=10)
    cache.start()
    try:
        everything = await cache.list(CONFIGMAP)
        assert sorted(names(everything)) == [f"in-{namespace}", f"in-{second}"]
        assert names(await cache.list(CONFIGMAP, namespace=second)) == [f"in-{second}"]
        assert (await cache.get(CONFIGMAP, f"in-{namespace}", namespace=namespace))["metadata"][
            "namespace"
        ] == namespace
        with pytest.raises(OutOfScope):
            await cache.get(CONFIGMAP, f"in-{outside}", namespace=outside)
        with pytest.raises(OutOfScope):
            await cache.list(CONFIGMAP, namespace=outside)
        informer = cache.informer_for(CONFIGMAP)
        assert len(informer.reflectors) == 2  # one list+watch per namespace

        # Events arrive from both namespaces, none from outside.
        await client.create(configmap("late", second))
        await client.create(configmap("late", outside))
        await eventually(lambda: f"{second}/late" in informer.store)
        assert f"{outside}/late" not in informer.store

        # Cluster-scoped kinds ignore the namespaces: one reflector, every object.
        listed = await cache.list(NAMESPACE)
        assert {namespace, second, outside} <= set(names(listed))
        assert len(cache.informer_for(NAMESPACE).reflectors) == 1
        assert (await cache.get(NAMESPACE, outside))["metadata"]["name"] == outside
    finally:
        await cache.stop()


def test_a_relist_of_one_namespace_keeps_the_others() -> None:
    from kubeloop.client.config import ClientConfig

    cache = Cache(
        APIClient(ClientConfig(server="http://127.0.0.1:1")), CacheOptions(default_namespaces=["a", "b"])
    )
    informer = cache.informer_for(CONFIGMAP)
    informer.reflectors = [object(), object()]  # type: ignore[list-item]  # as _run sets them
    informer.list_page([configmap("x", "a"), configmap("y", "a")], "a")
    informer.list_done("1", "a")
    assert not informer.has_synced  # "b" has not listed yet
    informer.list_page([configmap("z", "b")], "b")
    informer.list_done("2", "b")
    assert informer.has_synced
    # A relist of "a" (after a 410, say) that no longer holds y: only a/y goes.
    informer.list_page([configmap("x", "a")], "a")
    informer.list_done("3", "a")
    assert sorted(informer.store.list_keys()) == ["a/x", "b/z"]


async def test_by_object_selectors_and_transforms(client: APIClient, namespace: str) -> None:
    await client.create(configmap("web", namespace, {"tier": "web"}))
    await client.create(configmap("db", namespace, {"tier": "db"}))
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s1", "namespace": namespace},
            "type": "Opaque",
        }
    )
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s2", "namespace": namespace},
            "type": "Opaque",
        }
    )

    def mark(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["annotations"] = {"transformed": "yes"}
        return obj

    options = CacheOptions(
        default_namespaces=[namespace],
        by_object={
            CONFIGMAP: ByObject(label_selector="tier=web", transform=mark),
            SECRET: ByObject(field_selector="metadata.name=s2", strip_managed_fields=False),
        },
    )
    cache = Cache(client, options, sync_timeout=10)
    cache.start()
    try:
        cached = await cache.list(CONFIGMAP, namespace=namespace)
        assert names(cached) == ["web"]  # the server filtered: db is not cached at all
        assert cached[0]["metadata"]["annotations"] == {"transformed": "yes"}
        assert "managedFields" not in cached[0]["metadata"]  # stripped before the transform
        with pytest.raises(errors.NotFound):
            await cache.get(CONFIGMAP, "db", namespace=namespace)
        secrets = await cache.list(SECRET, namespace=namespace)
        assert names(secrets) == ["s2"]
        assert secrets[0]["metadata"]["managedFields"]  # stored whole
        # The default transform strips managedFields where no ByObject says otherwise.
        plain = Cache(client, CacheOptions(default_namespaces=[namespace]), sync_timeout=10)
        try:
            assert "managedFields" not in (await plain.get(SECRET, "s1", namespace=namespace))["metadata"]
        finally:
            await plain.stop()
    finally:
        await cache.stop()


async def test_reader_label_selectors_field_selectors_and_indexes(client: APIClient, namespace: str) -> None:
    objects = [
        ("a", {"tier": "web", "env": "prod"}, "red"),
        ("b", {"tier": "web", "env": "dev"}, "blue"),
        ("c", {"tier": "db", "env": "prod"}, "red"),
        ("d", {"tier": "cache", "legacy": "yes"}, "red"),
    ]
    for name, labels, team in objects:
        await client.create(configmap(name, namespace, labels, team=team))
    cache = Cache(client, CacheOptions(default_namespaces=[namespace]), sync_timeout=10)
    cache.add_index(CONFIGMAP, "data.team", lambda o: [(o.get("data") or {}).get("team", "")])
    cache.start()
    try:

        async def selected(**filters: Any) -> list[str]:
            return names(await cache.list(CONFIGMAP, namespace=namespace, **filters))

        assert await selected(label_selector="tier in (web,db)") == ["a", "b", "c"]
        assert await selected(label_selector="tier notin (web),!legacy") == ["c"]
        assert await selected(label_selector="env") == ["a", "b", "c"]
        assert await selected(label_selector="tier=web,env!=prod") == ["b"]
        assert await selected(label_selector="tier", match_labels={"env": "prod"}) == ["a", "c"]
        assert await selected(field_selector="data.team=red") == ["a", "c", "d"]
        assert await selected(field_selector="data.team=red", label_selector="env=prod") == ["a", "c"]
        assert await selected(field_selector="metadata.name=b") == ["b"]
        assert await selected(field_selector="metadata.name=b,data.team=red") == []
        assert await selected(field_selector=f"metadata.namespace={namespace},data.team=blue") == ["b"]
        assert await selected(index=("data.team", "blue")) == ["b"]
        assert names(await cache.list(CONFIGMAP, field_selector="data.team=blue")) == ["b"]  # all namespaces

        with pytest.raises(InvalidSelector):
            await selected(label_selector="tier in (web")
        with pytest.raises(InvalidSelector, match="exact"):
            await selected(field_selector="data.team!=red")
        with pytest.raises(KeyError, match=r"data\.owner"):
            await selected(field_selector="data.owner=x")

        # Indexes follow updates.
        await client.patch(CONFIGMAP, "a", {"data": {"team": "blue"}}, namespace=namespace)
        informer = cache.informer_for(CONFIGMAP)
        await eventually(
            lambda: informer.store.keys_by_index("data.team", "blue") == [f"{namespace}/a", f"{namespace}/b"]
        )
        assert await selected(field_selector="data.team=red") == ["c", "d"]
    finally:
        await cache.stop()


async def test_metadata_only_informers(client: APIClient, namespace: str) -> None:
    await client.create(configmap("big", namespace, {"app": "x"}, payload="y" * 10_000))
    cache = Cache(client, CacheOptions(default_namespaces=[namespace]), sync_timeout=10)
    cache.start()
    try:
        meta = await cache.get(CONFIGMAP, "big", namespace=namespace, metadata_only=True)
        assert meta["apiVersion"] == "v1" and meta["kind"] == "ConfigMap"
        assert set(meta) == {"apiVersion", "kind", "metadata"}  # no data
        assert meta["metadata"]["labels"] == {"app": "x"} and meta["metadata"]["uid"]
        assert "managedFields" not in meta["metadata"]
        full = await cache.get(CONFIGMAP, "big", namespace=namespace)  # a separate, full informer
        assert full["data"]["payload"] == "y" * 10_000
        metadata_informer = cache.informer_for(CONFIGMAP, metadata_only=True)
        assert metadata_informer is not cache.informer_for(CONFIGMAP)

        # Watch events arrive as metadata too.
        await client.patch(CONFIGMAP, "big", {"metadata": {"labels": {"app": "z"}}}, namespace=namespace)
        key = f"{namespace}/big"
        await eventually(
            lambda: (
                ((metadata_informer.store.get(key) or {}).get("metadata") or {}).get("labels") == {"app": "z"}
            )
        )
        assert set(metadata_informer.store.get(key) or {}) == {"apiVersion", "kind", "metadata"}
        listed = await cache.list(CONFIGMAP, namespace=namespace, label_selector="app=z", metadata_only=True)
        assert names(listed) == ["big"] and "data" not in listed[0]
        await client.delete(CONFIGMAP, "big", namespace=namespace)
        await eventually(lambda: key not in metadata_informer.store)
    finally:
        await cache.stop()


async def test_reader_can_refuse_kinds_without_an_informer(client: APIClient, namespace: str) -> None:
    cache = Cache(client, CacheOptions(default_namespaces=[namespace], reader_fails_on_missing_informer=True))
    cache.informer_for(SECRET)
    cache.start()
    try:
        assert await cache.list(SECRET, namespace=namespace) == []
        with pytest.raises(NotCached):
            await cache.list(CONFIGMAP, namespace=namespace)
    finally:
        await cache.stop()


async def test_an_unknown_kind_keeps_retrying_and_reads_fail_at_once(client: APIClient, namespace: str) -> None:
    """As controller-runtime: an informer for a kind the server lacks (a CRD not yet installed)
    retries instead of dying. A read does not wait out the sync timeout in silence: it fails at
    once, saying the server serves no such kind."""
    missing = GroupVersionKind("example.com", "v1", "Missing")
    cache = Cache(client, CacheOptions(default_namespaces=[namespace]), sync_timeout=120)
    cache.start()
    try:
        with pytest.raises(NoKindMatch, match=r'no matches for kind "Missing" in version "example\.com/v1"'):
            await cache.get(missing, "x", namespace=namespace)
        informer = cache.informer_for(missing)
        assert informer.namespaced is None and not informer.has_synced
        assert all(not task.done() for task in informer._tasks)  # still retrying, not crashed
        # Known kinds are unaffected.
        assert await cache.list(CONFIGMAP, namespace=namespace) == []
    finally:
        await cache.stop()


async def test_remove_informer_stops_it_and_a_later_one_starts_afresh(
    client: APIClient, namespace: str
) -> None:
    await client.create(configmap("first", namespace))
    cache = Cache(client, CacheOptions(default_namespaces=[namespace]), sync_timeout=10)
    cache.start()
    try:
        await cache.get(CONFIGMAP, "first", namespace=namespace)
        old = cache.informer_for(CONFIGMAP)
        await cache.remove_informer(CONFIGMAP)
        assert (CONFIGMAP, False) not in cache.informers
        # The removed informer hears nothing more; a new one (started at once) lists afresh.
        await client.create(configmap("second", namespace))
        fresh = cache.informer_for(CONFIGMAP)
        assert fresh is not old
        await eventually(lambda: f"{namespace}/second" in fresh.store)
        assert f"{namespace}/second" not in old.store
        await cache.remove_informer(SECRET)  # none: nothing to do
    finally:
        await cache.stop()
