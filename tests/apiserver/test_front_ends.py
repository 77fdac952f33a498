"""A front-end server over another server's store (the start of ``--workers``): each serves HTTP
on its own port, and clients see one cluster whichever they talk to — reads after writes made
through the other, watches, conflicts, RBAC with the owner's tokens, CRDs, unique addresses."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from kubeloop import errors
from kubeloop.apiserver import kubeconfig
from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.apiserver.storage.remotestore import RemoteStore
from kubeloop.client.config import load_config
from kubeloop.client.rest import APIClient
from kubeloop.client.restclient import RetryPolicy
from kubeloop.testing import eventually
from tests.accounts import account_token
from tests.conftest import Client, ServerThread, start_front_end, start_server
from tests.kubectl_finder import newest_kubectl


@dataclasses.dataclass
class Cluster:
    owner: APIServer
    front: APIServer
    at_owner: APIClient
    at_front: APIClient
    #: The front-end's connection to the owner's store (its feed, and the answers to its requests).
    to_store: asyncio.StreamWriter

    @contextlib.contextmanager
    def unfed(self) -> Iterator[None]:
        """Nothing the owner's store sends reaches the front-end inside."""
        self.to_store.transport.pause_reading()  # type: ignore[attr-defined]
        try:
            yield
        finally:
            self.to_store.transport.resume_reading()  # type: ignore[attr-defined]


@pytest.fixture
async def cluster(tmp_path: pathlib.Path) -> AsyncIterator[Cluster]:
    options = ServerOptions(port=0, data_dir=tmp_path / "data", controllers=False, fsync=False)
    async with APIServer(options) as owner:
        of = await owner.front_end_of()
        connections: list[asyncio.StreamWriter] = []

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            reader, writer = await of.connect()
            connections.append(writer)
            return reader, writer

        front = APIServer(ServerOptions(port=0), front_end_of=dataclasses.replace(of, connect=connect))
        async with front:
            config = load_config(owner.kubeconfig_path)
            async with (
                APIClient(config) as at_owner,
                APIClient(dataclasses.replace(config, server=front.url)) as at_front,
            ):
                yield Cluster(owner, front, at_owner, at_front, connections[0])


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data}


async def test_writes_through_either_are_read_at_once_through_the_other(cluster: Cluster) -> None:
    assert cluster.front.url != cluster.owner.url
    for writer, reader in ((cluster.at_front, cluster.at_owner), (cluster.at_owner, cluster.at_front)):
        for i in range(20):
            created = await writer.create(configmap(f"from-{id(writer)}-{i}", n=str(i)))
            read = await reader.get(created, created["metadata"]["name"], namespace="default")  # consistent: no waiting
            assert read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    listed = await cluster.at_front.list(configmap("x"), namespace="default")
    assert len(listed.items) >= 40


async def test_a_read_through_the_front_end_waits_for_what_the_owner_committed(cluster: Cluster) -> None:
    """With the front-end's feed held up, a get through it of what was just created through the
    owner waits (it asked the store for its revision) and then finds it: never a 404."""
    remote = cluster.front.store
    assert isinstance(remote, RemoteStore)
    with cluster.unfed():
        created = await cluster.at_owner.create(configmap("just-made"))
        reading = asyncio.create_task(cluster.at_front.get(created, "just-made", namespace="default"))
        await eventually(lambda: remote.requests_in_flight == 1)
        assert not reading.done()
    read = await reading
    assert read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_front_end_that_lost_its_store_answers_503_and_is_not_ready(cluster: Cluster) -> None:
    """Its cache is no longer fed: a read from it would be stale, so none is answered (not even
    one at resourceVersion 0, which never asks the store), a write is refused, /readyz fails;
    the owner serves on."""
    await cluster.at_front.create(configmap("before"))
    cluster.at_front.retry = RetryPolicy(max_retries=0)  # the 503s as answered, not retried
    cluster.to_store.transport.abort()
    remote = cluster.front.store
    assert isinstance(remote, RemoteStore)
    await eventually(lambda: remote.lost is not None)
    for attempt in (
        cluster.at_front.get(configmap("x"), "before", namespace="default"),
        cluster.at_front.list(configmap("x"), namespace="default", resource_version="0"),
        cluster.at_front.create(configmap("after")),
    ):
        with pytest.raises(errors.ServiceUnavailable) as refused:
            await attempt
        assert "the store cannot be reached" in refused.value.message
    unready = cluster.front.readiness()  # what its /readyz reports
    assert unready is not None and "the store cannot be reached" in unready
    assert (await cluster.at_owner.get(configmap("x"), "before", namespace="default"))["metadata"]["name"] == "before"


async def test_a_watch_on_the_front_end_sees_the_owners_writes_in_order(cluster: Cluster) -> None:
    first = await cluster.at_owner.create(configmap("watched", v="0"))
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async for event in cluster.at_front.watch(
            configmap("watched"), namespace="default", resource_version=first["metadata"]["resourceVersion"]
        ):
            seen.append((event.type, event.object["data"]["v"]))
            if event.type == "DELETED":
                return

    watching = asyncio.create_task(watch())
    current = first
    for value in range(1, 6):
        current = await cluster.at_owner.update({**current, "data": {"v": str(value)}})
    await cluster.at_owner.delete(current)
    await watching
    assert seen == [("MODIFIED", str(v)) for v in range(1, 6)] + [("DELETED", "5")]


async def test_a_stale_update_through_the_front_end_is_a_conflict(cluster: Cluster) -> None:
    created = await cluster.at_front.create(configmap("contested", v="0"))
    await cluster.at_owner.update({**created, "data": {"v": "owner"}})
    with pytest.raises(errors.Conflict):
        await cluster.at_front.update({**created, "data": {"v": "stale"}})
    assert (await cluster.at_front.get(created, "contested", namespace="default"))["data"] == {"v": "owner"}


async def test_the_owners_tokens_and_rbac_hold_on_the_front_end(cluster: Cluster) -> None:
    """A ServiceAccount token the owner issued authenticates on the front-end, whose RBAC reads
    the bindings made through the owner."""
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
    token = await account_token(cluster.at_owner, "reader", "default", rules)
    async with APIClient(cluster.at_front.config.with_token(token)) as as_reader:
        await as_reader.list(configmap("x"), namespace="default")
        with pytest.raises(errors.Forbidden):
            await as_reader.create(configmap("not-allowed"))
        with pytest.raises(errors.Forbidden):
            await as_reader.list({"apiVersion": "v1", "kind": "Secret"}, namespace="default")
    async with APIClient(cluster.at_front.config.with_token("not-a-token")) as stranger:
        with pytest.raises(errors.Unauthorized):
            await stranger.list(configmap("x"), namespace="default")


def crd_of(plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural.rstrip("s"), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }  # fmt: skip


def conditions(crd: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}


async def test_a_crd_made_through_the_owner_is_served_by_the_front_end(cluster: Cluster) -> None:
    await cluster.at_owner.create(crd_of("widgets", "Widget"))
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
    # The front-end serves the kind once its cache has the CRD, as kube-apiservers each do once
    # their informer has it.
    await eventually(lambda: cluster.at_front.create(widget))
    assert (await cluster.at_owner.get(widget, "w", namespace="default"))["metadata"]["name"] == "w"


async def test_of_two_crds_naming_one_kind_at_once_the_later_is_refused_everywhere(cluster: Cluster) -> None:
    """Each process judges a CRD's names against what it serves: with the front-end's feed held
    up, a CRD naming a kind the owner has just accepted is accepted through the front-end too.
    The owner then refuses the later one (NamesAccepted False, KindConflict), neither process
    serves it, and once the first is gone it is judged again and served."""
    with cluster.unfed():
        first = await cluster.at_owner.create(crd_of("gadgets", "Gadget"))
        assert conditions(first)["Established"] == ("True", "InitialNamesAccepted")
        later = asyncio.create_task(cluster.at_front.create(crd_of("gizmos", "Gadget")))
        await eventually(lambda: cluster.at_owner.get(crd_of("gizmos", "Gadget"), "gizmos.example.com"))
    assert conditions(await later)["Established"] == ("True", "InitialNamesAccepted")  # judged blind

    async def refused(client: APIClient) -> bool:
        crd = await client.get(crd_of("gizmos", "Gadget"), "gizmos.example.com")
        return conditions(crd).get("NamesAccepted") == ("False", "KindConflict")

    for client in (cluster.at_owner, cluster.at_front):
        await eventually(lambda client=client: refused(client))  # type: ignore[misc]
        assert conditions(await client.get(crd_of("gizmos", "Gadget"), "gizmos.example.com"))["Established"][0] == "False"
        with pytest.raises(errors.NotFound):
            await client.request("GET", "/apis/example.com/v1/namespaces/default/gizmos")
        await client.request("GET", "/apis/example.com/v1/namespaces/default/gadgets")
    await cluster.at_owner.delete(crd_of("gadgets", "Gadget"), "gadgets.example.com")

    async def served(client: APIClient) -> bool:
        crd = await client.get(crd_of("gizmos", "Gadget"), "gizmos.example.com")
        return conditions(crd)["Established"][0] == "True"

    for client in (cluster.at_owner, cluster.at_front):
        await eventually(lambda client=client: served(client))  # type: ignore[misc]


def service(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def test_one_cluster_ip_asked_through_both_goes_to_one_service(cluster: Cluster) -> None:
    spec = {"clusterIP": "10.96.0.77", "ports": [{"port": 80}]}
    outcomes = await asyncio.gather(
        *(client.create(service(f"ip-{n}-{i}", spec)) for i in range(5) for n, client in enumerate((cluster.at_front, cluster.at_owner))),
        return_exceptions=True,
    )
    created = [o for o in outcomes if isinstance(o, dict)]
    refused = [o for o in outcomes if isinstance(o, errors.Invalid)]
    assert len(created) == 1 and len(refused) == 9, outcomes
    assert all("provided IP is already allocated" in str(r) for r in refused)


async def test_services_made_at_once_through_both_get_addresses_of_their_own(cluster: Cluster) -> None:
    """Each process chooses cluster IPs and node ports from its own cursor, so creates made at
    once through both choose the same values; the store refuses the later of each pair, and a
    value the server chose (not one the client asked for) is chosen again: every create succeeds."""
    spec = {"type": "NodePort", "ports": [{"port": 80}]}
    created = await asyncio.gather(
        *(client.create(service(f"auto-{n}-{i}", spec)) for i in range(10) for n, client in enumerate((cluster.at_front, cluster.at_owner)))
    )
    ips = [s["spec"]["clusterIP"] for s in created]
    ports = [s["spec"]["ports"][0]["nodePort"] for s in created]
    assert len(set(ips)) == len(set(ports)) == 20


async def test_an_update_through_the_front_end_chooses_again_a_port_taken_meanwhile(cluster: Cluster) -> None:
    """An update that makes the server choose (type ClusterIP to NodePort) chooses again when
    another process took that port first, as a create does. With the front-end's feed held up,
    the owner gives the port the front-end will choose (its cursor's first) to another Service;
    the front-end's update chooses it, the store refuses it, and the update succeeds with the
    next one."""
    remote = cluster.front.store
    assert isinstance(remote, RemoteStore)
    turned = await cluster.at_front.create(service("turned", {"ports": [{"port": 80}]}))
    with cluster.unfed():
        await cluster.at_owner.create(service("first", {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30000}]}))
        turned["spec"]["type"] = "NodePort"  # an update (PUT) reads no newer state: it writes at once
        updating = asyncio.create_task(cluster.at_front.update(turned))
        await eventually(lambda: remote.requests_in_flight == 1)
    updated = await updating
    assert updated["spec"]["ports"][0]["nodePort"] == 30001


async def test_kubectl_through_the_front_end(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    credentials = cluster.owner.credentials
    assert credentials is not None
    config = tmp_path / "front-end.kubeconfig"
    kubeconfig.write_kubeconfig(
        config, server_url=cluster.front.url, ca_pem=credentials.ca_cert_pem, token=credentials.admin_token
    )
    await cluster.at_owner.create(configmap("for-kubectl", shown="yes"))
    kubectl = await asyncio.create_subprocess_exec(
        str(newest_kubectl()), "--kubeconfig", str(config), "get", "configmap", "for-kubectl",
        "-o", "jsonpath={.data.shown}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await kubectl.communicate()
    assert (kubectl.returncode, out) == (0, b"yes"), err


async def test_the_owner_and_its_front_end_append_to_one_audit_log(tmp_path: pathlib.Path) -> None:
    """Each server's audit writer appends whole lines (O_APPEND): requests through both are in the
    one file, every line whole JSON, each request's events under its own audit ID."""
    audit = tmp_path / "audit.log"
    options = ServerOptions(port=0, memory=True, controllers=False, audit_log_path=audit)
    async with APIServer(options) as owner:
        front = APIServer(options, front_end_of=await owner.front_end_of())
        async with front:
            config = load_config(owner.kubeconfig_path)
            async with APIClient(config) as at_owner, APIClient(dataclasses.replace(config, server=front.url)) as at_front:
                await asyncio.gather(
                    *(client.create(configmap(f"audited-{n}-{i}")) for i in range(30) for n, client in enumerate((at_owner, at_front)))
                )
    events = [orjson.loads(line) for line in audit.read_bytes().splitlines()]
    created = {
        e["objectRef"]["name"] for e in events
        if e["stage"] == "ResponseComplete" and e["verb"] == "create" and e["objectRef"].get("resource") == "configmaps"
    }  # fmt: skip
    assert created == {f"audited-{n}-{i}" for i in range(30) for n in (0, 1)}
    assert len({e["auditID"] for e in events if e["stage"] == "ResponseComplete"}) == len(
        [e for e in events if e["stage"] == "ResponseComplete"]
    )


async def test_a_front_ends_way_to_the_node_reaches_the_owners_pod_streams(cluster: Cluster) -> None:
    """``FrontEndOf.dial_node`` in-process: a connection the owner's node endpoint serves, which
    answers pods' streams (here a missing pod's log: the owner's 404) and nothing else."""
    of = await cluster.owner.front_end_of()
    assert of.dial_node is not None
    answers = {}
    for path in ("/api/v1/namespaces/default/pods/nothing/log", "/api/v1/namespaces"):
        reader, writer = await asyncio.open_connection(sock=await of.dial_node())
        writer.write(f"GET {path} HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n".encode())
        answers[path] = await reader.read()
        writer.close()
    log = answers["/api/v1/namespaces/default/pods/nothing/log"]
    assert log.startswith(b"HTTP/1.1 404") and orjson.loads(log.split(b"\r\n\r\n", 1)[1])["message"] == 'pods "nothing" not found'
    assert answers["/api/v1/namespaces"].startswith(b"HTTP/1.1 404")  # not a pod's stream: not served there


def component_statuses(server: ServerThread) -> dict[str, tuple[str, str]]:
    """``kubectl get componentstatuses`` as ``server`` answers it: each component's Healthy
    status, and its message or error."""
    response = Client(server).get("/api/v1/componentstatuses")
    assert response.status_code == 200, response.text
    return {
        item["metadata"]["name"]: (condition["status"], condition.get("message") or condition["error"])
        for item in response.json()["items"]
        for condition in item["conditions"]
    }


def test_a_front_end_reports_the_owners_control_loops_and_loses_them_with_the_owner() -> None:
    """A front-end runs no control loops: the owner does. So ComponentStatus through either
    process says what the owner runs (kubectl's answer must not depend on which process its
    connection reached), until the front-end can no longer reach the owner."""
    owner = start_server(simulate=True)
    try:
        front = start_front_end(owner)
        healthy = {"scheduler": ("True", "ok"), "controller-manager": ("True", "ok"), "etcd-0": ("True", "ok")}
        assert component_statuses(owner) == healthy
        assert component_statuses(front) == healthy
        store = front.server.store
        assert isinstance(store, RemoteStore)
        front.call(store.close())
        lost = component_statuses(front)
        assert lost["controller-manager"][0] == "False"
        assert "the store cannot be reached" in lost["controller-manager"][1]
        front.stop()
    finally:
        owner.stop()
