"""The ReplicaSet controller: as many running pods as ``spec.replicas``, and a status that says so.

A reconciler of ReplicaSets that owns Pods; ReplicationControllers get the same reconciler,
with their plain label map for a selector (upstream runs one controller for both). Pods it
controls (its controller reference, and labels its selector matches) are counted while neither
ended nor being deleted; missing ones
are created from the template, extra ones deleted (not-ready and newest first, as upstream
prefers). The status has ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``,
``availableReplicas`` (ready, with ``minReadySeconds`` taken as met) and
``observedGeneration``. Orphaned pods that match are not adopted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.labels import LabelSelector
from kubeloop.apiserver.controllers.pods import (
    Expectations,
    active,
    controlled_by,
    pod_from_template,
    ready,
    write_status,
)
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllers.replicasets")

REPLICASET = GroupVersionKind("apps", "v1", "ReplicaSet")
REPLICATIONCONTROLLER = GroupVersionKind("", "v1", "ReplicationController")
POD = GroupVersionKind("", "v1", "Pod")


class ReplicaSetController:
    """Registers its reconciler with ``manager`` (a controller named ``replicaset``)."""

    kind = REPLICASET
    name = "replicaset"

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
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
        for _ in range(max(0, missing)):
            self._expected.created(
                uid, await self.client.create(pod_from_template(replica_set, template, {}))
            )
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
                with contextlib.suppress(errors.NotFound):
                    pod_meta = pod.get("metadata") or {}
                    await self.client.delete(POD, str(pod_meta.get("name")), namespace=request.namespace)
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
        }
        await write_status(self.client, self.kind, replica_set, status)
        return None


class ReplicationControllerController(ReplicaSetController):
    """ReplicationControllers (a controller named ``replicationcontroller``): a selector is a
    plain label map."""

    kind = REPLICATIONCONTROLLER
    name = "replicationcontroller"

    def selector_of(self, spec: Mapping[str, Any]) -> LabelSelector:
        selector = spec.get("selector")
        return LabelSelector.from_set(selector if isinstance(selector, Mapping) else {})


def _negated(text: str) -> str:
    """A key that sorts ``text`` (an RFC 3339 time) newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in text)
