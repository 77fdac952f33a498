"""``CertRotator``: the webhooks' serving certificate kept in a Secret, its CA in the
configurations, against the embedded API server.

Two replicas starting at once end with one Secret and the same certificate; the certificate
names the Service as kube-apiserver calls it; the CA goes into exactly the webhooks and CRD
conversions that call the Service, and back again when a re-applied manifest blanks it; a
certificate near its end is reissued on the same CA; a damaged Secret is replaced.
"""

from __future__ import annotations

import asyncio
import base64
import pathlib
from typing import Any

import pytest
from cryptography import x509

from kubeloop import certs
from kubeloop.client.rest import APIClient
from kubeloop.testing import eventually
from kubeloop.webhook.certrotator import CRD, SECRET, VALIDATING, CertRotator


def rotator(client: APIClient, namespace: str, folder: pathlib.Path, **options: Any) -> CertRotator:
    return CertRotator(
        client, namespace=namespace, secret="webhook-cert", service="webhook-svc", cert_dir=folder, **options
    )


def webhook(name: str, service: str, namespace: str) -> dict[str, Any]:
    return {
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
        "clientConfig": {"service": {"name": service, "namespace": namespace, "path": "/validate"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["limitranges"]}],
    }  # fmt: skip


def converted_crd(group: str, namespace: str) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": schema},
                {"name": "v2", "served": True, "storage": False, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
                "service": {"name": "webhook-svc", "namespace": namespace, "path": "/convert"}}}},
        },
    }  # fmt: skip


async def test_two_replicas_at_once_keep_one_certificate_for_the_service(
    kube_client: APIClient, kube_namespace: str, tmp_path: pathlib.Path
) -> None:
    first, second = (
        rotator(kube_client, kube_namespace, tmp_path / "a"),
        rotator(kube_client, kube_namespace, tmp_path / "b"),
    )
    made = await asyncio.gather(first.provision(), second.provision())
    assert made[0] == made[1]
    assert (
        (tmp_path / "a" / "tls.crt").read_bytes()
        == (tmp_path / "b" / "tls.crt").read_bytes()
        == made[0].cert_pem
    )
    assert (tmp_path / "a" / "tls.key").stat().st_mode & 0o077 == 0
    secret = await kube_client.get(SECRET, "webhook-cert", namespace=kube_namespace)
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == made[0].cert_pem
    names = x509.load_pem_x509_certificate(made[0].cert_pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert f"webhook-svc.{kube_namespace}.svc" in names.value.get_values_for_type(x509.DNSName)

    third = rotator(kube_client, kube_namespace, tmp_path / "c")  # a pod started later
    assert await third.provision() == made[0]


async def test_the_ca_goes_into_what_calls_the_service_and_back_when_blanked(
    kube_client: APIClient, kube_namespace: str, tmp_path: pathlib.Path
) -> None:
    name = f"{kube_namespace}-hooks"
    group = f"{kube_namespace}.example.com"
    await kube_client.create({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook("ours.example.com", "webhook-svc", kube_namespace),
                     webhook("theirs.example.com", "other-svc", kube_namespace)],
    })  # fmt: skip
    await kube_client.create(converted_crd(group, kube_namespace))
    keeper = rotator(kube_client, kube_namespace, tmp_path, check_interval=0.05)
    certificate = await keeper.provision()
    bundle = base64.b64encode(certificate.ca_cert_pem).decode()
    changed = await keeper.inject()
    assert f"ValidatingWebhookConfiguration/{name}" in changed
    assert f"CustomResourceDefinition/gizmos.{group}" in changed
    configuration = await kube_client.get(VALIDATING, name)
    assert [w["clientConfig"].get("caBundle") for w in configuration["webhooks"]] == [bundle, None]
    crd = await kube_client.get(CRD, f"gizmos.{group}")
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == bundle
    assert f"ValidatingWebhookConfiguration/{name}" not in await keeper.inject()  # nothing left to do

    stop = asyncio.Event()
    running = asyncio.create_task(keeper.run(stop))
    try:
        del configuration["webhooks"][0]["clientConfig"]["caBundle"]  # kubectl apply of the manifests
        await kube_client.update(configuration)

        async def injected_again() -> None:
            again = await kube_client.get(VALIDATING, name)
            assert again["webhooks"][0]["clientConfig"].get("caBundle") == bundle

        await eventually(injected_again)
    finally:
        stop.set()
        await running
        await kube_client.delete(VALIDATING, name)
        await kube_client.delete(CRD, f"gizmos.{group}")


async def test_a_certificate_near_its_end_is_reissued_on_the_same_ca(
    kube_client: APIClient, kube_namespace: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await rotator(kube_client, kube_namespace, tmp_path).provision()
    monkeypatch.setattr(
        certs, "RENEW_BEFORE", certs.SERVER_VALIDITY + certs.BACKDATE
    )  # every leaf is near its end
    after = await rotator(kube_client, kube_namespace, tmp_path).provision()
    assert after.cert_pem != before.cert_pem and after.ca_cert_pem == before.ca_cert_pem
    assert (tmp_path / "tls.crt").read_bytes() == after.cert_pem


async def test_a_damaged_secret_is_replaced(
    kube_client: APIClient, kube_namespace: str, tmp_path: pathlib.Path
) -> None:
    await kube_client.create({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "webhook-cert", "namespace": kube_namespace},
        "data": {"tls.crt": base64.b64encode(b"not a certificate").decode()},
    })  # fmt: skip
    made = await rotator(kube_client, kube_namespace, tmp_path).provision()
    assert made.usable_for([f"webhook-svc.{kube_namespace}.svc"])
    secret = await kube_client.get(SECRET, "webhook-cert", namespace=kube_namespace)
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
