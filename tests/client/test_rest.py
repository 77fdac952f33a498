"""The async REST client against the embedded server over HTTPS: every verb and patch type,
pagination, selectors, subresources, dry-run, field validation, each error class from a real
answer, retries and credential refresh."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import orjson
import pytest
from aiohttp import web

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.models import core_v1
from kubeloop.client import restclient
from kubeloop.client.calloptions import Preconditions
from kubeloop.client.config import ClientConfig, Credentials, load_kubeconfig
from kubeloop.client.rest import APIClient, PatchType
from kubeloop.client.restclient import PAUSED_DECODE_BYTES, REQUEST_ERRORS, RetryPolicy, decode_json
from kubeloop.client.restmapper import NoKindMatch
from tests.conftest import ServerThread, eventually
from tests.gcstate import gc_back_on, wait_gc_back_on

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")
NAMESPACE = GroupVersionKind("", "v1", "Namespace")


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def deployment(name: str, namespace: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
            },
        },
    }


async def test_crud_and_every_patch_type(client: APIClient, namespace: str) -> None:
    created = await client.create(configmap("a", namespace, k="1"))
    assert created["metadata"]["uid"] and created["data"] == {"k": "1"}
    fetched = await client.get(CONFIGMAP, "a", namespace=namespace)
    assert fetched == created

    fetched["data"]["k"] = "2"
    updated = await client.update(fetched)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    merged = await client.patch(CONFIGMAP, "a", {"data": {"m": "3"}}, namespace=namespace)
    assert merged["data"] == {"k": "2", "m": "3"}
    jsonpatched = await client.patch(
        CONFIGMAP, "a", [{"op": "remove", "path": "/data/m"}], patch_type=PatchType.JSON, namespace=namespace
    )
    assert jsonpatched["data"] == {"k": "2"}

    await client.create(deployment("web", namespace))
    strategic = await client.patch(
        DEPLOYMENT,
        "web",
        {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox"}]}}}},
        patch_type=PatchType.STRATEGIC,
        namespace=namespace,
    )
    names = [c["name"] for c in strategic["spec"]["template"]["spec"]["containers"]]
    assert names == ["side", "main"]  # merged by name, not replaced

    deleted = await client.delete(CONFIGMAP, "a", namespace=namespace)
    assert deleted["status"] == "Success"
    assert await errors.ignore_not_found(client.get(CONFIGMAP, "a", namespace=namespace)) is None


async def test_namespace_defaults_and_cluster_scope(client: APIClient, namespace: str) -> None:
    # An object's own namespace wins; without one the kubeconfig context's namespace ("default") is used.
    created = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "g-"}}
    )
    assert created["metadata"]["namespace"] == "default"
    await client.delete(created)
    ns = await client.get(NAMESPACE, namespace)
    assert ns["metadata"]["name"] == namespace and "namespace" not in ns["metadata"]


async def test_pagination_of_1000_objects(client: APIClient, namespace: str) -> None:
    async def make(i: int) -> None:
        body = configmap(f"cm-{i:04d}", namespace, i=str(i))
        body["metadata"]["labels"] = {"parity": "even" if i % 2 == 0 else "odd"}
        await client.create(body)

    for start in range(0, 1000, 250):
        await asyncio.gather(*(make(i) for i in range(start, start + 250)))

    pages = [page async for page in client.list_pages(CONFIGMAP, namespace=namespace, page_size=200)]
    assert len(pages) == 5
    assert all(len(p["items"]) == 200 for p in pages)
    assert pages[0]["metadata"]["remainingItemCount"] == 800

    # One page is read ahead: the next one is asked for before a page is handed over, and comes
    # in while the caller still holds it; stopping early asks for nothing more.
    answered = client.requests[("GET", "200")]
    async with contextlib.aclosing(client.list_pages(CONFIGMAP, namespace=namespace, page_size=200)) as it:
        async for page in it:
            assert page["metadata"]["remainingItemCount"] == 800
            await eventually(lambda: client.requests[("GET", "200")] == answered + 2)
            break
    # Closed: nothing of the listing is left running to ask again.
    running = [task for task in asyncio.all_tasks() if not task.done() and "_json" in repr(task.get_coro())]
    assert running == []
    assert client.requests[("GET", "200")] == answered + 2

    everything = await client.list(CONFIGMAP, namespace=namespace, page_size=300)
    names = [item["metadata"]["name"] for item in everything.items]
    assert names == [f"cm-{i:04d}" for i in range(1000)]
    assert int(everything.resource_version) > 0

    even = await client.list(CONFIGMAP, namespace=namespace, label_selector="parity=even", page_size=100)
    assert len(even.items) == 500
    one = await client.list(CONFIGMAP, namespace=namespace, field_selector="metadata.name=cm-0007")
    assert [item["data"]["i"] for item in one.items] == ["7"]

    removed = await client.delete_collection(CONFIGMAP, namespace=namespace, label_selector="parity=odd")
    assert len(removed["items"]) == 500
    assert len((await client.list(CONFIGMAP, namespace=namespace)).items) == 500


def test_a_large_answer_is_decoded_with_the_gc_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hundreds of thousands of acyclic dicts made at once: with the GC running, its passes over
    them took ten times the decoding (``bench/client_throughput.py``).

    Only passes that start while orjson decodes are counted: passes just before or after the
    pause depend on what the process's other threads allocate."""
    payload = orjson.dumps(
        {"items": [{"metadata": {"name": f"o{i}", "labels": {"a": "b"}}} for i in range(20_000)]}
    )
    assert len(payload) > PAUSED_DECODE_BYTES
    decoding = False
    passes_while_decoding: list[int] = []
    real_loads = orjson.loads

    def loads(raw: bytes) -> Any:
        nonlocal decoding
        decoding = True
        try:
            return real_loads(raw)
        finally:
            decoding = False

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and decoding:
            passes_while_decoding.append(info["generation"])

    monkeypatch.setattr(restclient.orjson, "loads", loads)
    threshold = gc.get_threshold()
    gc.set_threshold(10)  # with the GC on, decoding would set off thousands of passes
    gc.callbacks.append(record)
    try:
        decoded = decode_json(payload)
        paused = list(passes_while_decoding)
        # Under the bound the GC runs as ever: a small answer decoded while no other thread of
        # this process holds a pause of its own sets off passes (tried again if one took a pause
        # meanwhile: an in-process server's controllers do at any moment).
        for _ in range(50):
            wait_gc_back_on()
            decode_json(b'{"small": [' + b"[1]," * 100 + b"[2]]}")
            if len(passes_while_decoding) > len(paused):
                break
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*threshold)
    assert len(decoded["items"]) == 20_000
    wait_gc_back_on()
    # None while the large one decodes (one allowed for another thread's gc.collect());
    # thousands had the GC run while decoding.
    assert len(paused) <= 1
    assert len(passes_while_decoding) > len(paused)


async def test_a_list_of_models_is_made_with_the_gc_paused(
    client: APIClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.gather(*(client.create(configmap(f"m{i}", namespace)) for i in range(20)))
    made_with_gc: list[bool] = []
    validate = core_v1.ConfigMap.model_validate

    def recording(obj: Any, *args: Any, **kwargs: Any) -> core_v1.ConfigMap:
        made_with_gc.append(gc.isenabled())
        return validate(obj, *args, **kwargs)

    monkeypatch.setattr(core_v1.ConfigMap, "model_validate", recording)
    listed = await client.list(core_v1.ConfigMap, namespace=namespace)
    assert [item.metadata.name for item in listed.items] == sorted(f"m{i}" for i in range(20))
    assert made_with_gc == [False] * 20
    await gc_back_on()


async def test_metadata_only_list_and_watch(client: APIClient, namespace: str) -> None:
    for i in range(3):
        await client.create(configmap(f"meta-{i}", namespace, payload="p" * 100))
    listed = await client.list(CONFIGMAP, namespace=namespace, page_size=2, metadata_only=True)
    assert listed.resource_version
    assert [item["metadata"]["name"] for item in listed.items] == ["meta-0", "meta-1", "meta-2"]
    assert all(item["kind"] == "PartialObjectMetadata" and "data" not in item for item in listed.items)
    watch = client.watch(
        CONFIGMAP,
        namespace=namespace,
        resource_version=listed.resource_version,
        metadata_only=True,
    )
    await client.patch(CONFIGMAP, "meta-1", {"data": {"payload": "changed"}}, namespace=namespace)
    async for event in watch:
        assert event.type == "MODIFIED" and event.object["kind"] == "PartialObjectMetadata"
        assert event.object["metadata"]["name"] == "meta-1" and "data" not in event.object
        break
    await watch.close()


async def test_all_namespaces_list(client: APIClient, namespace: str) -> None:
    await client.create(configmap("everywhere", namespace))
    listed = await client.list(CONFIGMAP, field_selector="metadata.name=everywhere")
    assert {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed.items} >= {
        (namespace, "everywhere")
    }


async def test_subresources_dry_run_and_field_manager(client: APIClient, namespace: str) -> None:
    await client.create(deployment("web", namespace, replicas=2))
    scale = await client.get(DEPLOYMENT, "web", namespace=namespace, subresource="scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    scaled = await client.patch(
        DEPLOYMENT, "web", {"spec": {"replicas": 4}}, namespace=namespace, subresource="scale"
    )
    assert scaled["spec"]["replicas"] == 4

    current = await client.get(DEPLOYMENT, "web", namespace=namespace)
    current["status"] = {"replicas": 4, "observedGeneration": current["metadata"]["generation"]}
    with_status = await client.update(current, subresource="status")
    assert with_status["status"]["replicas"] == 4

    dry = await client.create(configmap("dry", namespace), dry_run=True)
    assert dry["metadata"]["name"] == "dry"
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAP, "dry", namespace=namespace)


async def test_field_validation_and_warnings(
    client: APIClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = configmap("v", namespace)
    body["bogus"] = 1
    with pytest.raises(errors.BadRequest) as raised:
        await client.create(body, field_validation="Strict")
    assert 'unknown field "bogus"' in raised.value.message
    with caplog.at_level(logging.WARNING, logger="kubeloop.client"):
        await client.create(body, field_validation="Warn")
    assert any('unknown field "bogus"' in record.getMessage() for record in caplog.records)
    # The same warning about the same object, on every write an operator sends: logged once.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kubeloop.client"):
        for value in ("1", "2", "3"):
            patch = {"data": {"n": value}, "bogus": 1}
            await client.patch(CONFIGMAP, "v", patch, namespace=namespace, field_validation="Warn")
        other = configmap("w", namespace)
        other["bogus"] = 1
        await client.create(other, field_validation="Warn")
        await client.patch(CONFIGMAP, "w", {"bogus": 2}, namespace=namespace, field_validation="Warn")
    logged = [record.getMessage() for record in caplog.records if "bogus" in record.getMessage()]
    assert len(logged) == 3, logged  # v's patches once; w's create and w's patches once each


async def test_each_error_class_from_real_answers(
    client: APIClient, namespace: str, shared_server: ServerThread
) -> None:
    with pytest.raises(errors.NotFound) as not_found:
        await client.get(CONFIGMAP, "missing", namespace=namespace)
    assert not_found.value.code == 404 and errors.is_not_found(not_found.value)

    first = await client.create(configmap("dup", namespace))
    with pytest.raises(errors.AlreadyExists):
        await client.create(configmap("dup", namespace))
    assert await errors.ignore_already_exists(client.create(configmap("dup", namespace))) is None

    await client.patch(CONFIGMAP, "dup", {"data": {"x": "1"}}, namespace=namespace)
    with pytest.raises(errors.Conflict):
        await client.update(first)  # stale resourceVersion

    with pytest.raises(errors.Conflict):
        await client.delete(CONFIGMAP, "dup", namespace=namespace, preconditions=Preconditions(uid="other"))

    with pytest.raises(errors.Invalid) as invalid:
        await client.create(configmap("Bad_Name", namespace))
    assert [cause.field for cause in invalid.value.causes] == ["metadata.name"]

    with pytest.raises(errors.BadRequest):
        await client.list(CONFIGMAP, namespace=namespace, label_selector="a in (")

    with pytest.raises(errors.RequestEntityTooLarge):
        await client.create(configmap("big", namespace, x="a" * (3 * 1024 * 1024)))

    with pytest.raises(errors.UnsupportedMediaType):
        await client.request(
            "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/dup", body=b"{}", content_type="text/csv"
        )

    with pytest.raises(errors.NotAcceptable):
        await client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps", accept="application/cbor")

    with pytest.raises(errors.MethodNotAllowed):
        await client.request(
            "PUT", f"/api/v1/namespaces/{namespace}/configmaps", body=b"{}", content_type="application/json"
        )

    async with APIClient(
        load_kubeconfig(shared_server.kubeconfig), retry=RetryPolicy(max_retries=0)
    ) as no_retry:
        with pytest.raises(errors.Timeout) as too_new:
            await no_retry.request(
                "GET",
                f"/api/v1/namespaces/{namespace}/configmaps/dup",
                params={"resourceVersion": "99999999"},
            )
    assert too_new.value.code == 504 and too_new.value.retry_after_seconds == 1

    with pytest.raises(NoKindMatch):
        await client.get(GroupVersionKind("example.com", "v1", "Widget"), "w", namespace=namespace)

    # A namespace being deleted refuses new objects: Forbidden.
    doomed = f"{namespace}-doomed"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": doomed}})
    await client.create(
        {
            **configmap("keep", doomed),
            "metadata": {"name": "keep", "namespace": doomed, "finalizers": ["x.io/hold"]},
        }
    )
    await client.delete(NAMESPACE, doomed)
    with pytest.raises(errors.Forbidden):
        await client.create(configmap("late", doomed))
    await client.patch(CONFIGMAP, "keep", {"metadata": {"finalizers": None}}, namespace=doomed)

    bad = replace(load_kubeconfig(shared_server.kubeconfig), credentials=_StaticCredentials("wrong", "wrong"))
    async with APIClient(bad) as unauthenticated:
        with pytest.raises(errors.Unauthorized):
            await unauthenticated.get(NAMESPACE, "default")


async def test_resource_expired_from_an_old_continue_token(tmp_path: Any) -> None:
    from tests.conftest import start_server

    server = start_server(history_window=5)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            for i in range(3):
                await client.create(configmap(f"c{i}", "default"))
            first = await client.request(
                "GET", "/api/v1/namespaces/default/configmaps", params={"limit": "1"}
            )
            import orjson

            token = orjson.loads(first[1])["metadata"]["continue"]
            for i in range(10):
                await client.patch(CONFIGMAP, "c0", {"data": {"n": str(i)}}, namespace="default")
            with pytest.raises(errors.ResourceExpired) as expired:
                await client.request(
                    "GET", "/api/v1/namespaces/default/configmaps", params={"limit": "1", "continue": token}
                )
            assert expired.value.code == 410
    finally:
        server.stop()


class _StaticCredentials:
    """A credential source whose first token is wrong and whose refresh gives the right one."""

    def __init__(self, first: str, after_refresh: str) -> None:
        self.tokens = [first, after_refresh]
        self.refreshes = 0

    async def get(self) -> Credentials:
        return Credentials(token=self.tokens[min(self.refreshes, 1)])

    async def refresh(self) -> Credentials:
        self.refreshes += 1
        return await self.get()


async def test_a_401_refreshes_credentials_once(shared_server: ServerThread) -> None:
    source = _StaticCredentials("stale-token", shared_server.token)
    config = replace(load_kubeconfig(shared_server.kubeconfig), credentials=source)
    async with APIClient(config) as client:
        assert (await client.get(NAMESPACE, "default"))["metadata"]["name"] == "default"
        assert (await client.get(NAMESPACE, "kube-system"))["metadata"]["name"] == "kube-system"
    assert source.refreshes == 1


async def _flaky_server(answers: list[tuple[int, dict[str, str]]]) -> tuple[web.AppRunner, str, list[str]]:
    """A plain-HTTP server answering with the given (status, headers) in turn, then 200."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.method)
        if answers:
            status, headers = answers.pop(0)
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": status,
                "reason": "ServiceUnavailable"
                if status == 503
                else "TooManyRequests"
                if status == 429
                else "InternalError",
                "message": "try later",
            }
            return web.json_response(body, status=status, headers=headers)
        return web.json_response({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}", seen


async def test_retries_honour_retry_after_and_spare_unsafe_writes() -> None:
    runner, url, seen = await _flaky_server([(429, {"Retry-After": "0"}), (503, {"Retry-After": "0"})])
    try:
        async with APIClient(ClientConfig(server=url)) as client:
            assert (await client.request("GET", "/api/v1/namespaces/default/configmaps/x"))[0] == 200
            assert seen == ["GET", "GET", "GET"]
            seen.clear()
            # A POST answered 500 without Retry-After is not repeated (it may have been applied).
            runner_answers = [(500, {})]
            runner2, url2, seen2 = await _flaky_server(runner_answers)
            try:
                async with APIClient(ClientConfig(server=url2)) as writer:
                    with pytest.raises(errors.InternalError):
                        await writer.request(
                            "POST",
                            "/api/v1/namespaces/default/configmaps",
                            body=b"{}",
                            content_type="application/json",
                        )
                assert seen2 == ["POST"]
            finally:
                await runner2.cleanup()
    finally:
        await runner.cleanup()


async def test_client_side_rate_limit(shared_server: ServerThread) -> None:
    config = replace(load_kubeconfig(shared_server.kubeconfig), qps=20.0, burst=1)
    async with APIClient(config) as client:
        await client.get(NAMESPACE, "default")  # discovery and the first token
        started = time.monotonic()
        await asyncio.gather(*(client.get(NAMESPACE, "default") for _ in range(10)))
        # 10 requests at 20/s with no burst cannot finish in less than ~0.5 s.
        assert time.monotonic() - started >= 0.45


async def test_tls_server_name_is_what_the_certificate_is_checked_against(
    shared_server: ServerThread,
) -> None:
    config = load_kubeconfig(shared_server.kubeconfig)
    async with APIClient(replace(config, tls_server_name="localhost")) as client:
        assert (await client.get(NAMESPACE, "default"))["metadata"]["name"] == "default"
    async with APIClient(
        replace(config, tls_server_name="elsewhere.example"), retry=RetryPolicy(max_retries=0)
    ) as client:
        with pytest.raises(ssl.SSLCertVerificationError):  # aiohttp's error is one too
            await client.get(NAMESPACE, "default")


async def test_requests_go_through_the_proxy_url(shared_server: ServerThread) -> None:
    """An HTTP CONNECT proxy (written here) carries the TLS connection to the server."""
    tunnels: list[str] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = request.split(b"\r\n", 1)[0].decode().split(" ", 2)
        assert method == "CONNECT"
        tunnels.append(target)
        host, _, port = target.rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = proxy.sockets[0].getsockname()[1]
    try:
        config = replace(load_kubeconfig(shared_server.kubeconfig), proxy_url=f"http://127.0.0.1:{port}")
        async with APIClient(config) as client:
            assert (await client.get(NAMESPACE, "default"))["metadata"]["name"] == "default"
            # Through the proxy (on aiohttp) a write's fence is checked as its body goes out too.
            from kubeloop.client.fence import WriteFenced, current_write_fence

            token = current_write_fence.set(ShutsAfterFirstLook())
            try:
                with pytest.raises(WriteFenced, match="not sent"):
                    await client.create(configmap("by-proxy", "default"))
            finally:
                current_write_fence.reset(token)
            with pytest.raises(errors.NotFound):
                await client.get(CONFIGMAP, "by-proxy", namespace="default")
            # A watch goes through the proxy too.
            listed = await client.list(CONFIGMAP, namespace="default")
            watch = client.watch(CONFIGMAP, namespace="default", resource_version=listed.resource_version)
            events = aiter(watch)
            created = await client.create(configmap("watched-by-proxy", "default"))
            try:
                event = await asyncio.wait_for(anext(events), 10)
                assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "watched-by-proxy")
            finally:
                await watch.close()
                await client.delete(created)
        server_port = shared_server.url.rsplit(":", 1)[1]
        assert tunnels and all(t.endswith(f":{server_port}") for t in tunnels)
    finally:
        proxy.close()


async def test_a_proxy_that_breaks_the_answer_fails_as_the_pool_would() -> None:
    """Through a proxy (aiohttp), a broken answer is raised as the pool's error would be, one of
    REQUEST_ERRORS, so the informers and controllers that retry on those retry on it too."""

    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        writer.close()

    proxy = await asyncio.start_server(cut_short, "127.0.0.1", 0)
    port = proxy.sockets[0].getsockname()[1]
    try:
        config = ClientConfig(server="http://kube.invalid:8080", proxy_url=f"http://127.0.0.1:{port}")
        async with APIClient(config, retry=RetryPolicy(max_retries=0)) as client:
            with pytest.raises(REQUEST_ERRORS) as raised:
                await client.request("GET", "/api/v1/namespaces/default")
            assert isinstance(raised.value, ConnectionError)
            stream = await client.stream("/api/v1/namespaces/default", {}, timeout=5)
            try:
                with pytest.raises(ConnectionError):
                    await stream.read_all()
            finally:
                stream.close()
    finally:
        proxy.close()


async def test_server_side_apply(client: APIClient, namespace: str) -> None:
    body = configmap("applied", namespace, a="1")
    created = await client.apply(body, field_manager="tool")
    assert created["data"] == {"a": "1"}
    assert [(m["manager"], m["operation"]) for m in created["metadata"]["managedFields"]] == [
        ("tool", "Apply")
    ]
    await client.patch(
        CONFIGMAP, "applied", {"data": {"a": "2"}}, namespace=namespace, field_manager="editor"
    )
    with pytest.raises(errors.Conflict) as conflict:
        await client.apply(body, field_manager="tool")
    assert conflict.value.causes[0].type == "FieldManagerConflict"
    assert conflict.value.causes[0].field == ".data.a"
    forced = await client.apply(body, field_manager="tool", force=True)
    assert forced["data"] == {"a": "1"}


class SwitchFence:
    """A write fence a test opens and shuts."""

    def __init__(self) -> None:
        self.open = True

    def writes_allowed(self) -> bool:
        return self.open

    def describe(self) -> str:
        return "the test shut the fence"

    async def wait_until_allowed(self) -> bool:
        return self.open


async def test_a_shut_write_fence_keeps_writes_from_the_server(client: APIClient, namespace: str) -> None:
    from kubeloop.client.fence import WriteFenced, current_write_fence

    cm = CONFIGMAP
    fence = SwitchFence()
    token = current_write_fence.set(fence)
    try:
        await client.create(configmap("before", namespace, k="v"))
        fence.open = False
        with pytest.raises(WriteFenced, match="not sent: the test shut the fence"):
            await client.create(configmap("after", namespace))
        with pytest.raises(WriteFenced):
            await client.patch(cm, "before", {"data": {"x": "y"}}, namespace=namespace)
        with pytest.raises(WriteFenced):
            await client.delete(cm, "before", namespace=namespace)
        # Reads are never fenced.
        assert (await client.get(cm, "before", namespace=namespace))["data"] == {"k": "v"}
    finally:
        current_write_fence.reset(token)
    # Outside the fenced task nothing is refused, and nothing fenced reached the server.
    listed = await client.list(cm, namespace=namespace)
    names = [item["metadata"]["name"] for item in listed.items]
    assert names == ["before"]


class ShutsAfterFirstLook(SwitchFence):
    """Open when the request is made, shut by the time its body goes out (a pause in between)."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def writes_allowed(self) -> bool:
        self.looks += 1
        return self.looks < 2


async def test_the_fence_is_checked_again_as_the_body_goes_out(client: APIClient, namespace: str) -> None:
    from kubeloop.client.fence import WriteFenced, current_write_fence

    await client.create(configmap("late", namespace, k="v"))
    for write in (
        lambda: client.patch(CONFIGMAP, "late", {"data": {"k": "changed"}}, namespace=namespace),
        lambda: client.create(configmap("late-2", namespace)),
        lambda: client.delete(CONFIGMAP, "late", namespace=namespace),
    ):
        token = current_write_fence.set(ShutsAfterFirstLook())
        try:
            with pytest.raises(WriteFenced, match="not sent"):
                await write()
        finally:
            current_write_fence.reset(token)
    listed = await client.list(CONFIGMAP, namespace=namespace)
    assert [(i["metadata"]["name"], i["data"]) for i in listed] == [("late", {"k": "v"})]


async def test_preferred_resources_list_each_groups_preferred_version(client: APIClient) -> None:
    group = "preferred.example.com"
    version = {
        "served": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gears.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": "gears", "kind": "Gear"},
            "versions": [
                {"name": "v1", "storage": True, **version},
                {"name": "v2beta1", "storage": False, **version},
            ],
        },
    }
    await client.create(crd)
    try:
        requests_before = sum(client.requests.values())
        found = {(m.gvk.group, m.gvk.version, m.gvk.kind): m for m in await client.preferred_resources()}
        assert sum(client.requests.values()) - requests_before == 2  # /api and /apis, aggregated
        config_maps = found[("", "v1", "ConfigMap")]
        assert config_maps.resource == "configmaps" and config_maps.namespaced
        assert {
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        } <= config_maps.verbs
        assert not found[("", "v1", "Namespace")].namespaced
        assert ("apps", "v1", "Deployment") in found
        # v1 is preferred over a beta (the kube-aware version order), and only it is listed.
        assert (group, "v1", "Gear") in found and (group, "v2beta1", "Gear") not in found
        assert not found[(group, "v1", "Gear")].namespaced
        assert not any("/" in m.resource for m in found.values())  # no subresources
    finally:
        await client.delete(crd)
