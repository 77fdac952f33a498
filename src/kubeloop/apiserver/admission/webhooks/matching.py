"""Which webhooks a request calls, as kube-apiserver decides it (``ShouldCallHook``).

A webhook is called when its namespace selector matches the request's namespace (requests
outside namespaces always match), its object selector matches the new or the old object's
labels, and one of its rules matches the operation, the group, version and resource with the
subresource (``*`` and ``pods/*``, ``*/status`` included) and the scope. Under ``matchPolicy:
Equivalent`` a rule that names another version of the same resource (or a resource sharing its
storage, as core and events.k8s.io Events do) matches too, and the webhook is called with the
object in that version. The admission configuration kinds themselves are never sent to
webhooks, so a broken webhook cannot lock its own configuration.
"""

from __future__ import annotations

import copy
from typing import Protocol

from kubeloop import errors
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.admission.webhooks.configurations import Rule
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.registry.admissionhooks import CREATE, UPDATE, AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry

#: Kinds no webhook is called for (upstream's ``IsExemptAdmissionConfigurationResource``).
EXEMPT_KINDS = frozenset(
    {
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    }
)


def exempt(resource: ResourceType) -> bool:
    return resource.group == "admissionregistration.k8s.io" and resource.kind in EXEMPT_KINDS


def _any(items: tuple[str, ...], requested: str) -> bool:
    return "*" in items or requested in items


def _is_namespaces(resource: ResourceType) -> bool:
    return resource.group == "" and resource.plural == "namespaces"


def rule_matches(
    rule: Rule, operation: str, resource: ResourceType, subresource: str, namespace: str, name: str = ""
) -> bool:
    """One rule against a request (upstream's ``rules.Matcher``); a rule naming resources
    matches only objects of those names."""
    if rule.resource_names and name not in rule.resource_names:
        return False
    if rule.scope == "Namespaced" and (_is_namespaces(resource) or not namespace):
        return False
    if rule.scope == "Cluster" and not (_is_namespaces(resource) or not namespace):
        return False
    if rule.scope not in ("*", "Namespaced", "Cluster"):
        return False
    if not _any(rule.operations, operation):
        return False
    if not _any(rule.groups, resource.group) or not _any(rule.versions, resource.version):
        return False
    for named in rule.resources:
        res, _, sub = named.partition("/")
        if (res == "*" or res == resource.plural) and (sub == "*" or sub == subresource):
            return True
    return False


def equivalents(catalog: ResourceCatalog, resource: ResourceType) -> list[ResourceType]:
    """The other resources serving the same objects: other versions of it, and resources that
    share its storage."""
    storage = resource.storage_group_resource
    return [
        other
        for other in catalog.all()
        if other.storage_group_resource == storage
        and (other.group, other.version, other.plural) != (resource.group, resource.version, resource.plural)
    ]


class MatchCriteria(Protocol):
    """What decides whether a request is taken: a webhook's, or an admission policy's or
    binding's ``matchResources``."""

    @property
    def rules(self) -> tuple[Rule, ...]: ...
    @property
    def match_policy(self) -> str: ...
    @property
    def namespace_selector(self) -> LabelSelector: ...
    @property
    def object_selector(self) -> LabelSelector: ...


class Matcher:
    """Decides, per request, which webhooks (or policies) take it, and with which resource."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.catalog = catalog

    def resource_for(
        self, webhook: MatchCriteria, attributes: AdmissionAttributes, rules: tuple[Rule, ...] | None = None
    ) -> ResourceType | None:
        """The resource ``webhook`` is called with for this request (matched by its rules, or by
        ``rules``), or None: not called."""
        requested = attributes.resource
        chosen = webhook.rules if rules is None else rules
        for rule in chosen:
            if rule_matches(
                rule,
                attributes.operation,
                requested,
                attributes.subresource,
                attributes.namespace,
                attributes.name,
            ):
                return requested
        if webhook.match_policy != "Equivalent":
            return None
        others = equivalents(self.catalog, requested)
        for rule in chosen:
            for other in others:
                if rule_matches(
                    rule,
                    attributes.operation,
                    other,
                    attributes.subresource,
                    attributes.namespace,
                    attributes.name,
                ):
                    return other
        return None

    def selects(
        self, webhook: MatchCriteria, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> bool:
        """Whether the webhook's namespace and object selectors take this request."""
        selector = webhook.object_selector
        if not selector.is_empty and not any(
            isinstance(candidate, dict) and selector.matches(_labels(candidate)) for candidate in (obj, old)
        ):
            return False
        if webhook.namespace_selector.is_empty:
            return True
        resource = attributes.resource
        if not attributes.namespace and not _is_namespaces(resource):
            return True
        return webhook.namespace_selector.matches(self._namespace_labels(attributes, obj))

    def _namespace_labels(self, attributes: AdmissionAttributes, obj: Obj | None) -> dict[str, str]:
        resource = attributes.resource
        if (
            _is_namespaces(resource)
            and not attributes.subresource
            and attributes.operation in (CREATE, UPDATE)
            and isinstance(obj, dict)
        ):
            return _labels(obj)
        name = attributes.name if _is_namespaces(resource) else attributes.namespace
        namespaces = self.catalog.lookup("", "v1", "namespaces")
        assert namespaces is not None
        try:
            namespace = self.registry.get(namespaces, None, name)
        except errors.NotFound:
            raise errors.not_found("", "namespaces", name) from None
        return _labels(namespace)


def _labels(obj: Obj) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


async def in_version(
    registry: Registry, have: ResourceType, want: ResourceType, obj: Obj | None
) -> Obj | None:
    """``obj`` (served as ``have``) as ``want`` serves it: what a webhook or policy matched
    through another version sees (a CRD's conversion webhook may be called for it)."""
    if obj is None or have is want:
        return obj
    if (have.group, have.version, have.plural) == (want.group, want.version, want.plural):
        return obj
    stored = await registry.stored(have, copy.deepcopy(obj))
    return await registry.served(want, stored)
