"""What the API server does to a Pod besides storing it: binding it to a node (``pods/binding``
and ``bindings``, the scheduler's write) and evicting it (``pods/eviction``: a delete that a
PodDisruptionBudget may refuse), as kube-apiserver's pod storage does them.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from kubeloop import errors
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.api.timestamps import now
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import DeleteOptions, ListOptions, WriteOptions
from kubeloop.errors import StatusCause

#: How often a binding or an eviction re-reads and retries after losing a race.
_ATTEMPTS = 5


def success(code: int = 201) -> Obj:
    """The Status a binding or an eviction answers with."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _named(body: Obj, url_name: str | None, kind: str) -> str:
    name = str((body.get("metadata") or {}).get("name") or "")
    if url_name is not None:
        if name and name != url_name:
            raise errors.BadRequest(f"name in URL does not match name in {kind} object")
        return url_name
    if not name:
        raise errors.invalid(
            "", kind, "", [StatusCause("FieldValueRequired", "Required value", "metadata.name")]
        )
    return name


async def bind(
    registry: Registry,
    pods: ResourceType,
    namespace: str,
    body: Obj,
    url_name: str | None,
    options: WriteOptions,
) -> Obj:
    """Assign the pod a Binding names to its target node: ``spec.nodeName``, the Binding's
    annotations and a PodScheduled condition; 409 if it is bound already or being deleted."""
    name = _named(body, url_name, "Binding")
    target = body.get("target")
    if not isinstance(target, dict) or not target.get("name"):
        raise errors.invalid(
            "", "Binding", name, [StatusCause("FieldValueRequired", "Required value", "target.name")]
        )
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(
            "",
            "Binding",
            name,
            [
                StatusCause(
                    "FieldValueNotSupported",
                    f'Unsupported value: "{target["kind"]}": must be empty or "Node"',
                    "target.kind",
                )
            ],
        )
    node = str(target["name"])
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    for _ in range(_ATTEMPTS):
        pod = registry.get(pods, namespace, name)
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise errors.Conflict(
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being deleted, '
                "cannot be assigned to a host",
                name=name,
                kind="pods/binding",
            )
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise errors.Conflict(
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned '
                f'to node "{bound}"',
                name=name,
                kind="pods/binding",
            )
        updated = copy.deepcopy(pod)
        updated["spec"]["nodeName"] = node
        if annotations:
            updated["metadata"]["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        status = updated.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now()})
        status["conditions"] = conditions
        try:
            await registry.update(pods, namespace, name, updated, options, subresource="binding")
        except errors.Conflict:
            continue  # the pod changed since it was read: look again
        return success()
    raise errors.conflict("", "pods", name)


def _budgets_of(registry: Registry, budgets: ResourceType, pod: Obj) -> list[Obj]:
    namespace = str(pod["metadata"].get("namespace") or "")
    labels = pod["metadata"].get("labels") or {}
    found = []
    for budget in registry.list_objects(budgets, namespace, ListOptions()).items:
        selector = (budget.get("spec") or {}).get("selector")
        if selector is None:
            continue  # selects nothing, as upstream reads a nil selector
        if LabelSelector.from_label_selector_dict(selector).matches(labels):
            found.append(budget)
    return found


def _refused(budget: Obj, why: str) -> errors.TooManyRequests:
    return errors.TooManyRequests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        causes=[StatusCause("DisruptionBudget", why)],
    )


async def evict(
    registry: Registry,
    pods: ResourceType,
    budgets: ResourceType,
    namespace: str,
    url_name: str,
    body: Obj,
    delete_options: DeleteOptions,
) -> Obj:
    """Delete the pod unless the PodDisruptionBudget that covers it allows no disruption now
    (429); an allowed eviction spends one of the budget's disruptions (upstream's EvictionREST)."""
    name = _named(body, url_name, "Eviction")
    for _ in range(_ATTEMPTS):
        pod = registry.get(pods, namespace, name)
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or (pod.get("metadata") or {}).get(
            "deletionTimestamp"
        ):
            await registry.delete(pods, namespace, name, delete_options)  # nothing left to disrupt
            return success()
        covering = _budgets_of(registry, budgets, pod)
        if len(covering) > 1:
            raise errors.InternalError(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            )
        if covering:
            budget = covering[0]
            if not await _spend_disruption(registry, budgets, budget, name, dry_run=delete_options.dry_run):
                continue
        try:
            await registry.delete(pods, namespace, name, _with_uid(delete_options, pod))
        except errors.Conflict:
            continue
        return success()
    raise errors.conflict("", "pods", name)


def _with_uid(options: DeleteOptions, pod: Obj) -> DeleteOptions:
    """The options with the pod read as a precondition: a pod replaced meanwhile is not deleted."""
    if options.precondition_uid:
        return options
    return dataclasses.replace(options, precondition_uid=str(pod["metadata"].get("uid") or "") or None)


async def _spend_disruption(
    registry: Registry, budgets: ResourceType, budget: Obj, pod_name: str, *, dry_run: bool
) -> bool:
    """Take one allowed disruption of ``budget`` for ``pod_name`` (only check, on a dry run); 429
    if there is none; False if the budget changed meanwhile (the caller reads everything again)."""
    meta = budget.get("metadata") or {}
    status: dict[str, Any] = budget.get("status") or {}
    name = str(meta.get("name") or "")
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _refused(budget, f"The disruption budget {name} is still being processed by the server.")
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed <= 0:
        raise _refused(
            budget,
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods "
            f"and has {int(status.get('currentHealthy') or 0)} currently",
        )
    updated = copy.deepcopy(budget)
    spent = updated.setdefault("status", {})
    spent["disruptionsAllowed"] = allowed - 1
    spent["disruptedPods"] = {**(spent.get("disruptedPods") or {}), pod_name: now()}
    try:
        await registry.update(
            budgets,
            str(meta.get("namespace")),
            name,
            updated,
            WriteOptions(dry_run=dry_run),
            subresource="status",
        )
    except errors.Conflict:
        return False
    return True
