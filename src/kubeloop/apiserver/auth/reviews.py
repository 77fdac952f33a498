"""The review APIs: who am I (``SelfSubjectReview``, `kubectl auth whoami`), may I, or may
they (``SelfSubjectAccessReview``, `kubectl auth can-i`; ``SubjectAccessReview``;
``LocalSubjectAccessReview``), and what may I do here (``SelfSubjectRulesReview``, `kubectl auth
can-i --list`). A review is answered from its request and never stored: the
answer is the request's object with its ``status`` filled in, as kube-apiserver returns it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.auth.rbacauthorizer import Attributes, RBACAuthorizer
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.userinfo import UserInfo

#: Judges a TokenReview's token for its audiences: (user, audiences it is valid for) or None.
TokenReviewer = Callable[[str, list[str]], tuple[UserInfo, list[str]] | None]


def answer(
    resource: ResourceType,
    body: Obj,
    requester: UserInfo,
    authorizer: RBACAuthorizer,
    namespace: str | None,
    *,
    token_reviewer: TokenReviewer | None = None,
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
    if resource.kind == "TokenReview":
        answered["spec"] = spec or {}
        answered["status"] = _token_status(resource, spec, token_reviewer)
        return answered
    if resource.kind == "SelfSubjectRulesReview":
        namespace = str((spec or {}).get("namespace") or "") if isinstance(spec, dict) else ""
        answered["spec"] = spec or {}
        answered["status"] = _rules(authorizer, requester, namespace)
        return answered
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


def _token_status(resource: ResourceType, spec: Any, token_reviewer: TokenReviewer | None) -> Obj:
    token = spec.get("token") if isinstance(spec, dict) else None
    if not isinstance(token, str) or not token:
        raise errors.invalid(
            resource.group,
            resource.kind,
            "",
            [errors.StatusCause("FieldValueRequired", "Required value", "spec.token")],
        )
    audiences = spec.get("audiences") or []
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise errors.invalid(
            resource.group,
            resource.kind,
            "",
            [errors.StatusCause("FieldValueInvalid", "must be a list of strings", "spec.audiences")],
        )
    verdict = token_reviewer(token, audiences) if token_reviewer is not None else None
    if verdict is None:
        return {"user": {}, "error": "invalid bearer token"}
    user, valid_for = verdict
    return {
        "authenticated": True,
        "user": {"username": user.name, "groups": list(user.groups)},
        "audiences": valid_for,
    }


def _rules(authorizer: RBACAuthorizer, requester: UserInfo, namespace: str) -> Obj:
    """What ``requester`` may do in ``namespace``: the rules of every role bound to them there
    (`kubectl auth can-i --list`)."""
    resource_rules: list[Obj] = []
    non_resource_rules: list[Obj] = []
    for rule in authorizer.rules_for(requester, namespace):
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {"verbs": rule.get("verbs") or [], "nonResourceURLs": rule["nonResourceURLs"]}
            )
            continue
        entry: dict[str, Any] = {"verbs": rule.get("verbs") or []}
        for key in ("apiGroups", "resources", "resourceNames"):
            if rule.get(key):
                entry[key] = rule[key]
        resource_rules.append(entry)
    return {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": False}


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
