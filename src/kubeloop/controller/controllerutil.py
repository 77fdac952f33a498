"""Helpers reconcilers use (controller-runtime's ``controllerutil`` and apimachinery's
``meta.SetStatusCondition``): create-or-update/patch with the operation's result, owner and
controller references, finalizers, and status conditions that report whether anything changed.
Objects are dicts; helpers that change an object change it in place.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from enum import StrEnum
from typing import Any

from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.client import errors
from kubeloop.client.rest import APIClient, PatchType

Mutate = Callable[[Obj], Awaitable[None] | None]


class OperationResult(StrEnum):
    UNCHANGED = "unchanged"
    CREATED = "created"
    UPDATED = "updated"
    UPDATED_STATUS = "updatedStatus"
    UPDATED_STATUS_ONLY = "updatedStatusOnly"


class AlreadyOwnedError(Exception):
    """The object already has another controller owner."""


def _meta(obj: MutableMapping[str, Any]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    assert isinstance(meta, dict)
    return meta


async def _mutate(mutate: Mutate, obj: Obj, key: tuple[str, str]) -> None:
    outcome = mutate(obj)
    if outcome is not None:
        await outcome
    meta = obj.get("metadata") or {}
    if (meta.get("namespace") or "", meta.get("name") or "") != key:
        raise ValueError("the mutate function must not change the object's name or namespace")


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


async def create_or_update(client: APIClient, obj: Obj, mutate: Mutate) -> tuple[OperationResult, Obj]:
    """Fetch ``obj``; create it after ``mutate`` if absent, else update it if ``mutate`` changed it."""
    key = _key(obj)
    try:
        current = await client.get(obj, key[1], namespace=key[0] or None)
    except errors.NotFound:
        await _mutate(mutate, obj, key)
        return OperationResult.CREATED, await client.create(obj)
    before = copy.deepcopy(current)
    await _mutate(mutate, current, key)
    if current == before:
        return OperationResult.UNCHANGED, current
    return OperationResult.UPDATED, await client.update(current)


async def create_or_patch(client: APIClient, obj: Obj, mutate: Mutate) -> tuple[OperationResult, Obj]:
    """Like ``create_or_update`` but sends merge patches: one for the object, one for its status."""
    key = _key(obj)
    try:
        current = await client.get(obj, key[1], namespace=key[0] or None)
    except errors.NotFound:
        await _mutate(mutate, obj, key)
        status = obj.pop("status", None)
        created = await client.create(obj)
        if status:
            created = await client.patch(created, None, {"status": status}, subresource="status")
        return OperationResult.CREATED, created
    before = copy.deepcopy(current)
    await _mutate(mutate, current, key)
    body_before = {k: v for k, v in before.items() if k != "status"}
    body_after = {k: v for k, v in current.items() if k != "status"}
    result = current
    changed_object = body_before != body_after
    changed_status = before.get("status") != current.get("status")
    if changed_object:
        result = await client.patch(
            current, None, _merge_patch(body_before, body_after), patch_type=PatchType.MERGE
        )
    if changed_status:
        status_patch = _merge_patch(
            {"status": before.get("status") or {}}, {"status": current.get("status") or {}}
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


def _check_scope(owner: Mapping[str, Any], obj: MutableMapping[str, Any]) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace")
    obj_ns = _meta(obj).get("namespace")
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


def set_controller_reference(owner: Mapping[str, Any], obj: MutableMapping[str, Any]) -> None:
    """Make ``owner`` the controller of ``obj``; AlreadyOwnedError if another controller owns it."""
    _check_scope(owner, obj)
    ref = _reference(owner, controller=True)
    refs: list[Obj] = _meta(obj).setdefault("ownerReferences", [])
    for existing in refs:
        if existing.get("controller") and not _same_owner(existing, ref):
            raise AlreadyOwnedError(
                f'{_meta(obj).get("name")} is already owned by {existing.get("kind")} "{existing.get("name")}"'
            )
    _upsert_reference(refs, ref)


def set_owner_reference(owner: Mapping[str, Any], obj: MutableMapping[str, Any]) -> None:
    """Add ``owner`` as a (non-controller) owner of ``obj``, or refresh its reference."""
    _check_scope(owner, obj)
    _upsert_reference(_meta(obj).setdefault("ownerReferences", []), _reference(owner, controller=False))


def _upsert_reference(refs: list[Obj], ref: Obj) -> None:
    for index, existing in enumerate(refs):
        if _same_owner(existing, ref):
            merged = {**existing, **ref}
            refs[index] = merged
            return
    refs.append(ref)


# ---------------------------------------------------------------------------- finalizers


def contains_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def add_finalizer(obj: MutableMapping[str, Any], finalizer: str) -> bool:
    """Add ``finalizer``; True if it was not there."""
    finalizers: list[str] = _meta(obj).setdefault("finalizers", [])
    if finalizer in finalizers:
        return False
    finalizers.append(finalizer)
    return True


def remove_finalizer(obj: MutableMapping[str, Any], finalizer: str) -> bool:
    """Remove ``finalizer``; True if it was there."""
    finalizers: list[str] = _meta(obj).get("finalizers") or []
    if finalizer not in finalizers:
        return False
    _meta(obj)["finalizers"] = [f for f in finalizers if f != finalizer]
    return True


# ---------------------------------------------------------------------------- conditions


def find_status_condition(conditions: list[Obj], condition_type: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == condition_type), None)


def is_status_condition_true(conditions: list[Obj], condition_type: str) -> bool:
    found = find_status_condition(conditions, condition_type)
    return found is not None and found.get("status") == "True"


def set_status_condition(
    conditions: list[Obj],
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
    existing = find_status_condition(conditions, condition_type)
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


def remove_status_condition(conditions: list[Obj], condition_type: str) -> bool:
    for index, condition in enumerate(conditions):
        if condition.get("type") == condition_type:
            del conditions[index]
            return True
    return False
