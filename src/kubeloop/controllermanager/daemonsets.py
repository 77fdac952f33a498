"""The DaemonSet controller: one pod on every node the template fits.

A reconciler of DaemonSets that owns Pods and watches Nodes. A node is eligible when the pod
template fits it (:mod:`.scheduling`: node selector, required affinity, tolerated taints — with
the tolerations upstream adds to every daemon pod). Each eligible node gets a pod pinned to it by
a ``metadata.name`` node affinity, labelled with the revision (``controller-revision-hash``) and
``pod-template-generation``; pods on nodes no longer eligible and extra pods on one node are
deleted. A changed template is a new revision (:mod:`.revisions`): RollingUpdate replaces old pods
while no more than ``maxUnavailable`` nodes lack an available pod, or with ``maxSurge`` starts the
new pod first and deletes the old one once it is ready; OnDelete waits. The status has the
counters upstream always writes (``desiredNumberScheduled``, ``currentNumberScheduled``,
``numberMisscheduled``, ``numberReady``) and ``updatedNumberScheduled``, ``numberAvailable``,
``numberUnavailable`` — what ``kubectl rollout status daemonset`` reads.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api.object import Obj
from kubeloop.controller.handler import EnqueueRequestsFromMapFunc
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.deployments import scaled
from kubeloop.controllermanager.podcontrol import (
    CreateRefused,
    active,
    controlled_by,
    create_pod,
    delete_pod,
    pod_from_template,
    ready,
    write_status,
)
from kubeloop.controllermanager.revisions import CONTROLLER_REVISION, HASH_LABEL, History, revision_hash
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager
from kubeloop.node.scheduler import fits, required_node_name

log = logging.getLogger("kubeloop.controllermanager.daemonsets")

DAEMONSET = kinds.DaemonSet
POD = kinds.Pod
NODE = kinds.Node
TEMPLATE_GENERATION_LABEL = "pod-template-generation"

#: What upstream's daemon pods tolerate, whatever their template says.
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def daemon_pod_spec(template_spec: Obj) -> Obj:
    """The template's pod spec with the tolerations every daemon pod gets."""
    spec = copy.deepcopy(template_spec)
    tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
    extra = [*DAEMON_TOLERATIONS, *([HOST_NETWORK_TOLERATION] if spec.get("hostNetwork") else [])]
    for toleration in extra:
        if not any(
            t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"] for t in tolerations
        ):
            tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations
    return spec


class DaemonSetController:
    """Registers its reconciler with ``manager`` (a controller named ``daemonset``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self.recorder = manager.event_recorder("daemonset-controller")
        #: DaemonSet uid → pods created and not yet seen in the cache (name → node).
        self._expected: dict[str, dict[str, str]] = {}
        Builder(manager).named("daemonset").for_(DAEMONSET).owns(POD).watches(
            NODE, EnqueueRequestsFromMapFunc(self._every_daemon_set)
        ).with_options(max_concurrent_reconciles=4).complete(self.reconcile)

    def _every_daemon_set(self, node: Obj) -> list[Request]:
        keys = self.manager.informer_for(DAEMONSET).store.list_keys()
        return [Request(*key.split("/", 1)) for key in keys if "/" in key]

    async def reconcile(self, request: Request) -> Result | None:
        try:
            return await self._reconcile(request)
        except CreateRefused:
            return Result(requeue=True)  # a FailedCreate event says why; tried again with back-off

    async def _reconcile(self, request: Request) -> Result | None:
        try:
            daemon_set = await self.manager.client.get(DAEMONSET, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = daemon_set.get("metadata") or {}
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            self._expected.pop(uid, None)
            return None
        spec = daemon_set.get("spec") or {}
        template = spec.get("template") or {}
        history = History(
            self.client,
            daemon_set,
            (await self.manager.client.list(CONTROLLER_REVISION, namespace=request.namespace)).items,
        )
        revision = await history.for_template(template)
        update_hash = revision_hash(revision)
        pod_spec = daemon_pod_spec(template.get("spec") or {})
        nodes = {
            str((n.get("metadata") or {}).get("name")): n
            for n in (await self.manager.client.list(NODE)).items
        }
        eligible = {name for name, node in nodes.items() if fits({**pod_spec, "nodeName": None}, node)}

        listed = await self.manager.client.list(POD, namespace=request.namespace)
        owned = [pod for pod in listed.items if controlled_by(pod, uid)]
        expected = self._expected.setdefault(uid, {})
        for pod in owned:
            expected.pop(str((pod.get("metadata") or {}).get("name")), None)
        by_node: dict[str, list[Obj]] = {}
        for pod in owned:
            if active(pod):
                by_node.setdefault(required_node_name(pod.get("spec") or {}) or "", []).append(pod)
            elif not (pod.get("metadata") or {}).get("deletionTimestamp"):
                await delete_pod(self.client, pod)  # an ended daemon pod is replaced
        pending_nodes = set(expected.values())

        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        rolling_spec = strategy.get("rollingUpdate") or {}
        desired = len(eligible)
        max_surge = scaled(rolling_spec.get("maxSurge", 0), desired, round_up=True)
        max_unavailable = scaled(rolling_spec.get("maxUnavailable", 1), desired, round_up=True)
        if max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1

        for node_name, pods in by_node.items():
            if node_name not in eligible:
                for pod in pods:
                    await delete_pod(self.client, pod)
        unavailable = sum(1 for name in eligible if not any(ready(p) for p in by_node.get(name, ())))
        surging = 0
        for node_name in sorted(eligible):
            pods = sorted(
                by_node.get(node_name, []),
                key=lambda p: (
                    _hash(p) != update_hash,
                    not ready(p),
                    str((p.get("metadata") or {}).get("creationTimestamp")),
                ),
            )
            new = [p for p in pods if _hash(p) == update_hash]
            old = [p for p in pods if _hash(p) != update_hash]
            for extra in new[1:]:
                await delete_pod(self.client, extra)
            if not pods:
                if node_name not in pending_nodes:
                    await self._create(daemon_set, pod_spec, node_name, update_hash, expected)
                continue
            if not rolling or not old:
                continue
            if new:
                if ready(new[0]):
                    for pod in old:
                        await delete_pod(self.client, pod)
                continue
            if max_surge > 0:
                if surging < max_surge and node_name not in pending_nodes:
                    await self._create(daemon_set, pod_spec, node_name, update_hash, expected)
                    surging += 1
                continue
            if not any(ready(p) for p in old):
                for pod in old:
                    await delete_pod(self.client, pod)
            elif unavailable < max_unavailable:
                for pod in old:
                    await delete_pod(self.client, pod)
                unavailable += 1

        scheduled = [name for name in eligible if by_node.get(name)]
        ready_nodes = [name for name in scheduled if any(ready(p) for p in by_node[name])]
        updated = [name for name in scheduled if any(_hash(p) == update_hash for p in by_node[name])]
        new_status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 1),
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": len(scheduled),
            "numberMisscheduled": sum(1 for name in by_node if name not in eligible),
            "numberReady": len(ready_nodes),
            "updatedNumberScheduled": len(updated) or None,
            "numberAvailable": len(ready_nodes) or None,
            "numberUnavailable": (desired - len(ready_nodes)) or None,
        }
        await write_status(self.client, DAEMONSET, daemon_set, new_status)
        limit = int(spec.get("revisionHistoryLimit", 10))
        in_use = {
            str((r.get("metadata") or {}).get("name"))
            for r in history.revisions
            if revision_hash(r) in {update_hash, *(_hash(p) for p in owned)}
        }
        await history.truncate(limit, in_use)
        return None

    async def _create(
        self, daemon_set: Obj, pod_spec: Obj, node: str, update_hash: str, expected: dict[str, str]
    ) -> None:
        meta = daemon_set.get("metadata") or {}
        template = {**((daemon_set.get("spec") or {}).get("template") or {}), "spec": _pinned(pod_spec, node)}
        labels = {HASH_LABEL: update_hash, TEMPLATE_GENERATION_LABEL: str(meta.get("generation", 1))}
        created = await create_pod(
            self.client, self.recorder, daemon_set, pod_from_template(daemon_set, template, labels)
        )
        expected[str((created.get("metadata") or {}).get("name"))] = node


def _pinned(pod_spec: Obj, node: str) -> Obj:
    """The pod spec with its required node affinity replaced by ``metadata.name`` = ``node``."""
    spec = copy.deepcopy(pod_spec)
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }
    return spec


def _hash(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(HASH_LABEL, ""))
