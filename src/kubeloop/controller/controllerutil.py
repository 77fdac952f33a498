"""Helpers reconcilers use (controller-runtime's ``controllerutil`` and apimachinery's
``meta.SetStatusCondition``): create-or-update/patch with the operation's result, owner and
controller references, finalizers, and status conditions that report whether anything changed.

Every helper takes an object as a dict or as a model, and answers in the form it was given;
helpers that change an object change the caller's dict or model in place. The create-or-*
helpers take any ``Client`` — ``manager.client`` reads through the cache, so a reconcile that
changes nothing sends nothing to the server.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, TypeVar, overload

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.model import KubeModel, KubeObject, as_dict
from kubeloop.api.models import meta_v1
from kubeloop.api.object import Obj
from kubeloop.client.interface import Client

O = TypeVar("O", bound=Mapping[str, Any] | KubeObject)  # noqa: E741
#: What create_or_update/create_or_patch call to set the wanted state (on a dict or a model, as given).
Mutate = Callable[[Any], Awaitable[None] | None]


class OperationResult(StrEnum):
    """What ``create_or_update`` / ``create_or_patch`` did (controller-runtime's names)."""

    UNCHANGED = "unchanged"
    CREATED = "created"
    UPDATED = "updated"
    UPDATED_STATUS = "updatedStatus"
    UPDATED_STATUS_ONLY = "updatedStatusOnly"


class AlreadyOwnedError(Exception):
    """The object already has another controller owner."""


class NotControlledError(Exception):
    """``create_or_update(..., controlled_by=owner)`` found an object of that name which ``owner``
    does not control (someone else made it): it was left as it was."""

    def __init__(self, kind: str, name: str, owner: str) -> None:
        super().__init__(f"{kind} {name} exists and is not controlled by {owner}: left alone")
        self.kind = kind
        self.name = name
        self.owner = owner


def _meta(obj: MutableMapping[str, Any]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    assert isinstance(meta, dict)
    return meta


@contextmanager
def _editing(obj: MutableMapping[str, Any] | KubeModel) -> Iterator[dict[str, Any]]:
    """The object's JSON form to change: a dict itself; a model's dict, assigned back on success."""
    if isinstance(obj, KubeModel):
        data = obj.to_dict()
        yield data
        obj.assign(data)
    else:
        assert isinstance(obj, dict)
        yield obj


#: The metadata fields these helpers read or change, by JSON name: their attribute on a metadata model.
_ATTRIBUTES = {
    "name": "name",
    "namespace": "namespace",
    "ownerReferences": "owner_references",
    "finalizers": "finalizers",
}


def _dumped(meta: KubeModel, fields: tuple[str, ...]) -> dict[str, Any]:
    """``fields`` of a metadata model in JSON form, dumped alone: the rest (managedFields, labels,
    times) is not (dumping the whole metadata, and validating it back after a change, took 8 % of
    an operator's CPU). All of it for a metadata model of its own making that lacks one of them."""
    attributes = {_ATTRIBUTES[field] for field in fields}
    if not attributes <= type(meta).model_fields.keys():
        return meta.to_dict()
    return meta.model_dump(by_alias=True, exclude_none=True, mode="json", include=attributes)


@contextmanager
def _editing_metadata(obj: MutableMapping[str, Any] | KubeModel, field: str) -> Iterator[dict[str, Any]]:
    """The object's metadata in its JSON form, to change ``field`` in: a dict's own; of a model's
    metadata model, its name, namespace and ``field`` (:func:`_dumped`), and ``field`` alone
    validated and assigned back on success."""
    meta = getattr(obj, "metadata", None) if isinstance(obj, KubeModel) else None
    if isinstance(meta, KubeModel):
        attribute = _ATTRIBUTES[field]
        if attribute not in type(meta).model_fields:
            with _editing(meta) as whole:
                yield whole
            return
        data = _dumped(meta, ("name", "namespace", field))
        yield data
        fresh = type(meta).model_validate({field: data[field]} if field in data else {})
        setattr(meta, attribute, getattr(fresh, attribute))
        return
    with _editing(obj) as whole:
        yield _meta(whole)


def _metadata(obj: Mapping[str, Any] | KubeModel, *fields: str) -> Mapping[str, Any]:
    """The object's metadata in its JSON form: a dict's own, a model's ``fields`` (:func:`_dumped`)."""
    if isinstance(obj, KubeModel):
        meta = getattr(obj, "metadata", None)
        return _dumped(meta, fields) if isinstance(meta, KubeModel) else {}
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def _meta_value(obj: Mapping[str, Any] | KubeModel, attribute: str, key: str) -> Any:
    """One metadata field of an object: a model's read off its metadata model (no dump)."""
    if isinstance(obj, KubeModel):
        meta = getattr(obj, "metadata", None)
        return getattr(meta, attribute, None) if isinstance(meta, KubeModel) else None
    found = obj.get("metadata")
    return found.get(key) if isinstance(found, Mapping) else None


def _key(obj: Mapping[str, Any] | KubeModel) -> tuple[str, str]:
    return (
        str(_meta_value(obj, "namespace", "namespace") or ""),
        str(_meta_value(obj, "name", "name") or ""),
    )


def _owner_view(owner: Mapping[str, Any] | KubeModel) -> Mapping[str, Any]:
    """What an owner reference is made of (apiVersion, kind, name, uid, namespace), in JSON form;
    a model's read off its attributes rather than dumped whole."""
    if not isinstance(owner, KubeModel):
        return as_dict(owner)
    gvk = getattr(type(owner), "__gvk__", None)
    return {
        "apiVersion": getattr(owner, "api_version", None) or (gvk.api_version if gvk else None),
        "kind": getattr(owner, "kind", None) or (gvk.kind if gvk else None),
        "metadata": {
            "name": _meta_value(owner, "name", "name"),
            "uid": _meta_value(owner, "uid", "uid"),
            "namespace": _meta_value(owner, "namespace", "namespace"),
        },
    }


async def _mutate(mutate: Mutate, obj: Any, key: tuple[str, str]) -> None:
    outcome = mutate(obj)
    if outcome is not None:
        await outcome
    if _key(obj) != key:
        raise ValueError("the mutate function must not change the object's name or namespace")


def _snapshot(obj: Mapping[str, Any] | KubeModel) -> Obj:
    return obj.to_dict() if isinstance(obj, KubeModel) else copy.deepcopy(dict(obj))


async def create_or_update(
    client: Client, obj: O, mutate: Mutate, *, controlled_by: Object | None = None
) -> tuple[OperationResult, O]:
    """Read ``obj`` (through ``client``: the cache for ``manager.client``); create it after
    ``mutate`` if absent, else update it if ``mutate`` changed it.

    A create that meets AlreadyExists (the cache had not seen the object yet) reads it from the
    server and goes on as if it had been found.

    An object of that name that someone else made is changed like any other (controller-runtime
    leaves it to the caller: a ``mutate`` that sets a controller reference adopts an object no
    one controls). With ``controlled_by``, an existing object that owner does not control is
    left alone instead: :class:`NotControlledError`, nothing sent — for objects named after what
    a user writes, which another user may have made first.

    UNCHANGED exactly when ``mutate`` changed nothing and nothing was sent; UPDATED whenever an
    update was sent, as controller-runtime's — even when the server, once it defaulted the
    object, found nothing to change. A controller that gets UPDATED from every reconcile sets a
    field the server defaults (a whole ``spec`` or container list): set only the fields it owns.
    The answer is in the form ``obj`` was given in.
    """
    key = _key(obj)
    current: Any = await _current(client, obj, key)
    if current is None:
        await _mutate(mutate, obj, key)
        try:
            created: Any = await client.create(obj)
        except errors.AlreadyExists:  # made a moment ago, and not in the cache yet
            current = await _server_reader(client).get(obj, key[1], namespace=key[0] or None)
        else:
            return OperationResult.CREATED, created
    _check_controller(current, controlled_by)
    before = _snapshot(current)
    await _mutate(mutate, current, key)
    if as_dict(current) == before:
        return OperationResult.UNCHANGED, current
    updated: Any = await client.update(current)
    return OperationResult.UPDATED, updated


def _check_controller(current: Any, owner: Object | None) -> None:
    if owner is None or is_controlled_by(current, owner):
        return
    data, owner_data = as_dict(current), as_dict(owner)
    raise NotControlledError(
        str(data.get("kind") or type(current).__name__),
        str((data.get("metadata") or {}).get("name") or ""),
        f"{owner_data.get('kind', '')} {(owner_data.get('metadata') or {}).get('name', '')}".strip(),
    )


async def _current(client: Client, obj: Any, key: tuple[str, str]) -> Any:
    """The object as ``client`` reads it; None when it is not found."""
    try:
        return await client.get(obj, key[1], namespace=key[0] or None)
    except errors.NotFound:
        return None


def _server_reader(client: Client) -> Client:
    """What reads past a cached client's cache (its writer, the API client); the client itself
    otherwise."""
    writer = getattr(client, "writer", None)
    return writer if writer is not None else client


async def create_or_patch(
    client: Client, obj: O, mutate: Mutate, *, controlled_by: Object | None = None
) -> tuple[OperationResult, O]:
    """Like ``create_or_update`` but sends merge patches: one for the object, one for its status
    (each reported as sent, as ``create_or_update`` reports its update); ``controlled_by`` as
    there."""
    key = _key(obj)
    current: Any = await _current(client, obj, key)
    if current is None:
        await _mutate(mutate, obj, key)
        body = dict(as_dict(obj))
        status = body.pop("status", None)
        try:
            created: Any = await client.create(
                type(obj).model_validate(body) if isinstance(obj, KubeModel) else body
            )
        except errors.AlreadyExists:  # made a moment ago, and not in the cache yet
            current = await _server_reader(client).get(obj, key[1], namespace=key[0] or None)
        else:
            if status:
                created = await client.patch(created, None, {"status": status}, subresource="status")
            return OperationResult.CREATED, created
    _check_controller(current, controlled_by)
    before = _snapshot(current)
    await _mutate(mutate, current, key)
    after = as_dict(current)
    body_before = {k: v for k, v in before.items() if k != "status"}
    body_after = {k: v for k, v in after.items() if k != "status"}
    result: Any = current
    changed_object = body_before != body_after
    changed_status = before.get("status") != after.get("status")
    if changed_object:
        result = await client.patch(current, None, _merge_patch(body_before, body_after))
    if changed_status:
        status_patch = _merge_patch(
            {"status": before.get("status") or {}}, {"status": after.get("status") or {}}
        )
        result = await client.patch(current, None, status_patch, subresource="status")
    if changed_object and changed_status:
        return OperationResult.UPDATED_STATUS, result
    if changed_status:
        return OperationResult.UPDATED_STATUS_ONLY, result
    return (OperationResult.UPDATED if changed_object else OperationResult.UNCHANGED), result


def _merge_patch(before: Any, after: Any) -> Any:
    """The JSON merge patch turning ``before`` into ``after`` (null removes a key)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return after
    patch: Obj = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, value in after.items():
        if key not in before:
            patch[key] = value
        elif before[key] != value:
            patch[key] = _merge_patch(before[key], value)
    return patch


# ---------------------------------------------------------------------------- owners

#: An object as a helper takes it: a dict or a model.
Object = MutableMapping[str, Any] | KubeModel


def _reference(owner: Mapping[str, Any], *, controller: bool) -> Obj:
    meta = owner.get("metadata") or {}
    if not meta.get("uid") or not meta.get("name"):
        raise ValueError("the owner must have a name and a uid (create it first)")
    ref: Obj = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if controller:
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref


def _check_scope(owner: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace")
    obj_ns = metadata.get("namespace")
    if owner_ns and not obj_ns:
        raise ValueError("a cluster-scoped object cannot have a namespaced owner")
    if owner_ns and obj_ns and owner_ns != obj_ns:
        raise ValueError(
            f"cross-namespace owner references are not allowed: {owner_ns} owns an object in {obj_ns}"
        )


def _same_owner(ref: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    other_group = str(other.get("apiVersion", "")).rpartition("/")[0]
    return (
        group == other_group and ref.get("kind") == other.get("kind") and ref.get("name") == other.get("name")
    )


def set_controller_reference(owner: Mapping[str, Any] | KubeModel, obj: Object) -> None:
    """Make ``owner`` the controller of ``obj``; AlreadyOwnedError if another controller owns it."""
    owner_data = _owner_view(owner)
    if _holds_controller_reference(obj, owner_data) or _set_first_reference(obj, owner_data, controller=True):
        return
    with _editing_metadata(obj, "ownerReferences") as metadata:
        _check_scope(owner_data, metadata)
        ref = _reference(owner_data, controller=True)
        refs: list[Obj] = metadata.setdefault("ownerReferences", [])
        for existing in refs:
            if existing.get("controller") and not _same_owner(existing, ref):
                raise AlreadyOwnedError(
                    f'{metadata.get("name")} is already owned by {existing.get("kind")} "{existing.get("name")}"'
                )
        _upsert_reference(refs, ref)


#: An owner reference's JSON names, by attribute of the OwnerReference model.
_REFERENCE_ATTRIBUTES = {
    "apiVersion": "api_version",
    "kind": "kind",
    "name": "name",
    "uid": "uid",
    "controller": "controller",
    "blockOwnerDeletion": "block_owner_deletion",
}


def _set_first_reference(obj: Object, owner_data: Mapping[str, Any], *, controller: bool) -> bool:
    """On a model whose metadata is kubeloop's ``ObjectMeta`` holding no owner reference yet
    (the child a reconcile is making, every time it makes one), the reference set at once:
    validated alone, the metadata not dumped. False for anything else, which the general edit
    handles (and checks)."""
    meta = getattr(obj, "metadata", None) if isinstance(obj, KubeModel) else None
    if type(meta) is not meta_v1.ObjectMeta or meta.owner_references:
        return False
    _check_scope(owner_data, {"namespace": meta.namespace})
    meta.owner_references = [meta_v1.OwnerReference.model_validate(_reference(owner_data, controller=controller))]
    return True


def _holds_controller_reference(obj: Object, owner_data: Mapping[str, Any]) -> bool:
    """Whether a model's metadata model already holds the controller reference to the owner as
    :func:`set_controller_reference` would leave it, and no other controller: then nothing is to
    change (a reconcile that finds its object as it wants it, every time but the first), and the
    metadata is not dumped and validated back. False whenever the edit must run (it also raises
    what is wrong)."""
    meta = getattr(obj, "metadata", None) if isinstance(obj, KubeModel) else None
    refs = getattr(meta, "owner_references", None)
    if not refs or not isinstance(refs, list):
        return False
    try:
        _check_scope(owner_data, {"namespace": getattr(meta, "namespace", None)})
        wanted = _reference(owner_data, controller=True)
    except ValueError:
        return False
    held: bool | None = None  # as the edit goes: another controller refused, the first
    for existing in refs:  # reference to this owner refreshed
        values = {key: getattr(existing, attribute, None) for key, attribute in _REFERENCE_ATTRIBUTES.items()}
        same = _same_owner(values, wanted)
        if values["controller"] and not same:
            return False
        if same and held is None:
            held = all(values[key] == value for key, value in wanted.items())
    return bool(held)


def is_controlled_by(obj: Mapping[str, Any] | KubeModel, owner: Mapping[str, Any] | KubeModel) -> bool:
    """Whether ``owner`` is ``obj``'s controller, by UID (apimachinery's ``metav1.IsControlledBy``)."""
    uid = _meta_value(owner, "uid", "uid")
    refs = _metadata(obj, "ownerReferences").get("ownerReferences") or ()
    return bool(uid) and any(ref.get("controller") and ref.get("uid") == uid for ref in refs)


def set_owner_reference(owner: Mapping[str, Any] | KubeModel, obj: Object) -> None:
    """Add ``owner`` as a (non-controller) owner of ``obj``, or refresh its reference."""
    owner_data = _owner_view(owner)
    if _set_first_reference(obj, owner_data, controller=False):
        return
    with _editing_metadata(obj, "ownerReferences") as metadata:
        _check_scope(owner_data, metadata)
        _upsert_reference(
            metadata.setdefault("ownerReferences", []), _reference(owner_data, controller=False)
        )


def has_owner_reference(obj: Mapping[str, Any] | KubeModel, owner: Mapping[str, Any] | KubeModel) -> bool:
    """Whether ``obj`` has an owner reference to ``owner``: its API group, kind and name (not
    its uid or version), as controller-runtime's ``HasOwnerReference`` compares."""
    wanted = _owner_view(owner)
    ref = {"apiVersion": wanted.get("apiVersion"), "kind": wanted.get("kind"), "name": _meta_value(owner, "name", "name")}
    return any(_same_owner(existing, ref) for existing in _metadata(obj, "ownerReferences").get("ownerReferences") or ())


def has_controller_reference(obj: Mapping[str, Any] | KubeModel) -> bool:
    """Whether ``obj`` has a controller owner reference (to anyone)."""
    return any(ref.get("controller") for ref in _metadata(obj, "ownerReferences").get("ownerReferences") or ())


def remove_owner_reference(owner: Mapping[str, Any] | KubeModel, obj: Object) -> None:
    """Remove ``obj``'s owner reference to ``owner`` (by API group, kind and name); ValueError if
    it has none (controller-runtime's ``RemoveOwnerReference``)."""
    _remove_reference(owner, obj, controller=False)


def remove_controller_reference(owner: Mapping[str, Any] | KubeModel, obj: Object) -> None:
    """Remove ``obj``'s controller reference, which must be to ``owner``; ValueError if ``obj``
    has no controller, no reference to ``owner``, or ``owner`` is not its controller
    (controller-runtime's ``RemoveControllerReference``)."""
    if not has_controller_reference(obj):
        raise ValueError(f"{_describe(_metadata(obj, 'name', 'namespace'))} has no controller reference")
    _remove_reference(owner, obj, controller=True)


def _describe(metadata: Mapping[str, Any]) -> str:
    return f"{metadata.get('namespace')}/{metadata.get('name')}" if metadata.get("namespace") else str(metadata.get("name"))


def _remove_reference(owner: Mapping[str, Any] | KubeModel, obj: Object, *, controller: bool) -> None:
    owner_data = _owner_view(owner)
    name = _meta_value(owner, "name", "name")
    ref = {"apiVersion": owner_data.get("apiVersion"), "kind": owner_data.get("kind"), "name": name}
    with _editing_metadata(obj, "ownerReferences") as metadata:
        refs: list[Obj] = list(metadata.get("ownerReferences") or ())
        found = next((i for i, existing in enumerate(refs) if _same_owner(existing, ref)), None)
        if found is None:
            raise ValueError(f"{_describe(metadata)} has no owner reference to {ref['kind']} {name}")
        if controller and not refs[found].get("controller"):
            raise ValueError(f"{ref['kind']} {name} is not the controller of {_describe(metadata)}")
        del refs[found]
        metadata["ownerReferences"] = refs


def _upsert_reference(refs: list[Obj], ref: Obj) -> None:
    for index, existing in enumerate(refs):
        if _same_owner(existing, ref):
            merged = {**existing, **ref}
            refs[index] = merged
            return
    refs.append(ref)


# ---------------------------------------------------------------------------- finalizers


def contains_finalizer(obj: Mapping[str, Any] | KubeModel, finalizer: str) -> bool:
    """Whether ``obj``'s ``metadata.finalizers`` holds ``finalizer``."""
    return finalizer in (_metadata(obj, "finalizers").get("finalizers") or ())


def add_finalizer(obj: Object, finalizer: str) -> bool:
    """Add ``finalizer``; True if it was not there."""
    if contains_finalizer(obj, finalizer):
        return False
    with _editing_metadata(obj, "finalizers") as metadata:
        metadata.setdefault("finalizers", []).append(finalizer)
    return True


def remove_finalizer(obj: Object, finalizer: str) -> bool:
    """Remove ``finalizer``; True if it was there."""
    if not contains_finalizer(obj, finalizer):
        return False
    with _editing_metadata(obj, "finalizers") as metadata:
        metadata["finalizers"] = [f for f in metadata.get("finalizers") or () if f != finalizer]
    return True


# ---------------------------------------------------------------------------- conditions

#: Where conditions live: a list of conditions (dicts or models), or an object (dict or model)
#: whose ``status.conditions`` they are (created when missing; a model's status gets models).
Conditions = list[Any] | Object


@contextmanager
def _condition_dicts(target: Conditions) -> Iterator[list[Obj]]:
    """The conditions as a list of dicts to change; written back in ``target``'s own form."""
    if isinstance(target, list):
        element = next((type(c) for c in target if isinstance(c, KubeModel)), None)
        dicts = [as_dict(c) if isinstance(c, KubeModel) else c for c in target]
        yield dicts
        target[:] = [element.model_validate(c) for c in dicts] if element is not None else dicts
        return
    with _editing(target) as data:
        status = data.get("status")
        if not isinstance(status, dict):
            status = data["status"] = {}
        conditions = status.get("conditions")
        if not isinstance(conditions, list):
            conditions = status["conditions"] = []
        yield conditions


def _find(conditions: list[Obj], condition_type: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == condition_type), None)


def _read_conditions(target: Conditions) -> list[Obj]:
    """The conditions as dicts, to read (nothing is created or written back)."""
    if isinstance(target, list):
        return [as_dict(c) for c in target]
    status = as_dict(target).get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return conditions if isinstance(conditions, list) else []


@overload
def find_status_condition(target: Mapping[str, Any] | list[Obj], condition_type: str) -> Obj | None: ...


@overload
def find_status_condition(target: KubeModel | list[Any], condition_type: str) -> Any: ...


def find_status_condition(target: Mapping[str, Any] | KubeModel | list[Any], condition_type: str) -> Any:
    """The condition of ``condition_type``, or None; in the form ``target`` holds it, as the other
    helpers answer: the model's own condition (a ``meta_v1.Condition``: ``.status``, ``.reason``)
    for a typed object or a list of models, a dict for a dict or a list of dicts."""
    for condition in _held_conditions(target):
        held = condition.get("type") if isinstance(condition, Mapping) else getattr(condition, "type", None)
        if held == condition_type:
            return condition
    return None


def _held_conditions(target: Mapping[str, Any] | KubeModel | list[Any]) -> list[Any]:
    """The conditions as ``target`` holds them (nothing is created or converted)."""
    if isinstance(target, list):
        return target
    status = target.get("status") if isinstance(target, Mapping) else getattr(target, "status", None)
    conditions = status.get("conditions") if isinstance(status, Mapping) else getattr(status, "conditions", None)
    return conditions if isinstance(conditions, list) else []


def is_status_condition_true(target: Conditions, condition_type: str) -> bool:
    """Whether the condition ``condition_type`` is there with status ``"True"``."""
    found = find_status_condition(target, condition_type)
    if found is None:
        return False
    status = found.get("status") if isinstance(found, Mapping) else getattr(found, "status", None)
    return status == "True"


def set_status_condition(
    target: Conditions,
    condition_type: str,
    status: str,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
) -> bool:
    """meta.SetStatusCondition: add or update; lastTransitionTime moves only when the status does.

    Returns whether anything changed (so a reconciler writes status only when needed).
    """
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    wanted: Obj = {"type": condition_type, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        wanted["observedGeneration"] = observed_generation
    with _condition_dicts(target) as conditions:
        existing = _find(conditions, condition_type)
        if existing is None:
            conditions.append({**wanted, "lastTransitionTime": timestamps.now()})
            return True
        changed = False
        if existing.get("status") != status:
            existing["status"] = status
            existing["lastTransitionTime"] = timestamps.now()
            changed = True
        for field in ("reason", "message", "observedGeneration"):
            if field in wanted and existing.get(field) != wanted[field]:
                existing[field] = wanted[field]
                changed = True
        return changed


def remove_status_condition(target: Conditions, condition_type: str) -> bool:
    """Remove the condition of ``condition_type``; True if it was there."""
    if _find(_read_conditions(target), condition_type) is None:
        return False  # nothing to write back (and no empty status.conditions created)
    with _condition_dicts(target) as conditions:
        for index, condition in enumerate(conditions):
            if condition.get("type") == condition_type:
                del conditions[index]
                return True
        return False
