"""Label selectors in objects (``metav1.LabelSelector``): their validation, and the Go form a
selector is rendered in when a message shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.api import naming
from kubeloop.apiserver.registry.validation.causes import (
    GoStruct,
    as_dict,
    as_list,
    as_text,
    forbidden,
    invalid,
    required,
)
from kubeloop.apiserver.registry.validation.objectmeta import validate_labels
from kubeloop.errors import StatusCause

__all__ = ["Selector", "go_label_selector", "validate_label_selector"]


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_label_selector(selector: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidateLabelSelector`` (strict: label values in selectors must be valid).

    A missing ``operator`` or ``key`` is left to :func:`validate_required` (the schema requires
    both), so the two never report the same field twice.
    """
    causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for index, expr in enumerate(as_list(selector.get("matchExpressions"))):
        expr = as_dict(expr)
        at = f"{path}.matchExpressions[{index}]"
        operator = expr.get("operator")
        values = as_list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(
                    required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(
                    forbidden(
                        f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    )
                )
        elif operator:  # a missing operator or key is validate_required's "Required value"
            causes.append(invalid(f"{at}.operator", as_text(operator), "not a valid selector operator"))
        key = as_text(expr.get("key"))
        if key:
            causes.extend(invalid(f"{at}.key", key, msg) for msg in naming.qualified_name_errors(key))
        for value_index, value in enumerate(values):
            text = as_text(value)
            causes.extend(
                invalid(f"{at}.values[{value_index}]", text, msg) for msg in naming.label_value_errors(text)
            )
    return causes


class Selector:
    """labels.Selector from metav1.LabelSelectorAsSelector: nil matches nothing, {} everything."""

    def __init__(self, selector: Any) -> None:
        self.nothing = selector is None
        self.valid = True
        self.match_labels: dict[str, Any] = {}
        self.expressions: list[tuple[str, str, list[str]]] = []
        if self.nothing:
            return
        selector = as_dict(selector)
        self.match_labels = as_dict(selector.get("matchLabels"))
        for key, value in self.match_labels.items():
            if naming.qualified_name_errors(key) or naming.label_value_errors(as_text(value)):
                self.valid = False
        for expr in as_list(selector.get("matchExpressions")):
            expr = as_dict(expr)
            operator, key = as_text(expr.get("operator")), as_text(expr.get("key"))
            values = [as_text(v) for v in as_list(expr.get("values"))]
            if (
                operator not in _SELECTOR_OPERATORS
                or naming.qualified_name_errors(key)
                or (operator in ("In", "NotIn")) != bool(values)
                or any(naming.label_value_errors(v) for v in values)
            ):
                self.valid = False
            self.expressions.append((operator, key, values))

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, Any]) -> bool:
        if self.nothing:
            return False
        for key, value in self.match_labels.items():
            if key not in labels or labels[key] != value:
                return False
        for operator, key, values in self.expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


def go_label_selector(selector: Any) -> Any:
    """A ``*metav1.LabelSelector`` as json.Marshal prints it."""
    if not isinstance(selector, dict):
        return None
    shown = GoStruct()
    if selector.get("matchLabels"):
        shown["matchLabels"] = dict(sorted(as_dict(selector["matchLabels"]).items()))
    if selector.get("matchExpressions"):
        shown["matchExpressions"] = [
            GoStruct(
                [("key", as_dict(expr).get("key")), ("operator", as_dict(expr).get("operator"))]
                + ([("values", as_dict(expr)["values"])] if as_dict(expr).get("values") else [])
            )
            for expr in as_list(selector["matchExpressions"])
        ]
    return shown
