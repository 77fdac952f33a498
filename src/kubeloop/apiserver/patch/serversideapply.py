"""Server-side apply: an applied configuration merged into the live object as structured-merge-diff
merges it, the fields its manager owned and no longer applies removed, a field another manager
owns a Conflict (unless forced), and the last-applied annotation of a client-side apply taken
over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.patch.fieldmanager import ManagedEntry, scoped
from kubeloop.apiserver.patch.fieldsets import (
    STRIPPED,
    Path,
    field_node,
    field_set,
    key_fields,
    keyed_element,
    list_kind,
    path_string,
    resolve,
    value_key,
)
from kubeloop.apiserver.patch.mergepatch import copy_json


@dataclass(frozen=True)
class Conflict:
    manager: ManagedEntry
    path: Path


def conflict_error(group: str, kind: str, name: str, conflicts: list[Conflict]) -> errors.Conflict:
    """409 as upstream words it: ``Apply failed with 1 conflict: conflict with "m" using v1: .spec.x``."""

    def who(entry: ManagedEntry) -> str:
        return f'"{entry.manager}"' + (f" using {entry.api_version}" if entry.api_version else "")

    causes = [
        errors.StatusCause("FieldManagerConflict", f"conflict with {who(c.manager)}", path_string(c.path))
        for c in conflicts
    ]
    if len(conflicts) == 1:
        detail = f"conflict with {who(conflicts[0].manager)}: {path_string(conflicts[0].path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for c in conflicts:
            by_manager.setdefault(who(c.manager), []).append(path_string(c.path))
        if len(by_manager) == 1:
            ((manager, paths),) = by_manager.items()
            detail = f"conflicts with {manager}" + "".join(f"\n- {p}" for p in paths)
        else:
            detail = "conflicts with" + "".join(
                f"\n{manager}:" + "".join(f"\n- {p}" for p in paths) for manager, paths in by_manager.items()
            )
    plural = "" if len(conflicts) == 1 else "s"
    return errors.Conflict(
        f"Apply failed with {len(conflicts)} conflict{plural}: {detail}",
        name=name,
        group=group,
        kind=kind,
        causes=causes,
    )


@dataclass
class ApplyResult:
    obj: Obj
    entries: list[ManagedEntry]


#: The annotation client-side ``kubectl apply`` records its configuration in.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

#: The one manager whose server-side applies upgrade from client-side apply (upstream's rule:
#: another field manager opts out).
UPGRADING_MANAGER = "kubectl"


def apply(
    live: Obj | None,
    applied: Obj,
    entries: list[ManagedEntry],
    schema: Mapping[str, Any] | None,
    *,
    manager: str,
    api_version: str,
    subresource: str,
    has_status: bool,
    force: bool,
    group: str,
    kind: str,
    name: str,
) -> ApplyResult:
    """Merge ``applied`` into ``live`` for ``manager``; raises the 409 on conflicts unless ``force``."""
    resolved = resolve(schema)
    base = copy_json(live) if live is not None else {}
    (base.get("metadata") or {}).pop("managedFields", None)
    merged = _merge(base, applied, resolved)
    applied_set = scoped(field_set(applied, schema), subresource, has_status)
    identity = (manager, "Apply", api_version, subresource)
    previous = next((e for e in entries if e.identity == identity), None)
    others = [e.copy() for e in entries if e.identity != identity]

    live_set = field_set(base, schema)
    merged_set = field_set(merged, schema)
    conflicts: list[Conflict] = []
    for path, member in applied_set.items():
        if not member.leaf or path not in live_set:
            continue
        if live_set[path].value == merged_set.get(path, member).value:
            continue  # the same value: shared ownership
        conflicts.extend(Conflict(other, path) for other in others if path in other.paths)
    upgrading = manager == UPGRADING_MANAGER and not subresource and LAST_APPLIED in _annotations(base)
    if conflicts and not force and upgrading:
        # kubectl's first server-side apply of an object it applied client-side: the fields the
        # last-applied configuration set, still at those values, were its own and change hands
        # (upstream applies again with force); any other conflict stays one.
        allowed = _last_applied_fields(base, schema)
        remaining = [c for c in conflicts if c.path not in allowed]
        if remaining:
            conflicts = remaining
        else:
            force = True
    if conflicts and not force:
        raise conflict_error(group, kind, name, conflicts)
    taken = {c.path for c in conflicts}

    owned_by_others = set().union(*(e.paths for e in others)) if others else set()
    # The server's own fields (name, uid, ...) are every applier's: never pruned.
    kept = set(applied_set) | owned_by_others | STRIPPED
    _prune(merged, set(merged_set), previous.paths if previous else set(), kept, resolved)
    final_set = field_set(merged, schema)

    result: list[ManagedEntry] = []
    for entry in others:
        entry.paths = {p for p in entry.paths if p not in taken and p in final_set}
        if entry.paths:
            result.append(entry)
    mine = ManagedEntry(manager, "Apply", api_version, subresource, timestamps.now(), set(applied_set))
    if previous is not None and previous.paths == mine.paths:
        mine.time = previous.time
    insert_at = next((i for i, e in enumerate(entries) if e.identity == identity), len(result))
    result.insert(min(insert_at, len(result)), mine)
    if upgrading:
        # The annotation follows what kubectl applied, so a later client-side apply still works.
        merged.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED] = _last_applied_of(
            applied
        )
    return ApplyResult(merged, result)


def _annotations(obj: Obj) -> Mapping[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _last_applied_fields(live: Obj, schema: Mapping[str, Any] | None) -> set[Path]:
    """The leaf fields of the last-applied configuration whose live values are still those."""
    try:
        last_applied = orjson.loads(str(_annotations(live)[LAST_APPLIED]))
    except orjson.JSONDecodeError:
        return set()
    if not isinstance(last_applied, dict):
        return set()
    recorded = field_set(last_applied, schema)
    current = field_set(live, schema)
    return {
        path
        for path, member in recorded.items()
        if member.leaf and path in current and current[path].value == member.value
    }


def _last_applied_of(applied: Obj) -> str:
    """The annotation's value for ``applied``: it as JSON (sorted keys, as Go encodes a map),
    without the annotation itself."""
    copied = copy_json(applied)
    annotations = (copied.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    return orjson.dumps(copied, option=orjson.OPT_SORT_KEYS).decode() + "\n"


def _merge(live: Any, applied: Any, node: Mapping[str, Any]) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict) and node.get("x-kubernetes-map-type") != "atomic":
        properties: Mapping[str, Any] = node.get("properties") or {}
        extra = node.get("additionalProperties")
        out = dict(live)
        for key, value in applied.items():
            child = properties.get(key) or (extra if isinstance(extra, Mapping) else {})
            out[key] = _merge(live[key], value, resolve(child)) if key in live else copy_json(value)
        return out
    if isinstance(live, list) and isinstance(applied, list):
        kind, keys = list_kind(node)
        items = node.get("items")
        item_node = resolve(items) if isinstance(items, Mapping) else {}
        if kind == "map":
            merged = list(live)
            fields = key_fields(keys, item_node)
            index = {keyed_element(item, fields): i for i, item in enumerate(merged)}
            for item in applied:
                key = keyed_element(item, fields)
                if key in index:
                    merged[index[key]] = _merge(merged[index[key]], item, item_node)
                else:
                    index[key] = len(merged)
                    merged.append(copy_json(item))
            return merged
        if kind == "set":
            present = {value_key(item) for item in live}
            return [*live, *(copy_json(i) for i in applied if value_key(i) not in present)]
    return copy_json(applied)


def _prune(
    merged: Obj, present: set[Path], last: set[Path], kept: set[Path], node: Mapping[str, Any]
) -> None:
    """Remove from ``merged`` (whose members are ``present``) what the manager applied last time
    (``last``) and no one owns now (``kept``: its new set and everyone else's), as
    structured-merge-diff's prune does: only what is a member of ``merged`` can go.

    As there, the struct fields on the way to a path the manager applied count as applied too
    (``EnsureNamedFieldsAreMembers``): a struct field none of whose fields are kept goes whole, so
    applying ``spec.nested.x`` and then nothing leaves no ``spec: {nested: {}}`` behind. A path on
    the way to a kept one is never removed (keys applied into a map applied empty before fill it),
    and a container a removal empties, if no one owns it as empty, goes with its last member
    (upstream leaves it null, which the object does not keep).
    """
    if not last:
        return
    leading = {path[:depth] for path in kept for depth in range(1, len(path))}
    removable = present | _named_fields_on_the_way(present, node)
    removed = ((last | _named_fields_on_the_way(last, node)) & removable) - kept - leading
    for path in sorted(removed, key=len):  # an element before its fields: they hold its key
        if _remove(merged, path, node) and len(path) > 1:
            container = path[:-1]
            if container not in kept and _is_empty_container(_value_at(merged, container, node)):
                _remove(merged, container, node)


def _named_fields_on_the_way(paths: Iterable[Path], node: Mapping[str, Any]) -> set[Path]:
    """The prefixes of ``paths`` that end in a field the schema declares (a struct's field, not a
    map's key, a list element or an undeclared field)."""
    named: set[Path] = set()
    for path in paths:
        current = node
        for depth, element in enumerate(path[:-1], start=1):
            kind, value = element[:2], element[2:]
            if kind == "f:":
                properties: Mapping[str, Any] = current.get("properties") or {}
                if value in properties:
                    named.add(path[:depth])
                current, _ = field_node(value, properties, current.get("additionalProperties"))
            else:
                items = current.get("items")
                current = resolve(items) if isinstance(items, Mapping) else {}
    return named


def _is_empty_container(value: Any) -> bool:
    return isinstance(value, (dict, list)) and not value


_NOT_FOUND = object()


def _value_at(obj: Any, path: Path, node: Mapping[str, Any]) -> Any:
    """The value at ``path`` in ``obj`` (``_NOT_FOUND`` if there is none)."""
    return _locate(obj, path, node)[0]


def _locate(obj: Any, path: Path, node: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
    """The value at ``path`` in ``obj`` (``_NOT_FOUND`` if there is none) and its schema node."""
    current: Any = obj
    for element in path:
        kind, value = element[:2], element[2:]
        if kind == "f:":
            if not isinstance(current, dict) or value not in current:
                return _NOT_FOUND, node
            properties: Mapping[str, Any] = node.get("properties") or {}
            node, _ = field_node(value, properties, node.get("additionalProperties"))
            current = current[value]
            continue
        if not isinstance(current, list):
            return _NOT_FOUND, node
        index = _element_index(current, element, node)
        if index is None:
            return _NOT_FOUND, node
        current = current[index]
        items = node.get("items")
        node = resolve(items) if isinstance(items, Mapping) else {}
    return current, node


def _element_index(items: list[Any], element: str, node: Mapping[str, Any]) -> int | None:
    """Where list element ``element`` (``k:``, ``v:`` or ``i:``) is in ``items``, if it is."""
    kind, value = element[:2], element[2:]
    item_schema = node.get("items")
    item_node = resolve(item_schema) if isinstance(item_schema, Mapping) else {}
    _, keys = list_kind(node)
    if kind == "k:":
        fields = key_fields(keys, item_node)
        return next((i for i, item in enumerate(items) if keyed_element(item, fields) == element), None)
    if kind == "v:":
        return next((i for i, item in enumerate(items) if value_key(item) == element), None)
    return int(value) if value.isdigit() and int(value) < len(items) else None


def _remove(obj: Any, path: Path, node: Mapping[str, Any]) -> bool:
    """Remove the member at ``path`` from ``obj``; whether it was there."""
    parent, parent_node = _locate(obj, path[:-1], node)
    element = path[-1]
    if element.startswith("f:"):
        if not isinstance(parent, dict) or element[2:] not in parent:
            return False
        del parent[element[2:]]
        return True
    if not isinstance(parent, list):
        return False
    index = _element_index(parent, element, parent_node)
    if index is None:
        return False
    del parent[index]
    return True
