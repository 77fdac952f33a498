"""Structural schemas of custom resources, compiled once and applied to every write.

A CustomResourceDefinition version's ``openAPIV3Schema`` is checked for being *structural*
(upstream's ``apiextensions-apiserver/pkg/apiserver/schema``: every node has a type unless it is
int-or-string or preserves unknown fields, no ``$ref``, ``additionalProperties`` and
``properties`` not together, only ``name``/``generateName`` under the root's ``metadata``) and
compiled into a tree of :class:`Node`s — types, bounds and compiled patterns resolved once —
which then prunes unknown fields, drops nulls where the schema does not allow them, fills
defaults and validates, with upstream's messages and one cause per violated field path.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import copy
import datetime
import math
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import re2

from kubeloop.api import naming
from kubeloop.api.fielderrors import json_type
from kubeloop.api.naming import go_quote
from kubeloop.apiserver.cel import rules as celrules
from kubeloop.errors import StatusCause

_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_MISSING: Any = object()
#: Schema keys the compiler reads; anything else is an error only where upstream forbids it.
_FORBIDDEN = ("$ref", "$schema", "id", "definitions", "dependencies", "patternProperties")


class SchemaError(Exception):
    """A schema is not structural or not valid; carries one cause per problem."""

    def __init__(self, causes: list[StatusCause]) -> None:
        super().__init__("; ".join(f"{c.field}: {c.message}" for c in causes))
        self.causes = causes


@dataclass
class Node:
    """One compiled schema node."""

    type: str = ""
    description: str = ""
    nullable: bool = False
    int_or_string: bool = False
    preserve_unknown: bool = False
    embedded_resource: bool = False
    properties: dict[str, Node] = field(default_factory=dict)
    additional: Node | None = None
    #: additionalProperties: true (any value is kept).
    additional_any: bool = False
    items: Node | None = None
    required: tuple[str, ...] = ()
    enum: list[Any] | None = None
    default: Any = _MISSING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    #: The compiled RE2 pattern (``re2._Regexp``; the binding has no type hints).
    pattern: Any = None
    pattern_text: str = ""
    format: str = ""
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int | None = None
    max_properties: int | None = None
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    #: CEL rules (x-kubernetes-validations) of this node, and whether any node below has some.
    rules: tuple[celrules.CompiledRule, ...] = ()
    rules_below: bool = False
    #: The exact Python types of the values that are valid here by their type alone: a scalar
    #: node without bounds, length, pattern, format or enum (most fields), whose values need no
    #: further look (set when compiled; a node made otherwise checks every value).
    plain_scalars: frozenset[builtins.type] = frozenset()
    #: Whether an object here needs only its members and properties checked (an object node,
    #: or an untyped one, without enum: set when compiled).
    plain_object: bool = False
    #: The source node (OpenAPI publishing and field management read it).
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING


# --------------------------------------------------------------------------- compiling


def compile_schema(schema: Any, path: str, *, check_rule_types: bool = True) -> Node:
    """Check that ``schema`` is a structural schema and compile it; :class:`SchemaError` lists
    every problem with its field path (``path`` names the schema's own place in the CRD).
    ``check_rule_types=False`` skips the static type check of its CEL rules (a stored CRD,
    written before that check, is served as it was accepted)."""
    causes: list[StatusCause] = []
    if not isinstance(schema, Mapping):
        raise SchemaError([StatusCause("FieldValueRequired", "Required value: schemas are required", path)])
    node = _compile(schema, path, causes, root=True, under_metadata=False, check_rule_types=check_rule_types)
    if schema.get("type") != "object":
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                f"Invalid value: {go_quote(str(schema.get('type', '')))}: must be object at the root",
                f"{path}.type",
            )
        )
    metadata = (
        schema.get("properties", {}).get("metadata")
        if isinstance(schema.get("properties"), Mapping)
        else None
    )
    if isinstance(metadata, Mapping):
        for key in metadata:
            if key not in ("type", "properties", "description"):
                causes.append(
                    StatusCause(
                        "FieldValueForbidden",
                        "Forbidden: must not be specified at the root's metadata",
                        f"{path}.properties[metadata].{key}",
                    )
                )
        for name in metadata.get("properties") or {}:
            if name not in ("name", "generateName"):
                causes.append(
                    StatusCause(
                        "FieldValueForbidden",
                        "Forbidden: only name and generateName may be specified under metadata",
                        f"{path}.properties[metadata].properties[{name}]",
                    )
                )
    if causes:
        raise SchemaError(causes)
    return node


def _compile(
    schema: Mapping[str, Any],
    path: str,
    causes: list[StatusCause],
    *,
    root: bool,
    under_metadata: bool,
    correlatable: bool = True,
    check_rule_types: bool = True,
) -> Node:
    for key in _FORBIDDEN:
        if key in schema:
            causes.append(StatusCause("FieldValueForbidden", "Forbidden: must not be used", f"{path}.{key}"))
    node = Node(source=schema)
    type_ = schema.get("type", "")
    node.int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    node.preserve_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    node.embedded_resource = bool(schema.get("x-kubernetes-embedded-resource"))
    if type_:
        if type_ not in _TYPES:
            causes.append(
                StatusCause(
                    "FieldValueNotSupported",
                    f'Unsupported value: {go_quote(str(type_))}: supported values: "array", "boolean", '
                    '"integer", "number", "object", "string"',
                    f"{path}.type",
                )
            )
        node.type = str(type_)
    elif not node.int_or_string and not node.preserve_unknown:
        causes.append(
            StatusCause(
                "FieldValueRequired",
                "Required value: must not be empty for specified object fields",
                f"{path}.type",
            )
        )
    if node.int_or_string and type_:
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                "Invalid value: must be empty if x-kubernetes-int-or-string is true",
                f"{path}.type",
            )
        )
    if node.embedded_resource and type_ != "object":
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                "Invalid value: must be object if x-kubernetes-embedded-resource is true",
                f"{path}.type",
            )
        )
    node.description = str(schema.get("description") or "")
    node.nullable = bool(schema.get("nullable"))
    node.format = str(schema.get("format") or "")
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            if not isinstance(sub, Mapping):
                causes.append(
                    StatusCause(
                        "FieldValueInvalid", "Invalid value: must be an object", f"{path}.properties[{name}]"
                    )
                )
                continue
            node.properties[str(name)] = _compile(
                sub,
                f"{path}.properties[{name}]",
                causes,
                root=False,
                under_metadata=root and name == "metadata",
                correlatable=correlatable,
                check_rule_types=check_rule_types,
            )
    additional = schema.get("additionalProperties")
    if additional is not None:
        # Upstream forbids the pair when additionalProperties is false or a schema; ``true``
        # beside properties keeps unknown fields (Allows without a Schema).
        if (
            isinstance(properties, Mapping)
            and properties
            and (additional is False or isinstance(additional, Mapping))
        ):
            causes.append(
                StatusCause(
                    "FieldValueForbidden",
                    "Forbidden: additionalProperties and properties are mutual exclusive",
                    f"{path}.additionalProperties",
                )
            )
        if isinstance(additional, Mapping):
            node.additional = _compile(
                additional,
                f"{path}.additionalProperties",
                causes,
                root=False,
                under_metadata=False,
                correlatable=correlatable,
                check_rule_types=check_rule_types,
            )
        elif additional is True:
            node.additional_any = True
    items = schema.get("items")
    if isinstance(items, Mapping):
        # Items of a map list are correlated with their old selves by key; others are not.
        node.items = _compile(
            items,
            f"{path}.items",
            causes,
            root=False,
            under_metadata=False,
            correlatable=correlatable and schema.get("x-kubernetes-list-type") == "map",
            check_rule_types=check_rule_types,
        )
    elif items is not None:
        causes.append(
            StatusCause(
                "FieldValueForbidden",
                "Forbidden: items must be a schema object and not an array",
                f"{path}.items",
            )
        )
    elif node.type == "array":
        causes.append(StatusCause("FieldValueRequired", "Required value: must be specified", f"{path}.items"))
    required = schema.get("required")
    if isinstance(required, list):
        node.required = tuple(str(r) for r in required)
    enum = schema.get("enum")
    if isinstance(enum, list):
        node.enum = list(enum)
    if "default" in schema:
        node.default = schema["default"]
    for key, attr in (("minimum", "minimum"), ("maximum", "maximum"), ("multipleOf", "multiple_of")):
        value = schema.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(node, attr, value)
    node.exclusive_minimum = bool(schema.get("exclusiveMinimum"))
    node.exclusive_maximum = bool(schema.get("exclusiveMaximum"))
    for key, attr in (
        ("minLength", "min_length"),
        ("maxLength", "max_length"),
        ("minItems", "min_items"),
        ("maxItems", "max_items"),
        ("minProperties", "min_properties"),
        ("maxProperties", "max_properties"),
    ):
        value = schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(node, attr, value)
    node.unique_items = bool(schema.get("uniqueItems"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            node.pattern = re2.compile(pattern)  # Go's regexp is RE2: linear time, its syntax
            node.pattern_text = pattern
        except re2.error as exc:
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(pattern)}: must be a valid regular expression: {exc}",
                    f"{path}.pattern",
                )
            )
    node.list_type = str(schema.get("x-kubernetes-list-type") or "")
    if node.list_type and node.list_type not in ("atomic", "set", "map"):
        causes.append(
            StatusCause(
                "FieldValueNotSupported",
                f'Unsupported value: {go_quote(node.list_type)}: supported values: "atomic", "map", "set"',
                f"{path}.x-kubernetes-list-type",
            )
        )
    keys = schema.get("x-kubernetes-list-map-keys")
    if isinstance(keys, list):
        node.list_map_keys = tuple(str(k) for k in keys)
    if node.list_type == "map" and not node.list_map_keys:
        causes.append(
            StatusCause(
                "FieldValueRequired",
                "Required value: must not be empty if x-kubernetes-list-type is map",
                f"{path}.x-kubernetes-list-map-keys",
            )
        )
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is not None and map_type not in ("atomic", "granular"):
        causes.append(
            StatusCause(
                "FieldValueNotSupported",
                f'Unsupported value: {go_quote(str(map_type))}: supported values: "atomic", "granular"',
                f"{path}.x-kubernetes-map-type",
            )
        )
    properties_schema = schema.get("properties")
    node.rules = celrules.compile_rules(
        schema,
        path,
        causes,
        properties=properties_schema if isinstance(properties_schema, Mapping) else {},
        correlatable=correlatable,
        root=root,
        check_types=check_rule_types,
    )
    children = [*node.properties.values(), node.additional, node.items]
    node.rules_below = bool(node.rules) or any(child is not None and child.rules_below for child in children)
    node.plain_scalars = _plain_scalars(node)
    node.plain_object = node.type in ("", "object") and not node.int_or_string and node.enum is None
    if node.list_type == "map" and node.items is not None:
        for key in node.list_map_keys:
            if key not in node.items.properties:
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(key)}: entries must all be names of item properties",
                        f"{path}.x-kubernetes-list-map-keys",
                    )
                )
    return node


# --------------------------------------------------------------------------- pruning, nulls, defaults


def prune(value: Any, node: Node, path: str = "", *, root: bool = True) -> list[str]:
    """Drop, in place, fields the schema does not specify (kept under
    ``x-kubernetes-preserve-unknown-fields``); at the root and in embedded resources
    ``apiVersion``, ``kind`` and ``metadata`` are kept. Returns the dropped paths as strict
    decoding names them (``spec.foo``)."""
    dropped: list[str] = []
    if isinstance(value, (dict, list)):
        _prune(value, node, path, root, dropped)
    return dropped


_RESOURCE_META = frozenset({"apiVersion", "kind", "metadata"})


def _prune(value: dict[str, Any] | list[Any], node: Node, path: str, root: bool, dropped: list[str]) -> None:
    """``prune`` of a container, the dropped paths appended to ``dropped`` in the order met.
    Scalars hold nothing to prune, and a path is written only for what is dropped or entered."""
    if isinstance(value, dict):
        keep_meta = root or node.embedded_resource
        properties, additional = node.properties, node.additional
        unknown: list[str] | None = None
        for key, item in value.items():
            if keep_meta and key in _RESOURCE_META:
                continue  # ObjectMeta's own rules apply to them, not the schema's
            sub = properties.get(key) or additional
            if sub is not None:
                if isinstance(item, (dict, list)):
                    _prune(item, sub, f"{path}.{key}" if path else key, False, dropped)
            elif not (node.preserve_unknown or node.additional_any):
                if unknown is None:
                    unknown = []
                unknown.append(key)
                dropped.append(f"{path}.{key}" if path else key)
        if unknown is not None:
            for key in unknown:
                del value[key]
    elif node.items is not None:
        items = node.items
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)):
                _prune(item, items, f"{path}[{index}]", False, dropped)


def default(value: Any, node: Node) -> None:
    """Fill defaults: a missing property with a default gets a copy of it, and so does a
    ``null`` one that is not nullable; other non-nullable ``null`` properties are dropped.

    ``value``'s own top level (the caller's object) is changed in place; what lies below it never
    is: a container a default changes is copied, and the copy takes its place in its parent
    (copy-on-write). An object being written shares parts with the stored one (a ``/status``
    write keeps the stored spec, an update the stored status) and may be defaulted by a schema
    newer than the one that judged those parts: the stored object is never changed under the store.
    """
    _defaulted(value, node, in_place=True)


_CONTAINERS = (dict, list)

#: Per node, what defaulting reads of it (``_defaulting``), kept with the node (a reused id is
#: told apart). Bounded: a CRD's schema is compiled anew at every write of the CRD.
_DEFAULTING: dict[int, tuple[Node, tuple[tuple[str, Node], ...], bool]] = {}
_DEFAULTING_MAX = 16_384


def _defaulting(node: Node) -> tuple[tuple[tuple[str, Node], ...], bool]:
    """The properties of ``node`` with a default, and whether nothing below a value of it can
    change (no properties, additionalProperties or items: an object's metadata, a free-form
    map). Read once per node rather than at every object defaulted."""
    found = _DEFAULTING.get(id(node))
    if found is not None and found[0] is node:
        return found[1], found[2]
    defaulted = tuple((key, sub) for key, sub in node.properties.items() if sub.has_default)
    inert = not node.properties and node.additional is None and node.items is None
    if len(_DEFAULTING) >= _DEFAULTING_MAX:
        _DEFAULTING.clear()
    _DEFAULTING[id(node)] = (node, defaulted, inert)
    return defaulted, inert


def _defaulted(value: Any, node: Node, *, in_place: bool = False) -> Any:
    """``value`` with the defaults of ``node`` filled (:func:`default`): ``value`` itself when
    nothing changes or ``in_place``, else a copy of it holding the changed members."""
    if isinstance(value, dict):
        out = value
        properties, additional = node.properties, node.additional
        nulls: list[tuple[str, Node]] | None = None
        # One walk over the members: the nulls a property may not hold, and the containers.
        for key, item in value.items():
            if item is None:
                sub = properties.get(key)
                if sub is not None and not sub.nullable:
                    if nulls is None:
                        nulls = []
                    nulls.append((key, sub))
                continue
            if not isinstance(item, _CONTAINERS):
                continue  # a scalar: nothing below it to default
            child = properties.get(key) or additional
            if child is not None and not _defaulting(child)[1]:
                changed = _defaulted(item, child)
                if changed is not item:
                    if out is value and not in_place:
                        out = dict(value)
                    out[key] = changed  # an existing key: the walk over ``value`` goes on
        if nulls is not None:
            if out is value and not in_place:
                out = dict(value)
            for key, sub in nulls:
                if sub.has_default:
                    out[key] = _defaulted(copy.deepcopy(sub.default), sub)
                else:
                    del out[key]
        for key, sub in _defaulting(node)[0]:
            if key not in value:
                if out is value and not in_place:
                    out = dict(value)
                out[key] = _defaulted(copy.deepcopy(sub.default), sub)
        return out
    if isinstance(value, list) and node.items is not None:
        out_list = value
        for index, item in enumerate(value):
            if isinstance(item, _CONTAINERS):
                changed = _defaulted(item, node.items)
                if changed is not item:
                    if out_list is value and not in_place:
                        out_list = list(value)
                    out_list[index] = changed
        return out_list
    return value


# --------------------------------------------------------------------------- validation


def validate(value: Any, node: Node, path: str = "") -> list[StatusCause]:
    """Every violation of the schema by ``value``, one cause per field path, with upstream's messages."""
    causes: list[StatusCause] = []
    _validate(value, node, path, causes)
    return causes


def check_rules(
    value: Any,
    node: Node,
    path: str = "",
    *,
    old: Any = _MISSING,
    transition_only: bool = False,
    budget: celrules.Budget | None = None,
    ratcheted: list[StatusCause] | None = None,
    unchanged: bool | None = None,
) -> list[StatusCause]:
    """The causes the CEL rules of ``node`` and the nodes below give ``value``. Without
    ``transition_only``, the rules that do not read oldSelf run; with it, the transition rules,
    against the correlated parts of ``old`` (None on a create: only those with optionalOldSelf).
    ``budget``: the object's runtime budget, when its rules are judged in several calls.

    ``ratcheted`` (an update's rules that do not read oldSelf, ``old`` given): a rule that fails
    at a value the update left as it was goes there, not into the causes, as upstream's
    ratcheting (since 1.30) makes it a warning: the value is unchanged when it is equal to its
    correlated old value (a map's member, a map list's item with the same keys) as
    :func:`unchanged_under` compares them, and a value with none (an atomic list's item, a
    member the old map lacked) is judged by its nearest correlated ancestor. ``unchanged``:
    whether ``value`` itself is, when the caller knows better (an object's rules see part of
    its metadata; upstream compares the whole objects)."""
    causes: list[StatusCause] = []
    budget = budget or celrules.Budget()
    if node.rules_below and budget.remaining > 0:
        if ratcheted is None or transition_only or old is _MISSING or old is None:
            unchanged = None
        elif unchanged is None:
            unchanged = unchanged_under(value, old, node)
        try:
            _check_rules(value, old, node, path, transition_only, budget, causes, ratcheted, unchanged)
        except celrules.RuleOverBudget:
            budget.remaining = 0  # its cause is in; no further rules run for this object
    return causes


def unchanged_under(value: Any, old: Any, node: Node | None) -> bool:
    """Whether ``value`` is its correlated ``old`` one as upstream's ratcheting decides
    (``CorrelatedObject.CachedDeepEqual``): maps member by member, and a map with a member the
    schema does not describe (kept by x-kubernetes-preserve-unknown-fields) is never unchanged;
    a map list item by item through its keys (in any order); other lists and scalars as Go's
    DeepEqual of decoded JSON (a 1 is not a 1.0)."""
    if value is None or old is None:
        return value is None and old is None
    if node is None:
        return False
    if isinstance(value, dict):
        if not isinstance(old, dict) or len(value) != len(old):
            return False
        for key, item in value.items():
            sub = node.properties.get(key) or node.additional
            if sub is None or key not in old or not unchanged_under(item, old[key], sub):
                return False
        return True
    if isinstance(value, list):
        if not isinstance(old, list) or len(value) != len(old):
            return False
        if node.list_type != "map" or node.items is None:
            return equal_values(value, old)
        olds = correlated_items(value, old, node)
        return all(
            was is not _MISSING and unchanged_under(item, was, node.items)
            for item, was in zip(value, olds, strict=True)
        )
    if isinstance(old, (dict, list)):
        return False
    return equal_values(value, old)


def equal_values(value: Any, old: Any) -> bool:
    """Whether two JSON values are the same as upstream's ratcheting compares them (Go's
    DeepEqual of decoded JSON): a 1 is not a 1.0, nor a true; members in any order."""
    if value is old:
        return True
    try:
        return bool(orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == orjson.dumps(old, option=orjson.OPT_SORT_KEYS))
    except orjson.JSONEncodeError:
        return bool(value == old and type(value) is type(old))


def _check_rules(
    value: Any,
    old: Any,
    node: Node,
    path: str,
    transition_only: bool,
    budget: celrules.Budget,
    causes: list[StatusCause],
    ratcheted: list[StatusCause] | None = None,
    unchanged: bool | None = None,
) -> None:
    """``unchanged``: whether this value is as the update found it (None: not ratcheting, or
    nothing correlated above it)."""
    if value is None or not _type_matches(value, node):
        return  # rules judge present values of the right type (type errors block them upstream)
    has_old = old is not _MISSING and old is not None
    if node.rules:
        celrules.evaluate(
            node.rules,
            value,
            old if has_old else None,
            has_old=has_old,
            transition_only=transition_only,
            node_type=node.type,
            path=path,
            budget=budget,
            causes=causes,
            ratcheted=ratcheted if unchanged else None,
        )
    if isinstance(value, dict):
        old_map = old if has_old and isinstance(old, dict) else {}
        for key, item in value.items():
            sub = node.properties.get(key) or node.additional
            if sub is not None and sub.rules_below:
                old_item = old_map.get(key, _MISSING)
                if unchanged is None or (not path and key in ("apiVersion", "kind")):
                    below = None  # never ratcheted upstream: both sides are converted alike
                elif unchanged or old_item is _MISSING:
                    below = unchanged  # an equal map's members are equal; a new one: its map's
                else:
                    below = unchanged_under(item, old_item, sub)
                _check_rules(
                    item, old_item, sub, _join(path, key), transition_only, budget, causes, ratcheted, below
                )
    elif isinstance(value, list) and node.items is not None and node.items.rules_below:
        old_items = correlated_items(value, old if has_old else None, node)
        for index, item in enumerate(value):
            old_item = old_items[index]
            if unchanged is None or unchanged or old_item is _MISSING:
                below = unchanged  # uncorrelated items are judged by their list
            else:
                below = unchanged_under(item, old_item, node.items)
            _check_rules(
                item, old_item, node.items, f"{path}[{index}]", transition_only, budget, causes, ratcheted, below
            )


def correlated_items(value: list[Any], old: Any, node: Node) -> list[Any]:
    """Each new item's old self: the old item with the same keys in a map list, else none."""
    if node.list_type != "map" or not isinstance(old, list):
        return [_MISSING] * len(value)
    keys = node.list_map_keys

    def key_of(item: Any) -> Any:
        return tuple(_json(item.get(k)) for k in keys) if isinstance(item, dict) else None

    by_key = {key_of(item): item for item in old if isinstance(item, dict)}
    return [by_key.get(key_of(item), _MISSING) for item in value]


def _json(value: Any) -> str:
    if isinstance(value, str):
        return go_quote(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return _go_value(value)  # objects and arrays, as Go's %v prints them


def _go_value(value: Any) -> str:
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if isinstance(value, str):
        return value
    return _json(value)


def _name(path: str) -> str:
    return path or "<root>"


def _invalid(path: str, value: Any, detail: str) -> StatusCause:
    return StatusCause("FieldValueInvalid", f"Invalid value: {_json(value)}: {detail}", path)


#: The JSON type of a decoded value by its exact Python type; a float (a whole one is an
#: integer) and anything else are asked of ``json_type``. Every value validated or judged by a
#: rule is typed here: the lookup is a third of what ``json_type``'s isinstance chain costs.
_JSON_TYPES: dict[type, str] = {
    str: "string",
    dict: "object",
    list: "array",
    bool: "boolean",
    int: "integer",
    type(None): "null",
}


def _type_matches(value: Any, node: Node) -> bool:
    actual = _JSON_TYPES.get(type(value)) or json_type(value)
    if node.int_or_string:
        return actual in ("integer", "string")
    if not node.type:
        return True
    if node.type == "number":
        return actual in ("integer", "number")
    return actual == node.type


#: The Python types a scalar node without further checks accepts, by its type.
_TYPES_OF: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "boolean": frozenset({bool}),
    "integer": frozenset({int}),  # a whole float is an integer too: the full check says so
    "number": frozenset({int, float}),
}


def _plain_scalars(node: Node) -> frozenset[type]:
    if (
        node.enum is not None
        or node.maximum is not None
        or node.minimum is not None
        or node.multiple_of
        or node.format
        or node.max_length is not None
        or node.min_length is not None
        or node.pattern is not None
    ):
        return frozenset()
    if node.int_or_string:
        return frozenset({int, str})
    return _TYPES_OF.get(node.type, frozenset())


def _validate(value: Any, node: Node, path: str, causes: list[StatusCause]) -> None:
    kind = type(value)
    if kind in node.plain_scalars:
        return
    if kind is dict and node.plain_object:  # what the checks below come to for an object
        _validate_object(value, node, path, causes)
        return
    if value is None:
        if not node.nullable and (node.type or node.int_or_string):
            expected = node.type or "integer,string"
            causes.append(
                StatusCause(
                    "FieldValueTypeInvalid",
                    f'Invalid value: "null": {_name(path)} in body must be of type {expected}: "null"',
                    path,
                )
            )
        return
    if not _type_matches(value, node):
        expected = "integer,string" if node.int_or_string else node.type
        causes.append(
            StatusCause(
                "FieldValueTypeInvalid",
                f'Invalid value: "{json_type(value)}": {_name(path)} in body must be of type {expected}: '
                f'"{json_type(value)}"',
                path,
            )
        )
        return
    if node.enum is not None and value not in node.enum:
        supported = ", ".join(_json(v) for v in node.enum)
        causes.append(
            StatusCause(
                "FieldValueNotSupported",
                f"Unsupported value: {_json(value)}: supported values: {supported}",
                path,
            )
        )
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        _validate_number(value, node, path, causes)
    elif isinstance(value, str):
        _validate_string(value, node, path, causes)
    elif isinstance(value, list):
        _validate_array(value, node, path, causes)
    elif isinstance(value, dict):
        _validate_object(value, node, path, causes)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _validate_number(value: float, node: Node, path: str, causes: list[StatusCause]) -> None:
    name = _name(path)
    if node.maximum is not None:
        if node.exclusive_maximum and value >= node.maximum:
            causes.append(
                _invalid(path, value, f"{name} in body should be less than {_number(node.maximum)}")
            )
        elif value > node.maximum:
            causes.append(
                _invalid(
                    path, value, f"{name} in body should be less than or equal to {_number(node.maximum)}"
                )
            )
    if node.minimum is not None:
        if node.exclusive_minimum and value <= node.minimum:
            causes.append(
                _invalid(path, value, f"{name} in body should be greater than {_number(node.minimum)}")
            )
        elif value < node.minimum:
            causes.append(
                _invalid(
                    path, value, f"{name} in body should be greater than or equal to {_number(node.minimum)}"
                )
            )
    if node.multiple_of:
        quotient = value / node.multiple_of
        if not math.isclose(quotient, round(quotient)):
            causes.append(
                _invalid(path, value, f"{name} in body should be a multiple of {_number(node.multiple_of)}")
            )
    if node.format in ("int32", "int64") and isinstance(value, int):
        bits = 31 if node.format == "int32" else 63
        if not -(2**bits) <= value < 2**bits:
            causes.append(
                _invalid(path, value, f"{name} in body must be of type {node.format}: {_json(value)}")
            )


def _validate_string(value: str, node: Node, path: str, causes: list[StatusCause]) -> None:
    name = _name(path)
    length = len(value)
    if node.max_length is not None and length > node.max_length:
        causes.append(
            StatusCause("FieldValueTooLong", f"Too long: may not be more than {node.max_length} bytes", path)
        )
    if node.min_length is not None and length < node.min_length:
        causes.append(
            _invalid(path, value, f"{name} in body should be at least {node.min_length} chars long")
        )
    if node.pattern is not None and node.pattern.search(value) is None:
        causes.append(_invalid(path, value, f"{name} in body should match '{node.pattern_text}'"))
    if node.format and not node.int_or_string:
        checker = _FORMATS.get(node.format)
        if checker is not None and not checker(value):
            causes.append(
                _invalid(path, value, f"{name} in body must be of type {node.format}: {go_quote(value)}")
            )


def _validate_array(value: list[Any], node: Node, path: str, causes: list[StatusCause]) -> None:
    if node.max_items is not None and len(value) > node.max_items:
        causes.append(
            StatusCause(
                "FieldValueTooMany", f"Too many: {len(value)}: must have at most {node.max_items} items", path
            )
        )
    if node.min_items is not None and len(value) < node.min_items:
        causes.append(_invalid(path, value, f"{_name(path)} in body should have at least {node.min_items} items"))
    if node.list_type == "set" or node.unique_items:
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                causes.append(
                    StatusCause("FieldValueDuplicate", f"Duplicate value: {_json(item)}", f"{path}[{index}]")
                )
            else:
                seen.append(item)
    elif node.list_type == "map":
        keys_seen: set[tuple[str, ...]] = set()
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = tuple(repr(item.get(k)) for k in node.list_map_keys)
            if key in keys_seen:
                shown = ", ".join(f"{go_quote(k)}:{_json(item.get(k))}" for k in node.list_map_keys)
                causes.append(
                    StatusCause("FieldValueDuplicate", f"Duplicate value: map[{shown}]", f"{path}[{index}]")
                )
            keys_seen.add(key)
    items = node.items
    if items is not None:
        plain = items.plain_scalars
        for index, item in enumerate(value):
            if type(item) not in plain:
                _validate(item, items, f"{path}[{index}]", causes)


def _validate_object(value: dict[str, Any], node: Node, path: str, causes: list[StatusCause]) -> None:
    if node.max_properties is not None and len(value) > node.max_properties:
        causes.append(
            StatusCause(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {node.max_properties} items",
                path,
            )
        )
    if node.min_properties is not None and len(value) < node.min_properties:
        causes.append(
            _invalid(path, value, f"{_name(path)} in body should have at least {node.min_properties} properties")
        )
    for required in node.required:
        if required not in value:
            causes.append(StatusCause("FieldValueRequired", "Required value", _join(path, required)))
    properties, additional = node.properties, node.additional
    for key, item in value.items():
        sub = properties.get(key) or additional
        if sub is not None and type(item) not in sub.plain_scalars:  # no call, no path for those
            _validate(item, sub, _join(path, key), causes)
    if node.embedded_resource:
        causes.extend(_embedded(value, path))


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
#: Whether a key is written ``.key`` (else ``[key]``) in a field path, for keys met before: the
#: schema's property names, mostly. Bounded: a map's keys are the user's.
_PLAIN_KEYS: dict[str, bool] = {}
_PLAIN_KEYS_MAX = 4096


def _join(path: str, key: str) -> str:
    plain = _PLAIN_KEYS.get(key)
    if plain is None:
        plain = _PLAIN_KEY.fullmatch(key) is not None
        if len(_PLAIN_KEYS) < _PLAIN_KEYS_MAX:
            _PLAIN_KEYS[key] = plain
    if plain:
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def _embedded(value: dict[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    for key in ("apiVersion", "kind"):
        if not value.get(key):
            causes.append(
                StatusCause("FieldValueRequired", "Required value: must not be empty", _join(path, key))
            )
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        name = metadata.get("name")
        if isinstance(name, str) and name:
            for problem in naming.dns1123_subdomain_errors(name):
                causes.append(_invalid(_join(_join(path, "metadata"), "name"), name, problem))
    return causes


# --------------------------------------------------------------------------- formats


def _date_time(text: str) -> bool:
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in text.upper() or " " in text


def _date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


_DURATION = re.compile(r"^([-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h|d|w))+|0)$")


def _byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == 36


_FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time,
    "datetime": _date_time,
    "date": _date,
    "duration": lambda text: _DURATION.match(text) is not None,
    "byte": _byte,
    "uuid": _uuid,
    "hostname": lambda text: not naming.dns1123_subdomain_errors(text),
    "ipv4": lambda text: (
        re.fullmatch(r"(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}", text) is not None
    ),
    "email": lambda text: re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", text) is not None,
}
