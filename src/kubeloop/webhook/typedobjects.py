"""What a defaulter or validator is handed: the object as its model when the kind has one (a
custom resource class, a built-in model), else as the dict it travelled as."""

from __future__ import annotations

from typing import Any

from kubeloop.api.model import KubeObject

#: An object as handed to a defaulter or validator.
TypedObject = KubeObject | dict[str, Any]


def typed(model: type[KubeObject] | None, data: dict[str, Any]) -> TypedObject:
    """``data`` as ``model`` (unknown fields kept), or itself when there is no model."""
    return model.from_dict(data) if model is not None else data


def untyped(obj: TypedObject) -> dict[str, Any]:
    """An object's JSON form again."""
    return obj.to_dict() if isinstance(obj, KubeObject) else obj
