"""The reconcilers' client: cached reads (lazy informers, copies, labels, field indexes, typed),
writes to the server, and the uncached reader."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import errors, kinds
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.models import core_v1
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.controller.reconcile import Request
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager
from kubeloop.workqueue.ratelimiter import ItemExponentialFailureRateLimiter
from tests.accounts import account_token
from tests.conftest import ServerThread, eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def by_owner_team(obj: dict[str, Any]) -> list[str]:
    team = (obj.get("data") or {}).get("team")
    return [team] if team else []


async def test_cached_reads_and_direct_writes(client: APIClient, namespace: str) -> None:
    for name, team, tier in (("a", "red", "web"), ("b", "blue", "web"), ("c", "red", "db")):
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": {"tier": tier}},
                "data": {"team": team},
            }
        )
    manager = Manager(client, namespace=namespace, cache_sync_timeout=10)
    manager.add_index(CONFIGMAP, "data.team", by_owner_team)
    reader = manager.client
    try:
        got = await reader.get(CONFIGMAP, "a", namespace=namespace)  # first read: informer created and synced
        got["data"]["team"] = "changed"
        assert (await reader.get(CONFIGMAP, "a", namespace=namespace))["data"]["team"] == "red"  # a copy
        typed = await reader.get(core_v1.ConfigMap, "b", namespace=namespace)
        assert isinstance(typed, core_v1.ConfigMap) and typed.data == {"team": "blue"}
        with pytest.raises(errors.NotFound):
            await reader.get(CONFIGMAP, "missing", namespace=namespace)

        assert sorted(
            o["metadata"]["name"]
            for o in await reader.list(CONFIGMAP, namespace=namespace, match_labels={"tier": "web"})
        ) == ["a", "b"]
        assert sorted(
            o["metadata"]["name"]
            for o in await reader.list(CONFIGMAP, namespace=namespace, index=("data.team", "red"))
        ) == ["a", "c"]
        assert [
            o["metadata"]["name"]
            for o in await reader.list(
                CONFIGMAP, namespace=namespace, index=("data.team", "red"), match_labels={"tier": "db"}
            )
        ] == ["c"]

        await reader.patch(
            CONFIGMAP, "a", {"data": {"team": "blue"}}, namespace=namespace
        )  # written to the server
        direct = await manager.api_reader.get(CONFIGMAP, "a", namespace=namespace)
        assert direct["data"]["team"] == "blue"
        # The cache catches up through its watch.
        await eventually(
            lambda: (
                (manager.informer_for(CONFIGMAP).store.get(f"{namespace}/a") or {}).get("data")
                == {"team": "blue"}
            )
        )
        assert sorted(
            o["metadata"]["name"]
            for o in await reader.list(CONFIGMAP, namespace=namespace, index=("data.team", "blue"))
        ) == ["a", "b"]
    finally:
        await manager.stop()


async def test_a_read_the_server_refuses_fails_the_reconcile_at_once_in_its_words(
    client: APIClient, shared_server: ServerThread, namespace: str
) -> None:
    """An operator whose role lets it watch ConfigMaps but not PersistentVolumeClaims reads a
    PVC in its reconcile: the lazy informer's list is forbidden. The read fails at once with the
    server's words (it used to wait out the cache's sync, the reconcile hanging with no error),
    and once the role allows it, the next retry reads."""
    watch_config_maps = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
    token = await account_token(client, "op", namespace, [watch_config_maps])
    outcomes: list[str] = []
    async with APIClient(load_kubeconfig(shared_server.kubeconfig).with_token(token)) as operator_client:
        manager = Manager(operator_client, namespace=namespace)

        async def reconcile(request: Request) -> None:
            try:
                await manager.client.get(core_v1.PersistentVolumeClaim, "data", namespace=request.namespace)
            except errors.APIError as error:
                outcomes.append(f"{type(error).__name__}: {error}")
                raise

        Builder(manager).for_(CONFIGMAP).with_options(
            rate_limiter=ItemExponentialFailureRateLimiter(0.01, 0.05)
        ).complete(reconcile)
        async with manager:
            await client.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": namespace}}
            )
            await eventually(lambda: outcomes)
            assert outcomes[0].startswith(
                f'Forbidden: persistentvolumeclaims is forbidden: User "system:serviceaccount:{namespace}:op" '
                'cannot list resource "persistentvolumeclaims" in API group ""'
            ), outcomes[0]
            role = await client.get(kinds.Role, "op", namespace=namespace)
            role["rules"].append(
                {
                    "apiGroups": [""],
                    "resources": ["persistentvolumeclaims"],
                    "verbs": ["get", "list", "watch"],
                }
            )
            await client.update(role)
            await eventually(lambda: outcomes[-1].startswith("NotFound: "))
