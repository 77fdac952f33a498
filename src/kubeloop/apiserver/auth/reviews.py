"""The review APIs: who am I (``SelfSubjectReview``, `kubectl auth whoami`) and may I, or may
they (``SelfSubjectAccessReview``, `kubectl auth can-i`; ``SubjectAccessReview``;
``LocalSubjectAccessReview``). A review is answered from its request and never stored: the
answer is the request's object with its ``status`` filled in, as kube-apiserver returns it.
"""

from __future__ import annotations

from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.auth.rbac import Attributes, RBACAuthorizer
from kubeloop.apiserver.auth.user import UserInfo
from kubeloop.apiserver.catalog.resources import ResourceType


def answer(
    resource: ResourceType, body: Obj, requester: UserInfo, authorizer: RBACAuthorizer, namespace: str | None
) -> Obj:
    """The answered review ``body`` (of kind ``resource.kind``) that ``requester`` sent."""
    answered: Obj = {
        "kind": resource.kind,
        "apiVersion": resource.api_version,
        "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
    }
    if resource.kind == "SelfSubjectReview":
        answered["status"] = {"userInfo": {"username": requester.name, "groups": list(requester.groups)}}
        return answered
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise errors.invalid(
            resource.group,
            resource.kind,
            "",
            [errors.StatusCause("FieldValueRequired", "Required value", "spec")],
        )
    if resource.kind == "SelfSubjectAccessReview":
        subject = requester
    else:
        user = spec.get("user")
        groups = spec.get("groups") or []
        if not user and not groups:
            raise errors.invalid(
                resource.group,
                resource.kind,
                "",
                [
                    errors.StatusCause(
                        "FieldValueRequired", "at least one of user or group must be specified", "spec.user"
                    )
                ],
            )
        subject = UserInfo(str(user or ""), tuple(str(g) for g in groups))
    attributes = _attributes(resource, spec, namespace)
    allowed = authorizer.allowed(subject, attributes)
    answered["spec"] = spec
    status: dict[str, Any] = {"allowed": allowed}
    if not allowed:
        status["reason"] = ""
    answered["status"] = status
    return answered


def _attributes(resource: ResourceType, spec: Obj, namespace: str | None) -> Attributes:
    found = spec.get("resourceAttributes")
    other = spec.get("nonResourceAttributes")
    if isinstance(found, dict):
        review_namespace = str(found.get("namespace") or "")
        if resource.kind == "LocalSubjectAccessReview":
            if review_namespace and review_namespace != namespace:
                raise errors.invalid(
                    resource.group,
                    resource.kind,
                    "",
                    [
                        errors.StatusCause(
                            "FieldValueInvalid",
                            f'Invalid value: "{review_namespace}": must match metadata.namespace',
                            "spec.resourceAttributes.namespace",
                        )
                    ],
                )
            review_namespace = namespace or ""
        return Attributes(
            verb=str(found.get("verb") or ""),
            group=str(found.get("group") or ""),
            resource=str(found.get("resource") or ""),
            subresource=str(found.get("subresource") or ""),
            namespace=review_namespace,
            name=str(found.get("name") or ""),
        )
    if isinstance(other, dict):
        return Attributes(verb=str(other.get("verb") or ""), path=str(other.get("path") or ""))
    raise errors.invalid(
        resource.group,
        resource.kind,
        "",
        [
            errors.StatusCause(
                "FieldValueRequired",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                "spec.resourceAttributes",
            )
        ],
    )
