"""The audit policy (audit.k8s.io/v1 ``Policy``): which requests are recorded, at what level.

Rules are tried in order and the first that matches a request decides its level; a request no
rule matches is not recorded (level None), as upstream's ``policy.Checker`` decides. A rule
matches when each list it gives holds the request's part: ``users``, ``userGroups`` (any of the
user's groups), ``verbs``, then for resource requests ``namespaces`` ("" is cluster-scoped) and
``resources`` (``group`` with ``resources`` as ``name``, ``name/sub``, ``*``, ``*/sub`` or
``name/*``, and ``resourceNames``), and for other paths ``nonResourceURLs`` (exact, or a prefix
ending in ``*``). ``omitStages`` of the rule and of the policy are left out together;
``omitManagedFields`` of a rule overrides the policy's.

A policy file is read and validated as kube-apiserver reads ``--audit-policy-file``: YAML or
JSON, ``apiVersion: audit.k8s.io/v1`` and ``kind: Policy``, at least one rule, and every level,
stage and URL as upstream's validation words it (:class:`AuditPolicyError`).
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kubeloop.apiserver.userinfo import UserInfo

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class AuditPolicyError(ValueError):
    """A policy file that cannot be used, with what is wrong."""


@dataclass(frozen=True)
class RequestAttributes:
    """What a rule is matched against (upstream's ``authorizer.Attributes`` of the request)."""

    user: UserInfo | None
    verb: str
    path: str
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


@dataclass(frozen=True)
class GroupResources:
    group: str
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]


@dataclass(frozen=True)
class PolicyRule:
    level: str
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool | None = None

    def matches(self, attributes: RequestAttributes) -> bool:
        user = attributes.user
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.user_groups and (user is None or not set(user.groups) & set(self.user_groups)):
            return False
        if self.verbs and attributes.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(attributes)
        if self.non_resource_urls:
            return self._matches_non_resource(attributes)
        return True

    def _matches_resource(self, attributes: RequestAttributes) -> bool:
        if not attributes.resource_request:
            return False
        if self.namespaces and attributes.namespace not in self.namespaces:
            return False
        if not self.resources:
            return True
        resource, sub = attributes.resource, attributes.subresource
        combined = f"{resource}/{sub}" if sub else resource
        for group in self.resources:
            if group.group != attributes.api_group:
                continue
            if not group.resources:
                return True
            if group.resource_names and attributes.name not in group.resource_names:
                continue
            for pattern in group.resources:
                if pattern in ("*", combined):
                    return True
                if sub and pattern == f"*/{sub}":
                    return True
                if pattern.endswith("/*") and pattern[:-2] == resource:
                    return True
        return False

    def _matches_non_resource(self, attributes: RequestAttributes) -> bool:
        if attributes.resource_request:
            return False
        for url in self.non_resource_urls:
            if url == "*" or url == attributes.path:
                return True
            if url.endswith("*") and attributes.path.startswith(url[:-1]):
                return True
        return False


@dataclass(frozen=True)
class Decision:
    """How one request is recorded."""

    level: str
    omit_stages: frozenset[str]
    omit_managed_fields: bool


@dataclass(frozen=True)
class AuditPolicy:
    rules: tuple[PolicyRule, ...]
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool = False

    def decide(self, attributes: RequestAttributes) -> Decision:
        for rule in self.rules:
            if rule.matches(attributes):
                omit_managed = (
                    self.omit_managed_fields if rule.omit_managed_fields is None else rule.omit_managed_fields
                )
                return Decision(rule.level, frozenset(self.omit_stages) | set(rule.omit_stages), omit_managed)
        return Decision("None", frozenset(), False)


#: What ``--audit-log-path`` without ``--audit-policy-file`` records: every request at Metadata
#: level, from ResponseStarted on (kube-apiserver itself records nothing without a policy).
METADATA_FOR_ALL = AuditPolicy(rules=(PolicyRule(level="Metadata"),), omit_stages=("RequestReceived",))


def load_policy(path: pathlib.Path) -> AuditPolicy:
    """The policy in ``path`` (``--audit-policy-file``); AuditPolicyError saying what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise AuditPolicyError(f"failed to read audit policy file {path}: {error.strerror or error}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise AuditPolicyError(f"failed decoding audit policy file {path}: {error}") from None
    try:
        return policy_of(raw)
    except AuditPolicyError as error:
        raise AuditPolicyError(f"{path}: {error}") from None


def policy_of(raw: Any) -> AuditPolicy:
    """A decoded Policy object, validated (upstream's ``validation.ValidatePolicy``)."""
    if not isinstance(raw, dict):
        raise AuditPolicyError("an audit policy is a Policy object")
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if api_version != "audit.k8s.io/v1" or kind != "Policy":
        raise AuditPolicyError(
            f"unknown group version field {api_version}, Kind={kind}: want audit.k8s.io/v1, Kind=Policy"
        )
    failures: list[str] = []
    omit_stages = _strings(raw.get("omitStages"), "omitStages", failures)
    failures.extend(_stage_failures(omit_stages, "omitStages"))
    rules: list[PolicyRule] = []
    raw_rules = raw.get("rules")
    for index, item in enumerate(raw_rules if isinstance(raw_rules, list) else ()):
        rule = _rule_of(item, f"rules[{index}]", failures)
        if rule is not None:
            rules.append(rule)
    if failures:
        raise AuditPolicyError("invalid audit policy: " + "; ".join(failures))
    if not rules:
        raise AuditPolicyError("loaded illegal policy with 0 rules")
    return AuditPolicy(tuple(rules), tuple(omit_stages), bool(raw.get("omitManagedFields") or False))


def _rule_of(item: Any, path: str, failures: list[str]) -> PolicyRule | None:
    if not isinstance(item, dict):
        failures.append(f"{path}: Invalid value: a rule is an object")
        return None
    level = item.get("level")
    if level not in LEVELS:
        shown = '""' if level in (None, "") else f'"{level}"'
        failures.append(
            f"{path}.level: Unsupported value: {shown}: supported values: "
            + ", ".join(f'"{value}"' for value in LEVELS)
        )
    urls = _strings(item.get("nonResourceURLs"), f"{path}.nonResourceURLs", failures)
    namespaces = _strings(item.get("namespaces"), f"{path}.namespaces", failures)
    groups: list[GroupResources] = []
    raw_groups = item.get("resources")
    for index, group in enumerate(raw_groups if isinstance(raw_groups, list) else ()):
        group_path = f"{path}.resources[{index}]"
        if not isinstance(group, dict):
            failures.append(f"{group_path}: Invalid value: a resource rule is an object")
            continue
        resources = _strings(group.get("resources"), f"{group_path}.resources", failures)
        names = _strings(group.get("resourceNames"), f"{group_path}.resourceNames", failures)
        if names and not resources:
            failures.append(
                f"{group_path}.resourceNames: Invalid value: using resourceNames requires at least one resource"
            )
        groups.append(GroupResources(str(group.get("group") or ""), tuple(resources), tuple(names)))
    if urls and (groups or namespaces):
        failures.append(
            f"{path}.nonResourceURLs: Invalid value: rules cannot apply to both regular resources and "
            "non-resource URLs"
        )
    for index, url in enumerate(urls):
        if not url.startswith("/") and url != "*":
            failures.append(
                f'{path}.nonResourceURLs[{index}]: Invalid value: "{url}": non-resource URL rules must begin '
                "with a '/' character"
            )
        elif "*" in url[:-1]:
            failures.append(
                f'{path}.nonResourceURLs[{index}]: Invalid value: "{url}": non-resource URL wildcards \'*\' '
                "must be the final character of the rule"
            )
    omit_stages = _strings(item.get("omitStages"), f"{path}.omitStages", failures)
    failures.extend(_stage_failures(omit_stages, f"{path}.omitStages"))
    omit_managed = item.get("omitManagedFields")
    return PolicyRule(
        level=str(level),
        users=tuple(_strings(item.get("users"), f"{path}.users", failures)),
        user_groups=tuple(_strings(item.get("userGroups"), f"{path}.userGroups", failures)),
        verbs=tuple(_strings(item.get("verbs"), f"{path}.verbs", failures)),
        resources=tuple(groups),
        namespaces=tuple(namespaces),
        non_resource_urls=tuple(urls),
        omit_stages=tuple(omit_stages),
        omit_managed_fields=None if omit_managed is None else bool(omit_managed),
    )


def _strings(value: Any, path: str, failures: list[str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        failures.append(f"{path}: Invalid value: must be a list of strings")
        return []
    return list(value)


def _stage_failures(stages: Sequence[str], path: str) -> list[str]:
    return [
        f'{path}[{index}]: Unsupported value: "{stage}": supported values: '
        + ", ".join(f'"{value}"' for value in STAGES)
        for index, stage in enumerate(stages)
        if stage not in STAGES
    ]
