"""kopf pointed at the bench's server: the login handler both kopf peers register."""

from __future__ import annotations

import base64
from typing import Any

import yaml


def register_login(kopf: Any, registry: Any, kubeconfig: str, namespace: str) -> None:
    """Log kopf in with the kubeconfig's server, CA and token (kopf reads no kubeconfig path)."""

    def login(**_: Any) -> Any:
        with open(kubeconfig) as handle:
            config = yaml.safe_load(handle)
        cluster = config["clusters"][0]["cluster"]
        return kopf.ConnectionInfo(
            server=cluster["server"],
            ca_data=base64.b64decode(cluster["certificate-authority-data"])
            if "certificate-authority-data" in cluster
            else None,
            ca_path=cluster.get("certificate-authority"),
            token=config["users"][0]["user"]["token"],
            default_namespace=namespace,
        )

    kopf.on.login(registry=registry)(login)
