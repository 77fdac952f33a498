"""The webhooks the server calls: Validating- and MutatingWebhookConfigurations, read and kept.

Each configuration's ``webhooks`` become :class:`Webhook` values, ordered as kube-apiserver
orders them (configurations by name, webhooks in their order). They are read from the registry
once and kept until a write of either kind commits; the registry tells :class:`Configurations`
through its commit listeners, so a configuration written is in force for the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import ListOptions
from kubeloop.apiserver.webhookclient.clientconfig import ClientConfig, client_config_of

GROUP = "admissionregistration.k8s.io"
VALIDATING = "validatingwebhookconfigurations"
MUTATING = "mutatingwebhookconfigurations"


@dataclass(frozen=True)
class Rule:
    """A RuleWithOperations: what requests a webhook is called for."""

    operations: tuple[str, ...]
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str
    #: Only objects of these names (a policy's NamedRuleWithOperations); empty: any.
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Webhook:
    """One webhook of a configuration, defaulted as the server stores it."""

    name: str
    configuration: str
    #: Which webhook this is across reinvocations: the configuration's uid and the index.
    uid: str
    mutating: bool
    rules: tuple[Rule, ...]
    failure_policy: str
    match_policy: str
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    side_effects: str | None
    timeout_seconds: int
    review_versions: tuple[str, ...]
    client: ClientConfig
    reinvocation_policy: str
    #: (name, CEL expression) pairs that must all be true for the webhook to be called.
    match_conditions: tuple[tuple[str, str], ...]


def rule_of(raw: object) -> Rule:
    """A stored RuleWithOperations (or NamedRuleWithOperations)."""
    rule = raw if isinstance(raw, dict) else {}
    return Rule(
        operations=_strings(rule.get("operations")),
        groups=_strings(rule.get("apiGroups")),
        versions=_strings(rule.get("apiVersions")),
        resources=_strings(rule.get("resources")),
        scope=str(rule.get("scope") or "*"),
        resource_names=_strings(rule.get("resourceNames")),
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def webhooks_of(configuration: Obj, *, mutating: bool) -> list[Webhook]:
    """The webhooks of one (defaulted, valid) configuration, in their order."""
    metadata = configuration.get("metadata") or {}
    name = str(metadata.get("name") or "")
    uid = str(metadata.get("uid") or name)
    webhooks: list[Webhook] = []
    for index, hook in enumerate(configuration.get("webhooks") or ()):
        if not isinstance(hook, dict):
            continue
        rules = tuple(rule_of(rule) for rule in hook.get("rules") or () if isinstance(rule, dict))
        conditions = tuple(
            (str(condition.get("name") or ""), str(condition.get("expression") or ""))
            for condition in hook.get("matchConditions") or ()
            if isinstance(condition, dict)
        )
        side_effects = hook.get("sideEffects")
        webhooks.append(
            Webhook(
                name=str(hook.get("name") or ""),
                configuration=name,
                uid=f"{uid}/{index}",
                mutating=mutating,
                rules=rules,
                failure_policy=str(hook.get("failurePolicy") or "Fail"),
                match_policy=str(hook.get("matchPolicy") or "Equivalent"),
                namespace_selector=LabelSelector.from_label_selector_dict(
                    hook.get("namespaceSelector") or {}
                ),
                object_selector=LabelSelector.from_label_selector_dict(hook.get("objectSelector") or {}),
                side_effects=side_effects if isinstance(side_effects, str) else None,
                timeout_seconds=int(hook.get("timeoutSeconds") or 10),
                review_versions=_strings(hook.get("admissionReviewVersions")),
                client=client_config_of(hook.get("clientConfig")),
                reinvocation_policy=str(hook.get("reinvocationPolicy") or "Never"),
                match_conditions=conditions,
            )
        )
    return webhooks


class Configurations:
    """The current webhooks of each kind, read from ``registry`` and dropped when one is written."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.catalog = catalog
        self._cached: dict[bool, list[Webhook]] = {}
        for plural in (VALIDATING, MUTATING):
            registry.add_commit_listener(GROUP, plural, self._forget(plural == MUTATING))

    def _forget(self, mutating: bool) -> Callable[[Obj | None, Obj | None], None]:
        def forget(new: Obj | None, old: Obj | None) -> None:
            self._cached.pop(mutating, None)

        return forget

    def webhooks(self, *, mutating: bool) -> list[Webhook]:
        """The webhooks of every configuration of the kind, configurations in name order."""
        cached = self._cached.get(mutating)
        if cached is not None:
            return cached
        resource = self._resource(MUTATING if mutating else VALIDATING)
        found: list[Webhook] = []
        if resource is not None:
            listed = self.registry.list_objects(resource, None, ListOptions())
            ordered = sorted(listed.items, key=lambda obj: str((obj.get("metadata") or {}).get("name") or ""))
            for configuration in ordered:
                found.extend(webhooks_of(configuration, mutating=mutating))
        self._cached[mutating] = found
        return found

    def _resource(self, plural: str) -> ResourceType | None:
        return self.catalog.lookup(GROUP, "v1", plural)
