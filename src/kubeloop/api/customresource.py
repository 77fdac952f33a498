"""The base class of users' custom resources (apiVersion, kind, metadata, spec, status)::

    class Widget(CustomResource):
        __gvk__ = GroupVersionKind("example.com", "v1", "Widget")
        spec: WidgetSpec
        status: WidgetStatus | None = None

The class registers in the Scheme; apiVersion and kind default to its GroupVersionKind.
``__plural__`` (default: the lower-cased kind + "s") and ``__namespaced__`` describe its resource.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from kubeloop.api.model import KubeObject
from kubeloop.api.models.meta_v1 import ObjectMeta


class CustomResource(KubeObject):
    """The base class of a custom resource: declare ``__gvk__``, ``spec`` and ``status``.

    ``apiVersion`` and ``kind`` default to the class's GroupVersionKind; the class registers
    itself, so clients answer with it when asked for its kind.
    """

    api_version: str = Field(default="", alias="apiVersion")
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=lambda: ObjectMeta())

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
