"""Impersonation: ``Impersonate-User`` / ``Impersonate-Group`` (``kubectl --as``, ``--as-group``).

The authenticated user must be allowed the ``impersonate`` verb on each thing it claims: the
user (resource ``users``, or ``serviceaccounts`` in its namespace for
``system:serviceaccount:<ns>:<name>``) and every group (``groups``). The request then runs as the
impersonated user, in the groups asked for plus ``system:authenticated`` — a ServiceAccount
asked for without groups gets its own (``system:serviceaccounts``, ``...:<ns>``). Groups without
a user are refused (400), as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubeloop import errors
from kubeloop.apiserver.auth.rbacauthorizer import Attributes, RBACAuthorizer
from kubeloop.apiserver.userinfo import UserInfo

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def impersonated(
    requester: UserInfo, user: str | None, groups: Sequence[str], authorizer: RBACAuthorizer
) -> UserInfo:
    """Who the request runs as, once ``requester`` is found allowed to be them."""
    if not user:
        if groups:
            raise errors.BadRequest(f"requested {list(groups)} without impersonating a user")
        return requester
    checks: list[Attributes] = []
    own_groups: tuple[str, ...] = ()
    if user.startswith(SERVICE_ACCOUNT_PREFIX) and user.count(":") == 3:
        namespace, name = user[len(SERVICE_ACCOUNT_PREFIX) :].split(":")
        checks.append(Attributes("impersonate", resource="serviceaccounts", namespace=namespace, name=name))
        own_groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    else:
        checks.append(Attributes("impersonate", resource="users", name=user))
    checks.extend(Attributes("impersonate", resource="groups", name=group) for group in groups)
    for attributes in checks:
        if not authorizer.allowed(requester, attributes):
            raise authorizer.forbidden(requester, attributes)
    chosen = tuple(groups) if groups else own_groups
    if user != "system:anonymous" and "system:authenticated" not in chosen:
        chosen = (*chosen, "system:authenticated")
    return UserInfo(user, chosen)
