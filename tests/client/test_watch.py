"""Watch streams against the embedded server: events, bookmarks, reconnecting across a server
restart and a silent stream, and 410 after compaction as a distinct signal."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import signal
import socket
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.apiserver.http.watchstream import WatchSettings
from kubeloop.client.config import ClientConfig, load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.client.watch import WatchEvent
from tests.conftest import ServerThread, eventually, start_server

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def configmap(name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


async def _take(events: AsyncIterator[WatchEvent], count: int, timeout: float = 10) -> list[WatchEvent]:
    async def collect() -> list[WatchEvent]:
        out: list[WatchEvent] = []
        async for event in events:
            out.append(event)
            if len(out) == count:
                break
        return out

    return await asyncio.wait_for(collect(), timeout)


async def test_watch_events_in_order(client: APIClient, namespace: str) -> None:
    start = (await client.list(CONFIGMAP, namespace=namespace)).resource_version
    watch = client.watch(CONFIGMAP, namespace=namespace, resource_version=start)
    events = watch.__aiter__()
    await client.create(configmap("w", namespace, a="1"))
    await client.patch(CONFIGMAP, "w", {"data": {"a": "2"}}, namespace=namespace)
    await client.delete(CONFIGMAP, "w", namespace=namespace)
    seen = await _take(events, 3)
    assert [(e.type, e.object["metadata"]["name"]) for e in seen] == [
        ("ADDED", "w"),
        ("MODIFIED", "w"),
        ("DELETED", "w"),
    ]
    assert seen[1].object["data"] == {"a": "2"}
    assert watch.resource_version == seen[-1].resource_version
    await watch.close()


async def test_watch_with_selector_and_initial_events(client: APIClient, namespace: str) -> None:
    for name, tier in (("a", "web"), ("b", "db")):
        body = configmap(name, namespace)
        body["metadata"]["labels"] = {"tier": tier}
        await client.create(body)
    watch = client.watch(
        CONFIGMAP,
        namespace=namespace,
        label_selector="tier=web",
        send_initial_events=True,
        yield_bookmarks=True,
    )
    seen = await _take(watch.__aiter__(), 2)
    assert [e.type for e in seen] == ["ADDED", "BOOKMARK"]
    assert seen[0].object["metadata"]["name"] == "a"
    assert seen[1].object["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
    await watch.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_watch_survives_a_server_restart(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubeloop.client.watch")
    port = _free_port()
    server = start_server(tmp_path, port=port)
    config = load_kubeconfig(server.kubeconfig)
    async with APIClient(config) as client:
        await client.create(configmap("before"))
        start = (await client.list(CONFIGMAP, namespace="default")).resource_version
        watch = client.watch(CONFIGMAP, namespace="default", resource_version=start)
        events = watch.__aiter__()
        await client.create(configmap("one"))
        assert [e.object["metadata"]["name"] for e in await _take(events, 1)] == ["one"]

        waiting = asyncio.ensure_future(_take(events, 1, timeout=60))
        await asyncio.to_thread(server.stop)

        def interruptions() -> int:
            return sum("interrupted" in record.getMessage() for record in caplog.records)

        await eventually(lambda: interruptions() >= 2, timeout=30)  # it tried again, and failed
        server = await asyncio.to_thread(start_server, tmp_path, port=port)
        try:
            await client.create(configmap("two"))
            seen = await waiting
            # Resumed from the last resourceVersion: nothing replayed, nothing missed.
            assert [(e.type, e.object["metadata"]["name"]) for e in seen] == [("ADDED", "two")]
        finally:
            await watch.close()
            server.stop()


async def test_silent_stream_is_detected_and_resumed(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No bookmarks from this server: a quiet stream looks exactly like a stalled one. (No control
    # loops either: their start-up, in this process, could delay the watch past the quiet spell.)
    server = start_server(watch=WatchSettings(bookmark_interval=3600), controllers=False)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            watch = client.watch(CONFIGMAP, namespace="default", resource_version="0", inactivity_timeout=0.3)
            events = watch.__aiter__()
            with caplog.at_level(logging.INFO, logger="kubeloop.client.watch"):
                waiter = asyncio.ensure_future(_take(events, 1, timeout=30))

                def silences() -> int:
                    return sum("no event for 0.3s" in record.getMessage() for record in caplog.records)

                await eventually(lambda: silences() >= 2, timeout=30)  # several inactivity timeouts pass
                await client.create(configmap("late"))
                seen = await waiter
            assert seen[0].object["metadata"]["name"] == "late"
            assert any("no event for 0.3s" in r.getMessage() for r in caplog.records)
            await watch.close()
    finally:
        server.stop()


async def test_bookmarks_advance_the_resource_version(tmp_path: pathlib.Path) -> None:
    server = start_server(watch=WatchSettings(bookmark_interval=0.2), controllers=False)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            start = (await client.list(CONFIGMAP, namespace="default")).resource_version
            watch = client.watch(
                CONFIGMAP, namespace="kube-system", resource_version=start, yield_bookmarks=True
            )
            events = watch.__aiter__()
            await client.create(configmap("elsewhere", "default"))  # not in the watched namespace
            latest = (await client.get(CONFIGMAP, "elsewhere", namespace="default"))["metadata"][
                "resourceVersion"
            ]
            for _ in range(20):
                event = (await _take(events, 1))[0]
                assert event.type == "BOOKMARK"
                if int(watch.resource_version or 0) >= int(latest):
                    break
            assert int(watch.resource_version or 0) >= int(latest)
            await watch.close()
    finally:
        server.stop()


async def test_410_after_compaction_is_a_distinct_signal() -> None:
    server = start_server(history_window=5, controllers=False)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            old = (await client.create(configmap("c")))["metadata"]["resourceVersion"]
            for i in range(10):
                await client.patch(CONFIGMAP, "c", {"data": {"n": str(i)}}, namespace="default")
            watch = client.watch(CONFIGMAP, namespace="default", resource_version=old)
            with pytest.raises(errors.ResourceExpired) as expired:
                await _take(watch.__aiter__(), 1)
            assert expired.value.code == 410
            assert watch.resource_version is None  # the caller relists
    finally:
        server.stop()


async def test_a_watch_and_requests_outlast_a_paused_server_process(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A server process stopped (SIGSTOP) accepts connections in the kernel and answers nothing:
    # a watch started then must not wait forever for the answer's headers, and requests time out
    # and are retried on fresh connections; once it resumes, everything carries on.
    from tests.apiserver.storage.test_durability import apiserver

    with apiserver(tmp_path) as (proc, _):
        config = load_kubeconfig(tmp_path / "kubeconfig")
        async with APIClient(config, request_timeout=0.5) as client:
            await client.create(configmap("before"))
            start = (await client.list(CONFIGMAP, namespace="default")).resource_version
            proc.send_signal(signal.SIGSTOP)
            try:
                watch = client.watch(
                    CONFIGMAP,
                    namespace="default",
                    resource_version=start,
                    inactivity_timeout=0.5,
                    # The server keeps kube-root-ca.crt in every namespace, written as its loops start.
                    field_selector="metadata.name!=kube-root-ca.crt",
                )
                events = watch.__aiter__()
                with caplog.at_level(logging.INFO, logger="kubeloop.client.watch"):
                    waiter = asyncio.ensure_future(_take(events, 1, timeout=60))
                    with pytest.raises(TimeoutError):
                        await client.get(CONFIGMAP, "before", namespace="default")
                    await eventually(
                        lambda: any(
                            "no answer to the watch request" in r.getMessage() for r in caplog.records
                        ),
                        timeout=30,
                    )
            finally:
                proc.send_signal(signal.SIGCONT)
            client.request_timeout = 10
            await client.create(configmap("after"))
            seen = await waiter
            assert [(e.type, e.object["metadata"]["name"]) for e in seen] == [("ADDED", "after")]
            assert (await client.get(CONFIGMAP, "before", namespace="default"))["metadata"][
                "name"
            ] == "before"
            await watch.close()


async def test_one_client_outlives_a_sigkilled_durable_server(tmp_path: pathlib.Path) -> None:
    # An operator's client keeps running while `kubeloop apiserver --data-dir` is SIGKILLed and
    # restarted on the same port: its pooled connections died with the process, so its next
    # write goes out on a fresh one (a POST, which is never retried), and its watch resumes
    # from the last resourceVersion with nothing replayed and nothing missed.
    from tests.apiserver.storage.test_durability import apiserver

    port = _free_port()
    with apiserver(tmp_path, "--port", str(port)) as (proc, _):
        client = APIClient(load_kubeconfig(tmp_path / "kubeconfig"))
        await client.create(configmap("before"))
        start = (await client.list(CONFIGMAP, namespace="default")).resource_version
        # The server keeps kube-root-ca.crt in every namespace, written whenever its loops start.
        mine = "metadata.name!=kube-root-ca.crt"
        watch = client.watch(CONFIGMAP, namespace="default", resource_version=start, field_selector=mine)
        events = watch.__aiter__()
        await client.create(configmap("one"))
        assert [e.object["metadata"]["name"] for e in await _take(events, 1)] == ["one"]
        waiting = asyncio.ensure_future(_take(events, 1, timeout=60))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    try:
        with apiserver(tmp_path, "--port", str(port)):
            await asyncio.sleep(0.2)  # the kill's resets have reached the client's connections
            await client.create(configmap("two"))  # same client, same credentials
            seen = await waiting
            assert [(e.type, e.object["metadata"]["name"]) for e in seen] == [("ADDED", "two")]
            listed = await client.list(CONFIGMAP, namespace="default", field_selector=mine)
            assert [item["metadata"]["name"] for item in listed] == ["before", "one", "two"]
    finally:
        await watch.close()
        await client.close()


async def test_events_split_anywhere_arrive_whole_and_a_garbled_line_resumes_from_the_last_one() -> None:
    """A stream's events may be cut at any byte; a line that is not an event ends that
    connection (as a broken one) and the watch resumes from the newest resourceVersion seen."""
    from aiohttp import web

    asked: list[dict[str, str]] = []
    released = asyncio.Event()  # the streams stay open until the test is done with them

    def event(kind: str, name: str, rv: int) -> bytes:
        obj = configmap(name) | {
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}
        }
        return orjson.dumps({"type": kind, "object": obj}) + b"\n"

    async def discovery(request: web.Request) -> web.Response:
        resource = {"name": "configmaps", "namespaced": True, "kind": "ConfigMap", "verbs": ["watch"]}
        return web.json_response({"kind": "APIResourceList", "groupVersion": "v1", "resources": [resource]})

    async def watch(request: web.Request) -> web.StreamResponse:
        asked.append(dict(request.query))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if len(asked) == 1:
            wire = event("ADDED", "a", 5) + b"\n" + event("MODIFIED", "a", 6) + b"{not an event\n"
            for start in range(0, len(wire), 7):  # 7-byte chunks: every event is cut mid-way
                await response.write(wire[start : start + 7])
                await asyncio.sleep(0.001)
        else:
            await response.write(event("ADDED", "b", 7))
        await released.wait()
        return response

    app = web.Application()
    app.router.add_get("/api/v1", discovery)
    app.router.add_get("/api/v1/namespaces/default/configmaps", watch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with APIClient(ClientConfig(server=f"http://127.0.0.1:{port}")) as client:
            watch_stream = client.watch(CONFIGMAP, namespace="default")
            events = await _take(aiter(watch_stream), 3)
            assert [(e.type, e.object["metadata"]["name"], e.resource_version) for e in events] == [
                ("ADDED", "a", "5"),
                ("MODIFIED", "a", "6"),
                ("ADDED", "b", "7"),
            ]
            await watch_stream.close()
        assert "resourceVersion" not in asked[0] and asked[1]["resourceVersion"] == "6"
    finally:
        released.set()
        await runner.cleanup()
