"""The manager and the builder: wiring of for_/owns/watches, unique names, caches synced before
controllers start, copies from the cache, and an owned object's event reaching its owner."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import ClientConfig, load_kubeconfig
from kubeloop.client.rest import Client
from kubeloop.controller import predicate
from kubeloop.controller.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)
from kubeloop.controller.reconcile import Request
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager
from tests.conftest import ServerThread, eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
SECRET = GroupVersionKind("", "v1", "Secret")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[Client]:
    async with Client(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


def test_builder_wiring_and_unique_names() -> None:
    manager = Manager(Client(ClientConfig(server="http://127.0.0.1:1")))
    controller = (
        Builder(manager)
        .for_(DEPLOYMENT, predicate.GenerationChanged())
        .owns(CONFIGMAP)
        .watches(SECRET, EnqueueRequestsFromMapFunc(lambda o: []))
        .with_event_filter(predicate.ResourceVersionChanged())
        .with_options(max_concurrent_reconciles=3, reconcile_timeout=5)
        .complete(lambda request: None)
    )
    assert controller.name == "deployment" and controller.max_concurrent_reconciles == 3
    sources = controller._sources
    assert [type(s.handler) for s in sources] == [  # type: ignore[attr-defined]
        EnqueueRequestForObject,
        EnqueueRequestForOwner,
        EnqueueRequestsFromMapFunc,
    ]
    owner_handler = sources[1].handler  # type: ignore[attr-defined]
    assert owner_handler.owner == DEPLOYMENT and owner_handler.only_controller
    assert all(isinstance(s.predicates[0], predicate.ResourceVersionChanged) for s in sources)  # type: ignore[attr-defined]
    # One shared informer per kind.
    assert manager.informer_for(CONFIGMAP) is manager.informer_for(CONFIGMAP)
    with pytest.raises(ValueError, match="already exists"):
        Builder(manager).for_(DEPLOYMENT).complete(lambda request: None)
    Builder(manager).for_(DEPLOYMENT).named("deployment-2").complete(lambda request: None)
    with pytest.raises(ValueError, match="for_"):
        Builder(manager).complete(lambda request: None)


async def test_caches_sync_before_controllers_and_owned_events_reach_owners(
    client: Client, namespace: str
) -> None:
    owner = await client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "owner", "namespace": namespace},
            "type": "Opaque",
        }
    )
    manager = Manager(client, namespace=namespace)
    seen: list[Request] = []
    synced_at_first_reconcile: list[bool] = []

    async def reconcile(request: Request) -> None:
        synced_at_first_reconcile.append(manager.informer_for(CONFIGMAP).has_synced)
        seen.append(request)
        cached = manager.get_cached(SECRET, request.name, request.namespace)
        assert cached is not None
        cached["metadata"]["name"] = "changed"  # a copy: the cache is not affected
        assert (manager.get_cached(SECRET, request.name, request.namespace) or {})["metadata"][
            "name"
        ] == request.name

    Builder(manager).for_(SECRET).owns(CONFIGMAP).complete(reconcile)
    await manager.start()
    try:
        await eventually(lambda: Request(namespace, "owner") in seen)
        assert synced_at_first_reconcile[0]  # every cache synced before any reconcile
        seen.clear()
        ref: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "owned", "namespace": namespace, "ownerReferences": [ref]},
            }
        )
        await eventually(lambda: Request(namespace, "owner") in seen)  # the owned object's event → the owner
        assert [o["metadata"]["name"] for o in manager.list_cached(SECRET, namespace)] == ["owner"]
    finally:
        await manager.stop()


async def test_start_fails_when_a_cache_cannot_sync() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with Client(ClientConfig(server=f"http://127.0.0.1:{port}")) as client:
        manager = Manager(client, cache_sync_timeout=0.3)
        Builder(manager).for_(CONFIGMAP).complete(lambda request: None)
        with pytest.raises(TimeoutError, match="did not sync"):
            await manager.start()
        await manager.stop()
        assert not manager.controllers["configmap"]._workers  # no controller was started


async def test_run_stops_on_request(client: Client, namespace: str) -> None:
    manager = Manager(client, namespace=namespace)
    Builder(manager).for_(CONFIGMAP).complete(lambda request: None)
    running = asyncio.ensure_future(manager.run())
    await eventually(lambda: manager.informer_for(CONFIGMAP).has_synced)
    manager.request_stop()
    await asyncio.wait_for(running, 10)
