"""The webhook server on its own, over HTTPS: what a body that is no AdmissionReview gets, a
handler that raises, AdmissionReview v1beta1, and a certificate rotated on disk."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from kubeloop import certs, webhook
from kubeloop.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    AdmissionWebhook,
    ConversionWebhook,
    WebhookServer,
)
from kubeloop.webhook.validating import validating_handler


def review(version: str = "admission.k8s.io/v1", **request: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": "0df28fbd-5f5f-4c02-a1d4-5e0f9a5f1f6c",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "operation": "CREATE",
        "name": "c",
        "namespace": "default",
        "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
    }
    return {"apiVersion": version, "kind": "AdmissionReview", "request": {**base, **request}}


def answer(request: AdmissionRequest) -> AdmissionResponse:
    if request.name == "raise":
        raise KeyError("spec")
    return webhook.allowed().with_warnings(f"seen {request.kind.kind} {request.name}")


@pytest.fixture
async def server() -> AsyncIterator[WebhookServer]:
    made = WebhookServer(port=0)
    made.register("/check", AdmissionWebhook(answer, mutating=False))
    await made.start()
    yield made
    await made.stop()


@pytest.fixture
async def post(server: WebhookServer) -> AsyncIterator[Any]:
    assert server.ca_bundle is not None
    context = certs.client_ssl_context(server.ca_bundle)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:

        async def send(body: bytes, content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
            url = server.url("/check", "localhost")
            async with session.post(url, data=body, headers={"Content-Type": content_type}) as response:
                return response.status, orjson.loads(await response.read())

        yield send


async def test_an_admission_review_is_answered_in_its_own_version(post: Any) -> None:
    for version in ("admission.k8s.io/v1", "admission.k8s.io/v1beta1"):
        status, body = await post(orjson.dumps(review(version)))
        assert status == 200
        assert body["apiVersion"] == version
        assert body["response"]["uid"] == "0df28fbd-5f5f-4c02-a1d4-5e0f9a5f1f6c"
        assert body["response"]["allowed"] is True
        assert body["response"]["warnings"] == ["seen ConfigMap c"]


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"{}", "text/plain", "contentType=text/plain, expected application/json"),
        (b"", "application/json", "request body is empty"),
        (b"{not json", "application/json", "the body is not JSON"),
        (b"[1, 2]", "application/json", "the body is not an AdmissionReview object"),
        (
            orjson.dumps({**review(), "kind": "ConversionReview"}),
            "application/json",
            "expected an AdmissionReview of admission.k8s.io/v1 or admission.k8s.io/v1beta1, "
            "got kind 'ConversionReview' of 'admission.k8s.io/v1'",
        ),
        (
            orjson.dumps({**review(), "request": None}),
            "application/json",
            "the AdmissionReview has no request",
        ),
        (orjson.dumps(review(uid="")), "application/json", "request.uid is missing"),
        (orjson.dumps(review(operation="EXPLODE")), "application/json", "request.operation 'EXPLODE' is not"),
        (orjson.dumps(review(kind="ConfigMap")), "application/json", "request.kind must be an object"),
        (orjson.dumps(review(object=[1])), "application/json", "request.object must be an object"),
    ],
)
async def test_a_body_that_is_no_admission_review_gets_400_with_the_reason(
    post: Any, body: bytes, content_type: str, reason: str
) -> None:
    status, answered = await post(body, content_type)
    assert status == 400
    response = answered["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"].startswith(reason)


async def test_a_handler_that_raises_is_a_500_denial_naming_the_webhook_and_serving_goes_on(
    post: Any, server: WebhookServer
) -> None:
    status, body = await post(orjson.dumps(review(name="raise")))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"] == {
        "code": 500,
        "message": "admission webhook /check failed: KeyError: 'spec'",
    }
    status, body = await post(orjson.dumps(review()))
    assert (status, body["response"]["allowed"]) == (200, True)
    assert server.metrics.requests == {("/check", "200"): 2}
    assert server.metrics.in_flight["/check"] == 0


def served_certificate(address: str) -> bytes:
    """The PEM certificate a new TLS connection to ``address`` is shown."""
    _host, _, port = address.rpartition(":")
    return ssl.get_server_certificate(("127.0.0.1", int(port))).encode()


def write_pair(folder: pathlib.Path, cert: bytes | None, key: bytes | None) -> None:
    if cert is not None:
        (folder / "tls.crt").write_bytes(cert)
    if key is not None:
        (folder / "tls.key").write_bytes(key)


def same_certificate(a: bytes, b: bytes) -> bool:
    return ssl.PEM_cert_to_DER_cert(a.decode()) == ssl.PEM_cert_to_DER_cert(b.decode())


async def test_a_certificate_rotated_on_disk_is_served_to_new_connections(tmp_path: pathlib.Path) -> None:
    first = certs.load_or_create_credentials(None, ["localhost"])
    second = certs.load_or_create_credentials(None, ["localhost"])
    write_pair(tmp_path, first.server_cert_pem, first.server_key_pem)
    server = WebhookServer(port=0, cert_dir=tmp_path, cert_poll_interval=0.01)
    server.register("/check", AdmissionWebhook(answer, mutating=False))
    await server.start()
    try:
        watcher = server.cert_watcher
        assert watcher is not None
        shown = await asyncio.to_thread(served_certificate, server.address)
        assert same_certificate(shown, first.server_cert_pem)

        # Half a rotation (the certificate without its key) does not load: the old pair serves on.
        write_pair(tmp_path, second.server_cert_pem, None)
        assert watcher.reload_if_changed() is False
        shown = await asyncio.to_thread(served_certificate, server.address)
        assert same_certificate(shown, first.server_cert_pem)

        write_pair(tmp_path, None, second.server_key_pem)
        await watcher.wait_for_load(2)  # the watcher's own look found it
        shown = await asyncio.to_thread(served_certificate, server.address)
        assert same_certificate(shown, second.server_cert_pem)
    finally:
        await server.stop()


async def test_a_missing_certificate_fails_the_start_by_its_path(tmp_path: pathlib.Path) -> None:
    server = WebhookServer(port=0, cert_dir=tmp_path)
    server.register("/check", AdmissionWebhook(answer, mutating=False))
    with pytest.raises(FileNotFoundError, match=r"tls\.crt"):
        await server.start()
    assert not server.started


# ------------------------------------------------------------------ /convert


@pytest.fixture
async def convert() -> AsyncIterator[Any]:
    from tests.webhook.test_operator_webhooks import Website

    server = WebhookServer(port=0)
    conversion = ConversionWebhook()
    conversion.add(Website)
    server.register("/convert", conversion)
    await server.start()
    assert server.ca_bundle is not None
    context = certs.client_ssl_context(server.ca_bundle)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:

            async def send(body: bytes, content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
                url = server.url("/convert", "localhost")
                async with session.post(url, data=body, headers={"Content-Type": content_type}) as response:
                    return response.status, orjson.loads(await response.read())

            yield send
    finally:
        await server.stop()


def conversion_review(version: str = "apiextensions.k8s.io/v1", **request: Any) -> dict[str, Any]:
    site = {
        "apiVersion": "web.kubeloop.dev/v1alpha1",
        "kind": "Website",
        "metadata": {"name": "blog", "namespace": "default", "uid": "u1", "labels": {"a": "b"}},
        "spec": {"url": "https://blog.example.com/", "replicas": 2},
    }
    base = {"uid": "c0ffee", "desiredAPIVersion": "web.kubeloop.dev/v1", "objects": [site]}
    return {"apiVersion": version, "kind": "ConversionReview", "request": {**base, **request}}


async def test_a_conversion_review_is_answered_in_its_own_version(convert: Any) -> None:
    for version in ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"):
        status, body = await convert(orjson.dumps(conversion_review(version)))
        assert (status, body["apiVersion"], body["kind"]) == (200, version, "ConversionReview")
        response = body["response"]
        assert (response["uid"], response["result"]) == ("c0ffee", {"status": "Success"})
        [converted] = response["convertedObjects"]
        assert converted["apiVersion"] == "web.kubeloop.dev/v1"
        assert converted["spec"] == {"domain": "blog.example.com", "replicas": 2}
        assert converted["metadata"] == {
            "name": "blog",
            "namespace": "default",
            "uid": "u1",
            "labels": {"a": "b"},
        }


async def test_a_conversion_that_cannot_be_done_is_a_failure_result(convert: Any) -> None:
    other = {"apiVersion": "other.example.com/v1", "kind": "Thing", "metadata": {"name": "t"}}
    status, body = await convert(orjson.dumps(conversion_review(objects=[other])))
    assert status == 200
    assert body["response"]["result"] == {
        "status": "Failure",
        "message": "no conversion is registered for Thing.other.example.com",
    }
    status, body = await convert(orjson.dumps(conversion_review(desiredAPIVersion="web.kubeloop.dev/v9")))
    assert body["response"]["result"] == {
        "status": "Failure",
        "message": "Website has no model of web.kubeloop.dev/v9",
    }


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"{}", "text/plain", "contentType=text/plain, expected application/json"),
        (b"", "application/json", "request body is empty"),
        (b"{not json", "application/json", "the body is not JSON"),
        (b"[]", "application/json", "the body is not a ConversionReview object"),
        (orjson.dumps({**conversion_review(), "kind": "AdmissionReview"}), "application/json", "expected a ConversionReview"),
        (orjson.dumps({**conversion_review(), "request": 3}), "application/json", "the ConversionReview has no request"),
        (orjson.dumps(conversion_review(uid="")), "application/json", "request.uid is missing"),
        (orjson.dumps(conversion_review(desiredAPIVersion=None)), "application/json", "request.desiredAPIVersion is missing"),
        (orjson.dumps(conversion_review(objects=[1])), "application/json", "request.objects must be a list of objects"),
    ],
)  # fmt: skip
async def test_a_body_that_is_no_conversion_review_gets_400_with_the_reason(
    convert: Any, body: bytes, content_type: str, reason: str
) -> None:
    status, answered = await convert(body, content_type)
    assert status == 400
    assert answered["response"]["result"]["status"] == "Failure"
    assert answered["response"]["result"]["message"].startswith(reason)


async def test_a_validator_knows_who_asks_through_current_request() -> None:
    """``current_request()`` is the request a validator answers (in a thread too); outside one
    it is a LookupError."""
    seen: list[str] = []

    class WhoAsks:
        def validate_create(self, obj: dict[str, Any]) -> None:  # plain: runs in a thread
            seen.append(webhook.current_request().user_info["username"])

    handler = webhook.AdmissionWebhook(validating_handler(None, WhoAsks()), mutating=False)
    request = AdmissionRequest.from_dict(review(userInfo={"username": "alice", "groups": ["dev"]})["request"])
    answered = await handler.handle(request)
    assert answered.allowed and seen == ["alice"]
    with pytest.raises(LookupError, match="only known while a webhook answers"):
        webhook.current_request()
