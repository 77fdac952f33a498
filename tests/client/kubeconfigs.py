"""Helpers for the configuration tests: kubeconfig documents written to disk."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

from kubeloop.client.config import ClientConfig


def write(path: pathlib.Path, document: dict[str, Any]) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def kubeconfig(
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, dict[str, Any]],
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }
    if current:
        doc["current-context"] = current
    return doc


def single(cluster: dict[str, Any], user: dict[str, Any] | None, **context: Any) -> dict[str, Any]:
    """One cluster "c", user "u" (when given) and current context "ctx"."""
    users = {"u": user} if user is not None else {}
    ctx = {"cluster": "c", **({"user": "u"} if user is not None else {}), **context}
    return kubeconfig({"c": cluster}, users, {"ctx": ctx}, "ctx")


async def token_of(config: ClientConfig) -> str | None:
    assert config.credentials is not None
    return (await config.credentials.get()).token
