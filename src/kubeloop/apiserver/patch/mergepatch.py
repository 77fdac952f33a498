"""JSON Merge Patch (RFC 7386), the ``application/merge-patch+json`` PATCH body.

A merge patch is a partial document: objects merge recursively, ``null`` deletes a member, and
every other value (lists included) replaces what was there. A patch that is not an object
replaces the whole target.

Also home of two helpers the other patch modules share: :func:`copy_json` (a deep copy of a
JSON value, from :mod:`~kubeloop.apiserver.decoding.jsoncopy`) and :func:`json_equal`
(equality as JSON sees it: ``1 == 1.0``, but ``true != 1``).

All functions take plain JSON values (dict/list/str/int/float/bool/None), never mutate their
arguments and return new values that share nothing mutable with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from kubeloop import errors
from kubeloop.apiserver.decoding.jsoncopy import copy_json

__all__ = ["apply_merge_patch", "copy_json", "create_merge_patch", "json_equal"]


def json_equal(left: Any, right: Any) -> bool:
    """Whether two JSON values are equal as JSON: numbers by value, booleans only to booleans."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, dict) and isinstance(right, dict):
        if left.keys() != right.keys():
            return False
        return all(json_equal(item, right[key]) for key, item in left.items())
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            return False
        return all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    return False


def apply_merge_patch(document: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch to ``document`` and return the result (a new value)."""
    try:
        if not isinstance(patch, dict):
            return copy_json(patch)
        # One copy of the whole document (in C), merged into in place: a copy per member the
        # patch leaves alone cost twice as much for a status patch of a custom resource.
        return _merge_into(copy_json(document) if isinstance(document, dict) else {}, patch)
    except RecursionError:
        raise errors.BadRequest("the merge patch is nested too deeply") from None


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``patch`` into ``target``, the caller's own copy. Members of the target keep their
    place; members the patch adds follow in patch order; a null removes a member."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = copy_json(value)
    return target


@overload
def create_merge_patch(original: Mapping[str, Any], modified: Mapping[str, Any]) -> dict[str, Any]: ...


@overload
def create_merge_patch(original: Any, modified: Any) -> Any: ...


def create_merge_patch(original: Any, modified: Any) -> Any:
    """The merge patch that turns ``original`` into ``modified`` (the two-way diff).

    ``apply_merge_patch(original, create_merge_patch(original, modified)) == modified`` holds
    whenever ``modified`` has no ``null`` inside an object: RFC 7386 cannot express "set this
    member to null" (a null in a patch deletes). When either side is not an object the patch is
    ``modified`` itself, which replaces the whole document.
    """
    if isinstance(original, dict) and isinstance(modified, dict):
        return _diff_objects(original, modified)
    return copy_json(modified)


def _diff_objects(original: Mapping[str, Any], modified: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key in original:
        if key not in modified:
            patch[key] = None
    for key, new in modified.items():
        if key not in original:
            if new is not None:
                patch[key] = copy_json(new)
            continue
        old = original[key]
        if isinstance(old, dict) and isinstance(new, dict):
            nested = _diff_objects(old, new)
            if nested:
                patch[key] = nested
        elif not json_equal(old, new):
            patch[key] = copy_json(new)
    return patch
