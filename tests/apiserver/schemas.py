"""Schema pieces the API server's tests write into their CRDs."""

from __future__ import annotations

from typing import Any


def map_list(
    properties: dict[str, Any], *, keys: tuple[str, ...] = ("name",), required: bool = True
) -> dict[str, Any]:
    """An ``x-kubernetes-list-type: map`` array of objects with ``properties``, keyed by ``keys``
    (required in each item unless ``required`` is off)."""
    items: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        items["required"] = list(keys)
    return {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": list(keys),
        "items": items,
    }
