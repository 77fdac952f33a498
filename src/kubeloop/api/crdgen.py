"""CustomResourceDefinitions generated from ``CustomResource`` models (controller-gen's job).

``definitions(*models)`` gives one CRD per kind; models of the same group and kind are its
versions. ``to_yaml`` writes them as a multi-document YAML stream, as ``kubeloop crd`` prints them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import yaml

from kubeloop.api.crdmarkers import CRDOptions
from kubeloop.api.model import KubeObject
from kubeloop.api.structuralschema import SchemaConversionError, model_schema

API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should "
    "convert recognized schemas to the latest internal value, and may reject unrecognized values. More "
    "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer "
    "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)


def options_of(model: type[KubeObject]) -> CRDOptions:
    """What a custom resource model's class keywords declared; TypeError for any other model."""
    options = getattr(model, "__crd__", None)
    if not isinstance(options, CRDOptions):
        raise TypeError(f"{model.__name__} declares no custom resource kind (group= and version=)")
    return options


def definitions(*models: type[KubeObject]) -> list[dict[str, Any]]:
    """One CRD per (group, kind) among ``models`` (``CustomResource`` classes), in the order
    first seen."""
    by_name: dict[str, list[type[KubeObject]]] = {}
    for model in models:
        by_name.setdefault(options_of(model).name, []).append(model)
    return [_definition(name, versions) for name, versions in by_name.items()]


def custom_resources_in(namespace: Iterable[Any]) -> list[type[KubeObject]]:
    """The custom resource models among ``namespace``'s values (a module's ``vars()``): classes
    that declare a kind themselves (``__crd__`` of their own), once each."""
    found: list[type[KubeObject]] = []
    for value in namespace:
        if (
            inspect.isclass(value)
            and issubclass(value, KubeObject)
            and isinstance(value.__dict__.get("__crd__"), CRDOptions)
            and value not in found
        ):
            found.append(value)
    return found


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a schema shared by two fields twice rather than as a YAML anchor and alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(crds: Iterable[dict[str, Any]]) -> str:
    """A multi-document YAML stream (``---`` between documents)."""
    return "---\n".join(yaml.dump(crd, Dumper=_NoAliasDumper, sort_keys=False, width=100) for crd in crds)


def _definition(name: str, models: list[type[KubeObject]]) -> dict[str, Any]:
    first = options_of(models[0])
    for model in models[1:]:
        other = options_of(model)
        if (other.plural, other.scope, other.singular) != (first.plural, first.scope, first.singular):
            raise ValueError(f"{name}: {models[0].__name__} and {model.__name__} disagree on plural/scope")
    versions = [_version(model, storage=_is_storage(model, models)) for model in models]
    seen = [version["name"] for version in versions]
    if len(set(seen)) != len(seen):
        raise ValueError(f"{name}: a version is declared twice: {seen}")
    names: dict[str, Any] = {
        "kind": first.gvk.kind,
        "listKind": f"{first.gvk.kind}List",
        "plural": first.plural,
        "singular": first.singular,
    }
    short_names = sorted({short for model in models for short in options_of(model).short_names})
    categories = sorted({category for model in models for category in options_of(model).categories})
    if short_names:
        names["shortNames"] = short_names
    if categories:
        names["categories"] = categories
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": first.gvk.group, "names": names, "scope": first.scope, "versions": versions},
    }


def _is_storage(model: type[KubeObject], models: list[type[KubeObject]]) -> bool:
    declared = [m for m in models if options_of(m).storage]
    if len(declared) > 1:
        raise ValueError(f"{options_of(model).name}: more than one version says storage=True")
    if declared:
        return model is declared[0]
    if len(models) > 1:
        raise ValueError(f"{options_of(model).name}: several versions; say storage=True on the stored one")
    return options_of(model).storage is not False


def _version(model: type[KubeObject], *, storage: bool) -> dict[str, Any]:
    options = options_of(model)
    try:
        schema = model_schema(model, root_path=options.gvk.kind)
    except SchemaConversionError as error:
        raise SchemaConversionError(
            f"{model.__module__}.{model.__qualname__}: {error.path}", error.reason
        ) from None
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"description": API_VERSION_DESCRIPTION, "type": "string"}
    properties["kind"] = {"description": KIND_DESCRIPTION, "type": "string"}
    properties["metadata"] = {"type": "object"}
    required = [
        field for field in schema.get("required", ()) if field not in ("apiVersion", "kind", "metadata")
    ]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    if options.rules:
        schema["x-kubernetes-validations"] = [
            *schema.get("x-kubernetes-validations", ()),
            *(rule.to_dict() for rule in options.rules),
        ]
    schema = _sorted(schema)
    version: dict[str, Any] = {"name": options.gvk.version, "served": options.served, "storage": storage}
    if options.deprecated:
        version["deprecated"] = True
        if options.deprecation_warning:
            version["deprecationWarning"] = options.deprecation_warning
    version["schema"] = {"openAPIV3Schema": schema}
    has_status = "status" in model.model_fields if options.status is None else options.status
    subresources: dict[str, Any] = {}
    if has_status:
        subresources["status"] = {}
    if options.scale is not None:
        subresources["scale"] = options.scale.to_dict()
    if subresources:
        version["subresources"] = subresources
    if options.printer_columns:
        version["additionalPrinterColumns"] = [column.to_dict() for column in options.printer_columns]
    if options.selectable_fields:
        version["selectableFields"] = [{"jsonPath": path} for path in options.selectable_fields]
    return version


def _sorted(schema: Any) -> Any:
    """The schema with its keys in alphabetical order, as controller-gen writes it (defaults,
    which are values, keep theirs)."""
    if isinstance(schema, list):
        return [_sorted(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: _sorted(schema[key]) if key != "default" else schema[key] for key in sorted(schema)}
