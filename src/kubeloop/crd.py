"""CustomResourceDefinitions from Python models: the markers, the generator and the installer::

    from typing import Annotated
    from pydantic import Field
    import kubeloop
    from kubeloop.crd import PrinterColumn, Rule

    class WidgetSpec(kubeloop.KubeModel):
        size: Annotated[int, Field(ge=1), Rule("self <= 10", message="at most 10")] = 1

    class Widget(kubeloop.CustomResource, group="example.com", version="v1",
                 printer_columns=(PrinterColumn("Size", ".spec.size", type="integer"),)):
        spec: WidgetSpec

    print(kubeloop.crd.to_yaml(kubeloop.crd.definitions(Widget)))   # or: kubeloop crd MODULE
    await kubeloop.crd.install_crds(client, Widget)                 # or: kubeloop run --install-crds

Field markers (``Rule``, ``PreserveUnknownFields``, ``EmbeddedResource``, ``ListType``,
``MapType``) go in ``Annotated``; ``PrinterColumn`` and ``Scale`` are class keywords of the
model. ``IntOrString`` is the type of a field that takes a number or a string.
"""

from kubeloop.api.crdgen import custom_resources_in, definitions, to_yaml
from kubeloop.api.crdmarkers import (
    CRDOptions,
    EmbeddedResource,
    ListType,
    MapType,
    PreserveUnknownFields,
    PrinterColumn,
    Rule,
    Scale,
)
from kubeloop.api.customresource import plural_of
from kubeloop.api.model import IntOrString
from kubeloop.api.structuralschema import SchemaConversionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kubeloop.client.crdinstall import CRDNotServed, install_crds

__all__ = [
    "CRDNotServed",
    "CRDOptions",
    "EmbeddedResource",
    "IntOrString",
    "ListType",
    "MapType",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Rule",
    "Scale",
    "SchemaConversionError",
    "custom_resources_in",
    "definitions",
    "install_crds",
    "plural_of",
    "to_yaml",
]


def __getattr__(name: str) -> object:
    # The installer needs the HTTP client; a module of models that only declares kinds does not.
    if name in ("install_crds", "CRDNotServed"):
        from kubeloop.client import crdinstall

        value = getattr(crdinstall, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kubeloop.crd' has no attribute {name!r}")
