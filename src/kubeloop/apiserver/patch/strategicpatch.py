"""Strategic merge patch, the ``application/strategic-merge-patch+json`` PATCH body of built-in kinds.

A strategic merge patch is a JSON merge patch (objects merge, ``null`` deletes) that knows, from
the kind's OpenAPI schema, how to merge lists: a list whose field says
``x-kubernetes-patch-strategy: merge`` is merged element by element — by its
``x-kubernetes-patch-merge-key`` for lists of objects (containers by ``name``, ports by
``containerPort``, owner references by ``uid``), as a set union for lists of scalars
(finalizers) — and every other list is replaced. Semantics follow upstream
(kubernetes/apimachinery ``pkg/util/strategicpatch``, applied server side), including its
directives:

``$patch: replace``
    in an object: the object becomes the patch's content; as a list element: the list becomes
    the patch's other elements.
``$patch: delete``
    in an object: the object is emptied (``{}``, as upstream; at a member the original lacks, the
    member is not created); as an element of a merged list of objects: the elements with that
    merge key are removed.
``$patch: merge``
    the default; accepted and ignored.
``$retainKeys: [names]``
    members of the original object not listed are dropped before merging (every member the patch
    sets must be listed).
``$setElementOrder/<field>: [...]``
    the order the merged list ends up in (items not listed keep their place relative to it).
``$deleteFromPrimitiveList/<field>: [...]``
    values removed from a list of scalars.

Ordering of a merged list (upstream's rule): elements the patch mentions appear in the patch's
order, the others keep their original relative order and are interleaved by their original
positions; an element the original did not have is never held back by the others, so a lone new
element goes first (kubectl sends ``$setElementOrder`` along, which settles the order).

A malformed patch (unknown ``$patch`` value, a directive that is not a list, an element without
its merge key, a value of the wrong type where the schema wants an object or a list) is a 400
``BadRequest`` naming the field; lists of lists are a 422, as upstream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeloop import errors
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.patch.mergepatch import copy_json

__all__ = ["accepts_strategic_merge", "apply_strategic_merge_patch"]

Schema = Mapping[str, Any]

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ELEMENT_ORDER = "$setElementOrder"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"


class _Omit:
    """Marker: a new member whose patch value is ``{"$patch": "delete"}`` is not created."""


_OMIT = _Omit()


@dataclass(frozen=True)
class _Field:
    """What the schema says about one member: its (resolved) node, list strategy and merge key."""

    node: Schema | None
    strategy: str = ""
    merge_key: str = ""

    @property
    def items(self) -> Schema | None:
        return schemas.items_schema(self.node) if self.node is not None else None


_UNKNOWN = _Field(None)


def accepts_strategic_merge(group: str, version: str, kind: str) -> bool:
    """Whether PATCH of this kind accepts a strategic merge patch (upstream has its schema)."""
    return schemas.kind_schema(group, version, kind) is not None


def apply_strategic_merge_patch(
    document: Mapping[str, Any], patch: Mapping[str, Any], schema: Schema | None
) -> dict[str, Any]:
    """Apply a strategic merge ``patch`` to ``document`` and return the result (a new object).

    ``schema`` is the kind's top-level schema node (``schemas.kind_schema``); with ``None`` no
    list is merged, which makes the patch a JSON merge patch that also understands directives.
    """
    if not isinstance(document, dict):
        raise errors.BadRequest("the object to patch is not a JSON object")
    if not isinstance(patch, dict):
        raise errors.BadRequest("a strategic merge patch must be a JSON object")
    try:
        node = schemas.resolve(schema) if schema is not None else None
        return _merge_map(copy_json(document), patch, node, "")
    except RecursionError:
        raise errors.BadRequest("the object or the strategic merge patch is nested too deeply") from None


# --- maps -------------------------------------------------------------------------------------


def _merge_map(
    original: dict[str, Any], patch: Mapping[str, Any], node: Schema | None, path: str
) -> dict[str, Any]:
    """Merge ``patch`` into ``original`` (a private copy, changed in place) and return the result."""
    if _PATCH in patch:
        directive = patch[_PATCH]
        if directive == "replace":
            return _merge_map({}, {k: v for k, v in patch.items() if k != _PATCH}, node, path)
        if directive == "delete":
            return {}
        if directive != "merge":
            raise _bad(path, f"unknown patch type {_show(directive)} (expected replace, delete or merge)")
    for key in patch:
        if not isinstance(key, str):
            raise _bad(path, f"member name {_show(key)} is not a string")
    if _RETAIN_KEYS in patch:
        _retain_keys(original, patch, path)
    handled = {_PATCH, _RETAIN_KEYS}
    for key, value in patch.items():
        if key.startswith(_SET_ELEMENT_ORDER):
            name = _directive_target(key, _SET_ELEMENT_ORDER, "setElementOrder list", path)
            _set_element_order(original, patch, name, value, _field(node, name), _join(path, name))
            handled.update((key, name))
    for key, value in patch.items():
        if key in handled:
            continue
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            name = _directive_target(key, _DELETE_FROM_PRIMITIVE_LIST, "primitive list", path)
            _delete_from_primitive_list(original, name, value, _join(path, name))
        else:
            _merge_member(original, key, value, _field(node, key), _join(path, key))
    return original


def _merge_member(original: dict[str, Any], key: str, value: Any, field: _Field, path: str) -> None:
    if value is None:
        original.pop(key, None)
        return
    # A value of another type than the schema's replaces the member, as upstream's mergeMap
    # does; the result's decoding refuses it ("cannot restore map from string").
    current = original.get(key)
    new: Any
    if isinstance(current, dict) and isinstance(value, dict) and field.strategy != "replace":
        new = _merge_map(current, value, field.node, path)
    elif isinstance(current, list) and isinstance(value, list) and field.strategy == "merge":
        new, _ = _merge_list(current, value, field, path)
    else:
        # Absent, null, of another type, a scalar, a replaced list or a "replace" object: the
        # patch value wins, cleaned of nulls and directives.
        new = _new_value(value, field, path)
    if isinstance(new, _Omit):
        original.pop(key, None)
    else:
        original[key] = new


def _new_value(value: Any, field: _Field, path: str) -> Any:
    """A patch value taken as is where there is nothing to merge it with."""
    if isinstance(value, dict):
        if value.get(_PATCH) == "delete":
            return _OMIT
        return _merge_map({}, value, field.node, path)
    if isinstance(value, list):
        return _new_list(value, field.items, path)
    return value


def _new_list(values: Sequence[Any], items: Schema | None, path: str) -> list[Any]:
    """A patch list taken as is: directive elements dropped, nulls removed from its objects."""
    out: list[Any] = []
    for index, value in enumerate(values):
        where = f"{path}[{index}]"
        if isinstance(value, dict):
            if _PATCH not in value:
                out.append(_merge_map({}, value, items, where))
        elif isinstance(value, list):
            out.append(_new_list(value, None, where))
        else:
            out.append(value)
    return out


def _retain_keys(original: dict[str, Any], patch: Mapping[str, Any], path: str) -> None:
    listed = patch[_RETAIN_KEYS]
    if not isinstance(listed, list):
        raise _bad(path, "invalid patch format of retainKeys: $retainKeys must be a list of member names")
    keep = {name for name in listed if isinstance(name, str)}
    for key, value in patch.items():
        if (
            value is None
            or key in (_RETAIN_KEYS, _PATCH)
            or key.startswith((_SET_ELEMENT_ORDER, _DELETE_FROM_PRIMITIVE_LIST))
        ):
            continue
        if key not in keep:
            raise _bad(path, f'invalid patch format of retainKeys: "{key}" is set but not in $retainKeys')
    for key in [key for key in original if key not in keep]:
        del original[key]


def _directive_target(key: str, prefix: str, what: str, path: str) -> str:
    head, slash, name = key.partition("/")
    if not slash or head != prefix:
        raise _bad(path, f'invalid patch format of {what}: "{key}" is not "{prefix}/<field>"')
    return name


def _delete_from_primitive_list(original: dict[str, Any], name: str, values: Any, path: str) -> None:
    if values is None:
        original.pop(name, None)  # upstream: a null deletion list deletes the field
        return
    if not isinstance(values, list):
        raise _bad(path, "invalid patch format of primitive list: $deleteFromPrimitiveList must be a list")
    current = original.get(name)
    if not isinstance(current, list):
        return  # nothing to delete from; the list is not created
    if _element_kind([*current, *values], path) == "object":
        raise _bad(
            path, "invalid patch format of primitive list: $deleteFromPrimitiveList needs a list of scalars"
        )
    drop = {_key(value) for value in values}
    original[name] = [item for item in current if _key(item) not in drop]


# --- lists ------------------------------------------------------------------------------------


def _merge_list(
    current: list[Any], patch: Sequence[Any], field: _Field, path: str
) -> tuple[list[Any], list[Any]]:
    """Merge a patch list into a list whose strategy is ``merge``.

    Returns the merged list and the original list as upstream's ``$setElementOrder`` handling
    then sees it (see :func:`_merge_object_list`).
    """
    if not current and not patch:
        return current, current
    directives = [item for item in patch if isinstance(item, dict) and _PATCH in item]
    plain = [item for item in patch if not (isinstance(item, dict) and _PATCH in item)]
    kind = _element_kind([*current, *plain], path)
    if field.merge_key:
        if kind not in (None, "object"):
            raise _bad(path, f'expected a list of objects merged by "{field.merge_key}"')
        return _merge_object_list(current, directives, plain, field, path)
    if kind == "object":
        raise _bad(path, "cannot merge a list of objects without a patch merge key")
    replace = False
    for directive in directives:
        value = directive[_PATCH]
        if value == "replace":
            replace = True
        elif value == "delete":
            raise _bad(
                path, "$patch: delete needs a list of objects with a merge key; use $deleteFromPrimitiveList"
            )
        elif value != "merge":
            raise _bad(path, f"unknown patch type {_show(value)} (expected replace, delete or merge)")
    if replace:
        return list(plain), current
    merged = _unique([*current, *plain])
    in_patch = {_key(item) for item in plain}
    ordered = _order(
        [item for item in merged if _key(item) in in_patch],
        [item for item in merged if _key(item) not in in_patch],
        [_key(item) for item in plain],
        [_key(item) for item in current],
        _key,
    )
    return ordered, current


def _merge_object_list(
    current: list[Any], directives: list[Any], plain: list[Any], field: _Field, path: str
) -> tuple[list[Any], list[Any]]:
    merge_key = field.merge_key
    items = field.items
    working = list(current)
    # Upstream deletes and appends in place on the Go slice of the original list, and its
    # $setElementOrder step then orders by that slice (same length as the original): deleted
    # elements shift the rest left and appended ones fill the freed places. ``view`` replays
    # that, so that ordering matches upstream where it matters (kubectl apply's three-way
    # patches delete, add and reorder in one go).
    view = list(current)
    replace = False
    for directive in directives:
        value = directive[_PATCH]
        if value == "delete":
            if merge_key not in directive:
                raise _no_merge_key(directive, merge_key, path)
            gone = _key(directive[merge_key])
            while True:
                index = next((i for i, item in enumerate(working) if _has_key(item, merge_key, gone)), None)
                if index is None:
                    break
                view[index : len(working) - 1] = view[index + 1 : len(working)]
                del working[index]
        elif value == "replace":
            replace = True
        elif value != "merge":
            raise _bad(path, f"unknown patch type {_show(value)} (expected replace, delete or merge)")
    if replace:
        working = [_merge_map({}, item, items, f"{path}[{i}]") for i, item in enumerate(plain)]
        plain = []
    original_order = list(working)
    for item in plain:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key, path)
        wanted = _key(item[merge_key])
        where = f"{path}[{merge_key}={_show(item[merge_key])}]"
        for index, existing in enumerate(working):
            if _has_key(existing, merge_key, wanted):
                working[index] = _merge_map(existing, item, items, where)
                break
        else:
            new = _merge_map({}, item, items, where)
            if not replace and len(working) < len(view):
                view[len(working)] = new
            working.append(new)
    key = _merge_key_of(merge_key, path)
    for item in working:
        key(item)  # every element needs its merge key, the original's too (as upstream)
    in_patch = {key(item) for item in plain}
    ordered = _order(
        [item for item in working if key(item) in in_patch],
        [item for item in working if key(item) not in in_patch],
        [key(item) for item in plain],
        [key(item) for item in original_order],
        key,
    )
    return ordered, view


def _set_element_order(
    original: dict[str, Any], patch: Mapping[str, Any], name: str, order: Any, field: _Field, path: str
) -> None:
    if not isinstance(order, list):
        raise _bad(path, "invalid patch format of setElementOrder list: $setElementOrder must be a list")
    current = original.get(name)
    if current is not None and not isinstance(current, list):
        raise _bad(path, "$setElementOrder is given for a member that is not a list")
    in_patch = name in patch
    patch_list = patch.get(name)
    if in_patch and not isinstance(patch_list, list):
        raise _bad(path, "$setElementOrder is given with a patch value that is not a list")
    _check_order_matches_patch(patch_list or [], order, field.merge_key, path)
    if current is None and patch_list is None:
        return
    before = current if current is not None else []
    if patch_list is None:
        merged = before
    elif current is None or field.strategy != "merge":
        merged = _new_list(patch_list, field.items, path)
    else:
        merged, before = _merge_list(current, patch_list, field, path)
    if not merged:
        original[name] = merged
        return
    key: Callable[[Any], Hashable]
    if field.merge_key:
        key = _merge_key_of(field.merge_key, path)
    else:
        if _element_kind([*merged, *order], path) == "object":
            raise _bad(path, "invalid patch format of setElementOrder list: the list has no merge key")
        key = _key
    listed = {key(item) for item in order}
    original[name] = _order(
        [item for item in merged if key(item) in listed],
        [item for item in merged if key(item) not in listed],
        [key(item) for item in order],
        [key(item) for item in before],
        key,
    )


def _check_order_matches_patch(patch_list: list[Any], order: list[Any], merge_key: str, path: str) -> None:
    """The patch list's elements must appear in the $setElementOrder list, in the same order."""
    if not patch_list or not order:
        return
    items = [item for item in patch_list if not (isinstance(item, dict) and _PATCH in item)]
    key: Callable[[Any], Hashable] = _merge_key_of(merge_key, path) if merge_key else _key
    at = 0
    for item in items:
        wanted = key(item)
        while at < len(order) and key(order[at]) != wanted:
            at += 1
        if at == len(order):
            raise _bad(path, "the order in the patch list doesn't match the $setElementOrder list")
        at += 1


def _order(
    patch_items: list[Any],
    server_items: list[Any],
    patch_order: list[Hashable],
    server_order: list[Hashable],
    key: Callable[[Any], Hashable],
) -> list[Any]:
    """Upstream's ordering of a merged list.

    Elements the patch mentions come in the patch's order, the others in their original order;
    the two runs are interleaved: an original-only element is placed before a patch element when
    both were in the original list and it came first there.
    """
    patch_rank = _first_positions(patch_order)
    server_rank = _first_positions(server_order)
    patch_items = sorted(patch_items, key=lambda item: patch_rank.get(key(item), len(patch_rank)))
    server_items = sorted(server_items, key=lambda item: server_rank.get(key(item), len(server_rank)))
    out: list[Any] = []
    i = j = 0
    while i < len(server_items) and j < len(patch_items):
        left = server_rank.get(key(server_items[i]))
        right = server_rank.get(key(patch_items[j]))
        if left is not None and right is not None and left < right:
            out.append(server_items[i])
            i += 1
        else:
            out.append(patch_items[j])
            j += 1
    out.extend(server_items[i:])
    out.extend(patch_items[j:])
    return out


def _first_positions(keys: list[Hashable]) -> dict[Hashable, int]:
    positions: dict[Hashable, int] = {}
    for index, item in enumerate(keys):
        positions.setdefault(item, index)
    return positions


def _unique(values: list[Any]) -> list[Any]:
    seen: set[Hashable] = set()
    out: list[Any] = []
    for value in values:
        marker = _key(value)
        if marker not in seen:
            seen.add(marker)
            out.append(value)
    return out


def _element_kind(values: list[Any], path: str) -> str | None:
    """The one JSON type of a list's elements (None if empty); lists of lists and mixed lists fail."""
    kinds = set()
    for value in values:
        if isinstance(value, list):
            raise errors.Invalid(f"{path or 'patch'}: lists of lists are not supported")
        kinds.add(_json_type(value))
    if len(kinds) > 1:
        raise _bad(path, f"list element types are not identical: {', '.join(sorted(kinds))}")
    return kinds.pop() if kinds else None


# --- helpers ----------------------------------------------------------------------------------


def _field(node: Schema | None, name: str) -> _Field:
    if node is None:
        return _UNKNOWN
    sub = schemas.property_schema(node, name)
    if sub is None:
        sub = schemas.additional_properties_schema(node)
    if sub is None:
        return _UNKNOWN
    raw_strategy = sub.get("x-kubernetes-patch-strategy")
    strategies = raw_strategy.split(",") if isinstance(raw_strategy, str) else []
    strategy = next((s for s in strategies if s != "retainKeys"), "")
    merge_key = sub.get("x-kubernetes-patch-merge-key")
    return _Field(sub, strategy, merge_key if isinstance(merge_key, str) else "")


def _key(value: Any) -> Hashable:
    """A hashable stand-in for a JSON value, equal for equal JSON (1 == 1.0, true != 1)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null",)
    if isinstance(value, list):
        return ("array", tuple(_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((str(k), _key(v)) for k, v in value.items())))
    return ("other", repr(value))


def _merge_key_of(merge_key: str, path: str) -> Callable[[Any], Hashable]:
    def key(item: Any) -> Hashable:
        if not isinstance(item, dict) or merge_key not in item:
            raise _no_merge_key(item, merge_key, path)
        return _key(item[merge_key])

    return key


def _has_key(item: Any, merge_key: str, wanted: Hashable) -> bool:
    return isinstance(item, dict) and merge_key in item and _key(item[merge_key]) == wanted


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _bad(path: str, message: str) -> errors.BadRequest:
    return errors.BadRequest(f"{path}: {message}" if path else message)


def _no_merge_key(item: Any, merge_key: str, path: str) -> errors.BadRequest:
    return _bad(path, f'{_show(item)} does not contain declared merge key "{merge_key}"')
