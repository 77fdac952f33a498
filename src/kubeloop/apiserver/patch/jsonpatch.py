"""JSON Patch (RFC 6902), the ``application/json-patch+json`` PATCH body.

A patch is a list of operations applied in order to a copy of the document; the first one that
cannot be applied aborts the whole patch. How the errors map to Status objects follows the
upstream API server (kubernetes/apiserver ``pkg/endpoints/handlers/patch.go``):

* a body that is not a patch (not a list, an operation without a known ``op`` or without the
  ``path``/``value``/``from`` it needs, a malformed JSON pointer) → 400 ``BadRequest``;
* more than 10,000 operations → 413 ``RequestEntityTooLarge``;
* an operation that does not apply to this document (missing target, failed ``test``, index out
  of range) → 422 ``Invalid`` whose message names the operation and its path. Clients rely on
  this: kopf, for one, uses a failing ``test`` as an optimistic-concurrency check.

Semantics are RFC 6902's; like evanphx/json-patch (the library Kubernetes uses), ``remove`` of a
missing member fails. ``test`` compares values as JSON (``1`` equals ``1.0``; ``true`` is not
``1``). See :func:`apply_json_patch` for ``replace`` of a missing member.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson

from kubeloop import errors
from kubeloop.apiserver.patch.mergepatch import copy_json, json_equal

__all__ = ["MAX_OPERATIONS", "apply_json_patch", "parse_pointer"]

#: Upstream's limit (``maxJSONPatchOperations``).
MAX_OPERATIONS = 10_000
#: Bytes (as JSON) that ``copy`` operations may add in one patch (evanphx/json-patch's
#: ``AccumulatedCopySizeLimit``): 20 copies of a document into itself would double it 20 times.
MAX_ACCUMULATED_COPY_BYTES = 3 * 1024 * 1024

_OPS = ("add", "remove", "replace", "move", "copy", "test")
_NEEDS_VALUE = frozenset({"add", "replace", "test"})
_NEEDS_FROM = frozenset({"move", "copy"})
_INDEX = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE = re.compile(r"~(?![01])")


class _OperationFailed(Exception):
    """An operation does not apply; becomes a 422 naming the operation."""


def parse_pointer(pointer: str) -> list[str]:
    """The reference tokens of an RFC 6901 JSON pointer ("" is the whole document).

    Raises ``ValueError`` for a pointer that does not start with "/" or has a "~" that is not
    "~0" or "~1".
    """
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f'JSON pointer "{pointer}" does not start with "/"')
    if _BAD_ESCAPE.search(pointer):
        raise ValueError(f'JSON pointer "{pointer}" has an invalid "~" escape')
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def apply_json_patch(document: Any, operations: Any, *, allow_replace_missing: bool = False) -> Any:
    """Apply the RFC 6902 ``operations`` to ``document`` and return the patched copy.

    ``replace`` of an object member that does not exist fails (RFC 6902: "the target location
    MUST exist"). The evanphx/json-patch v4 library the upstream API server links instead adds
    the member; ``allow_replace_missing=True`` reproduces that.
    """
    ops = _validate(operations)
    try:
        root = [copy_json(document)]
        copied = [0]
        for number, op in enumerate(ops):
            try:
                _apply_one(root, op, allow_replace_missing, copied)
            except _OperationFailed as exc:
                raise errors.Invalid(
                    f'json patch {op["op"]} operation {number} on path "{op["path"]}" failed: {exc}'
                ) from None
    except RecursionError:
        raise errors.BadRequest("the document or the json patch is nested too deeply") from None
    return root[0]


def _validate(operations: Any) -> list[Mapping[str, Any]]:
    if not isinstance(operations, list):
        raise errors.BadRequest(f"a json patch must be a JSON array of operations, not {_kind(operations)}")
    if len(operations) > MAX_OPERATIONS:
        raise errors.RequestEntityTooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {len(operations)}"
        )
    for number, op in enumerate(operations):
        if not isinstance(op, dict):
            raise errors.BadRequest(f"json patch operation {number} is {_kind(op)}, not an object")
        kind = op.get("op")
        if kind not in _OPS:
            shown = "missing" if kind is None else repr(kind)
            raise errors.BadRequest(
                f"json patch operation {number}: unknown op {shown}, expected one of {', '.join(_OPS)}"
            )
        members = ["path", *(["from"] if kind in _NEEDS_FROM else [])]
        for member in members:
            pointer = op.get(member)
            if not isinstance(pointer, str):
                raise errors.BadRequest(
                    f'json patch {kind} operation {number}: "{member}" must be a JSON pointer string'
                )
            try:
                parse_pointer(pointer)
            except ValueError as exc:
                raise errors.BadRequest(f"json patch {kind} operation {number}: {exc}") from None
        if kind in _NEEDS_VALUE and "value" not in op:
            raise errors.BadRequest(f'json patch {kind} operation {number}: missing "value"')
    return operations


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _apply_one(
    root: list[Any], op: Mapping[str, Any], allow_replace_missing: bool, copied: list[int]
) -> None:
    kind = op["op"]
    path = parse_pointer(op["path"])
    if kind == "add":
        _add(root, path, copy_json(op["value"]))
    elif kind == "remove":
        _remove(root, path)
    elif kind == "replace":
        _replace(root, path, copy_json(op["value"]), allow_replace_missing)
    elif kind == "test":
        if not json_equal(_get(root, path), op["value"]):
            raise _OperationFailed("the value does not match")
    elif kind == "copy":
        value = _get(root, parse_pointer(op["from"]))
        copied[0] += _encoded_size(value)
        if copied[0] > MAX_ACCUMULATED_COPY_BYTES:
            raise _OperationFailed(
                f"Unable to complete the copy, the accumulated size increase of copy is {copied[0]}, "
                f"exceeding the limit {MAX_ACCUMULATED_COPY_BYTES}"
            )
        _add(root, path, copy_json(value))
    else:  # move
        source = parse_pointer(op["from"])
        if source == path:
            _get(root, source)  # moving a value onto itself changes nothing, if it exists
            return
        if len(source) < len(path) and path[: len(source)] == source:
            raise _OperationFailed(f'cannot move "{op["from"]}" into one of its own children')
        value = _get(root, source)
        _remove(root, source)
        _add(root, path, value)


def _parent(root: list[Any], path: list[str]) -> tuple[Any, str]:
    """The container holding the target of ``path`` (which must not be empty) and its last token."""
    node: Any = root[0]
    for depth, token in enumerate(path[:-1]):
        node = _child(node, token, path[: depth + 1])
    return node, path[-1]


def _child(node: Any, token: str, where: list[str]) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise _OperationFailed(f"the document has no member at {_show(where)}")
        return node[token]
    if isinstance(node, list):
        return node[_index(node, token, where, allow_end=False)]
    raise _OperationFailed(f"the document has no member at {_show(where)} (its parent is a scalar)")


def _index(array: list[Any], token: str, where: list[str], *, allow_end: bool) -> int:
    if not _INDEX.fullmatch(token):
        raise _OperationFailed(f'"{token}" is not a valid array index at {_show(where)}')
    index = int(token)
    limit = len(array) if allow_end else len(array) - 1
    if index > limit:
        raise _OperationFailed(
            f"array index {index} is out of range at {_show(where)} (the array has {len(array)} items)"
        )
    return index


def _show(tokens: list[str]) -> str:
    """The JSON pointer of ``tokens``, quoted for a message."""
    return '"' + "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens) + '"'


def _get(root: list[Any], path: list[str]) -> Any:
    if not path:
        return root[0]
    container, token = _parent(root, path)
    return _child(container, token, path)


def _add(root: list[Any], path: list[str], value: Any) -> None:
    if not path:
        root[0] = value
        return
    container, token = _parent(root, path)
    if isinstance(container, dict):
        container[token] = value
    elif isinstance(container, list):
        if token == "-":
            container.append(value)
        else:
            container.insert(_index(container, token, path, allow_end=True), value)
    else:
        raise _OperationFailed(f"cannot add a member to a scalar at {_show(path[:-1])}")


def _remove(root: list[Any], path: list[str]) -> None:
    if not path:
        raise _OperationFailed("cannot remove the whole document")
    container, token = _parent(root, path)
    if isinstance(container, dict):
        if token not in container:
            raise _OperationFailed(f"the document has no member at {_show(path)}")
        del container[token]
    elif isinstance(container, list):
        del container[_index(container, token, path, allow_end=False)]
    else:
        raise _OperationFailed(f"the document has no member at {_show(path)} (its parent is a scalar)")


def _replace(root: list[Any], path: list[str], value: Any, allow_missing: bool) -> None:
    if not path:
        root[0] = value
        return
    container, token = _parent(root, path)
    if isinstance(container, dict):
        if token not in container and not allow_missing:
            raise _OperationFailed(f"the document has no member at {_show(path)}")
        container[token] = value
    elif isinstance(container, list):
        container[_index(container, token, path, allow_end=False)] = value
    else:
        raise _OperationFailed(f"the document has no member at {_show(path)} (its parent is a scalar)")


def _encoded_size(value: Any) -> int:
    """The bytes ``value`` takes as JSON (orjson, or the standard encoder for integers beyond
    64 bits, which a patch built in Python rather than decoded from a request may hold)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:
        return len(json.dumps(value, separators=(",", ":")))
