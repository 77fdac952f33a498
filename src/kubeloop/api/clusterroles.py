"""ClusterRole aggregation on plain objects: which roles an aggregating ClusterRole selects, and
the rules it holds for them, as upstream's aggregation controller computes them. The server's
bootstrap roles are written with them, and the controller
(:mod:`kubeloop.controllermanager.clusterroleaggregation`) keeps them so."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj


def aggregation_selectors(role: Mapping[str, Any]) -> list[Any]:
    """The ``clusterRoleSelectors`` of a ClusterRole's ``aggregationRule`` (none: not aggregating)."""
    return list((role.get("aggregationRule") or {}).get("clusterRoleSelectors") or ())


def aggregated_rules(role: Mapping[str, Any], roles: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The rules an aggregating ClusterRole holds, as upstream's aggregation controller computes
    them: selector by selector, the rules of the matching ``roles`` other than itself, taken in
    name order, each rule once. Raises ``InvalidSelector`` for a selector that cannot match."""
    name = (role.get("metadata") or {}).get("name")
    by_name = sorted(roles, key=lambda other: str((other.get("metadata") or {}).get("name") or ""))
    rules: list[Obj] = []
    for selector in aggregation_selectors(role):
        if not isinstance(selector, Mapping):
            continue
        matcher = LabelSelector.from_label_selector_dict(selector)
        for other in by_name:
            meta = other.get("metadata") or {}
            if meta.get("name") == name or not matcher.matches(meta.get("labels") or {}):
                continue
            for rule in _rules(other):
                if rule not in rules:
                    rules.append(rule)
    return rules


def _rules(role: Mapping[str, Any]) -> list[Obj]:
    return [rule for rule in role.get("rules") or () if isinstance(rule, dict)]
