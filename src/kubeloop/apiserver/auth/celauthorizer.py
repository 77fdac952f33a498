"""The ``authorizer`` of admission CEL (upstream's ``k8s.io/apiserver/pkg/cel/library/authz.go``):
what the requesting user may do, asked from a ValidatingAdmissionPolicy or a webhook's
matchConditions and answered by RBAC::

    authorizer.group('apps').resource('deployments').namespace('prod').check('delete').allowed()
    authorizer.path('/healthz').check('get').allowed()
    authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').allowed()

The values are maps: a check being built (``group``, ``resource``, ``subresource``,
``namespace``, ``name`` or ``path``, and whose it is) and a decision (``allowed()``,
``reason()``, ``errored()``, ``error()``). RBAC gives no reason, and cannot err.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeloop.apiserver.auth.rbacauthorizer import Attributes, RBACAuthorizer
from kubeloop.apiserver.userinfo import UserInfo

#: The functions the library adds (calls of them are detected when an expression compiles).
NAMES = (
    "allowed",
    "check",
    "error",
    "errored",
    "group",
    "name",
    "namespace",
    "path",
    "reason",
    "resource",
    "serviceAccount",
    "subresource",
)


def authorizer_variable(user: UserInfo | None) -> dict[str, Any]:
    """The ``authorizer`` variable for a request made by ``user`` (None: the server itself)."""
    if user is None:
        return {"user": "", "groups": ["system:masters"]}
    return {"user": user.name, "groups": list(user.groups)}


def functions(rbac: RBACAuthorizer) -> dict[str, Callable[..., Any]]:
    """The library's functions, answering checks with ``rbac``."""

    def setting(field: str) -> Callable[[dict[str, Any], str], dict[str, Any]]:
        return lambda check, value: {**check, field: str(value)}

    def service_account(check: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
        return {
            "user": f"system:serviceaccount:{namespace}:{name}",
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ],
        }

    def check(request: dict[str, Any], verb: str) -> dict[str, Any]:
        user = UserInfo(str(request.get("user") or ""), tuple(str(g) for g in request.get("groups") or ()))
        attributes = Attributes(
            verb=str(verb),
            group=str(request.get("group") or ""),
            resource=str(request.get("resource") or ""),
            subresource=str(request.get("subresource") or ""),
            namespace=str(request.get("namespace") or ""),
            name=str(request.get("name") or ""),
            path=str(request.get("path") or ""),
        )
        return {"allowed": rbac.allowed(user, attributes), "reason": "", "error": ""}

    return {
        "path": setting("path"),
        "group": setting("group"),
        "resource": setting("resource"),
        "subresource": setting("subresource"),
        "namespace": setting("namespace"),
        "name": setting("name"),
        "serviceAccount": service_account,
        "check": check,
        "allowed": lambda decision: bool(decision.get("allowed")),
        "reason": lambda decision: str(decision.get("reason") or ""),
        "errored": lambda decision: bool(decision.get("error")),
        "error": lambda decision: str(decision.get("error") or ""),
    }
