"""Field ownership: ``metadata.managedFields``, and the merge behind server-side apply.

Every write records which manager set which fields, as kube-apiserver does with
structured-merge-diff. A field path is a tuple of FieldsV1 elements — ``f:name`` (a field or map
key), ``k:{"name":"c"}`` (a list-map element by its keys), ``v:"x"`` (a set element), ``i:0`` —
and a field set is a set of such paths, written out as FieldsV1 (nested objects; ``"."`` marks a
path that is a member and also has members below it).

Which paths an object has follows the schema (``field_set``): struct fields and map entries
nest; lists are ``x-kubernetes-list-type`` map (elements by ``x-kubernetes-list-map-keys``, or by
the patch merge key), set, or atomic (a leaf, the default); ``x-kubernetes-map-type: atomic``
maps and structs are leaves. A scalar, an atomic value, an empty object, a list element and a map
entry are members.

- Update operations (create, update, every patch type, subresources): the fields the write added
  or changed go to the writing manager (taken from everyone else), removed fields leave every set.
- Apply: the applied configuration is merged into the live object; fields the manager applied
  before and no longer applies are removed unless another manager owns them (structured-merge-
  diff's prune: the struct fields on the way count as applied, what leads to a kept field stays,
  only members of the merged object go — ``_prune``); fields it applies
  with a value another manager owns and the live object holds differently are conflicts (409)
  unless ``force`` takes them over. The manager's Apply entry is then exactly the applied set.

Simplifications: metadata fields the server owns (name, uid, resourceVersion, ...) are never
tracked, as upstream's stripping does; the ten-Update-managers cap ("ancient-changes") is not
applied.
"""

from __future__ import annotations

import copy
import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import orjson

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog import schemas

Path = tuple[str, ...]

#: Paths upstream strips from every manager's set (stripmeta.go) — they belong to the server.
_STRIPPED = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        ("f:metadata", "f:name"),
        ("f:metadata", "f:namespace"),
        ("f:metadata", "f:creationTimestamp"),
        ("f:metadata", "f:selfLink"),
        ("f:metadata", "f:uid"),
        ("f:metadata", "f:generation"),
        ("f:metadata", "f:managedFields"),
        ("f:metadata", "f:resourceVersion"),
        ("f:metadata", "f:deletionTimestamp"),
        ("f:metadata", "f:deletionGracePeriodSeconds"),
    }
)


# ---------------------------------------------------------------------------- FieldsV1


def encode_fields_v1(paths: Iterable[Path]) -> Obj:
    """A field set as FieldsV1."""
    root: Obj = {}
    members: set[int] = set()
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
        members.add(id(node))
    _mark_members(root, members)
    return root


def _mark_members(node: Obj, members: set[int]) -> None:
    """Add "." to the nodes with children that are members themselves. (Module-level, not a
    recursive closure: a closure that calls itself is a reference cycle, left to the cyclic
    GC after every call; one per write was a quarter of the server's gen-0 collections.)"""
    for key, child in node.items():
        if key == ".":
            continue
        _mark_members(child, members)
        if child and id(child) in members:
            child["."] = {}


def _sorted_in_steps(paths: Iterable[Path], step: int = 4096) -> list[Path]:
    """``sorted(paths)``, in sorts of ``step`` paths merged by Python code: one C sort of tens of
    thousands of paths (a map of that many keys) holds the interpreter lock long enough to stall
    every thread."""
    items = list(paths)
    if len(items) <= step:
        return sorted(items)
    runs = [sorted(items[i : i + step]) for i in range(0, len(items), step)]
    return list(heapq.merge(*runs))


def decode_fields_v1(document: Any) -> set[Path]:
    """A FieldsV1 object as a set of paths; ValueError when it is not one."""
    paths: set[Path] = set()
    _collect_paths(document, (), paths)
    return paths


def _collect_paths(node: Any, prefix: Path, paths: set[Path]) -> None:
    """The paths of FieldsV1 ``node`` (at ``prefix``) into ``paths`` (module-level: see _mark_members)."""
    if not isinstance(node, dict):
        raise ValueError(f"expected an object at {'.'.join(prefix) or 'the root'}")
    if not node and prefix:
        paths.add(prefix)
    for key, child in node.items():
        if key == ".":
            if child != {}:
                raise ValueError('"." must map to {}')
            paths.add(prefix)
            continue
        if not isinstance(key, str) or key[:2] not in ("f:", "k:", "v:", "i:"):
            raise ValueError(f"{key!r} is not a FieldsV1 path element")
        if key[:2] in ("k:", "v:"):
            try:
                orjson.loads(key[2:])
            except orjson.JSONDecodeError:
                raise ValueError(f"{key!r} does not hold JSON") from None
        _collect_paths(child, (*prefix, key), paths)


def path_string(path: Path) -> str:
    """structured-merge-diff's rendering: ``.spec.containers[name="c"].image``."""
    out = []
    for element in path:
        kind, value = element[:2], element[2:]
        if kind == "f:":
            out.append(f".{value}")
        elif kind == "k:":
            keys = orjson.loads(value)
            out.append("[" + ",".join(f"{k}={orjson.dumps(v).decode()}" for k, v in keys.items()) + "]")
        elif kind == "v:":
            out.append(f"[={value}]")
        else:
            out.append(f"[{value}]")
    return "".join(out)


# ---------------------------------------------------------------------------- field sets

R = TypeVar("R")
_RESOLVED: dict[int, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
_LIST_KINDS: dict[int, tuple[Mapping[str, Any], tuple[str, list[str]]]] = {}


def _per_node(
    cache: dict[int, tuple[Mapping[str, Any], R]],
    node: Mapping[str, Any],
    compute: Callable[[Mapping[str, Any]], R],
) -> R:
    """``compute(node)`` memoised per schema node (nodes live as long as the loaded schemas;
    the node kept beside the answer tells a reused id apart)."""
    cached = cache.get(id(node))
    if cached is not None and cached[0] is node:
        return cached[1]
    found = compute(node)
    cache[id(node)] = (node, found)
    return found


def _resolve(node: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``schemas.resolve`` of a schema node, memoised."""
    return _per_node(_RESOLVED, node, schemas.resolve) if node else {}


class Member(NamedTuple):
    value: Any
    leaf: bool  # a scalar or atomic value: compared by value; otherwise a container that is a member


def _list_kind(node: Mapping[str, Any]) -> tuple[str, list[str]]:
    """How a list of schema ``node`` merges: ("map", its keys), ("set", []) or ("atomic", []);
    memoised (callers do not change the keys)."""
    return _per_node(_LIST_KINDS, node, _list_kind_of) if node else _list_kind_of(node)


def _list_kind_of(node: Mapping[str, Any]) -> tuple[str, list[str]]:
    kind = node.get("x-kubernetes-list-type")
    if kind == "map":
        return "map", list(node.get("x-kubernetes-list-map-keys") or ())
    if kind in ("set", "atomic"):
        return str(kind), []
    strategies = str(node.get("x-kubernetes-patch-strategy", "")).split(",")
    if "merge" in strategies:
        key = node.get("x-kubernetes-patch-merge-key")
        if key:
            return "map", [str(key)]
        return "set", []
    return "atomic", []


#: Defaults of list-map key fields the upstream schemas declare (``+default="TCP"`` on the ports'
#: protocol) but kubernetes-validate's copies leave out; a schema's own ``default`` wins.
_KEY_DEFAULTS = {"protocol": "TCP"}


def _element_key(item: Any, keys: list[str], item_node: Mapping[str, Any] | None = None) -> str:
    """``k:{...}`` of a list-map element; a missing key field takes its default, as upstream."""
    present: Obj = {}
    properties: Mapping[str, Any] = (item_node or {}).get("properties") or {}
    for key in sorted(keys):
        if isinstance(item, dict) and key in item:
            present[key] = item[key]
        elif isinstance(properties.get(key), Mapping) and "default" in properties[key]:
            present[key] = properties[key]["default"]
        elif key in _KEY_DEFAULTS and key in properties:
            present[key] = _KEY_DEFAULTS[key]
    return "k:" + orjson.dumps(present).decode()


def _value_key(item: Any) -> str:
    return "v:" + orjson.dumps(item, option=orjson.OPT_SORT_KEYS).decode()


def field_set(
    obj: Any, schema: Mapping[str, Any] | None, maps: set[Path] | None = None
) -> dict[Path, Member]:
    """The member paths of ``obj`` (structured-merge-diff's ToFieldSet), with their values.

    ``maps`` collects the paths of the maps (not structs) the object holds, which an Update that
    creates them owns as members too.
    """
    out: dict[Path, Member] = {}
    _walk(obj, _resolve(schema), (), out, maps if maps is not None else set())
    for stripped in _STRIPPED:
        out.pop(stripped, None)
    return out


def _walk(value: Any, node: Mapping[str, Any], path: Path, out: dict[Path, Member], maps: set[Path]) -> None:
    if isinstance(value, dict):
        if node.get("x-kubernetes-map-type") == "atomic":
            if path:
                out[path] = Member(value, True)
            return
        properties: Mapping[str, Any] = node.get("properties") or {}
        if path and not properties:
            maps.add(path)
        extra = node.get("additionalProperties")
        for key, child in value.items():
            _walk_field(key, child, properties, extra, path, out, maps)
        return
    if isinstance(value, list):
        kind, keys = _list_kind(node)
        items = node.get("items")
        item_node = _resolve(items) if isinstance(items, Mapping) else {}
        if kind == "atomic":
            if path:
                out[path] = Member(value, True)
            return
        for item in value:
            if kind == "set":
                out[(*path, _value_key(item))] = Member(item, True)
                continue
            element = (*path, _element_key(item, keys, item_node))
            _walk(item, item_node, element, out, maps)
            out[element] = Member(item, False)
        return
    if path:
        out[path] = Member(value, True)


def _field_node(key: str, properties: Mapping[str, Any], extra: Any) -> tuple[Mapping[str, Any], bool]:
    """The resolved schema of an object's field ``key``, and whether the schema declares it."""
    declared = key in properties
    child_node = properties.get(key) if declared else extra if isinstance(extra, Mapping) else {}
    return _resolve(child_node), declared


def _walk_field(
    key: str,
    child: Any,
    properties: Mapping[str, Any],
    extra: Any,
    path: Path,
    out: dict[Path, Member],
    maps: set[Path],
) -> None:
    """The members of one field of an object: the field's value and what lies below it."""
    child_path = (*path, f"f:{key}")
    resolved, declared = _field_node(key, properties, extra)
    _walk(child, resolved, child_path, out, maps)
    if child is None or (isinstance(child, dict) and not child):
        out[child_path] = Member(child, True)
    elif not declared and child_path not in out:
        out[child_path] = Member(child, False)


def changed_paths(old: dict[Path, Member], new: dict[Path, Member]) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) between two field sets."""
    changed = {p for p, m in new.items() if p not in old or (m.leaf and old[p].value != m.value)}
    removed = set(old) - set(new)
    return changed, removed


_ABSENT: Any = object()


def update_changes(
    old: Obj, new: Obj, schema: Mapping[str, Any] | None, in_scope: Callable[[str], bool]
) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) member paths between ``old`` and ``new``, as ``changed_paths``
    of their whole field sets gives them (maps an update creates or removes included), walking
    only the parts that differ: an update of one field costs that field, not the object.
    ``in_scope`` says which top-level fields count."""
    changed: set[Path] = set()
    removed: set[Path] = set()
    resolved = _resolve(schema)
    properties: Mapping[str, Any] = resolved.get("properties") or {}
    extra = resolved.get("additionalProperties")
    for key in {**old, **new}:
        if in_scope(key):
            _diff_field(
                key, old.get(key, _ABSENT), new.get(key, _ABSENT), properties, extra, (), changed, removed
            )
    return changed, removed


def _diff_field(
    key: str,
    before: Any,
    after: Any,
    properties: Mapping[str, Any],
    extra: Any,
    path: Path,
    changed: set[Path],
    removed: set[Path],
) -> None:
    if before is after or (before is not _ABSENT and after is not _ABSENT and before == after):
        return
    if isinstance(before, dict) and isinstance(after, dict) and before and after:
        resolved, _ = _field_node(key, properties, extra)
        if resolved.get("x-kubernetes-map-type") != "atomic":
            # Both non-empty objects: the field is a member on both sides (or on neither) and a
            # map on both sides (or on neither); only what differs below it can change.
            child_path = (*path, f"f:{key}")
            child_properties: Mapping[str, Any] = resolved.get("properties") or {}
            child_extra = resolved.get("additionalProperties")
            for child_key in {**before, **after}:
                _diff_field(
                    child_key,
                    before.get(child_key, _ABSENT),
                    after.get(child_key, _ABSENT),
                    child_properties,
                    child_extra,
                    child_path,
                    changed,
                    removed,
                )
            return
    old_set: dict[Path, Member] = {}
    new_set: dict[Path, Member] = {}
    old_maps: set[Path] = set()
    new_maps: set[Path] = set()
    if before is not _ABSENT:
        _walk_field(key, before, properties, extra, path, old_set, old_maps)
    if after is not _ABSENT:
        _walk_field(key, after, properties, extra, path, new_set, new_maps)
    if not path or path[0] == "f:metadata":
        for stripped in _STRIPPED:
            old_set.pop(stripped, None)
            new_set.pop(stripped, None)
    added, gone = changed_paths(old_set, new_set)
    changed |= added
    removed |= gone
    changed.update(p for p in new_maps if p not in old_maps and p not in old_set)
    removed.update(p for p in old_maps if p not in new_maps and p not in new_set)


# ---------------------------------------------------------------------------- managedFields entries


@dataclass
class ManagedEntry:
    manager: str
    operation: str  # "Apply" or "Update"
    api_version: str
    subresource: str = ""
    time: str = ""
    paths: set[Path] = field(default_factory=set)
    #: The managedFields item this entry was read from, and what it said: ``to_dict`` gives the
    #: item itself back while the entry still says that (most writes leave most entries alone).
    source: tuple[Obj, tuple[str, str, str, str, str], set[Path]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.manager, self.operation, self.api_version, self.subresource)

    def to_dict(self) -> Obj:
        source = self.source
        if source is not None and source[2] is self.paths and source[1] == (*self.identity, self.time):
            return source[0]
        out: Obj = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = encode_fields_v1(_sorted_in_steps(self.paths))
        if self.subresource:
            out["subresource"] = self.subresource
        return out


#: Live objects' managedFields lists as parsed, by identity: stored objects are never changed in
#: place, so a list read again (the next write of the same object) needs no parsing.
_PARSED: OrderedDict[int, tuple[list[Any], list[ManagedEntry]]] = OrderedDict()
_PARSED_LIMIT = 16384
_PARSED_LOCK = threading.Lock()


def parse_managed_fields(raw: Any) -> list[ManagedEntry]:
    """``metadata.managedFields`` as entries; BadRequest naming the field when malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _invalid_managed("must be a list")
    entries: list[ManagedEntry] = []
    for index, item in enumerate(raw):
        where = f"metadata.managedFields[{index}]"
        if not isinstance(item, dict):
            raise _invalid_managed(f"{where} must be an object")
        operation = item.get("operation")
        if operation not in ("Apply", "Update"):
            raise _invalid_managed(f'{where}.operation: Unsupported value: "{operation}"')
        fields_type = item.get("fieldsType", "FieldsV1")
        if fields_type != "FieldsV1":
            raise _invalid_managed(f'{where}.fieldsType: Unsupported value: "{fields_type}"')
        try:
            paths = decode_fields_v1(item.get("fieldsV1") or {})
        except ValueError as exc:
            raise _invalid_managed(f"{where}.fieldsV1: {exc}") from None
        entries.append(
            ManagedEntry(
                manager=str(item.get("manager") or ""),
                operation=str(operation),
                api_version=str(item.get("apiVersion") or ""),
                subresource=str(item.get("subresource") or ""),
                time=str(item.get("time") or ""),
                paths=paths,
            )
        )
    return entries


def _is_canonical(item: Obj, entry: ManagedEntry) -> bool:
    """Whether ``entry.to_dict()`` would give ``item`` back (key order aside)."""
    expected = 5 + bool(entry.time) + bool(entry.subresource)  # as to_dict writes it
    return (
        len(item) == expected
        and item.get("manager") == entry.manager
        and item.get("operation") == entry.operation
        and item.get("apiVersion") == entry.api_version
        and item.get("fieldsType") == "FieldsV1"
        and item.get("time", "") == entry.time
        and item.get("subresource", "") == entry.subresource
        and bool(entry.paths)
    )


def live_entries(raw: Any) -> list[ManagedEntry]:
    """``parse_managed_fields`` of a stored object's managedFields, parsed once per list; the
    entries remember their items (the server wrote them), which the next write can keep."""
    if not isinstance(raw, list):
        return parse_managed_fields(raw)
    cached = _PARSED.get(id(raw))
    if cached is not None and cached[0] is raw:
        return list(cached[1])
    entries = parse_managed_fields(raw)
    for item, entry in zip(raw, entries, strict=True):
        if _is_canonical(item, entry):
            entry.source = (item, (*entry.identity, entry.time), entry.paths)
    _remember(raw, entries)
    return list(entries)


def encode_entries(entries: list[ManagedEntry]) -> list[Obj]:
    """The managedFields list of ``entries``, to be stored: the next write of the object finds
    its entries already parsed (``live_entries``)."""
    raw = [entry.to_dict() for entry in entries]
    for item, entry in zip(raw, entries, strict=True):
        entry.source = (item, (*entry.identity, entry.time), entry.paths)
    _remember(raw, list(entries))
    return raw


def _remember(raw: list[Any], entries: list[ManagedEntry]) -> None:
    with _PARSED_LOCK:  # large writes run on the worker loop's thread too
        while len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.popitem(
                last=False
            )  # the oldest (a dict's first key is slow to find after many deletions)
        _PARSED[id(raw)] = (raw, entries)


def _invalid_managed(message: str) -> errors.BadRequest:
    return errors.BadRequest(f"metadata.managedFields: Invalid value: {message}")


def _scoped(paths: dict[Path, Member], subresource: str, has_status: bool) -> dict[Path, Member]:
    """The paths a write through ``subresource`` may own: status only through /status."""
    if not has_status:
        return paths
    in_scope = _scope_test(subresource, has_status)
    return {p: m for p, m in paths.items() if p and in_scope(p[0][2:])}


def _scope_test(subresource: str, has_status: bool) -> Callable[[str], bool]:
    """Which top-level fields a write through ``subresource`` may own: with a status
    subresource, status only through /status and nothing else through it."""
    if not has_status:
        return lambda key: True
    if subresource == "status":
        return lambda key: key == "status"
    return lambda key: key != "status"


def starting_entries(old: Obj | None, new: Obj) -> list[ManagedEntry]:
    """The managers before this write: the live object's, or the ones the client sent.

    As upstream: an empty list leaves them as they are (clients unaware of the field), a list
    holding one empty entry resets them, any other change replaces them.
    """
    stored = ((old or {}).get("metadata") or {}).get("managedFields")
    sent = (new.get("metadata") or {}).get("managedFields")
    if sent is None or sent == [] or sent == stored:  # a patch carries the stored list along
        return live_entries(stored)
    if sent == [{}]:
        return []
    return parse_managed_fields(sent)


def record_update(
    entries: list[ManagedEntry],
    old: Obj | None,
    new: Obj,
    schema: Mapping[str, Any] | None,
    *,
    manager: str,
    api_version: str,
    subresource: str,
    has_status: bool,
) -> list[ManagedEntry]:
    """The entries after an Update operation by ``manager`` that turned ``old`` into ``new``."""
    if old is not None:
        changed, removed = update_changes(old, new, schema, _scope_test(subresource, has_status))
    else:
        new_maps: set[Path] = set()
        changed = set(_scoped(field_set(new, schema, new_maps), subresource, has_status))
        # A map this write creates is the writer's as a whole too ("." in FieldsV1), as upstream,
        # where the old object is the Go zero value in which maps are nil.
        changed.update(_scoped({p: Member(None, False) for p in new_maps}, subresource, has_status))
        removed = set()
    identity = (manager, "Update", api_version, subresource)
    result: list[ManagedEntry] = []
    mine: ManagedEntry | None = None
    for entry in entries:
        if entry.identity == identity:
            entry = copy.copy(entry)
            mine = entry
            entry.paths = entry.paths - removed
        elif not entry.paths.isdisjoint(removed) or not entry.paths.isdisjoint(changed):
            entry = copy.copy(entry)
            entry.paths = entry.paths - removed - changed
        result.append(entry)
    if changed:
        if mine is None:
            mine = ManagedEntry(manager, "Update", api_version, subresource)
            result.append(mine)
        mine.paths = mine.paths | changed
        mine.time = timestamps.now()
    return [e for e in result if e.paths]


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
    resolved = _resolve(schema)
    base = copy.deepcopy(live) if live is not None else {}
    (base.get("metadata") or {}).pop("managedFields", None)
    merged = _merge(base, applied, resolved)
    applied_set = _scoped(field_set(applied, schema), subresource, has_status)
    identity = (manager, "Apply", api_version, subresource)
    previous = next((e for e in entries if e.identity == identity), None)
    others = [copy.copy(e) for e in entries if e.identity != identity]

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
    kept = set(applied_set) | owned_by_others | _STRIPPED
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
    copied = copy.deepcopy(applied)
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
            out[key] = _merge(live[key], value, _resolve(child)) if key in live else copy.deepcopy(value)
        return out
    if isinstance(live, list) and isinstance(applied, list):
        kind, keys = _list_kind(node)
        items = node.get("items")
        item_node = _resolve(items) if isinstance(items, Mapping) else {}
        if kind == "map":
            merged = list(live)
            index = {_element_key(item, keys, item_node): i for i, item in enumerate(merged)}
            for item in applied:
                key = _element_key(item, keys, item_node)
                if key in index:
                    merged[index[key]] = _merge(merged[index[key]], item, item_node)
                else:
                    index[key] = len(merged)
                    merged.append(copy.deepcopy(item))
            return merged
        if kind == "set":
            present = {_value_key(item) for item in live}
            return [*live, *(copy.deepcopy(i) for i in applied if _value_key(i) not in present)]
    return copy.deepcopy(applied)


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
                current, _ = _field_node(value, properties, current.get("additionalProperties"))
            else:
                items = current.get("items")
                current = _resolve(items) if isinstance(items, Mapping) else {}
    return named


def _is_empty_container(value: Any) -> bool:
    return isinstance(value, dict | list) and not value


_ABSENT = object()


def _value_at(obj: Any, path: Path, node: Mapping[str, Any]) -> Any:
    """The value at ``path`` in ``obj`` (``_ABSENT`` if there is none)."""
    return _locate(obj, path, node)[0]


def _locate(obj: Any, path: Path, node: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
    """The value at ``path`` in ``obj`` (``_ABSENT`` if there is none) and its schema node."""
    current: Any = obj
    for element in path:
        kind, value = element[:2], element[2:]
        if kind == "f:":
            if not isinstance(current, dict) or value not in current:
                return _ABSENT, node
            properties: Mapping[str, Any] = node.get("properties") or {}
            node, _ = _field_node(value, properties, node.get("additionalProperties"))
            current = current[value]
            continue
        if not isinstance(current, list):
            return _ABSENT, node
        index = _element_index(current, element, node)
        if index is None:
            return _ABSENT, node
        current = current[index]
        items = node.get("items")
        node = _resolve(items) if isinstance(items, Mapping) else {}
    return current, node


def _element_index(items: list[Any], element: str, node: Mapping[str, Any]) -> int | None:
    """Where list element ``element`` (``k:``, ``v:`` or ``i:``) is in ``items``, if it is."""
    kind, value = element[:2], element[2:]
    item_schema = node.get("items")
    item_node = _resolve(item_schema) if isinstance(item_schema, Mapping) else {}
    _, keys = _list_kind(node)
    if kind == "k:":
        return next(
            (i for i, item in enumerate(items) if _element_key(item, keys, item_node) == element), None
        )
    if kind == "v:":
        return next((i for i, item in enumerate(items) if _value_key(item) == element), None)
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
