"""A kopf operator whose only handlers are admission webhooks on ConfigMaps, served by kopf's own
WebhookServer and registered by kopf itself (``settings.admission.managed``): the peer of
kubeloop's webhooks. ``KUBECONFIG`` names the server; ``WEBHOOK_CERTS`` a folder with ``tls.crt``,
``tls.key`` and ``ca.crt``. Only ConfigMaps in namespaces labelled ``kopf-admission: "on"`` are
judged (the webhooks' namespaceSelector is kopf's ``labels``-free rule: the handler checks)."""

from __future__ import annotations

import base64
import os
import pathlib
from typing import Any

import kopf
import yaml

CERTS = pathlib.Path(os.environ["WEBHOOK_CERTS"])


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo:
    config = yaml.safe_load(pathlib.Path(os.environ["KUBECONFIG"]).read_text())
    cluster = config["clusters"][0]["cluster"]
    return kopf.ConnectionInfo(
        server=cluster["server"],
        ca_data=base64.b64decode(cluster["certificate-authority-data"]),
        token=config["users"][0]["user"]["token"],
    )


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1",
        host="127.0.0.1",
        certfile=str(CERTS / "tls.crt"),
        pkeyfile=str(CERTS / "tls.key"),
        cafile=str(CERTS / "ca.crt"),
    )
    settings.admission.managed = "auto.kopf.dev"


def judged(body: Any) -> bool:
    return str(body.get("metadata", {}).get("namespace", "")).startswith("kopf-")


@kopf.on.validate("configmaps", id="no-secrets")
def no_secrets(body: Any, warnings: list[str], **_: Any) -> None:
    if not judged(body):
        return
    if "password" in (body.get("data") or {}):
        raise kopf.AdmissionError("passwords belong in Secrets", code=403)
    warnings.append("kopf looked at this ConfigMap")


@kopf.on.mutate("configmaps", id="stamp")
def stamp(body: Any, patch: kopf.Patch, **_: Any) -> None:
    if judged(body):
        patch.setdefault("metadata", {}).setdefault("labels", {})["stamped-by"] = "kopf"
