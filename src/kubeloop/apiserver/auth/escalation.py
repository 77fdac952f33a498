"""RBAC's escalation check: nobody grants a permission they do not hold.

Upstream's ``pkg/registry/rbac`` wraps the storage of roles and bindings with it. A write of a
Role or ClusterRole is refused unless its author holds every permission its rules grant (in the
role's namespace, or cluster-wide for a ClusterRole) or may ``escalate`` that role; a write of a
RoleBinding or ClusterRoleBinding is refused unless its author holds every permission of the
role it refers to or may ``bind`` that role. Members of ``system:masters`` are never checked,
and a write that changes only what the garbage collector changes (owner references,
finalizers) is let through. ClusterRoles that aggregate others may be written only by those who
may escalate (upstream: "must have cluster-admin privileges").

Whether one set of rules holds another is upstream's ``Covers``: each granted rule is broken
down into one verb, group, resource and resource name (or non-resource URL) at a time, and each
piece must be allowed by one held rule, with ``*`` and ``*/subresource`` wildcards, resource
names only narrowing, and ``/path*`` URL prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeloop import errors
from kubeloop.api.naming import go_quote
from kubeloop.api.object import Obj
from kubeloop.apiserver.auth.rbacauthorizer import RBAC_GROUP, SUPERUSER_GROUP, Attributes, RBACAuthorizer
from kubeloop.apiserver.userinfo import UserInfo

__all__ = ["EscalationGuard", "compact", "compact_string", "uncovered"]

_ROLE_KINDS = {"Role": "roles", "ClusterRole": "clusterroles"}
_GC_FIELDS = frozenset({"ownerReferences", "finalizers", "managedFields", "resourceVersion", "generation"})


@dataclass(frozen=True)
class _Rule:
    """A PolicyRule with each list made a tuple (at most one item each once broken down)."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()


def _rule(rule: Mapping[str, Any]) -> _Rule:
    return _Rule(
        _strings(rule.get("verbs")),
        _strings(rule.get("apiGroups")),
        _strings(rule.get("resources")),
        _strings(rule.get("resourceNames")),
        _strings(rule.get("nonResourceURLs")),
    )


def _breakdown(rule: _Rule) -> list[_Rule]:
    """``BreakdownRule``: one verb, group, resource and name per rule; URLs only with verbs."""
    pieces: list[_Rule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    pieces.extend(
                        _Rule((verb,), (group,), (resource,), (name,)) for name in rule.resource_names
                    )
                else:
                    pieces.append(_Rule((verb,), (group,), (resource,)))
    for url in rule.non_resource_urls:
        pieces.extend(_Rule((verb,), non_resource_urls=(url,)) for verb in rule.verbs)
    return pieces


#: At most this many broken-down pieces are checked one by one per write. A grant past it (a
#: rule naming a hundred verbs, groups, resources and names is 10^8 pieces) is checked rule by
#: rule instead: one held rule must cover it whole. That can refuse a pathological grant that
#: several held rules cover only together, never allow one that is not covered.
MAX_PIECES = 10_000


@dataclass(frozen=True)
class _Held:
    """A held rule as sets, for the many membership tests of a check."""

    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str]
    non_resource_urls: tuple[str, ...]

    @classmethod
    def of(cls, rule: _Rule) -> _Held:
        return cls(
            frozenset(rule.verbs),
            frozenset(rule.api_groups),
            frozenset(rule.resources),
            frozenset(rule.resource_names),
            rule.non_resource_urls,
        )


def _resources_cover(held: frozenset[str], wanted: Sequence[str]) -> bool:
    if "*" in held:
        return True
    for resource in wanted:
        if resource in held:
            continue
        _parent, slash, sub = resource.partition("/")
        if not slash or f"*/{sub}" not in held:
            return False
    return True


def _url_covers(held: str, wanted: str) -> bool:
    return held == wanted or (held.endswith("*") and wanted.startswith(held.rstrip("*")))


def _covers(held: _Held, rule: _Rule) -> bool:
    """``ruleCovers``: the held rule allows everything ``rule`` (a broken-down piece, or a whole
    rule) grants."""
    if not ("*" in held.verbs or held.verbs.issuperset(rule.verbs)):
        return False
    if not ("*" in held.api_groups or held.api_groups.issuperset(rule.api_groups)):
        return False
    if not _resources_cover(held.resources, rule.resources):
        return False
    if not all(any(_url_covers(h, url) for h in held.non_resource_urls) for url in rule.non_resource_urls):
        return False
    if rule.resource_names:
        return not held.resource_names or held.resource_names.issuperset(rule.resource_names)
    return not held.resource_names


def _piece_count(rule: _Rule) -> int:
    names = max(1, len(rule.resource_names))
    resource_pieces = len(rule.api_groups) * len(rule.resources) * len(rule.verbs) * names
    return resource_pieces + len(rule.non_resource_urls) * len(rule.verbs)


def uncovered(held: Iterable[Mapping[str, Any]], granted: Iterable[Mapping[str, Any]]) -> list[_Rule]:
    """The pieces of ``granted`` no rule of ``held`` allows (empty: ``held`` covers it all);
    past :data:`MAX_PIECES`, whole rules no single held rule covers."""
    owner = [_Held.of(_rule(rule)) for rule in held]
    missing: list[_Rule] = []
    budget = MAX_PIECES
    for rule in granted:
        whole = _rule(rule)
        pieces = _piece_count(whole)
        if pieces > budget:
            if not any(_covers(mine, whole) for mine in owner):
                missing.append(whole)
            continue
        budget -= pieces
        missing.extend(
            piece for piece in _breakdown(whole) if not any(_covers(mine, piece) for mine in owner)
        )
    return missing


def compact(rules: Iterable[_Rule]) -> list[_Rule]:
    """``CompactRules``: pieces that differ only in their verb become one rule with all the verbs."""
    merged: dict[tuple[str, str], list[str]] = {}
    out: list[_Rule | tuple[str, str]] = []
    for rule in rules:
        simple = (
            len(rule.api_groups) == 1
            and len(rule.resources) == 1
            and not rule.resource_names
            and not rule.non_resource_urls
        )
        if not simple:
            out.append(rule)
            continue
        key = (rule.api_groups[0], rule.resources[0])
        if key not in merged:
            merged[key] = []
            out.append(key)
        merged[key].extend(verb for verb in rule.verbs if verb not in merged[key])
    return [
        item if isinstance(item, _Rule) else _Rule(tuple(merged[item]), (item[0],), (item[1],))
        for item in out
    ]


def _go_quoted_list(values: Sequence[str]) -> str:
    """Go's ``%q`` of a []string: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(value) for value in values) + "]"


def compact_string(rule: _Rule) -> str:
    """``rbacv1helpers.CompactString``: ``{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}``."""
    parts = [
        f"{label}:{_go_quoted_list(values)}"
        for label, values in (
            ("APIGroups", rule.api_groups),
            ("Resources", rule.resources),
            ("NonResourceURLs", rule.non_resource_urls),
            ("ResourceNames", rule.resource_names),
            ("Verbs", rule.verbs),
        )
        if values
    ]
    return "{" + ", ".join(parts) + "}"


def _only_gc_fields_changed(new: Obj, old: Obj) -> bool:
    """``IsOnlyMutatingGCFields``: the objects differ in owner references and finalizers at most."""
    keys = (set(new) | set(old)) - {"metadata"}
    if any(new.get(key) != old.get(key) for key in keys):
        return False
    new_meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    keys = (set(new_meta) | set(old_meta)) - _GC_FIELDS
    return all(new_meta.get(key) == old_meta.get(key) for key in keys)


class EscalationGuard:
    """The check of one request's writes of ``plural`` (an RBAC resource) by ``user`` in
    ``namespace``; :meth:`check` is the registry's admission hook."""

    def __init__(self, authorizer: RBACAuthorizer, user: UserInfo, plural: str, namespace: str) -> None:
        self.authorizer = authorizer
        self.user = user
        self.plural = plural
        self.namespace = namespace

    def check(self, new: Obj, old: Obj | None) -> None:
        """Raise Forbidden (or NotFound for a binding of a missing role) when the write would
        grant what its author does not hold."""
        if SUPERUSER_GROUP in self.user.groups:
            return
        if old is not None and _only_gc_fields_changed(new, old):
            return
        name = str((new.get("metadata") or {}).get("name") or "")
        if self.plural in ("roles", "clusterroles"):
            self._check_role(new, name)
        elif self.plural in ("rolebindings", "clusterrolebindings"):
            self._check_binding(new, name)

    def _allowed(self, verb: str, resource: str, name: str, namespace: str) -> bool:
        attributes = Attributes(
            verb=verb, group=RBAC_GROUP, resource=resource, namespace=namespace, name=name
        )
        return self.authorizer.allowed(self.user, attributes)

    def _check_role(self, role: Obj, name: str) -> None:
        if self._allowed("escalate", self.plural, name, self.namespace):
            return
        if self.plural == "clusterroles" and role.get("aggregationRule") is not None:
            raise self._forbidden(name, "must have cluster-admin privileges to use the aggregationRule")
        rules = [rule for rule in role.get("rules") or () if isinstance(rule, dict)]
        self._confirm_held(rules, name)

    def _check_binding(self, binding: Obj, name: str) -> None:
        ref = binding.get("roleRef") or {}
        kind, role_name = str(ref.get("kind", "")), str(ref.get("name", ""))
        resource = _ROLE_KINDS.get(kind)
        if resource is None:
            return  # validation refuses the roleRef
        if self._allowed("bind", resource, role_name, self.namespace):
            return
        rules = self.authorizer.role_rules(kind, role_name, self.namespace)
        if rules is None:
            raise errors.not_found(RBAC_GROUP, resource, role_name)
        self._confirm_held(rules, name)

    def _confirm_held(self, rules: list[Obj], name: str) -> None:
        missing = uncovered(self.authorizer.rules_for(self.user, self.namespace), rules)
        if not missing:
            return
        descriptions = sorted({compact_string(rule) for rule in compact(missing)})
        detail = (
            f"user {go_quote(self.user.name)} (groups={_go_quoted_list(self.user.groups)}) is attempting "
            "to grant RBAC permissions not currently held:\n" + "\n".join(descriptions)
        )
        raise self._forbidden(name, detail)

    def _forbidden(self, name: str, detail: str) -> errors.Forbidden:
        label = errors.resource_label(RBAC_GROUP, self.plural)
        return errors.Forbidden(
            f'{label} "{name}" is forbidden: {detail}', name=name, group=RBAC_GROUP, kind=self.plural
        )
