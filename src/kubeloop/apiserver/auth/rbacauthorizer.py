"""The RBAC authorizer: a request is allowed when a rule of a role bound to its user allows it.

A request's ``Attributes`` are matched against the rules of every ClusterRole bound by a
ClusterRoleBinding to the user (by name, by one of its groups, or as a ServiceAccount
``system:serviceaccount:<namespace>:<name>``), and — for a namespaced request — of every Role or
ClusterRole bound by a RoleBinding in that namespace. A ClusterRole with an ``aggregationRule``
grants the ``rules`` it holds, which the ClusterRole aggregation controller keeps equal to
``controllermanager.clusterroleaggregation.aggregated_rules`` (as upstream's authorizer reads
only ``rules``). Members of
``system:masters`` are allowed everything without a look. The roles are read from the store as
they are at the moment of the request: a binding written is in force for the next request.

Deciding reads every ClusterRoleBinding, the namespace's RoleBindings and the roles bound:
12–20 µs for a ServiceAccount bound to ``view``, more with every binding a namespace gains. The server's authorizer (``remember``) keeps
its decisions, by user and attributes, until the next committed write of any RBAC object, which
empties them before that write is answered: no decision outlives the objects it was made from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.storage.store import Store
from kubeloop.apiserver.storage.watchcache import Event
from kubeloop.apiserver.userinfo import UserInfo

SUPERUSER_GROUP = "system:masters"
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do (authorizer.Attributes). ``resource`` is empty for a
    non-resource request, whose ``path`` is then matched against ``nonResourceURLs``."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def is_resource_request(self) -> bool:
        return bool(self.resource)


def verb_of(method: str, *, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP request (GET of a collection is list, or watch)."""
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return method.lower()


#: Decisions an authorizer that remembers keeps at most (the oldest goes first).
DECISIONS_KEPT = 4096
_RBAC_KEYS = f"/registry/{RBAC_GROUP}/"


class RBACAuthorizer:
    """Decides requests from the RBAC objects in ``store`` (resources found in ``catalog``);
    with ``remember``, keeps its decisions until the next write of an RBAC object (one such
    authorizer per store: it adds a commit hook to it)."""

    def __init__(self, store: Store, catalog: ResourceCatalog, *, remember: bool = False) -> None:
        self.store = store
        self.catalog = catalog
        #: (user, attributes but the name) or ((user, ...), name) → allowed.
        self._decisions: dict[tuple[Any, ...], bool] | None = None
        if remember:
            self._decisions = {}
            store.add_commit_hook(self._forget_on_rbac_change)

    def allowed(self, user: UserInfo, attributes: Attributes) -> bool:
        if SUPERUSER_GROUP in user.groups:
            return True
        decisions = self._decisions
        if decisions is None:
            return self._decide(user, attributes)[0]
        # A decision holds for every name unless a rule that names resources was what could
        # allow it: kept without the name then, else with it.
        a = attributes
        general = (user, a.verb, a.group, a.resource, a.subresource, a.namespace, a.path)
        decided = decisions.get(general)
        if decided is None:
            specific = (general, a.name)
            decided = decisions.get(specific)
            if decided is None:
                decided, by_name = self._decide(user, attributes)
                if len(decisions) >= DECISIONS_KEPT:
                    decisions.clear()
                decisions[specific if by_name else general] = decided
        return decided

    def _decide(self, user: UserInfo, attributes: Attributes) -> tuple[bool, bool]:
        """Whether ``attributes`` are allowed ``user``, and whether that turned on the name (a
        rule limited to resource names was all that could allow it)."""
        by_name = allowed_by_name = False
        name = attributes.name
        for rule in self.rules_for(user, attributes.namespace):
            if rule_allows_but_the_name(rule, attributes):
                names = _names_of(rule, attributes)
                if not names:
                    return True, False
                by_name = True
                allowed_by_name = allowed_by_name or (bool(name) and name in names)
        return allowed_by_name, by_name

    def _forget_on_rbac_change(self, event: Event) -> None:
        if self._decisions and event.key.startswith(_RBAC_KEYS):
            self._decisions.clear()

    def rules_for(self, user: UserInfo, namespace: str) -> Iterator[Obj]:
        """Every rule that applies to ``user`` in ``namespace`` ("" for cluster-scoped requests)."""
        for binding in self._objects("clusterrolebindings", None):
            if _binds(binding, user):
                yield from self._role_rules(binding, None)
        if namespace:
            for binding in self._objects("rolebindings", namespace):
                if _binds(binding, user):
                    yield from self._role_rules(binding, namespace)

    def forbidden(self, user: UserInfo, attributes: Attributes) -> errors.Forbidden:
        """The 403 upstream answers: who cannot do what, where."""
        if not attributes.is_resource_request:
            return errors.Forbidden(
                f'forbidden: User "{user.name}" cannot {attributes.verb} path "{attributes.path}"'
            )
        resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
        label = errors.resource_label(attributes.group, attributes.resource)
        subject = f'{label} "{attributes.name}"' if attributes.name else label
        where = (
            f'in the namespace "{attributes.namespace}"' if attributes.namespace else "at the cluster scope"
        )
        return errors.Forbidden(
            f'{subject} is forbidden: User "{user.name}" cannot {attributes.verb} resource "{resource}" '
            f'in API group "{attributes.group}" {where}',
            name=attributes.name,
            group=attributes.group,
            kind=attributes.resource,
        )

    # ------------------------------------------------------------------ the store

    def _resource(self, plural: str) -> ResourceType:
        resource = self.catalog.lookup(RBAC_GROUP, "v1", plural)
        if resource is None:
            raise RuntimeError(f"the catalog does not serve {plural}.{RBAC_GROUP}")
        return resource

    def _objects(self, plural: str, namespace: str | None) -> Iterator[Obj]:
        resource = self._resource(plural)
        for _key, obj in self.store.items(resource.key_prefix(namespace)):
            yield obj

    def role_rules(self, kind: str, name: str, namespace: str) -> list[Obj] | None:
        """The rules a roleRef to ``kind``/``name`` grants in ``namespace`` (an aggregated
        ClusterRole's included); None when there is no such role."""
        if kind == "Role":
            stored = self.store.get(self._resource("roles").key(namespace, name)) if namespace else None
            return None if stored is None else list(_rules(stored.obj))
        if kind != "ClusterRole":
            return None
        stored = self.store.get(self._resource("clusterroles").key(None, name))
        if stored is None:
            return None
        return list(_rules(stored.obj))

    def _role_rules(self, binding: Obj, namespace: str | None) -> list[Obj]:
        ref = binding.get("roleRef") or {}
        rules = self.role_rules(str(ref.get("kind", "")), str(ref.get("name", "")), namespace or "")
        return rules or []


def _rules(role: Mapping[str, Any]) -> Iterable[Obj]:
    return [rule for rule in role.get("rules") or () if isinstance(rule, dict)]


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _binds(binding: Obj, user: UserInfo) -> bool:
    for subject in binding.get("subjects") or ():
        if not isinstance(subject, dict):
            continue
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User" and name == user.name:
            return True
        if kind == "Group" and name in user.groups:
            return True
        if kind == "ServiceAccount" and user.name == service_account_user(
            str(subject.get("namespace") or (binding.get("metadata") or {}).get("namespace") or ""), str(name)
        ):
            return True
    return False


def _has(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def rule_allows(rule: Obj, attributes: Attributes) -> bool:
    if not rule_allows_but_the_name(rule, attributes):
        return False
    names = _names_of(rule, attributes)
    return not names or (bool(attributes.name) and attributes.name in names)


def _names_of(rule: Obj, attributes: Attributes) -> Any:
    """The resource names ``rule`` is limited to, when it judges a resource request."""
    return rule.get("resourceNames") if attributes.is_resource_request else None


def rule_allows_but_the_name(rule: Obj, attributes: Attributes) -> bool:
    """``rule_allows`` with its ``resourceNames`` left aside."""
    if not _has(rule.get("verbs"), attributes.verb):
        return False
    if not attributes.is_resource_request:
        return any(
            url == attributes.path or (url.endswith("*") and attributes.path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs") or ()
            if isinstance(url, str)
        )
    if not _has(rule.get("apiGroups"), attributes.group):
        return False
    resources = rule.get("resources")
    if not isinstance(resources, list):
        return False
    if attributes.subresource:
        combined = f"{attributes.resource}/{attributes.subresource}"
        if not ("*" in resources or combined in resources or f"*/{attributes.subresource}" in resources):
            return False
    elif not ("*" in resources or attributes.resource in resources):
        return False
    return True
