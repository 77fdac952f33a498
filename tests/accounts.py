"""ServiceAccounts for tests that act as someone other than the cluster's admin: an account
bound to a Role of given rules, and a token for it from the TokenRequest API."""

from __future__ import annotations

from typing import Any

from kubeloop import kinds
from kubeloop.client.rest import APIClient

RBAC = "rbac.authorization.k8s.io/v1"


async def account_token(client: APIClient, name: str, namespace: str, rules: list[dict[str, Any]]) -> str:
    """Make ServiceAccount ``name`` of ``namespace``, bound to a Role ``name`` there of
    ``rules``; return a token for it."""
    await client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
    )
    await client.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        }
    )
    await client.create(
        {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    )  # fmt: skip
    issued = await client.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        of=kinds.ServiceAccount,
        name=name,
        subresource="token",
        namespace=namespace,
    )
    return str(issued["status"]["token"])
