"""The disruption controller: how many pods a PodDisruptionBudget may lose right now.

A reconciler of PodDisruptionBudgets that watches Pods (a pod wakes the budgets of its
namespace whose selector matches it) and the workloads that scale them. As upstream's
``pkg/controller/disruption``: the budget's pods are those its selector matches (an empty
selector matches none); healthy ones are ready, not being deleted and not recorded in
``disruptedPods`` by an eviction in the last two minutes (older records, and those of pods gone,
are dropped). With an integer ``minAvailable`` the expected count is the number of pods;
with a percentage, or with ``maxUnavailable``, it is the sum of the scales of the pods'
controllers (ReplicaSets — or the Deployment owning one —, StatefulSets, ReplicationControllers),
percentages rounded up. The status says ``expectedPods``, ``desiredHealthy``,
``currentHealthy``, ``disruptionsAllowed`` (healthy beyond desired, never negative) and the
DisruptionAllowed condition (SufficientPods / InsufficientPods; SyncFailed when a pod's
controller cannot be scaled, or its selector or numbers are invalid), so evictions (``pods/<name>/eviction``) can spend them.
"""

from __future__ import annotations

import contextlib
import datetime
import math
from collections.abc import Mapping
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.controller.handler import EnqueueRequestsFromMapFunc
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.podcontrol import ready, write_status
from kubeloop.errors import InvalidSelector
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

BUDGET = kinds.PodDisruptionBudget
POD = kinds.Pod
#: Workloads whose scale is a budget's expected count, by controller reference kind.
SCALED = {
    "ReplicaSet": GroupVersionKind("apps", "v1", "ReplicaSet"),
    "Deployment": GroupVersionKind("apps", "v1", "Deployment"),
    "StatefulSet": GroupVersionKind("apps", "v1", "StatefulSet"),
    "ReplicationController": GroupVersionKind("", "v1", "ReplicationController"),
}
#: How long an eviction's record in ``disruptedPods`` keeps its pod from counting as healthy.
DELETION_TIMEOUT = datetime.timedelta(minutes=2)


class SyncFailure(Exception):
    """What keeps a budget from being computed (its status says SyncFailed, nothing allowed)."""


def _no_scale(pod: Obj) -> SyncFailure:
    return SyncFailure(f'found no controllers for pod "{(pod.get("metadata") or {}).get("name")}"')


def _scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` rounding up: "50%" of ``total``, or the integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return math.ceil(int(value[:-1]) * total / 100)
    raise SyncFailure(
        f"invalid value for IntOrString: invalid value {value!r}: must be an integer or a percentage"
    )


def _controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _condition(allowed: int, reason: str, message: str, old: Obj, generation: int) -> Obj:
    status = "True" if allowed > 0 else "False"
    previous = next(
        (
            c
            for c in (old.get("conditions") or ())
            if isinstance(c, Mapping) and c.get("type") == "DisruptionAllowed"
        ),
        None,
    )
    kept = previous is not None and previous.get("status") == status
    return {
        "type": "DisruptionAllowed",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": previous.get("lastTransitionTime")
        if previous is not None and kept
        else timestamps.now(),
        "reason": reason,
        "message": message,
    }


class DisruptionController:
    """Registers its reconciler with ``manager`` (a controller named ``disruption``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        builder = Builder(manager).named("disruption").for_(BUDGET)
        builder = builder.watches(POD, EnqueueRequestsFromMapFunc(self._budgets_of_pod))
        for kind in SCALED.values():
            builder = builder.watches(kind, EnqueueRequestsFromMapFunc(self._budgets_in_namespace))
        builder.with_options(max_concurrent_reconciles=2).complete(self.reconcile)

    def _budgets_in_namespace(self, obj: Obj) -> list[Request]:
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        store = self.manager.informer_for(BUDGET).store
        return [Request(namespace, key.split("/", 1)[-1]) for key in store.keys_in_namespace(namespace)]

    def _budgets_of_pod(self, pod: Obj) -> list[Request]:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        store = self.manager.informer_for(BUDGET).store
        out = []
        for request in self._budgets_in_namespace(pod):
            budget = store.get(f"{request.namespace}/{request.name}") or {}
            selector = (budget.get("spec") or {}).get("selector")
            with contextlib.suppress(InvalidSelector):  # its own reconcile reports it
                if selector and LabelSelector.from_label_selector_dict(selector).matches(labels):
                    out.append(request)
        return out

    async def reconcile(self, request: Request) -> Result | None:
        client = self.manager.client
        try:
            budget = await client.get(BUDGET, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = budget.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        spec = budget.get("spec") or {}
        old = budget.get("status") or {}
        generation = int(meta.get("generation") or 1)
        try:
            pods = await self._pods(spec.get("selector"), request.namespace)
        except InvalidSelector as invalid:
            return await self._fail(budget, invalid.message)
        now = datetime.datetime.now(datetime.UTC)
        disrupted, recheck = self._disrupted(pods, old.get("disruptedPods") or {}, now)
        healthy = sum(
            1
            for pod in pods
            if not (pod.get("metadata") or {}).get("deletionTimestamp")
            and str((pod.get("metadata") or {}).get("name")) not in disrupted
            and ready(pod)
        )
        try:
            expected, desired = await self._expected(spec, pods, request.namespace)
        except SyncFailure as failure:
            return await self._fail(budget, str(failure))
        allowed = healthy - desired if expected > 0 and healthy > desired else 0
        reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
        # A merge patch: records dropped are nulled, the others kept.
        records: dict[str, Any] = {
            name: None for name in old.get("disruptedPods") or {} if name not in disrupted
        }
        status = {
            "observedGeneration": generation,
            "disruptedPods": {**records, **disrupted} if disrupted else None,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [_condition(allowed, reason, "", old, generation)],
        }
        await write_status(self.manager.api_reader, BUDGET, budget, status)
        return Result(requeue_after=recheck) if recheck is not None else None

    async def _pods(self, selector: Any, namespace: str) -> list[Obj]:
        """The budget's pods: those its selector matches (an empty one matches none)."""
        if not isinstance(selector, Mapping) or not (
            selector.get("matchLabels") or selector.get("matchExpressions")
        ):
            return []
        matcher = LabelSelector.from_label_selector_dict(selector)
        return [
            pod
            for pod in (await self.manager.client.list(POD, namespace=namespace)).items
            if matcher.matches((pod.get("metadata") or {}).get("labels") or {})
        ]

    async def _fail(self, budget: Obj, message: str) -> Result:
        """upstream's ``failSafe``: nothing allowed, the DisruptionAllowed condition says why."""
        old = budget.get("status") or {}
        generation = int((budget.get("metadata") or {}).get("generation") or 1)
        status = {
            "disruptionsAllowed": 0,
            "observedGeneration": generation,
            "conditions": [_condition(0, "SyncFailed", message, old, generation)],
        }
        await write_status(self.manager.api_reader, BUDGET, budget, status)
        return Result(requeue_after=5.0)

    @staticmethod
    def _disrupted(
        pods: list[Obj], recorded: Mapping[str, Any], now: datetime.datetime
    ) -> tuple[dict[str, Any], float | None]:
        """``buildDisruptedPodMap``: the records still in force, and when the first one lapses."""
        kept: dict[str, Any] = {}
        recheck: float | None = None
        for pod in pods:
            meta = pod.get("metadata") or {}
            name = str(meta.get("name"))
            when = timestamps.parse_time(recorded.get(name))
            if meta.get("deletionTimestamp") or when is None:
                continue
            lapses = when + DELETION_TIMEOUT
            if lapses < now:
                continue
            kept[name] = recorded[name]
            wait = (lapses - now).total_seconds()
            recheck = wait if recheck is None else min(recheck, wait)
        return kept, recheck

    async def _expected(self, spec: Obj, pods: list[Obj], namespace: str) -> tuple[int, int]:
        """``getExpectedPodCount``: (expected pods, desired healthy)."""
        if spec.get("maxUnavailable") is not None:
            expected = await self._expected_scale(pods, namespace)
            return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected))
        minimum = spec.get("minAvailable")
        if isinstance(minimum, int):
            return len(pods), minimum
        if minimum is not None:
            expected = await self._expected_scale(pods, namespace)
            return expected, _scaled(minimum, expected)
        return len(pods), 0

    async def _expected_scale(self, pods: list[Obj], namespace: str) -> int:
        """The sum of the scales of the pods' controllers, each counted once."""
        client = self.manager.client
        counted: set[str] = set()
        total = 0
        for pod in pods:
            ref = _controller_ref(pod)
            if ref is None:
                name = (pod.get("metadata") or {}).get("name")
                raise SyncFailure(f'found no controller ref for pod "{name}"')
            if str(ref.get("uid")) in counted:
                continue
            counted.add(str(ref.get("uid")))
            kind = SCALED.get(str(ref.get("kind")))
            if kind is None:
                raise _no_scale(pod)
            try:
                owner = await client.get(kind, str(ref.get("name")), namespace=namespace)
            except errors.NotFound:
                raise _no_scale(pod) from None
            parent = _controller_ref(owner)
            if kind.kind == "ReplicaSet" and parent is not None and parent.get("kind") == "Deployment":
                if str(parent.get("uid")) in counted:
                    continue
                counted.add(str(parent.get("uid")))
                try:
                    owner = await client.get(
                        SCALED["Deployment"], str(parent.get("name")), namespace=namespace
                    )
                except errors.NotFound:
                    raise _no_scale(pod) from None
            total += int((owner.get("spec") or {}).get("replicas", 1))
        return total
