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

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.patch.fieldsets import (
    STRIPPED,
    Member,
    Path,
    RepeatedElement,
    created_fields_v1,
    decode_fields_v1,
    encode_fields_v1,
    field_set,
    sorted_in_steps,
    update_changes,
)
from kubeloop.freeing import free_in_steps
from kubeloop.gcuntrack import untrack


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

    def copy(self) -> ManagedEntry:
        """A shallow copy, every field included (``copy.copy`` goes through ``__reduce_ex__``:
        ~4.7 µs against ~1)."""
        copied = object.__new__(ManagedEntry)
        copied.__dict__.update(self.__dict__)
        return copied

    def to_dict(self) -> Obj:
        source = self.source
        if source is not None and source[2] is self.paths and source[1] == (*self.identity, self.time):
            return source[0]
        out: Obj = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = encode_fields_v1(sorted_in_steps(self.paths))
        if self.subresource:
            out["subresource"] = self.subresource
        return out


#: Live objects' managedFields lists as parsed, by identity: stored objects are never changed in
#: place, so a list read again (the next write of the same object) needs no parsing.
_PARSED: OrderedDict[int, tuple[list[Any], list[ManagedEntry]]] = OrderedDict()

_PARSED_LIMIT = 16384
#: Lists with more paths than this in all are not kept: parsing them again at the next write costs
#: less than keeping them, since the GC pass that first finds their path tuples walks them all
#: with every thread held up (a 1 MB ConfigMap's 30,000 paths: a 15 ms pass; a 2.9 MB body the
#: server refused still had its 87,000 kept, a 44 ms pass: ``bench/stall.py``).
_PARSED_MAX_PATHS = 4096

_PARSED_LOCK = threading.Lock()


def parse_managed_fields(raw: Any) -> list[ManagedEntry]:
    """``metadata.managedFields`` as entries; BadRequest naming the field when malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _invalid_managed("must be a list")
    return [_parse_item(index, item) for index, item in enumerate(raw)]


def _parse_item(index: int, item: Any) -> ManagedEntry:
    """Item ``index`` of a managedFields list as an entry; BadRequest naming it when malformed."""
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
    return ManagedEntry(
        manager=str(item.get("manager") or ""),
        operation=str(operation),
        api_version=str(item.get("apiVersion") or ""),
        subresource=str(item.get("subresource") or ""),
        time=str(item.get("time") or ""),
        paths=paths,
    )


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
    """``parse_managed_fields`` of a stored object's managedFields: as ``encode_entries`` kept
    them when it wrote the list, else parsed; the entries remember their items (the server
    wrote them), which the next write can keep. A list parsed here is not kept: the write
    reading it stores a list of its own (kept by ``encode_entries``), and keeping one costs
    about what parsing it again does (~6 against ~7 µs for a created object's)."""
    if not isinstance(raw, list):
        return parse_managed_fields(raw)
    cached = _PARSED.get(id(raw))
    if cached is not None and cached[0] is raw:
        return list(cached[1])
    entries = parse_managed_fields(raw)
    for item, entry in zip(raw, entries, strict=True):
        if _is_canonical(item, entry):
            entry.source = (item, (*entry.identity, entry.time), entry.paths)
    return entries


def encode_entries(entries: list[ManagedEntry]) -> list[Obj]:
    """The managedFields list of ``entries``, to be stored: the next write of the object finds
    its entries already parsed (``live_entries``)."""
    raw = [entry.to_dict() for entry in entries]
    for item, entry in zip(raw, entries, strict=True):
        entry.source = (item, (*entry.identity, entry.time), entry.paths)
    _remember(raw, list(entries))
    return raw


def _remember(raw: list[Any], entries: list[ManagedEntry]) -> None:
    if sum(len(entry.paths) for entry in entries) > _PARSED_MAX_PATHS:
        return
    with _PARSED_LOCK:  # large writes run on the worker loop's thread too
        while len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.popitem(
                last=False
            )  # the oldest (a dict's first key is slow to find after many deletions)
        _PARSED[id(raw)] = kept = (raw, entries)
    # Out of the cyclic GC's sight: a full pass walked the kept entries, their path sets and
    # lists (five containers a list), 62 ms for 16,384 lists on a slow day, holding every
    # request up. They hold plain values only, never a cycle.
    untrack(kept)
    untrack(entries)
    for entry in entries:
        untrack(entry)
        untrack(entry.paths)
        if entry.source is not None:
            untrack(entry.source)


def _invalid_managed(message: str) -> errors.BadRequest:
    return errors.BadRequest(f"metadata.managedFields: Invalid value: {message}")


def scoped(paths: dict[Path, Member], subresource: str, has_status: bool) -> dict[Path, Member]:
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


#: Field sets larger than this are freed a member at a time (:mod:`kubeloop.freeing`).
FREED_IN_STEPS = 4096


def record_create(
    new: Obj,
    schema: Mapping[str, Any] | None,
    *,
    manager: str,
    api_version: str,
    has_status: bool,
    unstructured: bool = False,
) -> list[Obj]:
    """The managedFields of ``new`` as an Update operation by ``manager`` creates it:
    ``encode_entries(record_update(starting_entries(None, new), None, new, ...))``, with the
    manager's fields encoded as they are walked (``created_fields_v1``) when it is the only
    manager (the client sent no managedFields, as clients do). Nothing is kept parsed for the
    next write, which parses the list if it comes (many objects are written once).
    ``unstructured``: the kind is a custom resource's (its objects are maps to
    structured-merge-diff: ``fieldsets._Plan.created_member``)."""
    sent = (new.get("metadata") or {}).get("managedFields")
    if sent is None or sent == [] or sent == [{}]:
        try:
            fields = created_fields_v1(new, schema, _scope_test("", has_status), unstructured=unstructured)
        except RepeatedElement:
            pass
        else:
            if not fields:
                return []
            return [
                {
                    "manager": manager,
                    "operation": "Update",
                    "apiVersion": api_version,
                    "time": timestamps.now(),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields,
                }
            ]
    entries = record_update(
        starting_entries(None, new),
        None,
        new,
        schema,
        manager=manager,
        api_version=api_version,
        subresource="",
        has_status=has_status,
        unstructured=unstructured,
    )
    return encode_entries(entries) if entries else []


def record_stored_update(
    old: Obj,
    new: Obj,
    schema: Mapping[str, Any] | None,
    *,
    manager: str,
    api_version: str,
    subresource: str,
    has_status: bool,
    unstructured: bool = False,
) -> list[Obj]:
    """The managedFields of ``new`` after an Update operation by ``manager`` that turned the
    stored ``old`` into it: ``encode_entries(record_update(starting_entries(old, new), ...))``.

    Most updates change fields only the writer owns (an operator's status, a controller's
    replicas), while the list holds entries of other managers that they leave alone. When every
    change falls under top-level fields no other entry holds, and the client left the list as
    it was stored, those entries are kept as stored, unparsed: their items are the server's own
    writing (or a client's list it parsed and checked when it stored it), and only canonical
    ones (``_raw_canonical``, what ``to_dict`` would give back) are kept so. Nothing is kept
    parsed for the next write (``live_entries`` parses what it needs then): for entries of a
    few paths, parsing again costs about what keeping them does, and many objects are not
    written again. Otherwise, the general way.

    A kept item is not read below its top-level fields: one the general way would refuse for
    what lies deeper in its fieldsV1 (stored before the server checked lists so) is kept, not
    refused, as upstream, which resets a live object's managedFields it cannot decode rather
    than refuse the write."""
    stored = (old.get("metadata") or {}).get("managedFields")
    if stored is None:
        stored = []  # as starting_entries reads it: no entries
    identity = (manager, "Update", api_version, subresource)
    mine = _quick_writers_item(stored, (new.get("metadata") or {}).get("managedFields"), identity)
    if mine == _GENERAL:
        entries = record_update(
            starting_entries(old, new),
            old,
            new,
            schema,
            manager=manager,
            api_version=api_version,
            subresource=subresource,
            has_status=has_status,
            unstructured=unstructured,
        )
        return encode_entries(entries) if entries else []
    changed, removed = _update_changes(old, new, schema, subresource, has_status, unstructured)
    touched = {path[0] for path in changed}
    touched.update(path[0] for path in removed)
    if any(index != mine and not touched.isdisjoint(item["fieldsV1"]) for index, item in enumerate(stored)):
        # Another manager's entry changes: all are parsed, the change already known.
        entries = _recorded(
            live_entries(stored),
            changed,
            removed,
            manager=manager,
            api_version=api_version,
            subresource=subresource,
        )
        return encode_entries(entries) if entries else []
    result = list(stored)
    entry: ManagedEntry | None = None
    if mine is not None:
        entry = _parse_item(mine, stored[mine])
        entry.paths = entry.paths - removed
    if changed:
        if entry is None:
            entry = ManagedEntry(manager, "Update", api_version, subresource)
        entry.paths = entry.paths | changed
        entry.time = timestamps.now()
    if mine is not None:
        assert entry is not None
        if entry.paths:
            result[mine] = entry.to_dict()
        else:
            del result[mine]
    elif entry is not None and entry.paths:
        result.append(entry.to_dict())
    return result


#: ``_quick_writers_item``'s answer when the write goes the general way.
_GENERAL = -1


def _quick_writers_item(stored: Any, sent: Any, identity: tuple[str, str, str, str]) -> int | None:
    """For ``record_stored_update``: the index of the writer's own item in the stored list
    (None: it has none), or ``_GENERAL`` when the general way must go: the client sent a list of
    its own, the list is parsed already (the general way is as cheap), or an item is not
    canonical or names the writer twice (the general way merges them). Checked before the
    change is computed: a list the general way refuses or rewrites goes there first."""
    if type(stored) is not list or not (sent is None or sent == [] or sent == stored):
        return _GENERAL
    cached = _PARSED.get(id(stored))
    if cached is not None and cached[0] is stored:
        return _GENERAL
    mine: int | None = None
    for index, item in enumerate(stored):
        if not _raw_canonical(item):
            return _GENERAL
        if (item["manager"], item["operation"], item["apiVersion"], item.get("subresource", "")) == identity:
            if mine is not None:
                return _GENERAL
            mine = index
    return mine


def _raw_canonical(item: Any) -> bool:
    """Whether a stored managedFields item is one ``parse_managed_fields`` reads without error
    into an entry whose ``to_dict`` gives the item back (its fieldsV1 aside, which the server
    wrote): the five keys, and time and subresource only when not empty."""
    if type(item) is not dict:
        return False
    time, subresource, fields = item.get("time"), item.get("subresource"), item.get("fieldsV1")
    return (
        len(item) == 5 + (time is not None) + (subresource is not None)
        and type(item.get("manager")) is str
        and item.get("operation") in ("Apply", "Update")
        and type(item.get("apiVersion")) is str
        and item.get("fieldsType") == "FieldsV1"
        and (time is None or (type(time) is str and time != ""))
        and (subresource is None or (type(subresource) is str and subresource != ""))
        and type(fields) is dict
        and bool(fields)
        and all(type(key) is str and key.startswith("f:") for key in fields)
    )


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
    unstructured: bool = False,
) -> list[ManagedEntry]:
    """The entries after an Update operation by ``manager`` that turned ``old`` into ``new``."""
    changed, removed = _update_changes(old, new, schema, subresource, has_status, unstructured)
    return _recorded(
        entries, changed, removed, manager=manager, api_version=api_version, subresource=subresource
    )


def _update_changes(
    old: Obj | None,
    new: Obj,
    schema: Mapping[str, Any] | None,
    subresource: str,
    has_status: bool,
    unstructured: bool,
) -> tuple[set[Path], set[Path]]:
    """(added or changed, removed) paths of an Update that turned ``old`` into ``new``."""
    if old is not None:
        changed, removed = update_changes(
            old, new, schema, _scope_test(subresource, has_status), unstructured=unstructured
        )
    else:
        new_maps: set[Path] = set()
        fields = field_set(new, schema, new_maps, unstructured=unstructured)
        changed = set(scoped(fields, subresource, has_status))
        if len(fields) > FREED_IN_STEPS:  # a map of 87,000 keys: 87,000 Members to free
            garbage = [fields]
            del fields
            free_in_steps(garbage)
        # An object this write creates is the writer's as a whole too ("." in FieldsV1), as
        # upstream, where the old object is the kind's zero value (``_Plan.created_member``);
        # metadata (a map in a CRD's schema) stays the server's.
        new_maps.difference_update(STRIPPED)
        changed.update(scoped({p: Member(None, False) for p in new_maps}, subresource, has_status))
        removed = set()
    return changed, removed


def _recorded(
    entries: list[ManagedEntry],
    changed: set[Path],
    removed: set[Path],
    *,
    manager: str,
    api_version: str,
    subresource: str,
) -> list[ManagedEntry]:
    """``entries`` after an Update by ``manager`` that changed and removed those paths."""
    identity = (manager, "Update", api_version, subresource)
    result: list[ManagedEntry] = []
    mine: ManagedEntry | None = None
    for entry in entries:
        if entry.identity == identity:
            entry = entry.copy()
            mine = entry
            entry.paths = entry.paths - removed
        elif not entry.paths.isdisjoint(removed) or not entry.paths.isdisjoint(changed):
            entry = entry.copy()
            entry.paths = entry.paths - removed - changed
        result.append(entry)
    if changed:
        if mine is None:
            mine = ManagedEntry(manager, "Update", api_version, subresource)
            result.append(mine)
        mine.paths = mine.paths | changed
        mine.time = timestamps.now()
    return [e for e in result if e.paths]
