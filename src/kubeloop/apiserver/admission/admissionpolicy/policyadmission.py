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
with binding '<b>' denied request: <message>``), Warn adds a warning, Audit annotates the
request's audit event (``validation.policy.admission.k8s.io/validation_failure``). The policy's
``auditAnnotations`` add ``<policy>/<key>`` to the event with their value (a string; null or
blank adds nothing; the values of several bindings are joined with ", "). An expression that
fails to compile or to evaluate, and a binding that cannot be configured (its param kind not
served, no params under Deny), refuse the request under ``failurePolicy: Fail`` and are passed
over under Ignore.

Costs are bounded as upstream bounds them, with the approximation schema rules use
(``celrules.expression_cost``): one expression may cost 1,000,000 (past it, it fails with
``operation cancelled: actual cost limit exceeded``), and the match conditions, the validations
(with variables and messages) and the audit annotations of one evaluation 10,000,000 each
(past it, the evaluation fails as a whole: ``validation failed due to running out of cost
budget, no further validation rules will be run``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop import errors
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.admission.admissionpolicy.policies import (
    BINDINGS,
    GROUP,
    Binding,
    Compiled,
    Criteria,
    Policy,
    PolicyStore,
    Validation,
)
from kubeloop.apiserver.admission.webhooks.matching import Matcher, exempt, in_version
from kubeloop.apiserver.admission.webhooks.review import review_request
from kubeloop.apiserver.audit import requestaudit
from kubeloop.apiserver.auth import celauthorizer
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.cel import rules as celrules
from kubeloop.apiserver.registry.admissionhooks import AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import ListOptions

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

    #: Its coverage follows the bindings: with none, no policy applies.
    coverage_sources: tuple[tuple[str, str], ...] = ((GROUP, BINDINGS),)

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
            #: The values of each audit annotation key, from every binding and param.
            published: dict[str, list[str]] = {}
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
                    evaluation = _evaluate(policy, variables, self.authorizer_functions)
                    for failure in evaluation.failures:
                        for action in binding.actions:
                            if action == "Deny":
                                denials.append(_Denial(policy.name, binding.name, failure.message, failure.reason))
                            elif action == "Warn":
                                warnings.append(
                                    f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' "
                                    f"with binding '{binding.name}': {failure.message}"
                                )
                            elif action == "Audit":
                                _publish_failure(policy, binding, failure)
                    for key, value in evaluation.annotations:
                        values = published.setdefault(key, [])
                        if value not in values:
                            values.append(value)
                    for message in evaluation.annotation_errors:
                        denials.append(_Denial(policy.name, binding.name, message, ""))
            for key, values in published.items():
                requestaudit.add_annotation(f"{policy.name}/{key}", ", ".join(values))
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


@dataclass(frozen=True)
class _Failure:
    """One way a request fails a policy: the validation's index, the message, the reason."""

    index: int
    message: str
    reason: str


@dataclass
class _Evaluation:
    """What one evaluation of a policy (for one binding and param) found."""

    failures: list[_Failure] = field(default_factory=list)
    #: (key, value) of each audit annotation to publish.
    annotations: list[tuple[str, str]] = field(default_factory=list)
    #: Why audit annotations could not be evaluated (under failurePolicy Fail).
    annotation_errors: list[str] = field(default_factory=list)


def _evaluate(
    policy: Policy, variables: dict[str, Any], functions: Mapping[str, Callable[..., Any]]
) -> _Evaluation:
    """How the request fares under the policy (upstream's validator): its failures and its
    audit annotations. ``functions`` are the authorizer library's. Match conditions, then
    variables and validations (with their messages), then audit annotations are each given
    upstream's runtime cost budget; a budget spent is one failure."""
    fail = policy.failure_policy != "Ignore"
    outcome = _Evaluation()
    try:
        conditions = celrules.Budget()
        failed: list[_Failure] = []
        for _name, source, compiled in policy.match_conditions:
            result = _evaluated(source, compiled, variables, functions, conditions)
            if result is False:
                return outcome
            if isinstance(result, str) and fail:
                failed.append(_Failure(0, result, ""))
        if failed:
            outcome.failures = failed
            return outcome
        budget = celrules.Budget()
        bound: dict[str, Any] = {}
        context = {**variables, "variables": bound}
        for name, source, compiled in policy.variables:
            value = _evaluated(source, compiled, context, functions, budget, raw=True)
            if not isinstance(value, _Failed):
                bound[name] = value
        for index, validation in enumerate(policy.validations):
            result = _evaluated(validation.source, validation.expression, context, functions, budget)
            if result is True:
                continue
            if isinstance(result, str):
                if fail:
                    outcome.failures.append(_Failure(index, result, ""))
                continue
            message = _message(validation, context, functions, budget)
            outcome.failures.append(_Failure(index, message, validation.reason))
    except celrules.BudgetExhausted as exhausted:
        if fail:
            outcome.failures = [_Failure(0, str(exhausted), "")]
        return outcome
    annotations = celrules.Budget()
    context = {**variables, "variables": bound}
    context.pop("authorizer", None)
    for key, source, compiled in policy.audit_annotations:
        try:
            value = _evaluated(source, compiled, context, functions, annotations, raw=True)
        except celrules.BudgetExhausted as exhausted:
            if fail:
                outcome.annotation_errors.append(str(exhausted))
            break
        if isinstance(value, _Failed):
            if fail:
                outcome.annotation_errors.append(str(value))
        elif isinstance(value, str):
            text = value.strip()[:MAX_AUDIT_ANNOTATION_LENGTH]
            if text:
                outcome.annotations.append((key, text))
        elif value is not None and fail:
            outcome.annotation_errors.append(
                f"valueExpression '{source}' resulted in unsupported return type: {_cel_type(value)}. "
                "Return type must be either string or null."
            )
    return outcome


#: Audit annotation values are cut to this many characters (upstream's limit).
MAX_AUDIT_ANNOTATION_LENGTH = 10 * 1024
VALIDATION_FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"


def _publish_failure(policy: Policy, binding: Binding, failure: _Failure) -> None:
    """The Audit action: the failure as upstream's ``validation_failure`` annotation (a JSON list,
    as Go marshals it)."""
    value = json.dumps(
        [
            {
                "message": failure.message,
                "policy": policy.name,
                "binding": binding.name,
                "expressionIndex": failure.index,
                "validationActions": list(binding.actions),
            }
        ],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    value = value.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    requestaudit.add_annotation(VALIDATION_FAILURE_ANNOTATION, value)


def _cel_type(value: Any) -> str:
    """The CEL type name of an interpreter's value."""
    for python_type, name in ((bool, "bool"), (int, "int"), (float, "double"), (bytes, "bytes")):
        if isinstance(value, python_type):
            return name
    if isinstance(value, dict):
        return "map"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


class _Failed(str):
    """Why an expression could not be evaluated."""


def _evaluated(
    source: str,
    compiled: Compiled,
    context: dict[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    budget: celrules.Budget,
    *,
    raw: bool = False,
) -> Any:
    """True/False (or the value, ``raw``), or a _Failed message saying why there is none;
    BudgetExhausted when ``budget`` cannot pay for it."""
    if isinstance(compiled, ValueError):
        return _Failed(f"compilation failed: {compiled}")
    try:
        value = celrules.evaluate_expression(compiled, context, functions, budget=budget)
    except celrules.BudgetExhausted:
        raise
    except Exception as error:  # the interpreter's errors are plain Python ones
        return _Failed(f"expression '{source}' resulted in error: {error}")
    if raw:
        return value  # the interpreter gives plain Python values
    if value is True or value is False:
        return value
    return _Failed(f"expression '{source}' resulted in a non-bool value")


def _message(
    validation: Validation,
    context: dict[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    budget: celrules.Budget,
) -> str:
    if validation.message_expression is not None:
        try:
            text = _evaluated("", validation.message_expression, context, functions, budget, raw=True)
        except celrules.BudgetExhausted:
            text = None
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
