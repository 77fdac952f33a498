"""Writes the kubeconfig that points kubectl and every client at the embedded server.

Where it sits in the flow: the server starts → **writes this file** → ``kubectl --kubeconfig``
(or kubeloop's own client, or the official one) reads it → requests authenticated by auth.py.

The file holds a bearer token (and optionally a client key), so it is created with mode 0600
and replaced atomically: a reader sees either the old file or the new one, and nobody else
can ever read it, not even for an instant. An existing kubeconfig is merged into (the server's
own cluster, users and contexts added or replaced), never overwritten.
"""

from __future__ import annotations

import base64
import pathlib
from typing import Any

import yaml

from kubeloop.certs import write_file_atomically


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build_kubeconfig(
    *,
    server_url: str,
    ca_pem: bytes,
    token: str,
    context: str = "kubeloop",
    namespace: str = "default",
    client_cert: tuple[bytes, bytes] | None = None,
) -> dict[str, Any]:
    """The kubeconfig as a dict (clientcmd v1 ``Config``): one cluster, the token user as the
    current context, and with ``client_cert`` a ``<context>-cert`` user and context too."""
    users: list[dict[str, Any]] = [{"name": context, "user": {"token": token}}]
    contexts: list[dict[str, Any]] = [
        {"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}
    ]
    if client_cert is not None:
        cert_pem, key_pem = client_cert
        cert_name = f"{context}-cert"
        users.append(
            {
                "name": cert_name,
                "user": {"client-certificate-data": _b64(cert_pem), "client-key-data": _b64(key_pem)},
            }
        )
        contexts.append(
            {"name": cert_name, "context": {"cluster": context, "user": cert_name, "namespace": namespace}}
        )
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {"name": context, "cluster": {"server": server_url, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": users,
        "contexts": contexts,
        "current-context": context,
    }


def write_kubeconfig(
    path: pathlib.Path,
    *,
    server_url: str,
    ca_pem: bytes,
    token: str,
    context: str = "kubeloop",
    namespace: str = "default",
    client_cert: tuple[bytes, bytes] | None = None,
) -> None:
    """Write a kubeconfig for the server at ``server_url`` to ``path`` (mode 0600, atomically;
    the parent directory is created if missing).

    An existing file is merged into, as kind and minikube do: the server's own cluster, users and
    contexts (named ``context`` and ``<context>-cert``) are added or replaced, it becomes the
    current context, and everything else in the file stays. A file that is not a kubeconfig is
    left alone (:class:`KubeconfigError`).
    """
    ours = build_kubeconfig(
        server_url=server_url,
        ca_pem=ca_pem,
        token=token,
        context=context,
        namespace=namespace,
        client_cert=client_cert,
    )
    path = pathlib.Path(path)
    config = merge_kubeconfig(_read_existing(path), ours) if path.exists() else ours
    text = yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_file_atomically(path, text.encode(), secret=True)


class KubeconfigError(ValueError):
    """An existing kubeconfig file that cannot be merged into (it would be lost)."""


def _read_existing(path: pathlib.Path) -> dict[str, Any]:
    try:
        existing = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"cannot merge into {path}: {exc}") from None
    if existing is None:
        return {}
    if not isinstance(existing, dict) or any(
        not isinstance(existing.get(section, []), list) for section in ("clusters", "users", "contexts")
    ):
        raise KubeconfigError(f"cannot merge into {path}: it is not a kubeconfig (clientcmd v1 Config)")
    return existing


def merge_kubeconfig(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """``existing`` with ``ours``' clusters, users and contexts added or replaced by name, and
    ``ours``' current context."""
    merged = dict(existing)
    merged.setdefault("apiVersion", "v1")
    merged.setdefault("kind", "Config")
    merged.setdefault("preferences", {})
    # Our names: the context's own and its client-certificate variant, whether written now or not.
    own = {ours["current-context"], f"{ours['current-context']}-cert"}
    for section in ("clusters", "users", "contexts"):
        replaced = own | {entry["name"] for entry in ours[section]}
        kept = [
            entry
            for entry in existing.get(section) or []
            if not (isinstance(entry, dict) and entry.get("name") in replaced)
        ]
        merged[section] = kept + ours[section]
    merged["current-context"] = ours["current-context"]
    return merged
