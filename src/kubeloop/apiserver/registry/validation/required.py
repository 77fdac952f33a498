"""Fields the OpenAPI schema lists as required that are missing, null, "" or [] — the 422 causes
Go's zero values make upstream report — walked with the decoding plans.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from kubeloop.apiserver.decoding.typed import (
    ARRAY,
    BOOL,
    MAP,
    STRUCT,
    Plan,
    root_plan,
    schema_kind,
)
from kubeloop.apiserver.registry.validation.causes import required
from kubeloop.errors import StatusCause

__all__ = ["validate_required"]


def validate_required(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[StatusCause]:
    """Fields the schema lists as ``required`` that are missing, ``null``, ``""`` or ``[]``.

    Required struct-valued fields are Go values, never "missing": their own required fields are
    checked inside an empty object instead. ``status`` is not checked (the server resets it), nor
    are required booleans (false is a value).
    """
    plan = _root_plan_of(schema)
    causes: list[StatusCause] = []
    if plan.kind == STRUCT and isinstance(obj, dict):
        with contextlib.suppress(RecursionError):  # what was found up to there stands
            _required_struct(obj, plan, "", causes, top=True)
    return causes


#: Each schema's root plan by the schema's id (the entry holds the schema, so its id stays its
#: own): every write of a kind asks with the same schema.
_ROOT_PLANS: dict[int, tuple[Mapping[str, Any], Plan]] = {}


def _root_plan_of(schema: Mapping[str, Any]) -> Plan:
    cached = _ROOT_PLANS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    kind, version = schema_kind(schema)
    plan = root_plan(schema, kind, version)
    if len(_ROOT_PLANS) >= 512:
        _ROOT_PLANS.clear()
    _ROOT_PLANS[id(schema)] = (schema, plan)
    return plan


_NEEDS_REQUIRED: dict[int, tuple[Plan, bool]] = {}


def _needs_required(plan: Plan) -> bool:
    """Whether any plan reachable from this one lists required fields (cached per plan)."""
    cached = _NEEDS_REQUIRED.get(id(plan))
    if cached is not None and cached[0] is plan:
        return cached[1]
    seen = {id(plan)}
    stack = [plan]
    found = False
    while stack and not found:
        current = stack.pop()
        if current.kind == STRUCT and current.required:
            found = True
            break
        children = list(current.props.values())
        if current.elem is not None:
            children.append(current.elem)
        for child in children:
            if id(child) not in seen and child.kind in (STRUCT, ARRAY, MAP):
                seen.add(id(child))
                stack.append(child)
    _NEEDS_REQUIRED[id(plan)] = (plan, found)
    return found


#: Fields the schema lists as required (Go's field has no ``omitempty``) that no upstream rule
#: asks a value of (a kubelet registers its CSINode with no drivers, a LimitRange may list no
#: limits), or whose absence the kind's own rules report in upstream's words (a rule with no
#: verbs; a roleRef or subject with no kind is an unsupported value, not a missing one).
_NOT_REQUIRED_UPSTREAM = frozenset(
    {
        ("io.k8s.api.storage.v1.CSINodeSpec", "drivers"),
        ("io.k8s.api.core.v1.LimitRangeSpec", "limits"),
        ("io.k8s.api.rbac.v1.PolicyRule", "verbs"),
        ("io.k8s.api.rbac.v1.RoleRef", "apiGroup"),
        ("io.k8s.api.rbac.v1.RoleRef", "kind"),
        ("io.k8s.api.rbac.v1.Subject", "kind"),
    }
)


def _required_struct(
    value: dict[str, Any], plan: Plan, path: str, causes: list[StatusCause], *, top: bool
) -> None:
    checks = plan.checks
    if checks is None:
        checks = plan.checks = _checks(plan)
    for name, sub, struct in checks:
        item = value.get(name)
        if struct:
            if item is None:
                _required_struct({}, sub, f"{path}.{name}" if path else name, causes, top=False)
        elif item is None or item == "" or item == []:
            causes.append(required(f"{path}.{name}" if path else name))
    walk = plan.walk
    if walk is None:
        walk = plan.walk = {
            name: sub
            for name, sub in plan.props.items()
            if sub.kind in (STRUCT, ARRAY, MAP) and _needs_required(sub)
        }
    for name, sub in walk.items():
        item = value.get(name)
        if item is None or (top and name == "status"):
            continue
        _required_value(item, sub, f"{path}.{name}" if path else name, causes)


def _checks(plan: Plan) -> tuple[tuple[str, Plan, bool], ...]:
    """The required fields of ``plan`` to check, in order, with their plans and whether each is
    a struct: not booleans (false is a value), nor those upstream asks no value of."""
    props = plan.props
    return tuple(
        (name, props[name], props[name].kind == STRUCT)
        for name in plan.required
        if props[name].kind == STRUCT
        or not (props[name].kind == BOOL or (plan.definition, name) in _NOT_REQUIRED_UPSTREAM)
    )


def _required_value(item: Any, plan: Plan, path: str, causes: list[StatusCause]) -> None:
    kind = plan.kind
    if kind == STRUCT:
        if isinstance(item, dict):
            _required_struct(item, plan, path, causes, top=False)
        return
    elem = plan.elem
    if elem is None or elem.kind not in (STRUCT, ARRAY, MAP):
        return
    if kind == ARRAY and isinstance(item, list):
        for index, sub in enumerate(item):
            _required_value(sub, elem, f"{path}[{index}]", causes)
    elif kind == MAP and isinstance(item, dict):
        for key, sub in item.items():
            _required_value(sub, elem, f"{path}[{key}]", causes)
