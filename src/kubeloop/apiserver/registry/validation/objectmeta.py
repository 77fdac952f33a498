"""``ObjectMeta`` of every kind, as ``apimachinery/pkg/api/validation/objectmeta.go``: names by the
kind's rule, labels, annotations, owner references and finalizers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubeloop.api import naming
from kubeloop.apiserver.registry.validation.causes import (
    NEGATIVE,
    as_dict,
    as_list,
    as_text,
    forbidden,
    invalid,
    is_int,
    required,
    too_long,
)
from kubeloop.errors import StatusCause

__all__ = ["validate_annotations", "validate_labels", "validate_object_meta"]


_NAME_RULES: dict[str, Callable[[str], list[str]]] = {
    "subdomain": naming.dns1123_subdomain_errors,
    "label": naming.dns1123_label_errors,
    "dns1035": naming.dns1035_label_errors,
    "path": naming.path_segment_errors,
}


def _mask_trailing_dash(name: str) -> str:
    """apimachinery maskTrailingDash: a generateName prefix may end in '-'."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def validate_object_meta(
    obj: Mapping[str, Any],
    *,
    namespaced: bool,
    name_rule: str = "subdomain",
    kube_finalizers: bool = False,
) -> list[StatusCause]:
    """``ValidateObjectMeta`` on create: name, namespace, labels, annotations, owners, finalizers.

    The namespace must already be filled from the URL (upstream's BeforeCreate does it first).
    ``kube_finalizers`` adds core's rule that a finalizer without '/' be a standard one.
    """
    name_errors = _NAME_RULES.get(name_rule)
    if name_errors is None:
        raise ValueError(f"unknown name rule {name_rule!r}")
    meta = obj.get("metadata")
    if type(meta) is not dict:
        meta = as_dict(meta)
    causes: list[StatusCause] = []
    get = meta.get
    # Every write's metadata comes here: what is absent or valid costs a check and no call more
    # (``as_text`` and ``is_int`` written out).
    generate_name = get("generateName")
    if generate_name and isinstance(generate_name, str):
        for msg in name_errors(_mask_trailing_dash(generate_name)):
            causes.append(invalid("metadata.generateName", generate_name, msg))
    name = get("name")
    if not name or not isinstance(name, str):
        causes.append(required("metadata.name", "name or generateName is required"))
    elif name_errors_found := name_errors(name):
        causes.extend(invalid("metadata.name", name, msg) for msg in name_errors_found)

    namespace = get("namespace")
    if not isinstance(namespace, str):
        namespace = ""
    if namespaced:
        if not namespace:
            causes.append(required("metadata.namespace"))
        elif namespace_errors := _namespace_errors(namespace):
            causes.extend(invalid("metadata.namespace", namespace, msg) for msg in namespace_errors)
    elif namespace:
        causes.append(forbidden("metadata.namespace", "not allowed on this type"))

    generation = get("generation")
    if generation is not None and is_int(generation) and generation < 0:
        causes.append(invalid("metadata.generation", generation, NEGATIVE))

    if labels := get("labels"):
        causes.extend(validate_labels(labels, "metadata.labels"))
    if annotations := get("annotations"):
        causes.extend(validate_annotations(annotations, "metadata.annotations"))
    if owners := get("ownerReferences"):
        causes.extend(_owner_references(owners))
    if finalizers := get("finalizers"):
        causes.extend(_finalizers(finalizers, kube_finalizers))
    return causes


#: Namespaces already judged valid: a server's writes name a few namespaces over and over.
_VALID_NAMESPACES: set[str] = set()


def _namespace_errors(namespace: str) -> list[str]:
    if namespace in _VALID_NAMESPACES:
        return []
    errors = naming.dns1123_label_errors(namespace)
    if not errors and len(_VALID_NAMESPACES) < 4096:
        _VALID_NAMESPACES.add(namespace)
    return errors


def validate_labels(labels: Any, path: str) -> list[StatusCause]:
    """``ValidateLabels``: keys are qualified names, values label values; field without the key."""
    causes: list[StatusCause] = []
    for key, value in as_dict(labels).items():
        causes.extend(invalid(path, key, msg) for msg in naming.qualified_name_errors(key))
        text = value if isinstance(value, str) else ""
        causes.extend(invalid(path, text, msg) for msg in naming.label_value_errors(text))
    return causes


def validate_annotations(annotations: Any, path: str) -> list[StatusCause]:
    """``ValidateAnnotations``: keys are qualified names (case-insensitively), total ≤ 256 KiB."""
    mapping = {key: value if isinstance(value, str) else "" for key, value in as_dict(annotations).items()}
    causes: list[StatusCause] = []
    for key in mapping:
        causes.extend(invalid(path, key, msg) for msg in naming.qualified_name_errors(key.lower()))
    if mapping and naming.annotations_size_errors(mapping):
        causes.append(too_long(path, naming.ANNOTATIONS_SIZE_LIMIT))
    return causes


def _owner_references(refs: Any) -> list[StatusCause]:
    causes: list[StatusCause] = []
    controllers: list[str] = []
    for index, ref in enumerate(as_list(refs)):
        path = f"metadata.ownerReferences[{index}]"
        ref = as_dict(ref)
        api_version, kind = as_text(ref.get("apiVersion")), as_text(ref.get("kind"))
        group, version, parsed = _parse_group_version(api_version)
        if not api_version:
            causes.append(required(f"{path}.apiVersion", "must not be empty"))
        elif not parsed or not version:
            causes.append(
                invalid(f"{path}.apiVersion", api_version, "must be <group>/<version> or <version>")
            )
        if not kind:
            causes.append(required(f"{path}.kind", "must not be empty"))
        if not as_text(ref.get("name")):
            causes.append(required(f"{path}.name", "must not be empty"))
        if not as_text(ref.get("uid")):
            causes.append(required(f"{path}.uid", "must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            causes.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            controllers.append(f"{kind}/{as_text(ref.get('name'))}")
            if len(controllers) > 1:
                causes.append(
                    invalid(
                        "metadata.ownerReferences",
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in references '
                        f"for {controllers[0]} and {controllers[-1]}",
                    )
                )
    return causes


def _parse_group_version(text: str) -> tuple[str, str, bool]:
    """schema.ParseGroupVersion: ("", "v1"), ("apps", "v1"); False for ``a/b/c``."""
    if not text or text == "/":
        return "", "", True
    parts = text.split("/")
    if len(parts) == 1:
        return "", text, True
    if len(parts) == 2:
        return parts[0], parts[1], True
    return "", "", False


_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _finalizers(finalizers: Any, kube_finalizers: bool) -> list[StatusCause]:
    causes: list[StatusCause] = []
    names = [f for f in as_list(finalizers) if isinstance(f, str)]
    for index, name in enumerate(names):
        causes.extend(invalid("metadata.finalizers", name, msg) for msg in naming.qualified_name_errors(name))
        if kube_finalizers and "/" not in name and name not in _STANDARD_FINALIZERS:
            causes.append(
                invalid(
                    f"metadata.finalizers[{index}]",
                    name,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    if "orphan" in names and "foregroundDeletion" in names:
        causes.append(
            invalid(
                "metadata.finalizers", names, "finalizer orphan and foregroundDeletion cannot be both set"
            )
        )
    return causes
