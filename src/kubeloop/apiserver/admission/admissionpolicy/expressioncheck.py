"""CEL expressions of admission objects compiled when the objects are written, as upstream's
validation compiles them: a ValidatingAdmissionPolicy's validations, message expressions,
match conditions, variables and audit annotations, and the match conditions of each webhook of a
Validating- or MutatingWebhookConfiguration. One that does not compile is refused with a 422
naming its field (``spec.validations[0].expression: Invalid value: "...": compilation failed:
...``). The registry's kind rules cannot import the CEL engine, so the server adds this check to
the kinds' strategies (``with_compiled_expressions``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from kubeloop.api import fielderrors
from kubeloop.apiserver.auth import celauthorizer
from kubeloop.apiserver.cel import rules as celrules
from kubeloop.apiserver.registry.strategies import BuiltinStrategy, Strategy
from kubeloop.errors import StatusCause

#: The kinds whose expressions are compiled on write, by plural.
KINDS = ("validatingadmissionpolicies", "validatingwebhookconfigurations", "mutatingwebhookconfigurations")


def compilation_causes(obj: Mapping[str, Any]) -> list[StatusCause]:
    """A cause for each expression of ``obj`` that does not compile."""
    causes = []
    for path, source in _expressions(obj):
        try:
            celrules.compile_expression(source, extra=celauthorizer.NAMES)
        except ValueError as error:
            causes.append(fielderrors.invalid(path, source, f"compilation failed: {error}"))
    return causes


def _expressions(obj: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        for field, key in (
            ("validations", "expression"),
            ("validations", "messageExpression"),
            ("matchConditions", "expression"),
            ("variables", "expression"),
            ("auditAnnotations", "valueExpression"),
        ):
            yield from _listed(spec.get(field), f"spec.{field}", key)
    for index, hook in enumerate(obj.get("webhooks") or ()):
        if isinstance(hook, Mapping):
            yield from _listed(
                hook.get("matchConditions"), f"webhooks[{index}].matchConditions", "expression"
            )


def _listed(items: Any, path: str, key: str) -> Iterator[tuple[str, str]]:
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, Mapping) and isinstance(item.get(key), str) and item[key]:
            yield f"{path}[{index}].{key}", item[key]


def with_compiled_expressions(strategy: Strategy) -> Strategy:
    """``strategy`` (a built-in kind's) whose validation also compiles the object's expressions."""
    if not isinstance(strategy, BuiltinStrategy):
        raise TypeError(f"{strategy.resource.plural} is not a built-in kind")
    rules = strategy.kind.rules

    def checked(obj: Mapping[str, Any]) -> list[StatusCause]:
        return [*(rules(obj) if rules is not None else []), *compilation_causes(obj)]

    return BuiltinStrategy(strategy.resource, dataclasses.replace(strategy.kind, rules=checked))
