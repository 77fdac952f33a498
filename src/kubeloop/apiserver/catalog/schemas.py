"""Upstream OpenAPI schemas of the built-in kinds, read from the kubernetes-validate package.

The package ships every release's definitions (``_definitions.json``) with the
``x-kubernetes-patch-merge-key``/``-patch-strategy``/``-list-type``/``-list-map-keys`` extensions.
They are loaded once, lazily (the file is ~2 MB), and shared: validation, strategic merge patch,
``/openapi/v3`` and ``kubectl explain`` all read the same nodes.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import re
import threading
from collections.abc import Mapping
from typing import Any

import orjson

#: The Kubernetes release whose schemas the server serves (the newest kubernetes-validate ships).
_VERSION_DIR = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-local$")

Schema = Mapping[str, Any]


def _schema_root() -> pathlib.Path:
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        raise RuntimeError("the kubernetes-validate package is not installed")
    return pathlib.Path(spec.origin).parent / "kubernetes-json-schema"


@functools.cache
def schema_release() -> str:
    """The newest Kubernetes release with schemas on disk, e.g. ``"1.37.0"``."""
    best: tuple[int, int, int] | None = None
    for entry in _schema_root().iterdir():
        match = _VERSION_DIR.match(entry.name)
        if match:
            version = (int(match[1]), int(match[2]), int(match[3]))
            if best is None or version > best:
                best = version
    if best is None:
        raise RuntimeError("kubernetes-validate ships no schemas")
    return ".".join(map(str, best))


_definitions: Mapping[str, Schema] | None = None
_definitions_loading = threading.Lock()


def definitions() -> Mapping[str, Schema]:
    """All definitions by their OpenAPI name, e.g. ``io.k8s.api.apps.v1.Deployment``: loaded
    once, by whichever thread asks first (the serving loop's or a worker loop's), and the same
    objects for every caller after, as the nodes' identities are what plans and memos key on
    (``patch.fieldsets`` finds a definition by its properties' identity)."""
    global _definitions
    found = _definitions
    if found is None:
        with _definitions_loading:
            found = _definitions
            if found is None:
                path = _schema_root() / f"v{schema_release()}-local" / "_definitions.json"
                document = orjson.loads(path.read_bytes())
                found = _definitions = document["$defs"]
    return found


@functools.cache
def _kind_index() -> Mapping[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, node in definitions().items():
        for gvk in node.get("x-kubernetes-group-version-kind", ()):
            # The first definition wins: upstream lists each GVK on exactly one object type,
            # except meta types (DeleteOptions, WatchEvent) that every group lists.
            index.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return index


def definition_name(group: str, version: str, kind: str) -> str | None:
    """The OpenAPI definition name of a kind, or None if upstream has no schema for it."""
    return _kind_index().get((group, version, kind))


def kind_schema(group: str, version: str, kind: str) -> Schema | None:
    name = definition_name(group, version, kind)
    return definitions()[name] if name else None


def resolve(node: Schema) -> Schema:
    """Follow ``$ref`` (``#/$defs/NAME`` or ``/api/_definitions.json#/$defs/NAME``) to its target.

    Sibling keys of the reference (the description, list extensions) are kept on top of the target.
    """
    seen = 0
    while "$ref" in node:
        ref: str = node["$ref"]
        target = definitions()[ref.rsplit("/", 1)[-1]]
        extras = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **extras} if extras else target
        seen += 1
        if seen > 32:
            raise RuntimeError(f"reference loop at {ref}")
    return node


def node_types(node: Schema) -> tuple[str, ...]:
    """The JSON types a node admits, without ``null`` (which every optional field admits)."""
    raw = node.get("type")
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    return tuple(t for t in raw if t != "null")


def property_schema(node: Schema, field_name: str) -> Schema | None:
    """The schema of one field of an object node, resolved, or None if the field is unknown."""
    props = resolve(node).get("properties")
    if not props or field_name not in props:
        return None
    return resolve(props[field_name])


def items_schema(node: Schema) -> Schema | None:
    items = resolve(node).get("items")
    return resolve(items) if items else None


def additional_properties_schema(node: Schema) -> Schema | None:
    extra = resolve(node).get("additionalProperties")
    if isinstance(extra, Mapping):
        return resolve(extra)
    return None


def is_int_or_string(node: Schema) -> bool:
    one_of = node.get("oneOf")
    if not one_of:
        return False
    kinds = {t for option in one_of for t in node_types(option)}
    return kinds in ({"string", "integer"}, {"string", "number"})


def _references(node: Any, found: set[str]) -> None:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            _references(value, found)
    elif isinstance(node, list):
        for value in node:
            _references(value, found)


def reachable(roots: list[str]) -> dict[str, Schema]:
    """The definitions named by ``roots`` and every definition they reference, by name."""
    defs = definitions()
    seen: dict[str, Schema] = {}
    stack = [r for r in roots if r in defs]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen[name] = defs[name]
            found: set[str] = set()
            _references(defs[name], found)
            stack.extend(r for r in found if r in defs and r not in seen)
    return seen
