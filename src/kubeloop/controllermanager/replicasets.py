"""The ReplicaSet controller: as many running pods as ``spec.replicas``, and a status that says so.

A reconciler of ReplicaSets that owns Pods; ReplicationControllers get the same reconciler,
with their plain label map for a selector (upstream runs one controller for both). Pods it
controls (its controller reference, and labels its selector matches) are counted while neither
ended nor being deleted; missing ones
are created from the template, extra ones deleted (not-ready and newest first, as upstream
prefers). The status has ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``,
``availableReplicas`` (ready, with ``minReadySeconds`` taken as met) and
``observedGeneration``. A pod the server refuses (PodSecurity admission, say) stops the
creating: a FailedCreate event, the condition ReplicaFailure (reason FailedCreate, the server's
message) until a create succeeds, and another try with back-off. Orphaned pods that match are
not adopted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.labels import LabelSelector
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.podcontrol import (
    FAILED_CREATE,
    CreateRefused,
    Expectations,
    active,
    controlled_by,
    create_pod,
    pod_from_template,
    ready,
    write_status,
)
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager
from kubeloop.manager.recorder import NORMAL

log = logging.getLogger("kubeloop.controllermanager.replicasets")

REPLICASET = kinds.ReplicaSet
REPLICATIONCONTROLLER = kinds.ReplicationController
POD = kinds.Pod
REPLICA_FAILURE = "ReplicaFailure"


class ReplicaSetController:
    """Registers its reconciler with ``manager`` (a controller named ``replicaset``)."""

    kind = REPLICASET
    name = "replicaset"
    #: Who its Events say they come from (upstream's source component).
    component = "replicaset-controller"

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self.recorder = manager.event_recorder(self.component)
        self._expected = Expectations()
        Builder(manager).named(self.name).for_(self.kind).owns(POD).with_options(
            max_concurrent_reconciles=4
        ).complete(self.reconcile)

    def selector_of(self, spec: Mapping[str, Any]) -> LabelSelector:
        return LabelSelector.from_label_selector_dict(spec.get("selector"))

    async def reconcile(self, request: Request) -> Result | None:
        try:
            replica_set = await self.manager.client.get(self.kind, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = replica_set.get("metadata") or {}
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            self._expected.forget(uid)
            return None
        spec = replica_set.get("spec") or {}
        selector = self.selector_of(spec)
        listed = await self.manager.client.list(POD, namespace=request.namespace)
        pods = [
            pod
            for pod in listed.items
            if controlled_by(pod, uid) and selector.matches((pod.get("metadata") or {}).get("labels") or {})
        ]
        expected = self._expected.observe(uid, pods)
        running = [pod for pod in pods if active(pod)]
        wanted = int(spec.get("replicas", 1))
        missing = wanted - len(running) - len(expected)
        template = spec.get("template") or {}
        refused: str | None = None
        for _ in range(max(0, missing)):
            try:
                pod = await create_pod(
                    self.client, self.recorder, replica_set, pod_from_template(replica_set, template, {})
                )
            except CreateRefused as error:
                refused = error.message
                break
            self._expected.created(uid, pod)
            self.recorder.event(replica_set, NORMAL, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
        if missing < 0 and not expected:
            # Not-ready before ready, newest before oldest: what upstream deletes first.
            extra = sorted(
                running,
                key=lambda pod: (
                    ready(pod),
                    _negated(str((pod.get("metadata") or {}).get("creationTimestamp"))),
                ),
            )[:-missing]
            for pod in extra:
                name = str((pod.get("metadata") or {}).get("name"))
                with contextlib.suppress(errors.NotFound):
                    await self.client.delete(POD, name, namespace=request.namespace)
                    self.recorder.event(replica_set, NORMAL, "SuccessfulDelete", f"Deleted pod: {name}")
            running = [pod for pod in running if pod not in extra]
        count = len(running) + len(expected)
        ready_count = sum(1 for pod in running if ready(pod))
        # Go leaves zero counts out (omitempty), but always writes replicas; null removes a field.
        status = {
            "replicas": count,
            "fullyLabeledReplicas": count or None,
            "readyReplicas": ready_count or None,
            "availableReplicas": ready_count or None,
            "observedGeneration": meta.get("generation", 1),
            "conditions": _failure_conditions((replica_set.get("status") or {}).get("conditions"), refused),
        }
        await write_status(self.client, self.kind, replica_set, status)
        return Result(requeue=True) if refused is not None else None


class ReplicationControllerController(ReplicaSetController):
    """ReplicationControllers (a controller named ``replicationcontroller``): a selector is a
    plain label map."""

    kind = REPLICATIONCONTROLLER
    name = "replicationcontroller"
    component = "replication-controller"

    def selector_of(self, spec: Mapping[str, Any]) -> LabelSelector:
        selector = spec.get("selector")
        return LabelSelector.from_set(selector if isinstance(selector, Mapping) else {})


def _failure_conditions(conditions: Any, refused: str | None) -> list[dict[str, Any]] | None:
    """The status conditions with ReplicaFailure set while pods are refused, gone once one is
    made (upstream's calculateStatus); None when there are none."""
    kept = [c for c in conditions or () if isinstance(c, dict)]
    failure = next((c for c in kept if c.get("type") == REPLICA_FAILURE), None)
    if refused is None:
        kept = [c for c in kept if c.get("type") != REPLICA_FAILURE]
    elif failure is None:
        kept.append(
            {"type": REPLICA_FAILURE, "status": "True", "lastTransitionTime": timestamps.now(),
             "reason": FAILED_CREATE, "message": refused}
        )  # fmt: skip
    return kept or None


def _negated(text: str) -> str:
    """A key that sorts ``text`` (an RFC 3339 time) newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in text)
