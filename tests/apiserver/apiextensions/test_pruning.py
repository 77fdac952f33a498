"""Pruning: what a custom resource's schema does not specify is dropped, in place, and named as
strict decoding names it; checked against a plain model of upstream's rules."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.apiextensions import structural

_KEYS = st.sampled_from(["a", "b", "spec", "x.y", "apiVersion", "kind", "metadata"])
_DECLARED = _KEYS.filter(lambda key: key not in ("apiVersion", "kind", "metadata"))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=2))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=16,
)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "boolean"])})

    def grown(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        struct = st.fixed_dictionaries(
            {"type": st.just("object")},
            optional={
                "properties": st.dictionaries(_DECLARED, inner, max_size=3),
                "x-kubernetes-preserve-unknown-fields": st.just(True),
                "x-kubernetes-embedded-resource": st.just(True),
            },
        )
        mapping = st.fixed_dictionaries({"type": st.just("object"), "additionalProperties": inner})
        array = st.fixed_dictionaries({"type": st.just("array"), "items": inner})
        return st.one_of(struct, mapping, array)

    fields = st.recursive(leaf, grown, max_leaves=8)
    return st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(_DECLARED, fields, max_size=3)},
        optional={"x-kubernetes-preserve-unknown-fields": st.just(True)},
    )


def _model(value: Any, schema: dict[str, Any], path: str, root: bool) -> tuple[Any, list[str]]:
    """The pruned value and the dropped paths, in the order the value's keys come."""
    if isinstance(value, dict):
        keep_meta = root or bool(schema.get("x-kubernetes-embedded-resource"))
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        dropped: list[str] = []
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if keep_meta and key in ("apiVersion", "kind", "metadata"):
                out[key] = item
            elif key in properties or isinstance(additional, dict):
                sub = properties.get(key, additional)
                out[key], below = _model(item, sub, child, False)
                dropped.extend(below)
            elif schema.get("x-kubernetes-preserve-unknown-fields"):
                out[key] = item
            else:
                dropped.append(child)
        return out, dropped
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        pruned = [_model(item, schema["items"], f"{path}[{i}]", False) for i, item in enumerate(value)]
        return [item for item, _ in pruned], [path for _, below in pruned for path in below]
    return value, []


@settings(max_examples=400)
@given(schema=_schemas(), value=_VALUES, root=st.booleans())
def test_pruning_drops_and_names_what_the_schema_does_not_specify(
    schema: dict[str, Any], value: Any, root: bool
) -> None:
    try:
        node = structural.compile_schema(schema, "schema", check_rule_types=False)
    except structural.SchemaError:
        assume(False)  # not a structural schema (an embedded resource without properties, say)
        raise
    expected, expected_dropped = _model(copy.deepcopy(value), schema, "", root)
    pruned = copy.deepcopy(value)
    assert structural.prune(pruned, node, "", root=root) == expected_dropped
    assert pruned == expected
    assert structural.prune(pruned, node, "", root=root) == []  # nothing is left to drop
