"""The embedded server's garbage collector (kube-controller-manager's, written with kubeloop):
Background, Foreground and Orphan propagation, dangling and invalid owner references, custom
resources, through the kubeloop client and kubectl 1.27 and 1.33, and on a durable server
across a restart."""

from __future__ import annotations

import asyncio
import gc
import json
import pathlib
import signal
import time
import weakref
from typing import Any

import pytest

import kubeloop
from kubeloop import GroupVersionKind
from kubeloop.controllermanager.garbagecollector import GarbageCollector
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.testing import eventually
from tests.apiserver.storage.test_durability import apiserver, session_for
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
SECRET = GroupVersionKind("", "v1", "Secret")
EVENT = GroupVersionKind("", "v1", "Event")
HOLD = "example.com/hold"


class Gadget(kubeloop.CustomResource, group="gc.example.com", version="v1"):
    spec: dict[str, str] = {}


class Fixture(kubeloop.CustomResource, group="gc.example.com", version="v1", scope="Cluster"):
    spec: dict[str, str] = {}


def reference(owner: dict[str, Any], *, block: bool = False, controller: bool = False) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    if controller:
        ref["controller"] = True
    return ref


async def config_map(
    client: kubeloop.APIClient, namespace: str, name: str, *owners: dict[str, Any], **meta: Any
) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace, **meta}
    if owners:
        metadata["ownerReferences"] = list(owners)
    return await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})


async def secret(
    client: kubeloop.APIClient, namespace: str, name: str, *owners: dict[str, Any]
) -> dict[str, Any]:
    return await client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": list(owners)},
        }
    )


async def gone(client: kubeloop.APIClient, kind: GroupVersionKind, name: str, namespace: str | None) -> None:
    try:
        found = await client.get(kind, name, namespace=namespace)
    except kubeloop.errors.NotFound:
        return
    raise AssertionError(f"{kind.kind} {name} is still there: {found['metadata']}")


async def test_background_deletion_takes_the_dependents_after_the_owner(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    owner = await config_map(kube_client, ns, "owner")
    await secret(kube_client, ns, "dep-secret", reference(owner, controller=True))
    await config_map(kube_client, ns, "dep-map", reference(owner))
    grandchild_owner = await kube_client.get(CONFIGMAP, "dep-map", namespace=ns)
    await secret(kube_client, ns, "grandchild", reference(grandchild_owner))
    bystander = await config_map(kube_client, ns, "bystander")

    await kube_client.delete(CONFIGMAP, "owner", namespace=ns)  # no policy: Background
    await gone(kube_client, CONFIGMAP, "owner", ns)  # the owner goes at once
    await eventually(lambda: gone(kube_client, SECRET, "dep-secret", ns))
    await eventually(lambda: gone(kube_client, CONFIGMAP, "dep-map", ns))
    await eventually(lambda: gone(kube_client, SECRET, "grandchild", ns))
    kept = await kube_client.get(CONFIGMAP, "bystander", namespace=ns)
    assert kept["metadata"]["uid"] == bystander["metadata"]["uid"]


async def test_foreground_deletion_waits_for_blocking_dependents(
    kube_client: kubeloop.APIClient, kube_namespace: str, kube_apiserver: ServerThread
) -> None:
    ns = kube_namespace
    owner = await config_map(kube_client, ns, "owner")
    await config_map(kube_client, ns, "held", reference(owner, block=True), finalizers=[HOLD])
    await secret(kube_client, ns, "blocking", reference(owner, block=True))
    await secret(kube_client, ns, "not-blocking", reference(owner))

    answer = await kube_client.delete(CONFIGMAP, "owner", namespace=ns, propagation_policy="Foreground")
    assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert answer["metadata"]["deletionTimestamp"]
    # Every dependent is deleted; the held one waits for its own finalizer.
    await eventually(lambda: gone(kube_client, SECRET, "blocking", ns))
    await eventually(lambda: gone(kube_client, SECRET, "not-blocking", ns))
    held = await eventually(lambda: _being_deleted(kube_client, CONFIGMAP, "held", ns))
    assert held["metadata"]["finalizers"] == [HOLD]
    # While a blocking dependent is there, the owner stays, marked: the collector has seen every
    # change so far and has nothing left to do now.
    await kube_apiserver.settled()
    waiting = await kube_client.get(CONFIGMAP, "owner", namespace=ns)
    assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]

    await kube_client.patch(CONFIGMAP, "held", {"metadata": {"finalizers": None}}, namespace=ns)
    await eventually(lambda: gone(kube_client, CONFIGMAP, "held", ns))
    await eventually(lambda: gone(kube_client, CONFIGMAP, "owner", ns))


async def test_foreground_deletion_without_blocking_dependents_finishes_at_once(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    owner = await config_map(kube_client, ns, "owner")
    # Not blocking and held by a finalizer: it is deleted but does not hold the owner.
    await secret(kube_client, ns, "not-blocking", reference(owner))
    await config_map(kube_client, ns, "held", reference(owner), finalizers=[HOLD])
    await kube_client.delete(CONFIGMAP, "owner", namespace=ns, propagation_policy="Foreground")
    await eventually(lambda: gone(kube_client, CONFIGMAP, "owner", ns))
    await eventually(lambda: gone(kube_client, SECRET, "not-blocking", ns))
    held = await eventually(lambda: _being_deleted(kube_client, CONFIGMAP, "held", ns))
    await kube_client.patch(CONFIGMAP, "held", {"metadata": {"finalizers": None}}, namespace=ns)
    assert held["metadata"]["name"] == "held"


async def test_orphan_deletion_strips_the_owner_from_its_dependents(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    owner = await config_map(kube_client, ns, "owner")
    other = await config_map(kube_client, ns, "other-owner")
    await secret(kube_client, ns, "only-child", reference(owner, controller=True, block=True))
    await secret(kube_client, ns, "shared-child", reference(owner), reference(other))

    await kube_client.delete(CONFIGMAP, "owner", namespace=ns, propagation_policy="Orphan")
    await eventually(lambda: gone(kube_client, CONFIGMAP, "owner", ns))
    only = await kube_client.get(SECRET, "only-child", namespace=ns)
    assert "ownerReferences" not in only["metadata"]
    shared = await kube_client.get(SECRET, "shared-child", namespace=ns)
    assert shared["metadata"]["ownerReferences"] == [reference(other)]
    # Deleting the remaining owner later still collects what it owns.
    await kube_client.delete(CONFIGMAP, "other-owner", namespace=ns)
    await eventually(lambda: gone(kube_client, SECRET, "shared-child", ns))
    assert (await kube_client.get(SECRET, "only-child", namespace=ns))["metadata"]["name"] == "only-child"


async def test_dangling_references_are_collected_or_dropped(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    absent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "never",
        "uid": "00000000-0000-0000-0000-00000000dead",
    }
    await secret(kube_client, ns, "orphaned", absent)
    await eventually(lambda: gone(kube_client, SECRET, "orphaned", ns))

    # An owner by the same name but another uid (deleted and created again) is not the owner.
    owner = await config_map(kube_client, ns, "reborn")
    stale = reference(owner)
    await kube_client.delete(CONFIGMAP, "reborn", namespace=ns, propagation_policy="Orphan")
    await eventually(lambda: gone(kube_client, CONFIGMAP, "reborn", ns))
    reborn = await config_map(kube_client, ns, "reborn")
    assert reborn["metadata"]["uid"] != stale["uid"]
    await secret(kube_client, ns, "stale-child", stale)
    await eventually(lambda: gone(kube_client, SECRET, "stale-child", ns))

    # With one solid owner, a dangling reference is removed and the object stays.
    await secret(kube_client, ns, "mixed", reference(reborn), absent)

    async def only_solid_left() -> None:
        mixed = await kube_client.get(SECRET, "mixed", namespace=ns)
        assert mixed["metadata"]["ownerReferences"] == [reference(reborn)]

    await eventually(only_solid_left)


async def test_owners_in_another_namespace_count_as_absent_and_are_reported(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    elsewhere = f"{ns}-other"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": elsewhere}})
    try:
        foreign_owner = await config_map(kube_client, elsewhere, "owner")
        await secret(kube_client, ns, "cross", reference(foreign_owner))
        await eventually(lambda: gone(kube_client, SECRET, "cross", ns))
        # The owner itself is untouched.
        assert (await kube_client.get(CONFIGMAP, "owner", namespace=elsewhere))["metadata"]["name"] == "owner"

        async def warned() -> dict[str, Any]:
            events = await kube_client.list(EVENT, namespace=ns)
            [event] = [e for e in events.items if e["reason"] == "OwnerRefInvalidNamespace"]
            return event

        event = await eventually(warned)
        assert event["type"] == "Warning"
        assert event["involvedObject"]["name"] == "cross"
        assert event["message"] == (
            f"ownerRef [v1/ConfigMap, namespace: {ns}, name: owner, uid: {foreign_owner['metadata']['uid']}] "
            f'does not exist in namespace "{ns}"'
        )
    finally:
        await kube_client.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": elsewhere}})


async def test_custom_resources_cluster_scoped_owners_and_invalid_cluster_scoped_dependents(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    # CRDs installed after the collector started: it reads discovery again and watches them.
    await kubeloop.crd.install_crds(kube_client, Gadget, Fixture)
    owner = await kube_client.create(Gadget(metadata=kubeloop.ObjectMeta(name="owner", namespace=ns)))
    owner_dict = owner.to_dict()
    child = await kube_client.create(
        Gadget(
            metadata=kubeloop.ObjectMeta(name="child", namespace=ns, owner_references=[reference(owner_dict)])
        )
    )
    await config_map(kube_client, ns, "child-map", reference(owner_dict, block=True))
    await secret(kube_client, ns, "grandchild", reference(child.to_dict()))

    # A cluster-scoped owner of namespaced dependents.
    fixture = (
        await kube_client.create(Fixture(metadata=kubeloop.ObjectMeta(name=f"{ns}-fixture")))
    ).to_dict()
    await config_map(kube_client, ns, "fixture-child", reference(fixture))
    # A cluster-scoped dependent naming a namespaced owner: never collected, reported.
    invalid = await kube_client.create(
        Fixture(metadata=kubeloop.ObjectMeta(name=f"{ns}-invalid", owner_references=[reference(owner_dict)]))
    )

    await kube_client.delete(owner, propagation_policy="Foreground")
    await eventually(lambda: gone(kube_client, Gadget.__gvk__, "owner", ns))
    await gone(kube_client, CONFIGMAP, "child-map", ns)  # it blocked the owner
    await eventually(lambda: gone(kube_client, Gadget.__gvk__, "child", ns))
    await eventually(lambda: gone(kube_client, SECRET, "grandchild", ns))

    await kube_client.delete(Fixture.__gvk__, f"{ns}-fixture")
    await eventually(lambda: gone(kube_client, CONFIGMAP, "fixture-child", ns))

    async def warned() -> dict[str, Any]:
        events = await kube_client.list(EVENT, namespace="default")
        [event] = [
            e
            for e in events.items
            if e["reason"] == "OwnerRefInvalidNamespace" and e["involvedObject"]["name"] == f"{ns}-invalid"
        ]
        return event

    event = await eventually(warned)
    assert event["type"] == "Warning"
    still = await kube_client.get(Fixture, f"{ns}-invalid")
    assert still.metadata.uid == invalid.metadata.uid
    await kube_client.delete(Fixture, f"{ns}-invalid")


async def test_kinds_of_a_deleted_crd_are_no_longer_watched(
    kube_client: kubeloop.APIClient, shared_server: ServerThread
) -> None:
    class Cog(kubeloop.CustomResource, group="gone.example.com", version="v1"):
        spec: dict[str, str] = {}

    controllers = shared_server.server.controllers
    assert controllers is not None
    collector = controllers.garbage_collector
    await kubeloop.crd.install_crds(kube_client, Cog)
    await eventually(lambda: Cog.__gvk__ in collector.monitored)
    await kube_client.delete(
        GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), "cogs.gone.example.com"
    )
    await eventually(lambda: Cog.__gvk__ not in collector.monitored)
    assert CONFIGMAP in collector.monitored


async def test_the_collectors_workers_let_the_loop_run_between_items(kube_client: kubeloop.APIClient) -> None:
    """Unknown uids are dropped without a request: without a turn for the loop between items a
    worker would hold the serving loop until its queue drained."""
    collector = GarbageCollector(kubeloop.Manager(kube_client))
    queue = collector.attempt_to_delete
    lengths: set[int] = set()

    async def watch_the_queue() -> None:
        while True:
            lengths.add(len(queue))
            await asyncio.sleep(0)

    for i in range(200):
        queue.add(f"unknown-{i}")
    tasks = [
        asyncio.create_task(watch_the_queue()),
        asyncio.create_task(collector._work(queue, collector._attempt_to_delete)),
    ]
    try:
        await eventually(lambda: 0 in lengths)
    finally:
        await cancel_and_wait(tasks)
    assert len(lengths) >= 150  # the queue was seen draining, not just full and then empty


def _owned(uid: str, *owners: str) -> dict[str, Any]:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": owner} for owner in owners]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"uid": uid, "name": uid, "namespace": "ns", "ownerReferences": refs}}  # fmt: skip


async def test_the_graph_is_out_of_the_gcs_sight_and_leaves_no_node_behind(kube_client: kubeloop.APIClient) -> None:
    """A node per object of every kind made each full GC pass walk three containers per object
    (92 ms more with 20,000 ConfigMaps): the graph is untracked. So the cycles of objects owning
    one another (or themselves) are broken by the graph itself: no node outlives its removal, nor
    the collector's stop."""
    collector = GarbageCollector(kubeloop.Manager(kube_client), sync_timeout=0)
    collector._observe(_owned("a", "b"))  # b known from the reference only, for now
    collector._observe(_owned("b", "a"))  # a and b own one another
    collector._observe(_owned("c", "c"))  # c owns itself
    collector._observe(_owned("d", "e"))
    collector._observe(_owned("e", "d"))  # still in the graph when the collector stops
    nodes = list(collector.nodes.values())
    assert not any(gc.is_tracked(part) for node in nodes for part in (node, node.dependents, node.owners))
    alive = {node.uid: weakref.ref(node) for node in nodes}
    del nodes
    for uid in ("c", "a", "b"):
        collector._forget(_owned(uid))
    assert {uid for uid, node in alive.items() if node() is not None} == {"d", "e"}
    stop = asyncio.Event()
    stop.set()
    await collector.run(stop)
    collector.nodes.clear()
    assert {uid for uid, node in alive.items() if node() is not None} == set()


async def _being_deleted(
    client: kubeloop.APIClient, kind: GroupVersionKind, name: str, namespace: str
) -> dict[str, Any]:
    obj = await client.get(kind, name, namespace=namespace)
    assert obj["metadata"].get("deletionTimestamp")
    return obj


# ---------------------------------------------------------------------------- kubectl


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


def _owned_objects(kubectl: Kubectl, ns: str) -> str:
    owner = json.loads(kubectl("create", "configmap", "owner", "-n", ns, "-o", "json").stdout)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    manifests = [
        {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": ns,
                "ownerReferences": [{**ref, "blockOwnerDeletion": True}],
            },
        }
        for kind, name in (("Secret", "dep-a"), ("Secret", "dep-b"), ("ConfigMap", "dep-c"))
    ]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
    return str(owner["metadata"]["uid"])


def test_kubectl_delete_cascade_foreground_returns_after_the_dependents_are_gone(
    kubectl: Kubectl, namespace: str
) -> None:
    _owned_objects(kubectl, namespace)
    deleted = kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=foreground")
    assert 'configmap "owner" deleted' in deleted.stdout
    # kubectl waited for the owner, which went only after its blocking dependents.
    left = kubectl("get", "secrets,configmaps", "-n", namespace, "-o", "name").stdout.split()
    assert not any(name.endswith(("/dep-a", "/dep-b", "/dep-c", "/owner")) for name in left), left


def test_kubectl_delete_cascade_orphan_leaves_the_dependents_ownerless(
    kubectl: Kubectl, namespace: str
) -> None:
    _owned_objects(kubectl, namespace)
    kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=orphan")
    assert kubectl("get", "configmap", "owner", "-n", namespace, check=False).returncode != 0
    for kind, name in (("secret", "dep-a"), ("secret", "dep-b"), ("configmap", "dep-c")):
        obj = json.loads(kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)
        assert "ownerReferences" not in obj["metadata"], obj["metadata"]


def test_kubectl_delete_cascade_background_collects_the_dependents(kubectl: Kubectl, namespace: str) -> None:
    _owned_objects(kubectl, namespace)
    kubectl("delete", "configmap", "owner", "-n", namespace, "--cascade=background")
    deadline = time.monotonic() + 10
    while True:
        left = kubectl("get", "secrets,configmaps", "-n", namespace, "-o", "name").stdout.split()
        if not any(name.endswith(("/dep-a", "/dep-b", "/dep-c")) for name in left):
            break
        assert time.monotonic() < deadline, left
        time.sleep(0.05)


# ---------------------------------------------------------------------------- durable server


def test_a_foreground_deletion_cut_by_a_sigkill_completes_after_the_restart(tmp_path: pathlib.Path) -> None:
    """The collector keeps no state of its own: a durable server killed while an owner waits for
    a held dependent rebuilds the graph from its lists when it starts again, and finishes."""
    data = tmp_path / "data"
    cms = "/api/v1/namespaces/default/configmaps"
    with apiserver(data) as (proc, url):
        session = session_for(data)
        owner = session.post(url + cms, json={"metadata": {"name": "owner"}}).json()
        ref = {**reference(owner), "blockOwnerDeletion": True}
        held = {"name": "held", "finalizers": [HOLD], "ownerReferences": [ref]}
        assert session.post(url + cms, json={"metadata": held}).status_code == 201
        assert (
            session.post(url + cms, json={"metadata": {"name": "free", "ownerReferences": [ref]}}).status_code
            == 201
        )
        marked = session.delete(url + cms + "/owner", json={"propagationPolicy": "Foreground"}).json()
        assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
        deadline = time.monotonic() + 10
        while session.get(url + cms + "/free").status_code != 404:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert session.get(url + cms + "/held").json()["metadata"]["deletionTimestamp"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data) as (proc, url):
        session = session_for(data)
        # Still waiting: the held dependent blocks the owner.
        assert session.get(url + cms + "/owner").json()["metadata"]["finalizers"] == ["foregroundDeletion"]
        released = session.patch(
            url + cms + "/held",
            data=json.dumps({"metadata": {"finalizers": None}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert released.status_code == 200
        deadline = time.monotonic() + 10
        while session.get(url + cms + "/owner").status_code != 404:
            assert time.monotonic() < deadline, session.get(url + cms + "/owner").json()
            time.sleep(0.02)
        assert session.get(url + cms + "/held").status_code == 404


async def test_a_dependent_seen_after_its_owner_began_deleting_in_the_foreground_is_deleted_too(
    kube_client: kubeloop.APIClient,
) -> None:
    """Each kind has its own watch: under load a Secret's creation can reach the collector after
    its owning ConfigMap's foreground deletion. It is queued as the dependents seen then were,
    not left until the owner goes (which a blocking dependent may hold off for ever); a fresh
    make test once met exactly that order."""
    collector = GarbageCollector(kubeloop.Manager(kube_client), sync_timeout=0)
    owner = _owned("owner")
    owner["metadata"] |= {"deletionTimestamp": "2026-12-01T20:39:10Z", "finalizers": ["foregroundDeletion"]}
    collector._observe(owner)
    queue = collector.attempt_to_delete
    assert [queue.get_nowait() for _ in range(len(queue))] == ["owner"]
    collector._observe(_owned("late", "owner"))  # its owner waits for its dependents already
    collector._observe(_owned("bystander", "someone-else"))
    queued = {queue.get_nowait() for _ in range(len(queue))}
    assert "late" in queued and "bystander" not in queued
