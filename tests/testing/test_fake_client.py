"""``kubeloop.testing.fake_client`` and ``fake_manager``: unit tests with no server beside them.

The seeded objects are there as given (their namespaces made, the CRDs of custom resource
models installed, a status set through the status subresource); the server's rules hold as on a
cluster (a stale resourceVersion is a Conflict, a status written with the object is dropped, a
bad name is refused naming the field, a watch from a resourceVersion sees what followed); the
connections are socket pairs, not TCP. A reconciler is unit-tested one request at a time with
``fake_manager`` — the web_config example's, including its terminal error and a Conflict
injected with ``intercepted`` — and the informers its reads started end with the block.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import pathlib
import socket
from types import ModuleType
from typing import Any

import pytest

import kubeloop
from kubeloop import errors, kinds
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.models import apps_v1, core_v1, meta_v1
from kubeloop.testing import ServerThread, conflict, eventually, fake_client, fake_manager, intercepted


def _example() -> ModuleType:
    """examples/web_config/main.py, under a name of its own (other tests import other main.py files)."""
    spec = importlib.util.spec_from_file_location(
        "web_config_example", pathlib.Path(__file__).parents[2] / "examples" / "web_config" / "main.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


web_config = _example()
setup, STATUS = web_config.setup, web_config.STATUS


class Gadget(kubeloop.CustomResource, group="fake.example.com", version="v1", kind="Gadget"):
    class Spec(kubeloop.KubeModel):
        size: int

    class Status(kubeloop.KubeModel):
        phase: str | None = None

    spec: Spec
    status: Status | None = None


def labelled_config(name: str, namespace: str, replicas: str) -> core_v1.ConfigMap:
    return core_v1.ConfigMap(
        metadata=meta_v1.ObjectMeta(
            name=name, namespace=namespace, labels={"web.example.com/deploy": "true"}
        ),
        data={"replicas": replicas, "image": "nginx:1.27"},
    )


async def test_seeded_objects_are_there_as_given() -> None:
    gadget = Gadget.model_validate(
        {"metadata": {"name": "g", "namespace": "lab"}, "spec": {"size": 3}, "status": {"phase": "Ready"}}
    )
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
        "status": {"replicas": 2, "readyReplicas": 2},
    }  # fmt: skip
    async with fake_client(gadget, deployment) as client:
        found = await client.get(Gadget, "g", namespace="lab")
        assert found.spec.size == 3 and found.status is not None and found.status.phase == "Ready"
        web = await client.get(apps_v1.Deployment, "web", namespace="shop")
        assert web.status is not None and web.status.ready_replicas == 2
        assert web.spec is not None and web.spec.replicas == 1  # defaulted, as the server does
        names = {ns.metadata.name for ns in (await client.list(core_v1.Namespace)).items}
        assert {"lab", "shop", "default"} <= names


async def test_the_servers_rules_hold() -> None:
    config_map = core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="c", namespace="default"))
    async with fake_client(config_map, crds=[Gadget]) as client:
        first = await client.get(core_v1.ConfigMap, "c", namespace="default")
        first.data = {"a": "1"}
        await client.update(first)
        first.data = {"a": "2"}
        with pytest.raises(errors.Conflict, match="the object has been modified"):
            await client.update(first)  # its resourceVersion is stale now

        gadget = await client.create(Gadget.model_validate({"metadata": {"name": "g"}, "spec": {"size": 1}}), namespace="default")  # fmt: skip
        gadget.status = Gadget.Status(phase="Ready")
        gadget.spec.size = 2
        updated = await client.update(gadget)
        assert updated.spec.size == 2 and updated.status is None  # status only through its subresource

        with pytest.raises(errors.Invalid) as invalid:
            await client.create(
                core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="Bad_Name", namespace="default"))
            )
        assert invalid.value.code == 422 and "metadata.name" in str(invalid.value)

        since = (await client.get(core_v1.ConfigMap, "c", namespace="default")).metadata.resource_version
        watch = client.watch(core_v1.ConfigMap, namespace="default", resource_version=since)
        try:
            await client.create(
                core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="later", namespace="default"))
            )
            async for event in watch:
                if event.type == "ADDED" and event.object["metadata"]["name"] == "later":
                    break
        finally:
            await watch.close()


async def test_the_client_reaches_its_server_through_socket_pairs() -> None:
    families: list[socket.AddressFamily] = []
    async with fake_client() as client:
        assert client.config.dial is not None
        dial = client.config.dial

        async def counted() -> socket.socket:
            sock = await dial()
            families.append(sock.family)
            return sock

        object.__setattr__(client.config, "dial", counted)  # frozen; the pool reads it when made
        client._transport = None
        await asyncio.gather(*(client.list(kinds.ConfigMap, namespace="default") for _ in range(3)))
    assert families and set(families) == {socket.AF_UNIX}


async def test_a_reconciler_unit_tested_one_request_at_a_time() -> None:
    async with fake_manager(
        setup, labelled_config("web", "shop", "3"), labelled_config("bad", "shop", "x")
    ) as manager:
        controller = manager.controllers["configmap"]
        assert await controller.reconcile_once(kubeloop.Request("shop", "web")) is None
        deployment = await manager.api_reader.get(apps_v1.Deployment, "web", namespace="shop")
        assert deployment.spec is not None and deployment.spec.replicas == 3
        [owner] = deployment.metadata.owner_references or []
        assert (owner.kind, owner.name, owner.controller) == ("ConfigMap", "web", True)
        config = await manager.api_reader.get(core_v1.ConfigMap, "web", namespace="shop")
        assert (config.metadata.annotations or {})[STATUS] == "0/3 ready"  # no workloads run here

        with pytest.raises(kubeloop.TerminalError, match="replicas is not a count: 'x'"):
            await controller.reconcile_once(kubeloop.Request("shop", "bad"))
        assert not (await manager.api_reader.list(apps_v1.Deployment, namespace="shop", field_selector="metadata.name=bad")).items  # fmt: skip
        informers = list(manager.cache._informers.values())
        assert informers and all(informer.has_synced for informer in informers)
    assert all(not informer._tasks for informer in informers)


async def test_a_conflict_injected_into_a_unit_tested_reconciler() -> None:
    seen: list[str] = []

    async def update(client: Any, obj: Any, **options: Any) -> Any:
        seen.append(obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name)
        raise conflict(obj)

    async with fake_manager(setup, labelled_config("web", "shop", "2")) as manager:
        controller = manager.controllers["configmap"]
        await controller.reconcile_once(kubeloop.Request("shop", "web"))  # creates the Deployment
        config = await manager.api_reader.get(core_v1.ConfigMap, "web", namespace="shop")
        config.data = {**(config.data or {}), "replicas": "4"}
        await manager.api_reader.update(config)
        await kubeloop.testing.eventually(
            lambda: manager.client.get(core_v1.ConfigMap, "web", namespace="shop"),
        )
        manager.client = intercepted(manager.client, update=update)

        async def replicas_seen() -> None:
            cached = await manager.client.get(core_v1.ConfigMap, "web", namespace="shop")
            assert (cached.data or {})["replicas"] == "4"

        await kubeloop.testing.eventually(replicas_seen)
        with pytest.raises(errors.Conflict):
            await controller.reconcile_once(kubeloop.Request("shop", "web"))
        assert seen == ["web"]
        deployment = await manager.api_reader.get(apps_v1.Deployment, "web", namespace="shop")
        assert deployment.spec is not None and deployment.spec.replicas == 2  # the write never happened


async def test_a_tls_server_on_another_threads_loop_is_dialed_too(
    kube_apiserver: ServerThread, kube_client: APIClient, kube_namespace: str
) -> None:
    """``ClientConfig.dial`` of any server: the session's, which serves TLS on its own loop in a
    thread; a watch (aiohttp's side of the server) and, while it holds its connection, a request
    go through socket pairs of their own."""
    families: list[socket.AddressFamily] = []

    async def dial() -> socket.socket:
        sock = await kube_apiserver.server.dial()
        families.append(sock.family)
        return sock

    config = dataclasses.replace(load_kubeconfig(kube_apiserver.kubeconfig), dial=dial)
    assert config.server.startswith("https://")
    namespace = await kube_client.get(core_v1.Namespace, kube_namespace)
    async with APIClient(config) as client:
        watch = client.watch(
            core_v1.ConfigMap, namespace=kube_namespace, resource_version=namespace.metadata.resource_version
        )

        async def dialed() -> None:
            async for event in watch:
                if event.object["metadata"]["name"] == "dialed":
                    return

        seen = asyncio.create_task(dialed())
        try:
            await eventually(lambda: families)  # the watch has its connection
            await client.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="dialed", namespace=kube_namespace)))
            await seen
        finally:
            seen.cancel()
            await watch.close()
    assert families == [socket.AF_UNIX, socket.AF_UNIX]
