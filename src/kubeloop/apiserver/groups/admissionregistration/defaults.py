"""The admissionregistration.k8s.io group's defaults: webhook configurations, and
ValidatingAdmissionPolicies and their bindings.
"""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = ["admission_policy", "admission_policy_binding", "webhook_configuration"]


def admission_policy(obj: Obj) -> None:
    """Validating and mutating admission policies: Fail on errors, Equivalent matching,
    selectors that select everything, rules of any scope."""
    spec = spec_of(obj)
    if spec is None:
        return
    spec.setdefault("failurePolicy", "Fail")
    _match_resources(spec.get("matchConstraints"))


def admission_policy_binding(obj: Obj) -> None:
    """A binding's ``matchResources``, when it has them, as a policy's ``matchConstraints``."""
    spec = spec_of(obj)
    if spec is not None:
        _match_resources(spec.get("matchResources"))


def _match_resources(match: object) -> None:
    """``SetDefaults_MatchResources``: Equivalent matching, selectors that select everything,
    rules of any scope."""
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def webhook_configuration(obj: Obj) -> None:
    """Each webhook of a Validating- or MutatingWebhookConfiguration (``SetDefaults_*Webhook``):
    Fail on errors, Equivalent matching, selectors that select everything, 10 s, rules of any
    scope, port 443 for a Service; a mutating webhook is not called again."""
    mutating = obj.get("kind") == "MutatingWebhookConfiguration"
    for hook in obj.get("webhooks") or ():
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        client = hook.get("clientConfig")
        service = client.get("service") if isinstance(client, dict) else None
        if isinstance(service, dict):
            service.setdefault("port", 443)
