"""The informer against the embedded server: initial sync, events, indexes, managedFields
stripped, a server restart and a watcher closed with 410 — handlers always end on the final state."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.cache.informer import EventHandler, Informer
from kubeloop.cache.store import NAMESPACE_INDEX, Indexer, object_key
from kubeloop.client.config import ClientConfig, load_kubeconfig
from kubeloop.client.rest import APIClient
from tests.conftest import Client as HttpClient
from tests.conftest import ServerThread, eventually, start_server

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def configmap(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.handler = EventHandler(
            on_add=lambda o: self.events.append(("add", object_key(o))),
            on_update=lambda old, new: self.events.append(("update", object_key(new))),
            on_delete=lambda o: self.events.append(("delete", object_key(o))),
        )


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


def by_tier(obj: dict[str, Any]) -> list[str]:
    tier = ((obj.get("metadata") or {}).get("labels") or {}).get("tier")
    return [tier] if tier else []


async def test_sync_events_and_indexes(client: APIClient, namespace: str) -> None:
    await client.create(configmap("before", namespace, tier="web"))
    informer = Informer(client, CONFIGMAP, namespaces=[namespace], indexers={"tier": by_tier})
    recorder = Recorder()
    informer.add_handler(recorder.handler)
    informer.start()
    try:
        assert await informer.wait_for_sync(10)
        assert recorder.events == [("add", f"{namespace}/before")]
        stored = informer.store.get(f"{namespace}/before")
        assert stored is not None and "managedFields" not in stored["metadata"]  # stripped by default

        await client.create(configmap("after", namespace, tier="db"))
        await client.patch(CONFIGMAP, "before", {"metadata": {"labels": {"tier": "db"}}}, namespace=namespace)
        await client.delete(CONFIGMAP, "after", namespace=namespace)
        await eventually(lambda: len(recorder.events) == 4)
        assert recorder.events[1:] == [
            ("add", f"{namespace}/after"),
            ("update", f"{namespace}/before"),
            ("delete", f"{namespace}/after"),
        ]
        assert [object_key(o) for o in informer.store.by_index("tier", "db")] == [f"{namespace}/before"]
        assert informer.store.by_index("tier", "web") == []
        assert len(informer.store.by_index(NAMESPACE_INDEX, namespace)) == 1

        late = Recorder()
        informer.add_handler(late.handler)  # a handler added later hears about what is there
        assert late.events == [("add", f"{namespace}/before")]
    finally:
        await informer.stop()


async def test_resync_reports_every_object_again(client: APIClient, namespace: str) -> None:
    await client.create(configmap("r", namespace))
    informer = Informer(client, CONFIGMAP, namespaces=[namespace], resync_period=0.1)
    recorder = Recorder()
    informer.add_handler(recorder.handler)
    informer.start()
    try:
        await eventually(lambda: recorder.events.count(("update", f"{namespace}/r")) >= 2)
    finally:
        await informer.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_survives_a_server_restart_and_misses_no_final_state(tmp_path: pathlib.Path) -> None:
    port = _free_port()
    server = start_server(tmp_path, port=port)
    async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
        for name in ("keep", "change", "remove"):
            await client.create(configmap(name, "default"))
        informer = Informer(client, CONFIGMAP, namespaces=["default"])
        informer.start()
        try:
            assert await informer.wait_for_sync(10)
            await asyncio.to_thread(server.stop)
            # The server is back (same data directory); whether the informer resumes its watch or
            # has to relist, it must end on the state below.
            server = await asyncio.to_thread(start_server, tmp_path, port=port)
            await client.patch(CONFIGMAP, "change", {"data": {"v": "2"}}, namespace="default")
            await client.delete(CONFIGMAP, "remove", namespace="default")
            await client.create(configmap("new", "default"))
            await eventually(
                lambda: (
                    sorted(informer.store.list_keys()) == ["default/change", "default/keep", "default/new"]
                    and (informer.store.get("default/change") or {}).get("data") == {"v": "2"}
                ),
                timeout=30,
            )
        finally:
            await informer.stop()
            server.stop()


async def test_relists_after_410_and_converges() -> None:
    # A watcher that falls 5 events behind is closed with 410; a handler that blocks the
    # informer until every write is done makes it fall behind, however fast the writes go.
    server = start_server(watcher_buffer=5, controllers=False)
    written = threading.Event()
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            informer = Informer(client, CONFIGMAP, namespaces=["default"])
            informer.add_handler(EventHandler(on_add=lambda o: written.wait(), on_update=lambda a, b: written.wait()))
            informer.start()
            assert await informer.wait_for_sync(10)
            http = HttpClient(server)

            def write_behind() -> set[str]:  # another thread: the server runs on while handlers block
                try:
                    for i in range(60):  # 200 KB each: more than the socket buffers hold
                        http.post(
                            "/api/v1/namespaces/default/configmaps",
                            {**configmap(f"c{i}", "default"), "data": {"x": "y" * 200_000}},
                        )
                    for i in range(0, 60, 2):
                        http.delete(f"/api/v1/namespaces/default/configmaps/c{i}")
                    items = http.get("/api/v1/namespaces/default/configmaps").json()["items"]
                    return {object_key(o) for o in items}
                finally:
                    written.set()

            final = await asyncio.to_thread(write_behind)
            await eventually(lambda: set(informer.store.list_keys()) == final, timeout=30)
            assert informer.reflectors[0].lists >= 2  # it relisted
            await informer.stop()
    finally:
        server.stop()


async def test_a_410_relists_one_namespace_and_handlers_end_on_the_final_state() -> None:
    """Over HTTP: an informer of two namespaces, whose watch of "busy" falls behind and is closed
    with 410 (the server keeps 5 events per watcher) while "calm" has only a few changes. "busy"
    relists; "calm" is never relisted and none of its objects is reported deleted; and what the
    handlers were told — adds, updates, deletes — adds up to exactly what the server holds."""
    server = start_server(watcher_buffer=5, controllers=False)
    try:
        http = HttpClient(server)
        for name in ("busy", "calm"):
            http.post(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )
        for i in range(3):
            http.post("/api/v1/namespaces/calm/configmaps", configmap(f"c{i}", "calm"))
        mirror: dict[str, str] = {}  # key → resourceVersion, as the handlers were told
        deleted: list[str] = []
        written = threading.Event()

        def seen(obj: dict[str, Any]) -> None:
            if obj["metadata"]["namespace"] == "busy":
                written.wait()  # blocks the informer until every write is done: "busy" falls behind
            mirror[object_key(obj)] = obj["metadata"]["resourceVersion"]

        def gone(obj: dict[str, Any]) -> None:
            mirror.pop(object_key(obj), None)
            deleted.append(object_key(obj))

        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            informer = Informer(client, CONFIGMAP, namespaces=["busy", "calm"])
            informer.add_handler(
                EventHandler(on_add=seen, on_update=lambda old, new: seen(new), on_delete=gone)
            )
            informer.start()
            try:
                assert await informer.wait_for_sync(10)

                def write() -> dict[str, str]:  # another thread: the server runs on while handlers block
                    try:
                        for i in range(60):  # 200 KB each: more than the socket buffers hold
                            body = {**configmap(f"b{i}", "busy"), "data": {"x": "y" * 200_000}}
                            http.post("/api/v1/namespaces/busy/configmaps", body)
                        for i in range(0, 60, 2):
                            http.delete(f"/api/v1/namespaces/busy/configmaps/b{i}")
                        merge = "application/merge-patch+json"
                        http.patch("/api/v1/namespaces/calm/configmaps/c1", {"data": {"v": "2"}}, merge)
                        http.delete("/api/v1/namespaces/calm/configmaps/c2")
                        final = {}
                        for name in ("busy", "calm"):
                            for obj in http.get(f"/api/v1/namespaces/{name}/configmaps").json()["items"]:
                                final[object_key(obj)] = obj["metadata"]["resourceVersion"]
                        return final
                    finally:
                        written.set()

                final = await asyncio.to_thread(write)
                await eventually(lambda: mirror == final, timeout=30)
                lists = {r.options.namespace: r.lists for r in informer.reflectors}
                assert lists["busy"] >= 2, lists  # it relisted after the 410
                assert lists["calm"] == 1, lists  # the other namespace kept its watch
                assert [key for key in deleted if key.startswith("calm/")] == ["calm/c2"]
            finally:
                await informer.stop()
    finally:
        server.stop()


async def test_wait_for_sync_times_out_without_a_server() -> None:
    port = _free_port()
    async with APIClient(ClientConfig(server=f"http://127.0.0.1:{port}")) as client:
        informer = Informer(client, CONFIGMAP)
        informer.start()
        try:
            assert await informer.wait_for_sync(0.5) is False
            assert not informer.has_synced
        finally:
            await informer.stop()


def test_indexer_add_indexers_later_and_reindex_on_update() -> None:
    store = Indexer()
    store.upsert(configmap("a", "ns", tier="web"))
    store.add_indexers({"tier": by_tier})
    assert [object_key(o) for o in store.by_index("tier", "web")] == ["ns/a"]
    store.upsert(configmap("a", "ns", tier="db"))
    assert store.by_index("tier", "web") == [] and len(store.by_index("tier", "db")) == 1
    store.delete(configmap("a", "ns"))
    assert store.by_index("tier", "db") == [] and len(store) == 0
    with pytest.raises(ValueError):
        store.add_indexers({"tier": by_tier})
    with pytest.raises(KeyError):
        store.by_index("nope", "x")


def test_a_late_handler_is_given_the_stored_objects_one_decoded_at_a_time() -> None:
    """A handler added to a synced informer (a controller started after the cache) hears of every
    stored object as an add, each decoded as it is handed over: decoding them all first held
    10,000 widgets at once (~15 MiB of an operator's peak RSS in bench B2)."""
    import tracemalloc

    informer = Informer(cast(Any, None), CONFIGMAP)  # never started: fed as its reflector would
    padding = "x" * 1000
    items = [{**configmap(f"cm-{n:04d}", "ns"), "data": {"pad": padding}} for n in range(3000)]
    informer.list_page(items, None)
    informer.list_done("1", None)
    del items
    heard: list[str] = []

    def on_add(obj: dict[str, Any]) -> None:
        heard.append(obj["metadata"]["name"])

    tracemalloc.start()
    try:
        held = informer.store.objects()  # what decoding them all at once costs
        all_at_once = tracemalloc.get_traced_memory()[0]
        del held
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        informer.add_handler(EventHandler(on_add=on_add))
        replay_peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert sorted(heard) == [f"cm-{n:04d}" for n in range(3000)]
    assert replay_peak < all_at_once / 10, (replay_peak, all_at_once)
