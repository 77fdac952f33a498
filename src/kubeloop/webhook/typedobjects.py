"""What a defaulter or validator is handed: the object as its model when the kind has one (a
custom resource class, a built-in model), else as the dict it travelled as.

An object its model refuses is answered as the API server's schema validation would answer it
(mutating admission runs before the server's validation, so this happens on a real cluster too):
a 422 naming each field in the server's words (``api.modelerrors``), never pydantic's dump."""

from __future__ import annotations

from typing import Any

import pydantic

from kubeloop.api.model import KubeObject
from kubeloop.api.modelerrors import invalid_object

#: An object as handed to a defaulter or validator.
TypedObject = KubeObject | dict[str, Any]


def typed(model: type[KubeObject] | None, data: dict[str, Any]) -> TypedObject:
    """``data`` as ``model`` (unknown fields kept), or itself when there is no model; raises
    ``errors.Invalid`` (field by field) for data the model refuses."""
    if model is None:
        return data
    try:
        return model.from_dict(data)
    except pydantic.ValidationError as error:
        raise invalid_object(data, error) from None


def untyped(obj: TypedObject) -> dict[str, Any]:
    """An object's JSON form again."""
    return obj.to_dict() if isinstance(obj, KubeObject) else obj
