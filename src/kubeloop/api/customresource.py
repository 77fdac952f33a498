"""The base class of users' custom resources: a pydantic model that is also its CRD's source::

    class Widget(CustomResource, group="example.com", version="v1", short_names=("wd",),
                 printer_columns=(PrinterColumn("Size", ".spec.size", type="integer"),)):
        '''A widget: the class docstring becomes the schema's description.'''
        spec: WidgetSpec
        status: WidgetStatus | None = None

The class keywords describe the kind as controller-gen's markers do: ``group``, ``version``,
``kind`` (default: the class name), ``plural`` and ``singular`` (default: from the kind),
``scope`` ("Namespaced" or "Cluster"), ``short_names``, ``categories``, ``status`` (the status
subresource; default: when the model has a ``status`` field), ``scale``, ``printer_columns``,
``selectable_fields``, ``rules`` (CEL rules on the whole object), ``storage`` and ``served``
(several models of one kind are its versions; one of them is stored) and ``deprecated`` /
``deprecation_warning``. ``Widget.crd()`` is the CustomResourceDefinition.

The class registers in the Scheme; apiVersion and kind default to its GroupVersionKind. The older
form, ``__gvk__ = GroupVersionKind(...)`` in the body, still declares a kind with defaults.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from kubeloop.api.crdgen import definitions
from kubeloop.api.crdmarkers import CRDOptions, PrinterColumn, Rule, Scale
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeObject
from kubeloop.api.models.meta_v1 import ObjectMeta


class CustomResource(KubeObject):
    """The base class of a custom resource: class keywords name the kind, fields give the schema.

    ``apiVersion`` and ``kind`` default to the class's GroupVersionKind; the class registers
    itself, so clients answer with it when asked for its kind.
    """

    __crd__: ClassVar[CRDOptions]

    api_version: str = Field(default="", alias="apiVersion")
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=lambda: ObjectMeta())

    def __init_subclass__(
        cls,
        *,
        group: str | None = None,
        version: str | None = None,
        kind: str | None = None,
        plural: str | None = None,
        singular: str | None = None,
        scope: Literal["Namespaced", "Cluster"] | None = None,
        short_names: Iterable[str] = (),
        categories: Iterable[str] = (),
        status: bool | None = None,
        scale: Scale | None = None,
        printer_columns: Iterable[PrinterColumn] = (),
        selectable_fields: Iterable[str] = (),
        rules: Iterable[Rule] = (),
        storage: bool | None = None,
        served: bool = True,
        deprecated: bool = False,
        deprecation_warning: str | None = None,
        **kwargs: Any,
    ) -> None:
        if group is not None or version is not None:
            if not group or not version:
                raise TypeError(f"{cls.__name__}: a custom resource needs both group= and version=")
            cls.__gvk__ = GroupVersionKind(group, version, kind or cls.__name__)
        elif "__gvk__" not in cls.__dict__:
            super().__init_subclass__(**kwargs)  # an abstract base of custom resources
            return
        gvk = cls.__gvk__
        if scope is None:
            scope = "Namespaced" if cls.__dict__.get("__namespaced__", True) else "Cluster"
        if scope not in ("Namespaced", "Cluster"):
            raise TypeError(f"{cls.__name__}: scope must be 'Namespaced' or 'Cluster', not {scope!r}")
        plural = plural or cls.__dict__.get("__plural__") or plural_of(gvk.kind)
        cls.__plural__ = plural
        cls.__namespaced__ = scope == "Namespaced"
        cls.__crd__ = CRDOptions(
            gvk=gvk,
            plural=plural,
            singular=singular or gvk.kind.lower(),
            scope=scope,
            short_names=tuple(short_names),
            categories=tuple(categories),
            status=status,
            scale=scale,
            printer_columns=tuple(printer_columns),
            selectable_fields=tuple(selectable_fields),
            rules=tuple(rules),
            storage=storage,
            served=served,
            deprecated=deprecated,
            deprecation_warning=deprecation_warning,
        )
        super().__init_subclass__(**kwargs)

    @classmethod
    def crd(cls) -> dict[str, Any]:
        """The CustomResourceDefinition of this kind (this version only; ``crdgen.definitions``
        joins the versions of a kind declared by several classes)."""
        (definition,) = definitions(cls)
        return definition

    @model_validator(mode="before")
    @classmethod
    def _type_meta_defaults(cls, data: Any) -> Any:
        gvk = getattr(cls, "__gvk__", None)
        if gvk is None or not isinstance(data, dict):
            return data
        filled = dict(data)
        if not filled.get("apiVersion") and not filled.get("api_version"):
            filled["apiVersion"] = gvk.api_version
        if not filled.get("kind"):
            filled["kind"] = gvk.kind
        return filled


_ES_ENDINGS = re.compile(r"(s|x|z|ch|sh)$")
_CONSONANT_Y = re.compile(r"[^aeiou]y$")


def plural_of(kind: str) -> str:
    """The resource name of a kind, as kubebuilder derives it: lower case, English plural
    (Policy → policies, Status → statuses, Gateway → gateways)."""
    lower = kind.lower()
    if _CONSONANT_Y.search(lower):
        return lower[:-1] + "ies"
    if _ES_ENDINGS.search(lower):
        return lower + "es"
    return lower + "s"
