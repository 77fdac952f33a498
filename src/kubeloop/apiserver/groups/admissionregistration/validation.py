"""The admissionregistration.k8s.io group's rules (``pkg/apis/admissionregistration/validation``):
Validating- and MutatingWebhookConfigurations, ValidatingAdmissionPolicies and their bindings.

Each webhook needs a fully qualified name unique in its configuration, ``sideEffects`` of None or
NoneOnDryRun, an AdmissionReview version the server speaks, a timeout of 1 to 30 seconds, and
exactly one of an https ``url`` or a ``service``; its rules, policies and selectors are checked
as upstream checks them, with upstream's messages.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from kubeloop.api.naming import dns1123_subdomain_errors, qualified_name_errors
from kubeloop.apiserver.registry.validation.causes import (
    as_dict,
    as_list,
    duplicate,
    forbidden,
    invalid,
    is_int,
    not_supported,
    required,
    too_long,
)
from kubeloop.apiserver.registry.validation.selectors import validate_label_selector
from kubeloop.errors import StatusCause

__all__ = [
    "client_config",
    "mutating_webhook_configuration_rules",
    "review_versions",
    "validating_admission_policy_binding_rules",
    "validating_admission_policy_rules",
    "validating_webhook_configuration_rules",
]

_REVIEW_VERSIONS = ("v1", "v1beta1")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_FAILURE_POLICIES = ("Fail", "Ignore")
_MATCH_POLICIES = ("Equivalent", "Exact")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_REINVOCATION_POLICIES = ("IfNeeded", "Never")
_URL_FORM = "; desired format: https://host[/path]"


def validating_webhook_configuration_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _configuration_rules(obj, mutating=False)


def mutating_webhook_configuration_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _configuration_rules(obj, mutating=True)


def _configuration_rules(obj: Mapping[str, Any], *, mutating: bool) -> list[StatusCause]:
    causes: list[StatusCause] = []
    names: set[str] = set()
    for index, hook in enumerate(as_list(obj.get("webhooks"))):
        path = f"webhooks[{index}]"
        hook = as_dict(hook)
        causes.extend(_webhook_rules(hook, path, mutating=mutating))
        causes.extend(review_versions(hook.get("admissionReviewVersions"), f"{path}.admissionReviewVersions"))
        name = hook.get("name")
        if isinstance(name, str) and name:
            if name in names:
                causes.append(duplicate(f"{path}.name", name))
            names.add(name)
    return causes


def _qualified_name(name: Any, path: str) -> list[StatusCause]:
    if not isinstance(name, str) or not name:
        return [required(path)]
    errors = dns1123_subdomain_errors(name)
    if errors:
        return [invalid(path, name, ",".join(errors))]
    if len(name.split(".")) < 3:
        return [invalid(path, name, "should be a domain with at least three segments separated by dots")]
    return []


def _webhook_rules(hook: Mapping[str, Any], path: str, *, mutating: bool) -> list[StatusCause]:
    causes = _qualified_name(hook.get("name"), f"{path}.name")
    for index, rule in enumerate(as_list(hook.get("rules"))):
        causes.extend(_rule(as_dict(rule), f"{path}.rules[{index}]"))
    for field, supported in (("failurePolicy", _FAILURE_POLICIES), ("matchPolicy", _MATCH_POLICIES)):
        value = hook.get(field)
        if value is not None and value not in supported:
            causes.append(not_supported(f"{path}.{field}", value, supported))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
    elif side_effects not in _SIDE_EFFECTS:
        causes.append(not_supported(f"{path}.sideEffects", side_effects, _SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if is_int(timeout) and not 1 <= timeout <= 30:
        causes.append(
            invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds")
        )
    for selector in ("namespaceSelector", "objectSelector"):
        value = hook.get(selector)
        if isinstance(value, Mapping):
            causes.extend(validate_label_selector(value, f"{path}.{selector}"))
    if mutating:
        policy = hook.get("reinvocationPolicy")
        if policy is not None and policy not in _REINVOCATION_POLICIES:
            causes.append(not_supported(f"{path}.reinvocationPolicy", policy, _REINVOCATION_POLICIES))
    causes.extend(client_config(as_dict(hook.get("clientConfig")), f"{path}.clientConfig"))
    return causes


def _rule(rule: Mapping[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    operations = [str(o) for o in as_list(rule.get("operations"))]
    if not operations:
        causes.append(required(f"{path}.operations"))
    if len(operations) > 1 and "*" in operations:
        causes.append(
            invalid(f"{path}.operations", operations, "if '*' is present, must not specify other operations")
        )
    for index, operation in enumerate(operations):
        if operation not in _OPERATIONS:
            causes.append(not_supported(f"{path}.operations[{index}]", operation, _OPERATIONS))
    groups = [str(g) for g in as_list(rule.get("apiGroups"))]
    if not groups:
        causes.append(required(f"{path}.apiGroups"))
    if len(groups) > 1 and "*" in groups:
        causes.append(
            invalid(f"{path}.apiGroups", groups, "if '*' is present, must not specify other API groups")
        )
    versions = [str(v) for v in as_list(rule.get("apiVersions"))]
    if not versions:
        causes.append(required(f"{path}.apiVersions"))
    if len(versions) > 1 and "*" in versions:
        causes.append(
            invalid(f"{path}.apiVersions", versions, "if '*' is present, must not specify other API versions")
        )
    for index, version in enumerate(versions):
        if not version:
            causes.append(required(f"{path}.apiVersions[{index}]"))
    causes.extend(_resources([str(r) for r in as_list(rule.get("resources"))], f"{path}.resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in _SCOPES:
        causes.append(not_supported(f"{path}.scope", scope, _SCOPES))
    return causes


def _resources(resources: list[str], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    if not resources:
        causes.append(required(path))
    with_wildcard_subresources: set[str] = set()
    subresources_of_wildcard: set[str] = set()
    double_wildcard = single_wildcard = plain_resource = False
    for index, named in enumerate(resources):
        if not named:
            causes.append(required(f"{path}[{index}]"))
            continue
        double_wildcard = double_wildcard or named == "*/*"
        single_wildcard = single_wildcard or named == "*"
        resource, slash, sub = named.partition("/")
        if not slash:
            plain_resource = named != "*"
            continue
        if resource in with_wildcard_subresources:
            causes.append(
                invalid(f"{path}[{index}]", named, f"if '{resource}/*' is present, must not specify {named}")
            )
        if sub in subresources_of_wildcard:
            causes.append(
                invalid(f"{path}[{index}]", named, f"if '*/{sub}' is present, must not specify {named}")
            )
        if sub == "*":
            with_wildcard_subresources.add(resource)
        if resource == "*":
            subresources_of_wildcard.add(sub)
    if len(resources) > 1 and double_wildcard:
        causes.append(invalid(path, resources, "if '*/*' is present, must not specify other resources"))
    if single_wildcard and plain_resource:
        causes.append(
            invalid(
                path, resources, "if '*' is present, must not specify other resources without subresources"
            )
        )
    return causes


def client_config(config: Mapping[str, Any], path: str) -> list[StatusCause]:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        return _url(str(url), f"{path}.url")
    return _service(as_dict(service), f"{path}.service")


def _url(url: str, path: str) -> list[StatusCause]:
    try:
        parsed = urllib.parse.urlsplit(url)
        parsed.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError as error:
        return [required(path, f"url must be a valid URL: {error}{_URL_FORM}")]
    causes: list[StatusCause] = []
    if parsed.scheme != "https":
        causes.append(invalid(path, parsed.scheme, "'https' is the only allowed URL scheme" + _URL_FORM))
    if not parsed.netloc.rpartition("@")[2]:
        causes.append(invalid(path, "", "host must be specified" + _URL_FORM))
    if "@" in parsed.netloc:
        causes.append(
            invalid(path, parsed.netloc.rpartition("@")[0], "user information is not permitted in the URL")
        )
    if parsed.fragment:
        causes.append(invalid(path, parsed.fragment, "fragments are not permitted in the URL"))
    if parsed.query:
        causes.append(invalid(path, parsed.query, "query parameters are not permitted in the URL"))
    return causes


def _service(service: Mapping[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    if not service.get("name"):
        causes.append(required(f"{path}.name"))
    if not service.get("namespace"):
        causes.append(required(f"{path}.namespace"))
    port = service.get("port", 443)
    if not is_int(port) or not 1 <= port <= 65535:
        causes.append(
            invalid(f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive")
        )
    url_path = service.get("path")
    if not isinstance(url_path, str) or url_path in ("", "/"):
        return causes
    if url_path == "//":
        return [*causes, invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        causes.append(invalid(f"{path}.path", url_path, "must start with a '/'"))
    steps = url_path[1:].removesuffix("/").split("/")
    for index, step in enumerate(steps):
        if not step:
            causes.append(invalid(f"{path}.path", url_path, f"segment[{index}] may not be empty"))
            continue
        for failure in dns1123_subdomain_errors(step):
            causes.append(invalid(f"{path}.path", url_path, f"segment[{index}]: {failure}"))
    return causes


def review_versions(versions: Any, path: str) -> list[StatusCause]:
    listed = [str(v) for v in as_list(versions)]
    if not listed:
        return [required(path, "must specify one of v1, v1beta1")]
    causes: list[StatusCause] = []
    seen: set[str] = set()
    for index, version in enumerate(listed):
        if version in seen:
            causes.append(invalid(f"{path}[{index}]", version, "duplicate version"))
            continue
        seen.add(version)
    if not seen & set(_REVIEW_VERSIONS):
        causes.append(invalid(path, listed, "must include at least one of v1, v1beta1"))
    return causes


_VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
_PARAMETER_NOT_FOUND_ACTIONS = ("Allow", "Deny")


def validating_admission_policy_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateValidatingAdmissionPolicy``: match constraints with resource rules, at least
    one validation (or audit annotation), expressions present, a known failure policy, a whole
    param kind. (That the expressions compile is checked when they are first evaluated.)"""
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    constraints = spec.get("matchConstraints")
    if not isinstance(constraints, dict):
        causes.append(required("spec.matchConstraints"))
    else:
        causes.extend(_match_resources(constraints, "spec.matchConstraints", rules_required=True))
    policy = spec.get("failurePolicy")
    if policy is not None and policy not in _FAILURE_POLICIES:
        causes.append(not_supported("spec.failurePolicy", policy, _FAILURE_POLICIES))
    param_kind = spec.get("paramKind")
    if isinstance(param_kind, dict):
        for key in ("apiVersion", "kind"):
            if not param_kind.get(key):
                causes.append(required(f"spec.paramKind.{key}"))
    validations = as_list(spec.get("validations"))
    if not validations and not as_list(spec.get("auditAnnotations")):
        causes.append(
            required("spec.validations", "validations or auditAnnotations must contain at least one item")
        )
    for index, validation in enumerate(validations):
        if not as_dict(validation).get("expression"):
            causes.append(required(f"spec.validations[{index}].expression", "expression is not specified"))
    causes.extend(_audit_annotations(obj, as_list(spec.get("auditAnnotations"))))
    for field_name in ("variables", "matchConditions"):
        for index, item in enumerate(as_list(spec.get(field_name))):
            for key in ("name", "expression"):
                if not as_dict(item).get(key):
                    causes.append(required(f"spec.{field_name}[{index}].{key}"))
    return causes


def _audit_annotations(obj: Mapping[str, Any], annotations: list[Any]) -> list[StatusCause]:
    """Each audit annotation has a key that makes a qualified name after the policy's name
    (``<policy>/<key>``, at most 63 characters), given once, and a value expression."""
    policy_name = str(as_dict(obj.get("metadata")).get("name") or "")
    causes: list[StatusCause] = []
    keys: set[str] = set()
    for index, annotation in enumerate(annotations):
        path = f"spec.auditAnnotations[{index}]"
        key = str(as_dict(annotation).get("key") or "")
        if not key:
            causes.append(required(f"{path}.key"))
        else:
            if len(key) > 63:
                causes.append(too_long(f"{path}.key", 63))
            qualified = f"{policy_name}/{key}"
            failures = qualified_name_errors(qualified)
            if failures:
                causes.append(invalid(f"{path}.key", qualified, ", ".join(failures)))
            if key in keys:
                causes.append(duplicate(f"{path}.key", key))
            keys.add(key)
        expression = str(as_dict(annotation).get("valueExpression") or "")
        if not expression:
            causes.append(required(f"{path}.valueExpression", "valueExpression is not specified"))
        elif len(expression) > 5 * 1024:
            causes.append(too_long(f"{path}.valueExpression", 5 * 1024))
    return causes


def validating_admission_policy_binding_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateValidatingAdmissionPolicyBinding``: a policy name, validation actions (known,
    once each, not both Deny and Warn), a paramRef by name or selector with its not-found action."""
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    if not spec.get("policyName"):
        causes.append(required("spec.policyName"))
    actions = [str(a) for a in as_list(spec.get("validationActions"))]
    if not actions:
        causes.append(required("spec.validationActions", "at least one validation action is required"))
    seen: set[str] = set()
    for index, action in enumerate(actions):
        if action not in _VALIDATION_ACTIONS:
            causes.append(not_supported(f"spec.validationActions[{index}]", action, _VALIDATION_ACTIONS))
        elif action in seen:
            causes.append(duplicate(f"spec.validationActions[{index}]", action))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        causes.append(
            invalid(
                "spec.validationActions",
                actions,
                "must not contain both Deny and Warn (repeating the same validation failure information in "
                "the API response and headers serves no purpose)",
            )
        )
    param_ref = spec.get("paramRef")
    if isinstance(param_ref, dict):
        if param_ref.get("name") and param_ref.get("selector") is not None:
            causes.append(forbidden("spec.paramRef.name", "name and selector are mutually exclusive"))
        elif not param_ref.get("name") and param_ref.get("selector") is None:
            causes.append(required("spec.paramRef", "one of name or selector must be specified"))
        not_found = param_ref.get("parameterNotFoundAction")
        if not_found is None:
            causes.append(required("spec.paramRef.parameterNotFoundAction"))
        elif not_found not in _PARAMETER_NOT_FOUND_ACTIONS:
            causes.append(
                not_supported("spec.paramRef.parameterNotFoundAction", not_found, _PARAMETER_NOT_FOUND_ACTIONS)
            )
    match = spec.get("matchResources")
    if isinstance(match, dict):
        causes.extend(_match_resources(match, "spec.matchResources", rules_required=False))
    return causes


def _match_resources(match: Mapping[str, Any], path: str, *, rules_required: bool) -> list[StatusCause]:
    causes: list[StatusCause] = []
    rules = as_list(match.get("resourceRules"))
    if rules_required and not rules:
        causes.append(required(f"{path}.resourceRules"))
    for key in ("resourceRules", "excludeResourceRules"):
        for index, rule in enumerate(as_list(match.get(key))):
            causes.extend(_rule(as_dict(rule), f"{path}.{key}[{index}]"))
    policy = match.get("matchPolicy")
    if policy is not None and policy not in _MATCH_POLICIES:
        causes.append(not_supported(f"{path}.matchPolicy", policy, _MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        selector = match.get(key)
        if isinstance(selector, dict):
            causes.extend(validate_label_selector(selector, f"{path}.{key}"))
    return causes
