"""Registries of two front-ends (each over a RemoteStore) over one store process's ObjectStore:
a read on one front-end sees what the other wrote, and writes racing on one object through both
lose nothing (the registry's retries read what won)."""

from __future__ import annotations

import asyncio
from typing import Any

from kubeloop.apiserver import groups
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import WriteOptions
from kubeloop.apiserver.storage.log import MemoryLog
from kubeloop.apiserver.storage.objectstore import ObjectStore
from tests.apiserver.storage.test_remote_store import StoreProcess


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


async def test_two_front_ends_registries_read_each_others_writes_and_race_without_loss() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    process = StoreProcess(store)
    one, two = await process.front_end(), await process.front_end()
    try:
        catalog = ResourceCatalog(groups.builtin_resources())
        first, second = (Registry(front, catalog, groups.builtin_strategy) for front in (one, two))
        namespaces = catalog.lookup("", "v1", "namespaces")
        configmaps = catalog.lookup("", "v1", "configmaps")
        assert namespaces is not None and configmaps is not None
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}
        await first.create(namespaces, None, namespace, WriteOptions())
        # A consistent read on the other front-end, whose feed is held up, waits until it has
        # what the store had committed (the create), then sees it.
        with process.unfed(two):
            created = await first.create(configmaps, "demo", configmap("settings", a="1"), WriteOptions())
            consistent = asyncio.ensure_future(second.caught_up(""))
            for _ in range(10):
                await asyncio.sleep(0)
            assert not consistent.done()
        await consistent
        assert second.get(configmaps, "demo", "settings") == created.obj

        # So does a read at a resourceVersion the other front-end has not reached (not a 504).
        with process.unfed(two):
            updated = await first.patch(
                configmaps, "demo", "settings", "application/merge-patch+json", b'{"data":{"b":"2"}}', WriteOptions()
            )
            rv = updated.obj["metadata"]["resourceVersion"]
            newer = asyncio.ensure_future(second.caught_up(rv))
            for _ in range(10):
                await asyncio.sleep(0)
            assert not newer.done()
        await newer
        assert second.get(configmaps, "demo", "settings", rv)["data"] == {"a": "1", "b": "2"}

        # Merge patches of one ConfigMap from both front-ends at once: each adds its key, and the
        # registry's retries after a refusal read the object that won, so every key is there.
        async def patch(registry: Registry, key: str) -> None:
            body = f'{{"data":{{"{key}":"x"}}}}'.encode()
            await registry.patch(configmaps, "demo", "settings", "application/merge-patch+json", body, WriteOptions())

        await asyncio.gather(
            *(patch(registry, f"k{i}-{n}") for i in range(25) for n, registry in enumerate((first, second)))
        )
        await first.caught_up("")
        data = first.get(configmaps, "demo", "settings")["data"]
        assert {f"k{i}-{n}" for i in range(25) for n in (0, 1)} <= set(data)
        stored = store.get("/registry/configmaps/demo/settings")
        assert stored is not None and stored.obj["data"] == data
    finally:
        await one.close()
        await two.close()
        await process.stop()
