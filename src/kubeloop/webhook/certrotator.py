"""Serving certificates for an operator's webhooks on a cluster without cert-manager: what
open-policy-agent/cert-controller's rotator does for the Go operators that use it.

kube-apiserver calls a deployed webhook through its Service, at
``https://<service>.<namespace>.svc``, and trusts the configuration's ``caBundle``. A
:class:`CertRotator`:

- keeps a CA and a serving certificate for the Service's names in a Secret of the operator's
  namespace (``kubernetes.io/tls``, with ``ca.crt`` and ``ca.key`` beside ``tls.crt`` and
  ``tls.key``). The first replica makes it; the others read it, and a replica whose create loses
  the race reads the winner's, so every replica serves the same certificate;
- writes the certificate and key into the webhook server's ``cert_dir``, from which the server
  reloads them (``certwatcher``);
- puts the CA into the ``caBundle`` of each webhook that calls the Service, in every
  Mutating- and ValidatingWebhookConfiguration and CRD conversion, and does so again whenever one
  lacks it (re-applying the manifests blanks it);
- reissues the certificate, on the same CA while that is good, ``certs.RENEW_BEFORE`` before it
  expires.

``kubeloop run --webhook-cert-secret NAME --webhook-service NAME`` runs one; the projects
``kubeloop init`` writes deploy with it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import pathlib
from collections.abc import Sequence
from typing import Any

from kubeloop import certs, errors, kinds
from kubeloop.api.object import Obj
from kubeloop.client.rest import APIClient

log = logging.getLogger("kubeloop.webhook.certificates")

SECRET = kinds.Secret
MUTATING = kinds.MutatingWebhookConfiguration
VALIDATING = kinds.ValidatingWebhookConfiguration
CRD = kinds.CustomResourceDefinition

#: The Secret's keys (cert-controller's).
CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
#: Tries at a write that loses to another replica's before giving up for this round.
ATTEMPTS = 5


def service_hosts(service: str, namespace: str) -> list[str]:
    """The names a Service is called by from inside the cluster, kube-apiserver's first."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


class CertRotator:
    """Keeps the serving certificate of the webhooks behind ``service`` in the Secret ``secret``
    (both in ``namespace``), its files in ``cert_dir`` and its CA in the configurations."""

    def __init__(
        self,
        client: APIClient,
        *,
        namespace: str,
        secret: str,
        service: str,
        cert_dir: str | pathlib.Path,
        cert_name: str = TLS_CERT,
        key_name: str = TLS_KEY,
        check_interval: float = 10.0,
        purpose: str = "webhook",
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.secret = secret
        self.service = service
        self.cert_dir = pathlib.Path(cert_dir)
        self.cert_name = cert_name
        self.key_name = key_name
        self.check_interval = check_interval
        #: What the certificate serves, as the log says it ("webhook certificate: ...").
        self.purpose = purpose
        self.hosts = service_hosts(service, namespace)
        #: The certificate served now (None before :meth:`provision`).
        self.certificate: certs.ServingCertificate | None = None

    async def provision(self) -> certs.ServingCertificate:
        """The Secret's certificate, made or reissued when it cannot serve the Service for a
        while yet, and written into ``cert_dir``."""
        for _ in range(ATTEMPTS):
            try:
                found: Obj | None = await self.client.get(SECRET, self.secret, namespace=self.namespace)
            except errors.NotFound:
                found = None
            current = _certificate_in(found)
            if current is not None and current.usable_for(self.hosts):
                break
            ca = (
                (current.ca_cert_pem, current.ca_key_pem)
                if current is not None and current.ca_usable()
                else None
            )
            issued = certs.issue_serving_certificate(self.hosts, ca=ca)
            try:
                if found is None:
                    await self.client.create(self._secret(issued))
                    log.info(
                        "%s certificate: created Secret %s/%s", self.purpose, self.namespace, self.secret
                    )
                else:
                    await self.client.update({**found, "data": _data(issued)})  # its type cannot change
                    log.info(
                        "%s certificate: reissued it in Secret %s/%s",
                        self.purpose,
                        self.namespace,
                        self.secret,
                    )
            except (errors.AlreadyExists, errors.Conflict):
                continue  # another replica wrote first: use what it wrote
            current = issued
            break
        else:
            raise errors.Conflict(
                f"Secret {self.namespace}/{self.secret} kept changing: {ATTEMPTS} writes lost to others"
            )
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        if self.certificate != current:
            certs.write_file_atomically(self.cert_dir / self.key_name, current.key_pem, secret=True)
            certs.write_file_atomically(self.cert_dir / self.cert_name, current.cert_pem)
        self.certificate = current
        return current

    async def inject(self) -> list[str]:
        """Put the CA into every webhook calling the Service that lacks it; what was changed,
        as ``Kind/name``."""
        if self.certificate is None:
            raise RuntimeError("provision() the certificate before injecting its CA")
        bundle = base64.b64encode(self.certificate.ca_cert_pem).decode()
        changed = []
        for kind in (MUTATING, VALIDATING):
            for configuration in (await self.client.list(kind)).items:
                if await self._update(configuration, lambda obj: self._set_in_webhooks(obj, bundle)):
                    changed.append(f"{kind.kind}/{configuration['metadata']['name']}")
        for crd in (await self.client.list(CRD)).items:
            if await self._update(crd, lambda obj: self._set_in_conversion(obj, bundle)):
                changed.append(f"CustomResourceDefinition/{crd['metadata']['name']}")
        return changed

    async def run(self, stop: asyncio.Event) -> None:
        """A manager runnable: provision and inject now, then every ``check_interval`` seconds
        (a failed round is logged and tried again at the next)."""
        while not stop.is_set():
            try:
                await self.provision()
                for changed in await self.inject():
                    log.info("%s certificate: CA injected into %s", self.purpose, changed)
            except errors.APIError as error:
                log.warning("%s certificate: %s (retrying in %ss)", self.purpose, error, self.check_interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.check_interval)

    def _calls_service(self, client_config: Any) -> bool:
        service = (client_config or {}).get("service") or {}
        return service.get("name") == self.service and service.get("namespace") == self.namespace

    def _set_in_webhooks(self, configuration: Obj, bundle: str) -> bool:
        changed = False
        for webhook in configuration.get("webhooks") or ():
            client_config = webhook.get("clientConfig") or {}
            if self._calls_service(client_config) and client_config.get("caBundle") != bundle:
                client_config["caBundle"] = bundle
                changed = True
        return changed

    def _set_in_conversion(self, crd: Obj, bundle: str) -> bool:
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        client_config = (conversion.get("webhook") or {}).get("clientConfig") or {}
        if conversion.get("strategy") != "Webhook" or not self._calls_service(client_config):
            return False
        if client_config.get("caBundle") == bundle:
            return False
        client_config["caBundle"] = bundle
        return True

    async def _update(self, obj: Obj, change: Any) -> bool:
        """Apply ``change`` (true when it changed something) and update, re-reading on conflict."""
        for _ in range(ATTEMPTS):
            if not change(obj):
                return False
            try:
                await self.client.update(obj)
                return True
            except errors.Conflict:
                obj = await self.client.get(obj, obj["metadata"]["name"])
        raise errors.Conflict(
            f"{obj['kind']} {obj['metadata']['name']} kept changing: {ATTEMPTS} writes lost"
        )

    def _secret(self, issued: certs.ServingCertificate) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": self.secret, "namespace": self.namespace},
            "data": _data(issued),
        }


def _data(issued: certs.ServingCertificate) -> dict[str, str]:
    pems = {
        CA_CERT: issued.ca_cert_pem,
        CA_KEY: issued.ca_key_pem,
        TLS_CERT: issued.cert_pem,
        TLS_KEY: issued.key_pem,
    }
    return {key: base64.b64encode(pem).decode() for key, pem in pems.items()}


def _certificate_in(secret: Obj | None) -> certs.ServingCertificate | None:
    if secret is None:
        return None
    data = secret.get("data") or {}
    try:
        pems: Sequence[bytes] = [
            base64.b64decode(data[key], validate=True) for key in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
        ]
    except (KeyError, ValueError, TypeError):
        return None  # not ours, or damaged: reissued
    return certs.ServingCertificate(*pems)
