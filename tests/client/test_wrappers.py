"""The wrapper clients against the embedded server (controller-runtime's WithFieldOwner,
NewNamespacedClient and NewDryRunClient), around the API client and around the manager's
cached client: what each changes is in the stored objects' managedFields, namespaces and
existence; reads pass through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import eventually


def config_map(name: str, namespace: str | None = None, **data: str) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(entry["manager"], entry["operation"]) for entry in obj["metadata"].get("managedFields") or ()}


@pytest.fixture(params=["api", "cached"])
async def client(request: pytest.FixtureRequest, kube_client: kubeloop.APIClient) -> AsyncIterator[kubeloop.Client]:
    """The API client, or a manager's cached client (reads from its cache)."""
    if request.param == "api":
        yield kube_client
        return
    manager = kubeloop.Manager(kube_client)
    async with manager:
        yield manager.client


async def test_with_field_owner_names_the_manager_of_every_write_unless_the_call_does(
    client: kubeloop.Client, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    owned = kubeloop.with_field_owner(client, "my-operator")
    made = await owned.create(config_map("a", kube_namespace, x="1"))
    assert managers(made) == {("my-operator", "Update")}
    made["data"]["y"] = "2"
    await owned.update(made)
    await owned.patch(kinds.ConfigMap, "a", {"data": {"z": "3"}}, namespace=kube_namespace)
    applied = await owned.apply(config_map("a", kube_namespace, w="4"))  # no field_manager: the owner's
    assert managers(applied) == {("my-operator", "Update"), ("my-operator", "Apply")}
    named = await owned.patch(kinds.ConfigMap, "a", {"data": {"v": "5"}}, namespace=kube_namespace, field_manager="someone")
    assert ("someone", "Update") in managers(named)  # a call's own name wins
    # Typed models too, and reads pass through.
    await owned.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="b", namespace=kube_namespace), data={"k": "v"}))
    assert managers(await kube_client.get(kinds.ConfigMap, "b", namespace=kube_namespace)) == {("my-operator", "Update")}
    found = await eventually(lambda: owned.get(kinds.ConfigMap, "a", namespace=kube_namespace))
    assert found["data"] == {"x": "1", "y": "2", "z": "3", "w": "4", "v": "5"}


async def test_a_namespaced_client_acts_in_its_namespace_only(
    client: kubeloop.Client, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    other = f"{kube_namespace}-other"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    await kube_client.create(config_map("theirs", other))
    scoped = kubeloop.namespaced(client, kube_namespace)
    made = await scoped.create(config_map("mine"))  # no namespace given: the client's
    assert made["metadata"]["namespace"] == kube_namespace
    await eventually(lambda: scoped.get(kinds.ConfigMap, "mine"))
    listed = await scoped.list(kinds.ConfigMap)
    assert {c["metadata"]["namespace"] for c in listed} == {kube_namespace}  # not every namespace
    patched = await scoped.patch(kinds.ConfigMap, "mine", {"data": {"k": "v"}})
    assert patched["data"] == {"k": "v"}
    refused = [
        scoped.create(config_map("sneaky", other)),
        scoped.get(kinds.ConfigMap, "theirs", namespace=other),
        scoped.delete(config_map("theirs", other)),
        scoped.list(kinds.ConfigMap, namespace=other),
    ]
    for call in refused:
        with pytest.raises(ValueError, match=f"the namespace {other} of the ConfigMap does not match the namespace {kube_namespace} of the client"):
            await call
    await kube_client.get(kinds.ConfigMap, "theirs", namespace=other)  # untouched
    # A cluster-scoped kind is not put in the namespace.
    assert (await scoped.get(kinds.Namespace, other))["metadata"]["name"] == other
    await scoped.delete(kinds.ConfigMap, "mine")
    with pytest.raises(kubeloop.errors.NotFound):
        await kube_client.get(kinds.ConfigMap, "mine", namespace=kube_namespace)


async def test_a_dry_run_client_stores_nothing_and_answers_what_would_be(
    client: kubeloop.Client, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    await kube_client.create(config_map("kept", kube_namespace, x="1"))
    dry = kubeloop.dry_run(client)
    would = await dry.create(config_map("new", kube_namespace, x="1"))
    assert would["metadata"]["uid"] and would["data"] == {"x": "1"}  # as it would be stored
    with pytest.raises(kubeloop.errors.NotFound):
        await kube_client.get(kinds.ConfigMap, "new", namespace=kube_namespace)
    with pytest.raises(kubeloop.errors.Invalid):  # admission and validation still run
        await dry.create(config_map("Not_A_Name", kube_namespace))
    kept = await kube_client.get(kinds.ConfigMap, "kept", namespace=kube_namespace)
    await dry.patch(kinds.ConfigMap, "kept", {"data": {"x": "2"}}, namespace=kube_namespace)
    kept["data"]["x"] = "3"
    await dry.update(kept)
    await dry.apply(config_map("kept", kube_namespace, x="4"), field_manager="me", force=True)
    await dry.delete(kinds.ConfigMap, "kept", namespace=kube_namespace)
    await dry.delete_collection(kinds.ConfigMap, namespace=kube_namespace)
    stored = await kube_client.get(kinds.ConfigMap, "kept", namespace=kube_namespace)
    assert stored["data"] == {"x": "1"}
    assert stored["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]  # no write at all
