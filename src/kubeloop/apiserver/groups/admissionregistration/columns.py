"""admissionregistration.k8s.io kinds' columns: webhook configurations, admission policies and
their bindings.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from kubeloop.apiserver.printing.cells import (
    Cell,
    Column,
    Obj,
    age_column,
    count_column,
    list_at,
    map_at,
    name_column,
    text_at,
)


def webhook_columns() -> list[Column]:
    return [
        name_column(),
        count_column(
            "Webhooks",
            "webhooks",
            "Webhooks indicates the number of webhooks registered in this configuration",
        ),
        age_column(),
    ]


def _param_kind(obj: Obj, now: datetime.datetime) -> Cell:
    kind = map_at(obj, "spec.paramKind")
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}" if kind else "<unset>"


def admission_policy_columns(title: str, path: str, description: str) -> Callable[[], list[Column]]:
    def columns() -> list[Column]:
        return [
            name_column(),
            count_column(title, path, description),
            Column(
                "ParamKind",
                "string",
                _param_kind,
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            age_column(),
        ]

    return columns


def _go_label_selector(selector: Mapping[str, Any]) -> str:
    """The generated ``LabelSelector.String()`` of Go."""
    labels = map_at(selector, "matchLabels")
    label_text = "".join(f"{key}: {labels[key]}," for key in sorted(labels))
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(str(v) for v in e.get('values') or ())}],}},"
        for e in list_at(selector, "matchExpressions")
        if isinstance(e, Mapping)
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{label_text}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )


def _param_ref(obj: Obj, now: datetime.datetime) -> Cell:
    ref = map_at(obj, "spec.paramRef")
    if not ref:
        return "<unset>"
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if isinstance(ref.get("selector"), Mapping):
        return _go_label_selector(ref["selector"])
    return "<unset>"


def policy_binding_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "PolicyName",
            "string",
            lambda o, n: text_at(o, "spec.policyName"),
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        Column(
            "ParamRef",
            "string",
            _param_ref,
            "ParamRef indicates the param resource which sets the configuration param",
        ),
        age_column(),
    ]


validating_admission_policy_columns = admission_policy_columns(
    "Validations",
    "spec.validations",
    "Validations indicates the number of validation rules defined in this configuration",
)
mutating_admission_policy_columns = admission_policy_columns(
    "Mutations",
    "spec.mutations",
    "Mutation indicates the number of mutations rules defined in this configuration",
)
