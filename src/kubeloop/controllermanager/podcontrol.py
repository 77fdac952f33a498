"""What the workload controllers share about the pods they make: a pod from a template, creating
it (a refusal — PodSecurity admission, validation — recorded as upstream's RealPodControl
records it: a Warning FailedCreate event "Error creating: ..." on the owner), the expectations
that keep a reconcile from making the same pods twice, deleting a pod (only the one seen, by uid)
and writing a workload's status when it changed.

A controller that creates pods sees them in its cache a moment later; a reconcile in between
would count too few and create more. ``Expectations`` remembers, per owner, the pods created and
not yet seen (upstream's ``ControllerExpectations``, by name).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Mapping
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.client.calloptions import Preconditions
from kubeloop.client.rest import APIClient
from kubeloop.manager.recorder import WARNING, EventRecorder

POD = kinds.Pod
FAILED_CREATE = "FailedCreate"


class CreateRefused(Exception):
    """The server refused a pod a controller made; its message is the server's."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def create_pod(client: APIClient, recorder: EventRecorder, owner: Obj, pod: Obj) -> Obj:
    """Create ``pod`` for ``owner``; a refusal is a FailedCreate event and :class:`CreateRefused`
    (the controller stops making pods and tries again with back-off, as upstream's do)."""
    try:
        return await client.create(pod)
    except (errors.Forbidden, errors.Invalid) as refused:
        recorder.event(owner, WARNING, FAILED_CREATE, f"Error creating: {refused.message}")
        raise CreateRefused(refused.message) from refused


def pod_from_template(owner: Obj, template: Obj, labels: Mapping[str, str]) -> Obj:
    """A pod of ``owner`` (its controller reference) from ``template``, named ``<owner>-<random>``,
    with ``labels`` added to the template's."""
    meta = owner.get("metadata") or {}
    template = copy.deepcopy(template)
    pod_meta = dict(template.get("metadata") or {})
    pod_meta.pop("name", None)
    pod_meta.update(
        {
            "generateName": f"{meta.get('name')}-",
            "namespace": meta.get("namespace"),
            "labels": {**(pod_meta.get("labels") or {}), **labels},
            "ownerReferences": [
                {
                    "apiVersion": owner.get("apiVersion"),
                    "kind": owner.get("kind"),
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}


def controlled_by(obj: Obj, owner_uid: str) -> bool:
    """Whether ``obj``'s controller reference names ``owner_uid``."""
    return any(
        ref.get("uid") == owner_uid and ref.get("controller")
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
        if isinstance(ref, dict)
    )


def active(pod: Obj) -> bool:
    """Neither ended nor being deleted."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


def ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
        if isinstance(c, dict)
    )


class Expectations:
    """Per owner uid: names of pods created and not yet seen in the cache."""

    def __init__(self) -> None:
        self._pending: dict[str, set[str]] = {}

    def observe(self, owner_uid: str, seen: Iterable[Obj]) -> set[str]:
        """Forget what ``seen`` (the owner's pods in the cache) shows; the names still awaited."""
        pending = self._pending.setdefault(owner_uid, set())
        pending -= {str((pod.get("metadata") or {}).get("name")) for pod in seen}
        return pending

    def created(self, owner_uid: str, pod: Obj) -> None:
        self._pending.setdefault(owner_uid, set()).add(str((pod.get("metadata") or {}).get("name")))

    def forget(self, owner_uid: str) -> None:
        self._pending.pop(owner_uid, None)


async def delete_pod(client: APIClient, pod: Obj) -> None:
    """Delete ``pod`` unless it is already going, or is gone or replaced (a uid precondition)."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return
    with contextlib.suppress(errors.NotFound, errors.Conflict):
        await client.delete(
            POD,
            str(meta.get("name")),
            namespace=meta.get("namespace"),
            preconditions=Preconditions(uid=str(meta.get("uid"))),
        )


async def write_status(client: APIClient, kind: GroupVersionKind, obj: Obj, status: dict[str, Any]) -> None:
    """Merge ``status`` into ``obj``'s (None removes a field) through ``/status``, if it changes it."""
    current = obj.get("status") or {}
    if all(current.get(key) == value for key, value in status.items()):
        return
    meta = obj.get("metadata") or {}
    with contextlib.suppress(errors.NotFound):
        await client.patch(
            kind,
            str(meta.get("name")),
            {"status": status},
            namespace=meta.get("namespace"),
            subresource="status",
        )
