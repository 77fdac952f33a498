"""ValidatingAdmissionPolicy as kube-apiserver runs it (``admission/plugin/policy/validating``):
CEL validations evaluated in process, after mutating webhooks and before validating ones.

For each policy that has bindings, in name order: its ``matchConstraints`` (resource rules and
exclusions, namespace and object selectors, matchPolicy Equivalent) must take the request; then
each binding whose ``matchResources`` (if any) take it too is evaluated once per param its
``paramRef`` selects (by name or label selector, in the param kind's namespace or the request's;
``parameterNotFoundAction: Deny`` refuses when there is none). The policy's ``matchConditions``
must hold; its ``variables`` are evaluated in order (``variables.<name>``); each validation sees
``object``, ``oldObject``, ``request``, ``params``, ``namespaceObject``, ``variables`` and
``authorizer`` (what the requesting user may do, by RBAC: ``auth.celauthorizer``).

A validation that is false is a failure with its ``messageExpression``'s value, else its
``message``, else ``failed expression: <expression>``; the binding's ``validationActions`` say
what a failure does: Deny refuses the request (the first refusal answers, 422 Invalid unless
the validation names another ``reason``, worded as upstream's ``ValidatingAdmissionPolicy '<p>'
with binding '<b>' denied request: <message>``), Warn adds a warning, Audit has no audit log to
go to here. An expression that fails to compile or to evaluate, and a binding that cannot be
configured (its param kind not served, no params under Deny), refuse the request under
``failurePolicy: Fail`` and are passed over under Ignore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop import errors
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.admissionpolicy.policies import (
    Binding,
    Compiled,
    Criteria,
    Policy,
    PolicyStore,
    Validation,
)
from kubeloop.apiserver.apiextensions import celrules
from kubeloop.apiserver.auth import celauthorizer
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.registry.admissionhooks import AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import ListOptions
from kubeloop.apiserver.webhooks.matching import Matcher, exempt, in_version
from kubeloop.apiserver.webhooks.review import review_request

#: The code of each reason a validation may give (upstream's ``reasonToCode``).
_CODES = {"Unauthorized": 401, "Forbidden": 403, "RequestEntityTooLarge": 413, "Invalid": 422}
_ERRORS: dict[str, type[errors.APIError]] = {
    "Unauthorized": errors.Unauthorized,
    "Forbidden": errors.Forbidden,
    "RequestEntityTooLarge": errors.RequestEntityTooLarge,
    "Invalid": errors.Invalid,
}


class _ConfigurationError(Exception):
    """A binding (or policy) that cannot be evaluated as configured."""


@dataclass(frozen=True)
class _Denial:
    policy: str
    binding: str | None
    message: str
    reason: str


class PolicyAdmission:
    """The ValidatingAdmissionPolicy plugin: validates only (``mutate`` changes nothing)."""

    def __init__(
        self, registry: Registry, catalog: ResourceCatalog, rbac: RBACAuthorizer | None = None
    ) -> None:
        self.registry = registry
        self.catalog = catalog
        self.store = PolicyStore(registry, catalog)
        self.matcher = Matcher(registry, catalog)
        #: The ``authorizer`` library's functions (RBAC of the embedded server).
        self.authorizer_functions = celauthorizer.functions(rbac or RBACAuthorizer(registry.store, catalog))

    def covers(self, resource: ResourceType) -> bool:
        return not exempt(resource) and bool(self.store.bindings())

    async def mutate(
        self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        return obj, []

    async def validate(self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> list[str]:
        if exempt(attributes.resource):
            return []
        policies = self.store.policies()
        by_policy: dict[str, list[Binding]] = {}
        for binding in self.store.bindings():
            by_policy.setdefault(binding.policy_name, []).append(binding)
        warnings: list[str] = []
        denials: list[_Denial] = []
        for name in sorted(by_policy):
            policy = policies.get(name)
            if policy is None or policy.constraints is None:
                continue  # a binding of a policy that does not exist is ignored
            resource = self._matched(policy.constraints, attributes, obj, old)
            if resource is None:
                continue
            versioned = await in_version(self.registry, attributes.resource, resource, obj)
            versioned_old = await in_version(self.registry, attributes.resource, resource, old)
            for binding in by_policy[name]:
                if binding.match is not None and self._matched(binding.match, attributes, obj, old) is None:
                    continue
                try:
                    params = await self._params(policy, binding, attributes)
                    namespace = self._namespace_object(attributes)
                except _ConfigurationError as error:
                    if policy.failure_policy != "Ignore":
                        denials.append(
                            _Denial(policy.name, binding.name, f"failed to configure binding: {error}", "")
                        )
                    continue
                _, request = review_request("v1", attributes, resource, versioned, versioned_old)
                for param in params:
                    variables = {
                        "object": versioned,
                        "oldObject": versioned_old,
                        "request": request["request"],
                        "params": param,
                        "namespaceObject": namespace,
                        "authorizer": celauthorizer.authorizer_variable(attributes.user),
                    }
                    for message, reason in _failures(policy, variables, self.authorizer_functions):
                        for action in binding.actions:
                            if action == "Deny":
                                denials.append(_Denial(policy.name, binding.name, message, reason))
                            elif action == "Warn":
                                warnings.append(
                                    f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' "
                                    f"with binding '{binding.name}': {message}"
                                )
        if denials:
            raise _refusal(denials[0], attributes, obj)
        return warnings

    # ------------------------------------------------------------ matching

    def _matched(
        self, criteria: Criteria, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> ResourceType | None:
        """The resource the criteria take the request as (another version under Equivalent),
        or None (upstream's ``matching.Matcher.Matches``: exclusions win; no rules is all)."""
        if not self.matcher.selects(criteria, attributes, obj, old):
            return None
        if criteria.exclude_rules and self.matcher.resource_for(criteria, attributes, criteria.exclude_rules):
            return None
        if not criteria.rules:
            return attributes.resource
        return self.matcher.resource_for(criteria, attributes)

    def _namespace_object(self, attributes: AdmissionAttributes) -> Obj | None:
        resource = attributes.resource
        if not attributes.namespace or (resource.group == "" and resource.plural == "namespaces"):
            return None
        namespaces = self.catalog.lookup("", "v1", "namespaces")
        assert namespaces is not None
        try:
            return self.registry.get(namespaces, None, attributes.namespace)
        except errors.NotFound:
            return None

    async def _params(
        self, policy: Policy, binding: Binding, attributes: AdmissionAttributes
    ) -> list[Obj | None]:
        """The params the binding selects (``generic.CollectParams``): [None] without a param
        kind or reference; _ConfigurationError when they cannot be found as configured."""
        ref = binding.param_ref
        if policy.param_kind is None or ref is None:
            return [None]
        api_version, kind = policy.param_kind
        group, _, version = api_version.rpartition("/")
        resource = self.catalog.by_kind(group, version, kind)
        if resource is None:
            raise _ConfigurationError(f"paramKind kind `{group}/{version}, Kind={kind}` not known")
        namespace: str | None = None
        if resource.namespaced:
            namespace = str(ref.get("namespace") or "") or attributes.namespace
            if not namespace:
                raise _ConfigurationError(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                )
        elif ref.get("namespace"):
            raise _ConfigurationError(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
            )
        name = ref.get("name")
        if name:
            try:
                params: list[Obj | None] = [
                    await self.registry.read(lambda: self.registry.get(resource, namespace, str(name)))
                ]
            except errors.NotFound:
                params = []
        elif isinstance(ref.get("selector"), dict):
            selector = LabelSelector.from_label_selector_dict(ref["selector"])
            listed = await self.registry.read(
                lambda: self.registry.list_objects(resource, namespace, ListOptions(label_selector=selector))
            )
            params = list(listed.items)
        else:
            raise _ConfigurationError("one of name or selector must be provided")
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise _ConfigurationError(
                "no params found for policy binding with `Deny` parameterNotFoundAction"
            )
        return params


def _failures(
    policy: Policy, variables: dict[str, Any], functions: Mapping[str, Callable[..., Any]]
) -> list[tuple[str, str]]:
    """(message, reason) of each way the request fails the policy (upstream's validator);
    ``functions`` are the authorizer library's."""
    fail = policy.failure_policy != "Ignore"
    failed: list[tuple[str, str]] = []
    for _name, source, compiled in policy.match_conditions:
        outcome = _evaluated(source, compiled, variables, functions)
        if outcome is False:
            return []
        if isinstance(outcome, str) and fail:
            failed.append((outcome, ""))
    if failed:
        return failed
    bound: dict[str, Any] = {}
    context = {**variables, "variables": bound}
    for name, source, compiled in policy.variables:
        value = _evaluated(source, compiled, context, functions, raw=True)
        if not isinstance(value, _Failed):
            bound[name] = value
    for validation in policy.validations:
        outcome = _evaluated(validation.source, validation.expression, context, functions)
        if outcome is True:
            continue
        if isinstance(outcome, str):
            if fail:
                failed.append((outcome, ""))
            continue
        failed.append((_message(validation, context, functions), validation.reason))
    return failed


class _Failed(str):
    """Why an expression could not be evaluated."""


def _evaluated(
    source: str,
    compiled: Compiled,
    context: dict[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    *,
    raw: bool = False,
) -> Any:
    """True/False (or the value, ``raw``), or a _Failed message saying why there is none."""
    if isinstance(compiled, ValueError):
        return _Failed(f"compilation failed: {compiled}")
    try:
        value = celrules.evaluate_expression(compiled, context, functions)
    except Exception as error:  # the interpreter's errors are plain Python ones
        return _Failed(f"expression '{source}' resulted in error: {error}")
    if raw:
        return value  # the interpreter gives plain Python values
    if value is True or value is False:
        return value
    return _Failed(f"expression '{source}' resulted in a non-bool value")


def _message(
    validation: Validation, context: dict[str, Any], functions: Mapping[str, Callable[..., Any]]
) -> str:
    if validation.message_expression is not None:
        text = _evaluated("", validation.message_expression, context, functions, raw=True)
        if isinstance(text, str) and not isinstance(text, _Failed) and text.strip() and "\n" not in text:
            return text.strip()
    if validation.message:
        return validation.message
    return f"failed expression: {validation.source.strip()}"


def _refusal(denial: _Denial, attributes: AdmissionAttributes, obj: Obj | None) -> errors.APIError:
    """Upstream's refusal: ``admission.NewForbidden``'s message, the validation's reason (Invalid
    by default) and its code, the message again as the one cause."""
    if denial.binding is not None:
        message = (
            f"ValidatingAdmissionPolicy '{denial.policy}' with binding '{denial.binding}' denied request: "
            f"{denial.message}"
        )
    else:
        message = f"ValidatingAdmissionPolicy '{denial.policy}' denied request: {denial.message}"
    resource = attributes.resource
    name = attributes.name or str(((obj or {}).get("metadata") or {}).get("name") or "")
    label = errors.resource_label(resource.group, resource.plural)
    text = f'{label} "{name}" is forbidden: {message}' if name else f"{label} is forbidden: {message}"
    reason = denial.reason or "Invalid"
    cls = _ERRORS.get(reason, errors.BadRequest)
    return cls(
        text,
        code=_CODES.get(reason, 400),
        reason=reason,
        name=name,
        group=resource.group,
        kind=resource.plural,
        causes=[errors.StatusCause("", message, "")],
    )
