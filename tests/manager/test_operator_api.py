"""The operator author's API, used the way an operator uses it (``import kubeloop``): both clients
take the same arguments, models and dicts work in every helper and come back in the form given,
create_or_update reads through the cache and tells a no-op from a change, and sync reconcilers
read and write through the manager's blocking client."""

from __future__ import annotations

import asyncio
import pathlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.errors import InvalidSelector
from kubeloop.models import apps_v1, core_v1
from kubeloop.testing.serverthread import start_server
from tests.conftest import Client as HttpClient
from tests.conftest import ServerThread, eventually


@pytest.fixture(params=["memory", "durable"])
async def manager(
    request: pytest.FixtureRequest, shared_server: ServerThread, namespace: str, tmp_path: pathlib.Path
) -> AsyncIterator[kubeloop.Manager]:
    """A manager on the shared in-memory server, and on a durable one (``--data-dir``) of its own."""
    server = shared_server if request.param == "memory" else start_server(tmp_path / "data")
    try:
        if server is not shared_server:
            HttpClient(server).post("/api/v1/namespaces", {"metadata": {"name": namespace}})
        async with kubeloop.APIClient(kubeloop.load_config(str(server.kubeconfig))) as api:
            manager = kubeloop.Manager(api, namespace=namespace, cache_sync_timeout=10)
            yield manager
            await manager.stop()
    finally:
        if server is not shared_server:
            server.stop()


def deployment_dict(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace}}


def set_image(image: str, replicas: int = 1) -> Callable[[Any], None]:
    """A mutate that sets what this controller owns and leaves server defaults alone."""

    def mutate(deployment: Any) -> None:
        data = deployment if isinstance(deployment, dict) else None
        if data is None:  # a model: edit its JSON form and assign it back
            data = deployment.to_dict()
        spec = data.setdefault("spec", {})
        spec["replicas"] = replicas
        spec.setdefault("selector", {"matchLabels": {"app": "web"}})
        template = spec.setdefault("template", {"metadata": {"labels": {"app": "web"}}, "spec": {}})
        containers = template["spec"].setdefault("containers", [{"name": "web"}])
        containers[0]["image"] = image
        if not isinstance(deployment, dict):
            deployment.assign(data)

    return mutate


def gets(manager: kubeloop.Manager) -> int:
    return sum(count for (method, _), count in manager.api_reader.requests.items() if method == "GET")


def writes(manager: kubeloop.Manager) -> int:
    return sum(count for (method, _), count in manager.api_reader.requests.items() if method != "GET")


async def test_namespace_keyword_and_answers_on_both_clients(
    manager: kubeloop.Manager, namespace: str
) -> None:
    await manager.api_reader.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same", "namespace": namespace}}
    )
    await manager.start()
    for client in (manager.api_reader, manager.client):
        reader: kubeloop.Client = client  # both implement the protocol helpers take
        as_dict = await reader.get(kinds.ConfigMap, "same", namespace=namespace)
        assert as_dict["metadata"]["name"] == "same"
        typed = await reader.get(core_v1.ConfigMap, "same", namespace=namespace)
        assert isinstance(typed, core_v1.ConfigMap) and typed.metadata.namespace == namespace
        listed = await reader.list(core_v1.ConfigMap, namespace=namespace, match_labels={})
        assert isinstance(listed, kubeloop.ObjectList)
        assert [item.metadata.name for item in listed if item.metadata.name == "same"] == ["same"]
        with pytest.raises(kubeloop.errors.NotFound):
            await reader.get(kinds.ConfigMap, "absent", namespace=namespace)
        # Bad input is refused alike by both (before it is sent or matched against anything).
        with pytest.raises(InvalidSelector, match="bad key"):
            await reader.list(kinds.ConfigMap, namespace=namespace, match_labels={"bad key": "x"})


async def test_create_or_update_reads_through_the_cache(manager: kubeloop.Manager, namespace: str) -> None:
    manager.informer_for(kinds.Deployment)
    await manager.start()
    result, created = await kubeloop.create_or_update(
        manager.client, deployment_dict("web", namespace), set_image("nginx:1")
    )
    assert result == kubeloop.OperationResult.CREATED and created["metadata"]["uid"]
    await eventually(lambda: manager.informer_for(kinds.Deployment).store.get(f"{namespace}/web") is not None)

    before_gets, before_writes = gets(manager), writes(manager)
    result, _ = await kubeloop.create_or_update(
        manager.client, deployment_dict("web", namespace), set_image("nginx:1")
    )
    assert result == kubeloop.OperationResult.UNCHANGED
    assert (gets(manager), writes(manager)) == (before_gets, before_writes)  # nothing reached the server

    # The same with the uncached reader: one GET.
    result, _ = await kubeloop.create_or_update(
        manager.api_reader, deployment_dict("web", namespace), set_image("nginx:1")
    )
    assert result == kubeloop.OperationResult.UNCHANGED and gets(manager) == before_gets + 1

    # A mutate that replaces the template drops what the server defaulted: the update is sent,
    # and the result says so (as controller-runtime's), though the server changed nothing (the
    # resourceVersion stays): UNCHANGED would hide a write sent on every reconcile.
    def replace_template(deployment: dict[str, Any]) -> None:
        deployment["spec"]["template"] = {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1"}]},
        }

    sent = writes(manager)
    result, same = await kubeloop.create_or_update(
        manager.client, deployment_dict("web", namespace), replace_template
    )
    assert writes(manager) == sent + 1
    assert result == kubeloop.OperationResult.UPDATED
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    result, updated = await kubeloop.create_or_update(
        manager.client, deployment_dict("web", namespace), set_image("nginx:2")
    )
    assert result == kubeloop.OperationResult.UPDATED
    assert updated["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"


async def test_models_in_every_helper(manager: kubeloop.Manager, namespace: str) -> None:
    await manager.start()
    owner = await manager.client.create(
        core_v1.ConfigMap(metadata=kubeloop.ObjectMeta(name="owner", namespace=namespace), data={"k": "v"})
    )
    assert isinstance(owner, core_v1.ConfigMap)

    # create_or_update and create_or_patch: a model in, a model out, the mutate given the model.
    wanted = apps_v1.Deployment(metadata=kubeloop.ObjectMeta(name="typed", namespace=namespace))
    seen: list[type] = []

    def mutate(deployment: apps_v1.Deployment) -> None:
        seen.append(type(deployment))
        kubeloop.set_controller_reference(owner, deployment)
        kubeloop.add_finalizer(deployment, "example.com/cleanup")
        set_image("nginx:1")(deployment)

    result, created = await kubeloop.create_or_update(manager.client, wanted, mutate)
    assert result == kubeloop.OperationResult.CREATED and isinstance(created, apps_v1.Deployment)
    assert seen == [apps_v1.Deployment]
    assert created.metadata.owner_references and created.metadata.owner_references[0].name == "owner"
    assert created.metadata.owner_references[0].controller is True
    assert kubeloop.contains_finalizer(created, "example.com/cleanup")
    await eventually(
        lambda: manager.informer_for(kinds.Deployment).store.get(f"{namespace}/typed") is not None
    )

    def scale(deployment: apps_v1.Deployment) -> None:
        set_image("nginx:1", replicas=3)(deployment)
        kubeloop.set_status_condition(deployment, "Progressing", "True", "Scaled", "three replicas")

    result, patched = await kubeloop.create_or_patch(manager.client, wanted, scale)
    assert result == kubeloop.OperationResult.UPDATED_STATUS and isinstance(patched, apps_v1.Deployment)
    assert patched.spec is not None and patched.spec.replicas == 3
    assert patched.status is not None and patched.status.conditions
    assert patched.status.conditions[0].type == "Progressing"  # typed: a DeploymentCondition
    assert kubeloop.is_status_condition_true(patched, "Progressing")

    # Finalizers and owner references on a model change the caller's instance.
    assert kubeloop.remove_finalizer(patched, "example.com/cleanup")
    assert not kubeloop.contains_finalizer(patched, "example.com/cleanup")
    kubeloop.set_owner_reference(owner, patched)  # already the controller: refreshed, not added
    assert patched.metadata.owner_references is not None and len(patched.metadata.owner_references) == 1
    with pytest.raises(kubeloop.AlreadyOwnedError):
        other = core_v1.ConfigMap(metadata=kubeloop.ObjectMeta(name="other", namespace=namespace, uid="u-2"))
        kubeloop.set_controller_reference(other, patched)
    patched = await manager.client.update(patched)
    assert isinstance(patched, apps_v1.Deployment) and not patched.metadata.finalizers

    # The recorder takes the model as it takes a dict.
    recorder = manager.event_recorder("typed-test")
    recorder.event(owner, kubeloop.NORMAL, "Typed", "recorded from a model")
    await recorder.stop()
    events = await manager.api_reader.list(
        kinds.Event, namespace=namespace, field_selector="involvedObject.name=owner"
    )
    assert [(e["reason"], e["involvedObject"]["kind"]) for e in events] == [("Typed", "ConfigMap")]


async def test_sync_reconciler_reads_and_writes(manager: kubeloop.Manager, namespace: str) -> None:
    threads: list[str] = []

    def reconcile(request: kubeloop.Request) -> None:
        threads.append(threading.current_thread().name)
        client = manager.blocking_client
        try:
            config = client.get(core_v1.ConfigMap, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return
        if (config.data or {}).get("seen") != "yes":
            client.patch(config, None, {"data": {"seen": "yes"}})

    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
    await manager.start()
    await manager.api_reader.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sync", "namespace": namespace}}
    )

    async def seen() -> bool:
        current = await manager.api_reader.get(kinds.ConfigMap, "sync", namespace=namespace)
        return (current.get("data") or {}).get("seen") == "yes"

    for _ in range(200):
        if await seen():
            break
        await asyncio.sleep(0.05)
    assert await seen()
    assert threads and threading.main_thread().name not in threads  # ran in a worker thread
    # On the loop itself the blocking client refuses rather than deadlocking.
    with pytest.raises(RuntimeError, match="own event loop"):
        manager.blocking_client.get(kinds.ConfigMap, "sync", namespace=namespace)


async def test_write_options_mean_the_same_on_every_client(manager: kubeloop.Manager, namespace: str) -> None:
    """dry_run, field_manager, field_validation and delete preconditions, through the protocol."""
    await manager.start()

    async def check(client: kubeloop.Client, name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"a": "1"},
        }
        dry = await client.create(body, dry_run=True, field_manager="dry")
        assert dry["metadata"]["name"] == name
        with pytest.raises(kubeloop.errors.NotFound):  # the dry run stored nothing
            await manager.api_reader.get(kinds.ConfigMap, name, namespace=namespace)
        with pytest.raises(kubeloop.errors.BadRequest, match='unknown field "bogus"'):
            await client.create({**body, "bogus": 1}, field_validation="Strict")
        created = await client.create(body, field_manager="author")
        assert [entry["manager"] for entry in created["metadata"]["managedFields"]] == ["author"]
        patched = await client.patch(
            kinds.ConfigMap, name, {"data": {"k": "v"}}, namespace=namespace, field_manager="patcher"
        )
        assert {entry["manager"] for entry in patched["metadata"]["managedFields"]} == {"author", "patcher"}
        with pytest.raises(kubeloop.errors.Conflict, match="Precondition failed: UID"):
            await client.delete(
                kinds.ConfigMap, name, namespace=namespace, preconditions=kubeloop.Preconditions(uid="other")
            )
        await client.delete(kinds.ConfigMap, name, namespace=namespace, dry_run=True)
        assert (await manager.api_reader.get(kinds.ConfigMap, name, namespace=namespace))["data"] == {
            "a": "1",
            "k": "v",
        }
        uid = created["metadata"]["uid"]
        await client.delete(
            kinds.ConfigMap, name, namespace=namespace, preconditions=kubeloop.Preconditions(uid=uid)
        )
        with pytest.raises(kubeloop.errors.NotFound):
            await manager.api_reader.get(kinds.ConfigMap, name, namespace=namespace)

    await check(manager.api_reader, "through-api")
    await check(manager.client, "through-cache")

    def blocking() -> None:
        client = manager.blocking_client
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "blocking", "namespace": namespace},
            "data": {"a": "1"},
        }
        client.create(body, dry_run=True)
        with pytest.raises(kubeloop.errors.NotFound):
            client.get(kinds.ConfigMap, "blocking", namespace=namespace)
        created = client.create(body, field_manager="thread")
        assert [entry["manager"] for entry in created["metadata"]["managedFields"]] == ["thread"]
        client.update({**created, "data": {"k": "v"}}, field_manager="thread-update")
        with pytest.raises(kubeloop.errors.Conflict):
            client.delete(
                kinds.ConfigMap,
                "blocking",
                namespace=namespace,
                preconditions=kubeloop.Preconditions(uid="x"),
            )
        client.delete_collection(
            kinds.ConfigMap, namespace=namespace, field_selector="metadata.name=blocking"
        )

    await asyncio.to_thread(blocking)
    with pytest.raises(kubeloop.errors.NotFound):
        await manager.api_reader.get(kinds.ConfigMap, "blocking", namespace=namespace)
