"""The manager and the builder: wiring of for_/owns/watches, unique names, caches synced before
controllers start, copies from the cache, and an owned object's event reaching its owner."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import ClientConfig
from kubeloop.client.rest import APIClient
from kubeloop.controller import predicate
from kubeloop.controller.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)
from kubeloop.controller.reconcile import Request
from kubeloop.controller.source import Channel
from kubeloop.manager.builder import Builder
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import Manager, RunnableFailed
from tests.conftest import ServerThread, eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
SECRET = GroupVersionKind("", "v1", "Secret")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")


async def create_owned_configmap(
    client: APIClient, namespace: str, owner: dict[str, Any], **data: str
) -> None:
    """A ConfigMap "owned" whose controller owner is the Secret ``owner``."""
    ref = {
        "apiVersion": "v1",
        "kind": "Secret",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "namespace": namespace}}
    body["metadata"]["ownerReferences"] = [ref]
    await client.create({**body, "data": data})


def test_builder_wiring_and_unique_names() -> None:
    manager = Manager(APIClient(ClientConfig(server="http://127.0.0.1:1")))
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
    # controller-runtime's rule: without for_, a named controller of sources (no owns).
    with pytest.raises(ValueError, match="watches nothing"):
        Builder(manager).named("idle").complete(lambda request: None)
    with pytest.raises(ValueError, match="owns needs for_"):
        Builder(manager).named("orphan").owns(CONFIGMAP).complete(lambda request: None)
    events: asyncio.Queue[dict[str, object]] = asyncio.Queue()
    channel = (
        Builder(manager).named("external").watches_raw_source(Channel(events, EnqueueRequestForObject()))
    )
    assert channel.complete(lambda request: None).name == "external"


async def test_caches_sync_before_controllers_and_owned_events_reach_owners(
    client: APIClient, namespace: str
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
        cached = await manager.client.get(SECRET, request.name, namespace=request.namespace)
        cached["metadata"]["name"] = "changed"  # a copy: the cache is not affected
        again = await manager.client.get(SECRET, request.name, namespace=request.namespace)
        assert again["metadata"]["name"] == request.name

    Builder(manager).for_(SECRET).owns(CONFIGMAP).complete(reconcile)
    await manager.start()
    try:
        await eventually(lambda: Request(namespace, "owner") in seen)
        assert synced_at_first_reconcile[0]  # every cache synced before any reconcile
        seen.clear()
        await create_owned_configmap(client, namespace, owner)
        await eventually(lambda: Request(namespace, "owner") in seen)  # the owned object's event → the owner
        listed = await manager.client.list(SECRET, namespace=namespace)
        assert [o["metadata"]["name"] for o in listed] == ["owner"]
    finally:
        await manager.stop()


async def test_start_fails_when_a_cache_cannot_sync() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with APIClient(ClientConfig(server=f"http://127.0.0.1:{port}")) as client:
        manager = Manager(client, cache_sync_timeout=0.3)
        Builder(manager).for_(CONFIGMAP).complete(lambda request: None)
        with pytest.raises(TimeoutError, match="did not sync"):
            await manager.start()
        await manager.stop()
        assert not manager.controllers["configmap"]._workers  # no controller was started


async def test_run_stops_on_request(client: APIClient, namespace: str) -> None:
    manager = Manager(client, namespace=namespace)
    Builder(manager).for_(CONFIGMAP).complete(lambda request: None)
    running = asyncio.ensure_future(manager.run())
    await eventually(lambda: manager.informer_for(CONFIGMAP).has_synced)
    manager.request_stop()
    await asyncio.wait_for(running, 10)


async def test_run_stops_on_request_while_caches_are_still_syncing(
    client: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A kind the server does not serve never syncs; SIGTERM (here: request_stop) must still
    stop the manager at once, not after the 120 s sync timeout."""
    manager = Manager(client)
    Builder(manager).for_(GroupVersionKind("example.com", "v1", "Missing")).complete(lambda request: None)
    running = asyncio.ensure_future(manager.run())
    # The informer has asked for the kind and been told there is none: the manager is waiting
    # for a cache that cannot sync.
    await eventually(lambda: any("no matches for kind" in record.getMessage() for record in caplog.records))
    assert not running.done()
    manager.request_stop()
    await asyncio.wait_for(running, 10)


async def test_an_owned_objects_event_enqueues_a_cluster_scoped_owner_without_a_namespace(
    client: APIClient, namespace: str
) -> None:
    owner = await client.get(GroupVersionKind("", "v1", "Namespace"), namespace)
    manager = Manager(client)
    seen: list[Request] = []
    only_this = predicate.Funcs(
        on_create=lambda o: o["metadata"]["name"] == namespace,
        on_update=lambda old, new: new["metadata"]["name"] == namespace,
        on_delete=lambda o: o["metadata"]["name"] == namespace,
    )
    Builder(manager).for_(GroupVersionKind("", "v1", "Namespace"), only_this).owns(CONFIGMAP).complete(
        seen.append
    )
    async with manager:
        await eventually(lambda: Request("", namespace) in seen)
        seen.clear()
        ref = {"apiVersion": "v1", "kind": "Namespace", "name": namespace, "uid": owner["metadata"]["uid"]}
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "owned", "namespace": namespace},
        }
        body["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
        await client.create(body)
        await eventually(lambda: seen == [Request("", namespace)])


async def test_the_manager_is_an_async_context_manager(client: APIClient, namespace: str) -> None:
    manager = Manager(client, namespace=namespace)
    seen: list[Request] = []
    Builder(manager).for_(CONFIGMAP).complete(seen.append)
    async with manager:
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": namespace}}
        )
        await eventually(lambda: Request(namespace, "a") in seen)
    assert not manager.controllers["configmap"]._workers  # stopped with the block


async def test_channel_source_and_metadata_only_watches(client: APIClient, namespace: str) -> None:
    """A Channel of events from outside the cluster and an owned kind watched through a
    metadata-only informer both reach the reconciler; stopping the controller stops the source."""
    owner = await client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "owner", "namespace": namespace}}
    )
    manager = Manager(client, namespace=namespace)
    external: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    channel = Channel(
        external,
        EnqueueRequestForObject(),
        predicate.Funcs(on_generic=lambda o: o["metadata"]["name"] != "ignored"),
    )
    seen: list[Request] = []
    owned_views: list[dict[str, Any]] = []

    def remember_owned(obj: dict[str, Any]) -> list[Request]:
        owned_views.append(obj)
        return []

    async def reconcile(request: Request) -> None:
        seen.append(request)

    Builder(manager).for_(SECRET).owns(CONFIGMAP, only_metadata=True).watches(
        CONFIGMAP, EnqueueRequestsFromMapFunc(remember_owned), only_metadata=True
    ).watches_raw_source(channel).complete(reconcile)
    assert manager.informer_for(CONFIGMAP, metadata_only=True).metadata_only
    await manager.start()
    try:
        await eventually(lambda: Request(namespace, "owner") in seen)
        seen.clear()
        external.put_nowait({"metadata": {"name": "from-outside", "namespace": namespace}})
        external.put_nowait({"metadata": {"name": "ignored", "namespace": namespace}})
        await eventually(lambda: Request(namespace, "from-outside") in seen)
        await create_owned_configmap(client, namespace, owner, big="x" * 1000)
        await eventually(lambda: Request(namespace, "owner") in seen and bool(owned_views))
        assert set(owned_views[-1]) == {"apiVersion", "kind", "metadata"}  # metadata only
        assert Request(namespace, "ignored") not in seen
        # No full ConfigMap informer was created for the owned kind.
        assert (CONFIGMAP, False) not in manager.cache.informers
    finally:
        await manager.stop()
    assert channel._task is None  # the source's reader task was stopped with the controller


async def test_runnables_start_in_order_and_stop_with_the_manager(client: APIClient, namespace: str) -> None:
    """Runnables without leader election start on every replica once caches sync; the others
    only on the leader; stop() asks them to return, cancels the stubborn after the grace period."""
    # Someone else holds the lease: this replica never leads during the test.
    lease_name = f"runnables-{namespace}"
    await client.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": lease_name, "namespace": namespace},
            "spec": {
                "holderIdentity": "someone-else",
                "leaseDurationSeconds": 3600,
                "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        }
    )
    manager = Manager(
        client,
        namespace=namespace,
        graceful_shutdown_timeout=0.5,
        leader_election=LeaderElectionConfig(lease_name, namespace=namespace, retry_period=0.1),
    )
    events: list[str] = []
    cache_synced_at_start: list[bool] = []

    async def everywhere(stop: asyncio.Event) -> None:
        cache_synced_at_start.append(manager.cache.has_synced)
        events.append("everywhere started")
        await stop.wait()
        events.append("everywhere stopped")

    async def leader_only(stop: asyncio.Event) -> None:
        events.append("leader_only started")
        await stop.wait()

    async def stubborn(stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)  # ignores stop: cancelled after the grace period
        finally:
            events.append("stubborn cancelled")

    manager.informer_for(CONFIGMAP)
    manager.add(everywhere, need_leader_election=False)
    manager.add(stubborn, need_leader_election=False)
    manager.add(leader_only)
    await manager.start()
    try:
        await eventually(lambda: "everywhere started" in events)
        # The elector has read the lease and found it held (for an hour) by someone else: this
        # replica does not lead, so what needs the lease has not started and will not.
        assert manager.elector is not None
        await eventually(
            lambda: manager.elector is not None and manager.elector.observed_holder == "someone-else"
        )
        assert "leader_only started" not in events
        assert cache_synced_at_start == [True]
    finally:
        await manager.stop()
    assert {"everywhere stopped", "stubborn cancelled"} <= set(events)


async def test_a_failing_runnable_stops_the_manager(client: APIClient, namespace: str) -> None:
    manager = Manager(client, namespace=namespace)

    async def broken(stop: asyncio.Event) -> None:
        raise RuntimeError("no luck")

    manager.add(broken, name="broken")
    with pytest.raises(RunnableFailed, match="broken failed: no luck"):
        await asyncio.wait_for(manager.run(), 10)


class Gate:
    """A write fence the test opens, shuts and revokes."""

    def __init__(self) -> None:
        self.open = False
        self.revoked = False
        self.waiting = 0  # callers held at the gate right now
        self.refused = 0  # callers told to give up (the gate was revoked)

    def writes_allowed(self) -> bool:
        return self.open and not self.revoked

    def describe(self) -> str:
        return "the gate is shut"

    async def wait_until_allowed(self) -> bool:
        self.waiting += 1
        try:
            while not self.writes_allowed():
                if self.revoked:
                    self.refused += 1
                    return False
                await asyncio.sleep(0.01)
            return True
        finally:
            self.waiting -= 1


async def test_a_shut_fence_holds_back_reconciles_and_leader_runnables() -> None:
    from kubeloop.controller.controller import Controller
    from kubeloop.manager.runnable import RunnableGroup

    gate = Gate()
    reconciled: list[str] = []
    controller = Controller("fenced", lambda request: reconciled.append(request.name))  # type: ignore[arg-type, func-returns-value]
    controller.fence = gate
    ran: list[str] = []

    async def runnable(stop: asyncio.Event) -> None:
        ran.append("started")
        await stop.wait()

    group = RunnableGroup(lambda name, error: None, fence=gate)
    group.add("leader-only", runnable)
    await controller.start()
    group.start()
    controller.queue.add(Request("ns", "a"))
    # The worker has taken the request and the runnable has been started: both are held at the
    # gate, so neither has run (nothing starts while the lease may be elsewhere).
    await eventually(lambda: gate.waiting == 2)
    assert reconciled == [] and ran == []
    gate.open = True
    await eventually(lambda: reconciled == ["a"] and ran == ["started"], timeout=5)
    gate.revoked = True  # leadership lost: queued requests are dropped unreconciled
    controller.queue.add(Request("ns", "b"))
    await eventually(
        lambda: gate.refused == 1 and len(controller.queue) == 0 and controller.active_workers == 0
    )
    assert reconciled == ["a"]
    await group.stop(1)
    await controller.stop(timeout=1)


OPERATOR_WITHOUT_SERVERS = """
import asyncio, sys
import kubeloop
from kubeloop.client.config import load_kubeconfig
from kubeloop.models import core_v1

async def main(kubeconfig: str, namespace: str) -> None:
    async with kubeloop.APIClient(load_kubeconfig(kubeconfig)) as client:
        manager = kubeloop.Manager(client, namespace=namespace)
        seen = asyncio.Event()

        async def reconcile(request: kubeloop.Request) -> None:
            if request.name == "probe":
                seen.set()

        kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
        async with manager:
            meta = kubeloop.ObjectMeta(name="probe", namespace=namespace)
            await client.create(core_v1.ConfigMap(metadata=meta))
            await asyncio.wait_for(seen.wait(), 20)
    servers = ("aiohttp", "yarl", "multidict", "prometheus_client", "difflib")
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in servers)
    webhooks = sorted(name for name in sys.modules if name.startswith("kubeloop.webhook."))
    assert not loaded and not webhooks, (loaded, webhooks)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_an_operator_without_metrics_probes_or_webhooks_loads_no_server_code(
    shared_server: ServerThread, namespace: str
) -> None:
    """Requests and watches go over the client's own HTTP/1.1 pool; aiohttp (13 MiB of an
    operator's memory) is loaded only for a metrics or probe server, or a proxy; the Prometheus
    client (~4 MiB) only when metrics are served or their registry is asked for; the webhook
    server and the admission machinery only for an operator with webhooks; difflib (a kind's
    "did you mean" suggestion) only for a kind the server does not serve."""
    subprocess.run(
        [sys.executable, "-c", OPERATOR_WITHOUT_SERVERS, str(shared_server.kubeconfig), namespace],
        check=True,
        timeout=60,
    )


def test_the_crds_of_a_setup_count_each_kind_and_version_once() -> None:
    """A model the setup uses joins the module's; a second class of the same kind and version
    (a module loaded twice, as tests load a file again) is the same version, not another."""
    import types

    import kubeloop
    from kubeloop.client.config import ClientConfig
    from kubeloop.manager.operatortarget import module_crds

    def backup_class() -> type[kubeloop.CustomResource]:
        class Backup(kubeloop.CustomResource, group="twice.example.com", version="v1"):
            schedule: str = ""

        return Backup

    first, second = backup_class(), backup_class()
    module = types.ModuleType("operator_module")
    module.Backup = first  # type: ignore[attr-defined]
    manager = Manager(APIClient(ClientConfig(server="https://127.0.0.1:1")))
    kubeloop.Builder(manager).for_(second).complete(lambda request: None)
    assert manager.custom_resources == [second]
    crds = module_crds(module, manager)
    assert [crd["metadata"]["name"] for crd in crds] == ["backups.twice.example.com"]
    assert [version["name"] for version in crds[0]["spec"]["versions"]] == ["v1"]
    assert [crd["metadata"]["name"] for crd in module_crds(None, manager)] == ["backups.twice.example.com"]
