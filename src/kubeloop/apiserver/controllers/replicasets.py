"""The ReplicaSet controller: as many running pods as ``spec.replicas``, and a status that says so.

A reconciler of ReplicaSets that owns Pods. Pods it controls (its controller reference, and
labels its selector matches) are counted while neither ended nor being deleted; missing ones
are created from the template, extra ones deleted (not-ready and newest first, as upstream
prefers). The status has ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``,
``availableReplicas`` (ready, with ``minReadySeconds`` taken as met) and
``observedGeneration``. Orphaned pods that match are not adopted.
"""

from __future__ import annotations

import contextlib
import logging

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
POD = GroupVersionKind("", "v1", "Pod")


class ReplicaSetController:
    """Registers its reconciler with ``manager`` (a controller named ``replicaset``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self._expected = Expectations()
        Builder(manager).named("replicaset").for_(REPLICASET).owns(POD).with_options(
            max_concurrent_reconciles=4
        ).complete(self.reconcile)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            replica_set = await self.manager.client.get(REPLICASET, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = replica_set.get("metadata") or {}
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            self._expected.forget(uid)
            return None
        spec = replica_set.get("spec") or {}
        selector = LabelSelector.from_label_selector_dict(spec.get("selector"))
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
        await write_status(self.client, REPLICASET, replica_set, status)
        return None


def _negated(text: str) -> str:
    """A key that sorts ``text`` (an RFC 3339 time) newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in text)
