"""The stored ValidatingAdmissionPolicies and their bindings, compiled: what a request is matched
and judged by. Read once from the registry and dropped whenever either kind is written (the
registry's commit listeners), as the webhook configurations are.

Expressions compile when first read; one that does not compile is kept as its error, which the
policy's failurePolicy then applies to every request it matches (upstream reports it in the
policy's status and fails the same way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.admission.webhooks.configurations import Rule, rule_of
from kubeloop.apiserver.auth import celauthorizer
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.cel import rules as celrules
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import ListOptions

GROUP = "admissionregistration.k8s.io"
POLICIES = "validatingadmissionpolicies"
BINDINGS = "validatingadmissionpolicybindings"

#: A compiled expression, or why it does not compile.
Compiled = celrules.Expression | ValueError


@dataclass(frozen=True)
class Criteria:
    """``matchConstraints`` of a policy or ``matchResources`` of a binding."""

    rules: tuple[Rule, ...]
    exclude_rules: tuple[Rule, ...]
    match_policy: str
    namespace_selector: LabelSelector
    object_selector: LabelSelector


@dataclass(frozen=True)
class Validation:
    source: str
    expression: Compiled
    message: str
    message_expression: Compiled | None
    reason: str


@dataclass(frozen=True)
class Policy:
    name: str
    #: (apiVersion, kind) of its params, or None.
    param_kind: tuple[str, str] | None
    constraints: Criteria | None
    validations: tuple[Validation, ...]
    variables: tuple[tuple[str, str, Compiled], ...]
    match_conditions: tuple[tuple[str, str, Compiled], ...]
    failure_policy: str
    #: (key, valueExpression, compiled) of each ``auditAnnotations`` item.
    audit_annotations: tuple[tuple[str, str, Compiled], ...] = ()


@dataclass(frozen=True)
class Binding:
    name: str
    policy_name: str
    param_ref: dict[str, Any] | None
    match: Criteria | None
    actions: tuple[str, ...]


class PolicyStore:
    """The current policies (by name) and bindings (in name order)."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.catalog = catalog
        self._policies: dict[str, Policy] | None = None
        self._bindings: list[Binding] | None = None
        self._compiled: dict[str, Compiled] = {}
        #: The sources compiled for the policies being read (what ``_compiled`` keeps after).
        self._used: set[str] = set()
        registry.add_commit_listener(GROUP, POLICIES, self._forget_policies)
        registry.add_commit_listener(GROUP, BINDINGS, self._forget_bindings)

    def _forget_policies(self, new: Obj | None, old: Obj | None) -> None:
        self._policies = None

    def _forget_bindings(self, new: Obj | None, old: Obj | None) -> None:
        self._bindings = None

    def bindings(self) -> list[Binding]:
        if self._bindings is None:
            self._bindings = [_binding_of(obj) for obj in self._listed(BINDINGS)]
        return self._bindings

    def policies(self) -> dict[str, Policy]:
        if self._policies is None:
            self._used = set()
            self._policies = {
                policy.name: policy for policy in (self._policy_of(o) for o in self._listed(POLICIES))
            }
            # Expressions no policy has any more (edited and deleted policies') are dropped.
            self._compiled = {
                source: compiled for source, compiled in self._compiled.items() if source in self._used
            }
        return self._policies

    def _listed(self, plural: str) -> list[Obj]:
        resource = self.catalog.lookup(GROUP, "v1", plural)
        if resource is None:
            return []
        items = self.registry.list_objects(resource, None, ListOptions()).items
        return sorted(items, key=lambda obj: str((obj.get("metadata") or {}).get("name") or ""))

    def compile(self, source: str) -> Compiled:
        self._used.add(source)
        compiled = self._compiled.get(source)
        if compiled is None:
            try:
                compiled = celrules.compile_expression(source, extra=celauthorizer.NAMES)
            except ValueError as error:
                compiled = error
            self._compiled[source] = compiled
        return compiled

    def _policy_of(self, obj: Obj) -> Policy:
        spec = obj.get("spec") or {}
        param_kind = spec.get("paramKind")
        validations = []
        for raw in spec.get("validations") or ():
            if not isinstance(raw, dict):
                continue
            source = str(raw.get("expression") or "")
            message_source = raw.get("messageExpression")
            validations.append(
                Validation(
                    source=source,
                    expression=self.compile(source),
                    message=str(raw.get("message") or ""),
                    message_expression=self.compile(str(message_source)) if message_source else None,
                    reason=str(raw.get("reason") or ""),
                )
            )
        return Policy(
            name=str((obj.get("metadata") or {}).get("name") or ""),
            param_kind=(
                (str(param_kind.get("apiVersion") or ""), str(param_kind.get("kind") or ""))
                if isinstance(param_kind, dict)
                else None
            ),
            constraints=_criteria_of(spec.get("matchConstraints")),
            validations=tuple(validations),
            variables=self._named(spec.get("variables"), "name", "expression"),
            match_conditions=self._named(spec.get("matchConditions"), "name", "expression"),
            failure_policy=str(spec.get("failurePolicy") or "Fail"),
            audit_annotations=self._named(spec.get("auditAnnotations"), "key", "valueExpression"),
        )

    def _named(self, raw: Any, name_key: str, expression_key: str) -> tuple[tuple[str, str, Compiled], ...]:
        out = []
        for item in raw if isinstance(raw, list) else ():
            if isinstance(item, dict):
                source = str(item.get(expression_key) or "")
                out.append((str(item.get(name_key) or ""), source, self.compile(source)))
        return tuple(out)


def _criteria_of(raw: Any) -> Criteria | None:
    if not isinstance(raw, dict):
        return None
    rules: Callable[[str], tuple[Rule, ...]] = lambda key: tuple(  # noqa: E731
        rule_of(rule) for rule in raw.get(key) or () if isinstance(rule, dict)
    )
    return Criteria(
        rules=rules("resourceRules"),
        exclude_rules=rules("excludeResourceRules"),
        match_policy=str(raw.get("matchPolicy") or "Equivalent"),
        namespace_selector=LabelSelector.from_label_selector_dict(raw.get("namespaceSelector") or {}),
        object_selector=LabelSelector.from_label_selector_dict(raw.get("objectSelector") or {}),
    )


def _binding_of(obj: Obj) -> Binding:
    spec = obj.get("spec") or {}
    param_ref = spec.get("paramRef")
    return Binding(
        name=str((obj.get("metadata") or {}).get("name") or ""),
        policy_name=str(spec.get("policyName") or ""),
        param_ref=param_ref if isinstance(param_ref, dict) else None,
        match=_criteria_of(spec.get("matchResources")),
        actions=tuple(str(a) for a in spec.get("validationActions") or ()),
    )
