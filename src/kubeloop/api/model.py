"""Typed models: the pydantic base classes of generated built-in kinds and of users' custom resources.

Objects travel as plain dicts at the core (fast); models are the typed edge. A model reads and
writes the JSON form (camelCase aliases, unset fields left out) and keeps fields it does not
know (``extra="allow"``), so a newer server's fields survive a read-modify-write. Models are
built on first use (``defer_build``): importing core/v1's 200-odd classes stays cheap. A top-level
kind carries its ``GroupVersionKind`` in ``__gvk__`` and registers in the ``Scheme``; users'
custom resources derive from ``customresource.CustomResource``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, PlainSerializer
from pydantic.alias_generators import to_camel

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.models import MODULES
from kubeloop.api.timestamps import format_time

#: resource.Quantity in JSON: "500m", "1Gi", or a bare number.
Quantity = str | int | float
#: intstr.IntOrString: a port number or name, a count or a percentage.
IntOrString = int | str
#: metav1.Time: a datetime, written as RFC 3339 in whole seconds, UTC ("2024-05-01T12:00:00Z").
Time = Annotated[datetime, PlainSerializer(format_time, return_type=str, when_used="json")]
#: metav1.MicroTime: a datetime, written with six digits of microseconds, as the API server's
#: decoder requires ("2024-05-01T12:00:00.000000Z"), even when they are zero.
MicroTime = Annotated[
    datetime, PlainSerializer(lambda moment: format_time(moment, micro=True), return_type=str, when_used="json")
]


class KubeModel(BaseModel):
    """Any part of an API object; fields are snake_case in Python and camelCase in JSON (an
    explicit ``Field(alias=...)`` names one otherwise, e.g. ``base_url`` as ``baseURL``)."""

    model_config = ConfigDict(
        populate_by_name=True,
        extra="allow",
        serialize_by_alias=True,
        defer_build=True,
        alias_generator=to_camel,  # JSON names are camelCase: a field run_as_user is runAsUser
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: aliases, RFC 3339 times, unset and null fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The model of ``data`` (an object's JSON form); unknown fields are kept."""
        return cls.model_validate(data)

    def assign(self, data: Mapping[str, Any]) -> None:
        """Make this model hold ``data`` (its JSON form), in place: helpers that change an object
        given as a model change the caller's instance, as they change a dict."""
        fresh = type(self).model_validate(data)
        object.__setattr__(self, "__dict__", fresh.__dict__)
        object.__setattr__(self, "__pydantic_fields_set__", fresh.__pydantic_fields_set__)
        object.__setattr__(self, "__pydantic_extra__", fresh.__pydantic_extra__)


def as_dict(obj: Mapping[str, Any] | KubeModel) -> dict[str, Any]:
    """An object's JSON form: a model's ``to_dict()``, a mapping as a dict (the same one if it is one)."""
    if isinstance(obj, KubeModel):
        return obj.to_dict()
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"an object dict or model is needed, not {type(obj).__name__}")


class KubeObject(KubeModel):
    """A top-level kind (has apiVersion, kind and metadata); subclasses set ``__gvk__``."""

    __gvk__: ClassVar[GroupVersionKind]
    __plural__: ClassVar[str | None] = None
    __namespaced__: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__gvk__" in cls.__dict__:
            scheme.register(cls)


#: Modules of the generated built-in models, by group/version; imported on first use.
BUILTIN_MODULES: dict[tuple[str, str], str] = {
    group_version: f"kubeloop.api.models.{module}" for group_version, module in MODULES.items()
}


class Scheme:
    """GroupVersionKind ↔ model class. Built-in kinds are found by importing their module lazily."""

    def __init__(self) -> None:
        self._by_gvk: dict[GroupVersionKind, type[KubeObject]] = {}

    def register(self, cls: type[KubeObject]) -> None:
        existing = self._by_gvk.get(cls.__gvk__)
        if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
            raise ValueError(
                f"{cls.__gvk__} is already registered as {existing.__module__}.{existing.__qualname__}"
            )
        self._by_gvk[cls.__gvk__] = cls

    def class_for(self, gvk: GroupVersionKind) -> type[KubeObject] | None:
        found = self._by_gvk.get(gvk)
        if found is None:
            module = BUILTIN_MODULES.get((gvk.group, gvk.version))
            if module is not None:
                # A generated module makes its classes when first asked for (``lazyclasses``).
                getattr(importlib.import_module(module), gvk.kind, None)
                found = self._by_gvk.get(gvk)
        return found

    def gvk_for(self, cls: type[KubeObject]) -> GroupVersionKind:
        return cls.__gvk__

    def versions_of(self, group: str, kind: str) -> dict[str, type[KubeObject]]:
        """The registered models of a kind, by apiVersion (the versions of a custom resource)."""
        return {
            gvk.group_version: cls
            for gvk, cls in self._by_gvk.items()
            if gvk.group == group and gvk.kind == kind
        }


scheme = Scheme()
