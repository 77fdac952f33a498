"""Apply configurations: what a field manager wants to own, for server-side apply (client-go's
``applyconfigurations``).

A typed model cannot say "I own only ``spec.replicas``": its required fields must be set, and
``None`` means "leave it out". An apply configuration has every field optional and sends exactly
the fields that were set, an explicit ``None`` as ``null``::

    from kubeloop.applyconfigurations import apps_v1, meta_v1

    scale = apps_v1.Deployment(
        metadata=meta_v1.ObjectMeta(name="web", namespace="default"),
        spec=apps_v1.DeploymentSpec(replicas=5),
    )
    deployment = await client.apply(scale, field_manager="autoscaler")  # an apps_v1 model back

    mine = apps_v1.extract_deployment(deployment, "autoscaler")  # what "autoscaler" owns

The built-in kinds' configurations are generated beside their models
(``kubeloop.applyconfigurations``); a custom resource's is derived from its model:
``apply_configuration(Widget)``.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar, Union, cast

import orjson
from pydantic import create_model
from pydantic.fields import FieldInfo

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeModel, KubeObject, as_dict

M = TypeVar("M", bound=KubeObject)
C = TypeVar("C", bound="ObjectApplyConfiguration[Any]")


class ApplyConfiguration(KubeModel):
    """A part of an apply configuration: every field optional; ``to_dict()`` holds the fields
    that were set, and only those (an explicit ``None`` as ``null``)."""

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class ObjectApplyConfiguration(ApplyConfiguration, Generic[M]):
    """The apply configuration of a kind whose model is ``M``: ``client.apply`` sends it and
    answers with an ``M``. ``apiVersion`` and ``kind`` are always sent."""

    __gvk__: ClassVar[GroupVersionKind]
    __model__: ClassVar[type[KubeObject]]

    def __init__(self, **data: Any) -> None:
        # Declared so that a derived configuration (a custom resource's, whose fields type
        # checkers cannot see) takes its fields by keyword; generated ones are typed field by field.
        super().__init__(**data)

    def to_dict(self) -> dict[str, Any]:
        gvk = type(self).__gvk__
        return {"apiVersion": gvk.group_version, "kind": gvk.kind, **super().to_dict()}


def owned_fields(obj: Mapping[str, Any] | KubeObject, field_manager: str, subresource: str = "") -> dict[str, Any]:
    """The part of ``obj`` (its JSON form) that ``field_manager`` owns through apply on
    ``subresource`` ("" for the object itself), read from ``metadata.managedFields``; with the
    object's apiVersion, kind, name and namespace, as client-go's ``ExtractInto`` gives them."""
    data = as_dict(obj)
    owned: dict[str, Any] = {}
    meta = data.get("metadata") or {}
    for entry in meta.get("managedFields") or ():
        if (
            entry.get("manager") == field_manager
            and entry.get("operation") == "Apply"
            and (entry.get("subresource") or "") == subresource
        ):
            owned = _union(owned, entry.get("fieldsV1") or {})
    picked = _pick(data, owned) if owned else {}
    result: dict[str, Any] = picked if isinstance(picked, dict) else {}
    identity = {key: meta[key] for key in ("name", "namespace") if meta.get(key)}
    result["metadata"] = {**identity, **(result.get("metadata") or {})}
    for key in ("apiVersion", "kind"):
        if key in data:
            result[key] = data[key]
    return result


def extract(config: type[C], obj: Mapping[str, Any] | KubeObject, field_manager: str, subresource: str = "") -> C:
    """``obj``'s fields that ``field_manager`` owns through apply, as a ``config``: change it and
    apply it again to change only those (client-go's ``Extract<Kind>``)."""
    return config.model_validate(owned_fields(obj, field_manager, subresource))


def _union(one: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(one)
    for key, value in other.items():
        merged[key] = _union(merged.get(key) or {}, value) if isinstance(value, Mapping) else value
    return merged


def _pick(value: Any, owned: Mapping[str, Any]) -> Any:
    """The part of ``value`` a FieldsV1 set names (``f:`` fields, ``k:`` list keys, ``v:`` set
    values, ``i:`` indexes); a node owned with no member owned is kept empty, a leaf whole."""
    members = {key: sub for key, sub in owned.items() if key != "."}
    if not members:
        if isinstance(value, dict) and "." in owned:
            return {}
        if isinstance(value, list) and "." in owned:
            return []
        return value
    if isinstance(value, dict):
        picked: dict[str, Any] = {}
        for key, sub in members.items():
            if key.startswith("f:") and key[2:] in value:
                picked[key[2:]] = _pick(value[key[2:]], sub)
        return picked
    if isinstance(value, list):
        chosen: list[Any] = []
        for index, item in enumerate(value):
            for key, sub in members.items():
                if _names_item(key, index, item):
                    part = _pick(item, sub)
                    if key.startswith("k:") and isinstance(part, dict) and isinstance(item, dict):
                        part = {**orjson.loads(key[2:]), **part}  # the keys say which item it is
                    chosen.append(part)
                    break
        return chosen
    return value


def _names_item(key: str, index: int, item: Any) -> bool:
    if key.startswith("k:"):
        keys = orjson.loads(key[2:])
        return isinstance(item, dict) and all(item.get(name) == wanted for name, wanted in keys.items())
    if key.startswith("v:"):
        return bool(orjson.loads(key[2:]) == item)
    if key.startswith("i:"):
        return key[2:] == str(index)
    return False


@functools.cache
def apply_configuration(model: type[M]) -> type[ObjectApplyConfiguration[M]]:
    """The apply configuration of a kind's model (a custom resource's, derived from its fields):
    the same fields and JSON names, every one optional, nested models made configurations too.
    A built-in model's is the generated class in ``kubeloop.applyconfigurations``."""
    builtin = _generated(model)
    if builtin is not None:
        return cast("type[ObjectApplyConfiguration[M]]", builtin)
    derived = cast(
        "type[ObjectApplyConfiguration[M]]",
        _derive(model, ObjectApplyConfiguration[model]),  # type: ignore[valid-type]
    )
    derived.__gvk__ = model.__gvk__
    derived.__model__ = model
    return derived


def _generated(model: type[KubeModel]) -> type[ApplyConfiguration] | None:
    prefix = "kubeloop.api.models."
    if not model.__module__.startswith(prefix):
        return None
    import importlib

    module = importlib.import_module("kubeloop.api.applyconfigurations." + model.__module__[len(prefix) :])
    found = getattr(module, model.__name__, None)
    return found if isinstance(found, type) and issubclass(found, ApplyConfiguration) else None


@functools.cache
def _part(model: type[KubeModel]) -> type[ApplyConfiguration]:
    return _generated(model) or _derive(model, ApplyConfiguration)


def _derive(model: type[KubeModel], base: type[ApplyConfiguration]) -> type[ApplyConfiguration]:
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = _optional(info.annotation)
        fields[name] = (annotation, FieldInfo(default=None, alias=info.alias, description=info.description))
    derived = create_model(
        f"{model.__name__}ApplyConfiguration", __base__=base, __module__=model.__module__, **fields
    )
    derived.__doc__ = f"The apply configuration of {model.__name__}: every field optional."
    return cast(type[ApplyConfiguration], derived)


def _optional(annotation: Any) -> Any:
    """``annotation`` with every model in it made an apply configuration, and ``None`` allowed."""
    return Union[_configured(annotation), None]  # noqa: UP007  # built at run time


def _configured(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, KubeModel):
        return _part(annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is None or not args:
        return annotation
    if origin is typing.Annotated:
        return _configured(args[0])  # constraints are the server's to check
    converted = tuple(_configured(arg) for arg in args)
    if origin in (Union, types.UnionType):
        return Union[converted]  # noqa: UP007
    if origin is typing.Literal:
        return annotation
    return origin[converted if len(converted) > 1 else converted[0]]


__all__ = [
    "ApplyConfiguration",
    "ObjectApplyConfiguration",
    "apply_configuration",
    "extract",
    "owned_fields",
]
