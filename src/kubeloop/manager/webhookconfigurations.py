"""The Validating- and MutatingWebhookConfigurations that make kube-apiserver call an operator's
webhooks (what kubebuilder's controller-gen writes from ``+kubebuilder:webhook`` markers).

``webhook_configurations`` builds them from what ``WebhookBuilder`` registered: one
configuration of each type, a webhook per kind and purpose, its rule naming the kind's resource
and the operations the webhook answers, its ``clientConfig`` from ``client_config(path)`` — a
Service in a cluster (``service_client_config``) or a URL with the CA bundle.
``crd_conversion_patches`` are the CRD patches that send conversions to ``/convert``.
``install_webhook_configurations`` writes both, with URLs of the running webhook server, into the
cluster a client talks to: what ``kubeloop run --embedded`` and the test kit do (envtest's
``WebhookInstallOptions``).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from kubeloop import errors
from kubeloop.api.crdgen import options_of
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.rest import APIClient
from kubeloop.webhook.admission import AdmissionWebhook
from kubeloop.webhook.hubconversion import CONVERT_PATH, ConversionWebhook
from kubeloop.webhook.server import WebhookServer

ADMISSION_API = "admissionregistration.k8s.io/v1"
#: kubebuilder's configuration names (config/webhook/manifests.yaml).
MUTATING_NAME = "mutating-webhook-configuration"
VALIDATING_NAME = "validating-webhook-configuration"

ClientConfigFor = Callable[[str], dict[str, Any]]
ResolvePlural = Callable[[GroupVersionKind], Awaitable[str]]


def admission_webhooks(server: WebhookServer) -> list[AdmissionWebhook]:
    """The registered admission webhooks that say which kind they admit."""
    return [
        webhook
        for webhook in server.webhooks.values()
        if isinstance(webhook, AdmissionWebhook) and webhook.kind is not None
    ]


async def webhook_configurations(
    server: WebhookServer, resolve: ResolvePlural, client_config: ClientConfigFor, *, name_prefix: str = ""
) -> list[dict[str, Any]]:
    """The configurations of ``server``'s admission webhooks (mutating first; a type without
    webhooks is left out). ``resolve`` gives a kind's resource name."""
    entries: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for webhook in admission_webhooks(server):
        assert webhook.kind is not None
        entries[webhook.mutating].append(
            {
                "name": webhook.name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client_config(webhook.path),
                "failurePolicy": webhook.failure_policy,
                "sideEffects": webhook.side_effects,
                "timeoutSeconds": webhook.timeout_seconds,
                "rules": [
                    {
                        "apiGroups": [webhook.kind.group],
                        "apiVersions": [webhook.kind.version],
                        "operations": list(webhook.operations),
                        "resources": [await resolve(webhook.kind)],
                    }
                ],
            }
        )
    configurations = []
    for mutating, kind, name in (
        (True, "MutatingWebhookConfiguration", MUTATING_NAME),
        (False, "ValidatingWebhookConfiguration", VALIDATING_NAME),
    ):
        if entries[mutating]:
            configurations.append(
                {
                    "apiVersion": ADMISSION_API,
                    "kind": kind,
                    "metadata": {"name": name_prefix + name},
                    "webhooks": entries[mutating],
                }
            )
    return configurations


def crd_conversion_patches(server: WebhookServer, client_config: ClientConfigFor) -> list[dict[str, Any]]:
    """For each kind ``server`` converts, the patch of its CRD that makes kube-apiserver call
    ``/convert`` (kubebuilder's ``config/crd/patches/webhook_in_<plural>.yaml``)."""
    conversion = server.webhooks.get(CONVERT_PATH)
    if not isinstance(conversion, ConversionWebhook):
        return []
    patches = []
    for versions in conversion.kinds.values():
        model = next(iter(versions.values()))
        patches.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": options_of(model).name},
                "spec": {
                    "conversion": {
                        "strategy": "Webhook",
                        "webhook": {
                            "clientConfig": client_config(CONVERT_PATH),
                            "conversionReviewVersions": ["v1"],
                        },
                    }
                },
            }
        )
    return patches


def service_client_config(
    name: str, namespace: str, *, port: int = 443, ca_bundle: bytes | None = None
) -> ClientConfigFor:
    """``clientConfig`` through a Service (kubebuilder's ``webhook-service`` in the operator's
    namespace), with ``ca_bundle`` when given (else cert-manager's CA injector fills it)."""

    def config(path: str) -> dict[str, Any]:
        made: dict[str, Any] = {"service": {"name": name, "namespace": namespace, "path": path, "port": port}}
        if ca_bundle is not None:
            made["caBundle"] = base64.b64encode(ca_bundle).decode()
        return made

    return config


def url_client_config(server: WebhookServer, *, host: str = "127.0.0.1") -> ClientConfigFor:
    """``clientConfig`` by URL to the running ``server``, trusting its CA."""

    def config(path: str) -> dict[str, Any]:
        made: dict[str, Any] = {"url": server.url(path, host)}
        if server.ca_bundle is not None:
            made["caBundle"] = base64.b64encode(server.ca_bundle).decode()
        return made

    return config


async def install_webhook_configurations(
    client: APIClient, server: WebhookServer, *, host: str = "127.0.0.1", name_prefix: str = ""
) -> list[dict[str, Any]]:
    """Write the configurations of the running ``server``'s webhooks (by URL, with its CA) into
    the cluster ``client`` talks to, replacing earlier ones of the same names; what was written.
    kube-apiserver calls the webhooks from the moment each write returns."""
    if not server.started:
        raise RuntimeError("start the webhook server (the manager) before installing its configurations")

    async def resolve(gvk: GroupVersionKind) -> str:
        return (await client.mapping(gvk)).resource

    client_config = url_client_config(server, host=host)
    written = []
    for configuration in await webhook_configurations(
        server, resolve, client_config, name_prefix=name_prefix
    ):
        try:
            written.append(await client.create(configuration))
        except errors.AlreadyExists:
            current = await client.get(configuration, configuration["metadata"]["name"])
            configuration["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            written.append(await client.update(configuration))
    for patch in crd_conversion_patches(server, client_config):
        name = patch["metadata"]["name"]
        try:
            written.append(await client.patch(patch, name, {"spec": patch["spec"]}))
        except errors.NotFound:
            raise RuntimeError(
                f"the CRD {name} is not installed: install it before its conversion webhook "
                "(kubeloop run --install-crds, kubeloop.crd.install_crds)"
            ) from None
    return written


async def uninstall_webhook_configurations(client: APIClient, installed: list[dict[str, Any]]) -> None:
    """Undo what ``install_webhook_configurations`` wrote (gone already is fine): delete the
    webhook configurations, and set the CRDs' conversion back to None."""
    for configuration in installed:
        with contextlib.suppress(errors.NotFound):
            if configuration.get("kind") == "CustomResourceDefinition":
                undo = {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
                await client.patch(configuration, configuration["metadata"]["name"], undo)
            else:
                await client.delete(configuration)
