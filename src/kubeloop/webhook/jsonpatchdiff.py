"""The JSON patch (RFC 6902) that turns one JSON document into another: what a defaulting webhook
answers with (controller-runtime's ``PatchResponseFromRaw``, which uses gomodules' ``CreatePatch``).

Objects are compared key by key and patched in place; a list that changed is replaced whole,
except that items appended to an unchanged prefix are added one by one. Paths escape ``~`` and
``/`` as RFC 6901 says.
"""

from __future__ import annotations

from typing import Any

Operation = dict[str, Any]


def create_patch(original: Any, current: Any) -> list[Operation]:
    """The operations that make ``original`` equal to ``current`` (empty when they are equal)."""
    operations: list[Operation] = []
    _diff(original, current, "", operations)
    return operations


def _diff(original: Any, current: Any, path: str, operations: list[Operation]) -> None:
    if _same(original, current):
        return
    if isinstance(original, dict) and isinstance(current, dict):
        for key in original:
            if key not in current:
                operations.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in current.items():
            child = f"{path}/{escape(key)}"
            if key in original:
                _diff(original[key], value, child, operations)
            else:
                operations.append({"op": "add", "path": child, "value": value})
        return
    if (
        isinstance(original, list)
        and isinstance(current, list)
        and len(current) > len(original)
        and all(_same(a, b) for a, b in zip(original, current, strict=False))
    ):
        for index in range(len(original), len(current)):
            operations.append({"op": "add", "path": f"{path}/{index}", "value": current[index]})
        return
    operations.append({"op": "replace", "path": path, "value": current})


def _same(a: Any, b: Any) -> bool:
    """JSON equality: True is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def escape(key: str) -> str:
    """A key as one JSON pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
