"""The rbac.authorization.k8s.io group's rules (``pkg/apis/rbac/validation``): policy rules of Roles
and ClusterRoles (with aggregation), subjects and role references of bindings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubeloop.api import naming
from kubeloop.apiserver.registry.validation.causes import (
    GoStruct,
    as_dict,
    as_list,
    as_text,
    invalid,
    not_supported,
    required,
)
from kubeloop.apiserver.registry.validation.selectors import validate_label_selector
from kubeloop.errors import StatusCause

__all__ = [
    "binding_update_rules",
    "cluster_role_binding_rules",
    "cluster_role_rules",
    "role_binding_rules",
    "role_rules",
]


_RBAC_GROUP = "rbac.authorization.k8s.io"


_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _policy_rule(rule: Any, namespaced: bool, path: str) -> list[StatusCause]:
    """``ValidatePolicyRule``: verbs, and either non-resource URLs (cluster roles only) or
    groups and resources."""
    rule = as_dict(rule)
    causes: list[StatusCause] = []
    if not as_list(rule.get("verbs")):
        causes.append(required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = as_list(rule.get("nonResourceURLs"))
    if urls:
        if namespaced:
            causes.append(
                invalid(f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs")
            )
        if any(as_list(rule.get(key)) for key in ("apiGroups", "resources", "resourceNames")):
            causes.append(
                invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        return causes
    if not as_list(rule.get("apiGroups")):
        causes.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not as_list(rule.get("resources")):
        causes.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


def _policy_rules(obj: Mapping[str, Any], namespaced: bool) -> list[StatusCause]:
    return [
        cause
        for index, rule in enumerate(as_list(obj.get("rules")))
        for cause in _policy_rule(rule, namespaced, f"rules[{index}]")
    ]


def role_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _policy_rules(obj, namespaced=True)


def cluster_role_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    causes = _policy_rules(obj, namespaced=False)
    aggregation = obj.get("aggregationRule")
    if isinstance(aggregation, dict):
        selectors = as_list(aggregation.get("clusterRoleSelectors"))
        if not selectors:
            causes.append(
                required(
                    "aggregationRule.clusterRoleSelectors",
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                )
            )
        for index, selector in enumerate(selectors):
            causes.extend(
                validate_label_selector(as_dict(selector), f"aggregationRule.clusterRoleSelectors[{index}]")
            )
    return causes


def _subject(subject: Any, namespaced: bool, path: str) -> list[StatusCause]:
    """``ValidateRoleBindingSubject``."""
    subject = as_dict(subject)
    causes: list[StatusCause] = []
    name, group, kind = as_text(subject.get("name")), as_text(subject.get("apiGroup")), subject.get("kind")
    if not name:
        causes.append(required(f"{path}.name"))
    if kind == "ServiceAccount":
        causes.extend(
            invalid(f"{path}.name", name, msg) for msg in naming.dns1123_subdomain_errors(name) if name
        )
        if group:
            causes.append(not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not as_text(subject.get("namespace")):
            causes.append(required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != _RBAC_GROUP:
            causes.append(not_supported(f"{path}.apiGroup", group, [_RBAC_GROUP]))
    else:
        causes.append(not_supported(f"{path}.kind", as_text(kind), _SUBJECT_KINDS))
    return causes


def _binding_rules(namespaced: bool) -> Callable[[Mapping[str, Any]], list[StatusCause]]:
    """``ValidateRoleBinding`` / ``ValidateClusterRoleBinding``: the roleRef and the subjects."""
    ref_kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)

    def rules(obj: Mapping[str, Any]) -> list[StatusCause]:
        ref = as_dict(obj.get("roleRef"))
        causes: list[StatusCause] = []
        if as_text(ref.get("apiGroup")) != _RBAC_GROUP:
            causes.append(not_supported("roleRef.apiGroup", as_text(ref.get("apiGroup")), [_RBAC_GROUP]))
        if ref.get("kind") not in ref_kinds:
            causes.append(not_supported("roleRef.kind", as_text(ref.get("kind")), ref_kinds))
        name = as_text(ref.get("name"))
        if not name:
            causes.append(required("roleRef.name"))
        causes.extend(invalid("roleRef.name", name, msg) for msg in naming.path_segment_errors(name) if name)
        for index, subject in enumerate(as_list(obj.get("subjects"))):
            causes.extend(_subject(subject, namespaced, f"subjects[{index}]"))
        return causes

    return rules


def binding_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """A binding's roleRef never changes (delete and re-create the binding instead)."""
    new_ref, old_ref = as_dict(new.get("roleRef")), as_dict(old.get("roleRef"))
    fields = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
    if all(as_text(new_ref.get(key)) == as_text(old_ref.get(key)) for _, key in fields):
        return []
    shown = GoStruct((go_name, as_text(new_ref.get(key))) for go_name, key in fields)
    return [invalid("roleRef", shown, "cannot change roleRef")]


role_binding_rules = _binding_rules(namespaced=True)


cluster_role_binding_rules = _binding_rules(namespaced=False)
