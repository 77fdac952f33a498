"""A second cluster (controller-runtime's ``cluster.Cluster``): its own client, cache and REST
mapper, added to a manager, so that one operator watches one cluster's objects and writes to
another. Two embedded servers: the manager's own and a second one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.client.config import ClientConfig, load_kubeconfig
from kubeloop.controller.handler import EnqueueRequestForObject
from kubeloop.testing import ServerThread, start_server
from tests.conftest import eventually


@pytest.fixture(scope="module")
def edge_server() -> Iterator[ServerThread]:
    server = start_server()
    yield server
    server.stop()


async def maybe_get(client: kubeloop.APIClient, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return await client.get(kinds.ConfigMap, name, namespace=namespace)
    except kubeloop.errors.NotFound:
        return None


async def present(client: kubeloop.APIClient, name: str, namespace: str) -> bool:
    return await maybe_get(client, name, namespace) is not None


async def test_an_operator_mirrors_a_second_clusters_objects_into_its_own(
    client: kubeloop.APIClient, namespace: str, edge_server: ServerThread
) -> None:
    async with kubeloop.APIClient(load_kubeconfig(edge_server.kubeconfig)) as edge_api:
        await edge_api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        edge = kubeloop.Cluster(edge_api, name="edge", namespace=namespace)
        manager = kubeloop.Manager(client, namespace=namespace)
        manager.add_cluster(edge)
        seen: list[str] = []

        async def reconcile(request: kubeloop.Request) -> None:
            seen.append(request.name)
            mirror_name = f"edge-{request.name}"
            try:
                source = await edge.client.get(kinds.ConfigMap, request.name, namespace=request.namespace)
            except kubeloop.errors.NotFound:
                with contextlib.suppress(kubeloop.errors.NotFound):
                    await manager.api_reader.delete(kinds.ConfigMap, mirror_name, namespace=namespace)
                return

            def mirror(obj: kubeloop.Obj) -> None:
                obj["data"] = dict(source.get("data") or {})
                obj["metadata"].setdefault("labels", {})["mirrored-from"] = "edge"

            wanted = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": mirror_name, "namespace": namespace},
            }
            await kubeloop.create_or_update(manager.api_reader, wanted, mirror)

        kubeloop.Builder(manager).named("mirror").watches_raw_source(
            edge.source(kinds.ConfigMap, EnqueueRequestForObject())
        ).complete(reconcile)

        # Something on the edge before the operator starts: its initial list brings it home.
        await edge_api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": namespace},
                "data": {"k": "1"},
            }
        )
        async with manager:
            await eventually(lambda: present(client, "edge-a", namespace))
            assert (await client.get(kinds.ConfigMap, "edge-a", namespace=namespace))["data"] == {"k": "1"}

            # The cluster's own client reads its cache: the edge's object, not a home one.
            edge_a = await edge.client.get(kinds.ConfigMap, "a", namespace=namespace)
            assert (
                edge_a["metadata"]["uid"]
                == (await edge_api.get(kinds.ConfigMap, "a", namespace=namespace))["metadata"]["uid"]
            )
            assert await maybe_get(client, "a", namespace) is None  # nothing of that name at home
            assert (await edge.rest_mapper.mapping(kinds.ConfigMap)).resource == "configmaps"

            # A change and a deletion on the edge follow home.
            await edge_api.patch(kinds.ConfigMap, "a", {"data": {"k": "2"}}, namespace=namespace)

            async def updated() -> bool:
                mirrored = await maybe_get(client, "edge-a", namespace)
                return mirrored is not None and mirrored.get("data") == {"k": "2"}

            await eventually(updated)
            await edge_api.delete(kinds.ConfigMap, "a", namespace=namespace)

            async def deleted() -> bool:
                return await maybe_get(client, "edge-a", namespace) is None

            await eventually(deleted)

            # A ConfigMap made at home is none of this controller's business: after it, an edge
            # object's mirror appears, and no mirror of the home one ever does.
            await client.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": namespace}}
            )
            await edge_api.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": namespace}}
            )
            await eventually(lambda: present(client, "edge-c", namespace))
            assert "b" not in seen and await maybe_get(client, "edge-b", namespace) is None
            await eventually(lambda: manager.busy() == [])
        # The manager stopped the edge's cache with its own.
        assert not edge.cache.started and not manager.cache.started


async def test_a_cluster_that_never_syncs_stops_the_manager_from_starting(client: kubeloop.APIClient) -> None:
    unreachable = kubeloop.APIClient(ClientConfig(server="https://127.0.0.1:9"))
    edge = kubeloop.Cluster(unreachable, name="nowhere", cache_sync_timeout=0.3)
    edge.informer_for(kinds.ConfigMap)
    manager = kubeloop.Manager(client)
    manager.add_cluster(edge)
    with pytest.raises(TimeoutError, match=r"in nowhere did not sync within 0\.3s"):
        await manager.start()
    await manager.stop()
    await unreachable.close()


def test_a_cluster_is_added_once_and_before_the_manager_starts(client: kubeloop.APIClient) -> None:
    manager = kubeloop.Manager(client)
    edge = kubeloop.Cluster(client, name="edge")
    manager.add_cluster(edge)
    with pytest.raises(ValueError, match="a cluster named edge is added already"):
        manager.add_cluster(kubeloop.Cluster(client, name="edge"))
