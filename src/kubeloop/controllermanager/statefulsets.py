"""The StatefulSet controller: pods with stable names, made and updated in order.

A reconciler of StatefulSets that owns Pods. Pod ``i`` is ``<set>-<i>``, labelled with its name
(``statefulset.kubernetes.io/pod-name``), its index (``apps.kubernetes.io/pod-index``) and its
revision (``controller-revision-hash``), with ``hostname`` and the governing service as
``subdomain``; each of ``volumeClaimTemplates`` becomes a claim ``<template>-<set>-<i>`` the pod
mounts. With ``OrderedReady`` (the default) pod ``i`` is made only once pods ``0..i-1`` are running
and ready, and scaling down removes the highest index first, one at a time; ``Parallel`` does
both at once. Ended pods are replaced.

A changed template is a new revision (:mod:`.revisions`). With the RollingUpdate strategy pods at
or above ``partition`` are deleted, highest index first and one at a time once all are ready, and
come back at the new revision; OnDelete waits for someone else to delete them. The status counts
``replicas``, ``readyReplicas``, ``availableReplicas``, ``currentReplicas`` and
``updatedReplicas`` with ``currentRevision`` and ``updateRevision`` — what ``kubectl rollout
status statefulset`` reads.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api.object import Obj
from kubeloop.controller.reconcile import Request, Result
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
from kubeloop.controllermanager.revisions import CONTROLLER_REVISION, HASH_LABEL, History, template_of
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllermanager.statefulsets")

STATEFULSET = kinds.StatefulSet
POD = kinds.Pod
PVC = kinds.PersistentVolumeClaim
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


class StatefulSetController:
    """Registers its reconciler with ``manager`` (a controller named ``statefulset``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self.recorder = manager.event_recorder("statefulset-controller")
        Builder(manager).named("statefulset").for_(STATEFULSET).owns(POD).with_options(
            max_concurrent_reconciles=4
        ).complete(self.reconcile)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            return await self._reconcile(request)
        except CreateRefused:
            return Result(requeue=True)  # a FailedCreate event says why; tried again with back-off

    async def _reconcile(self, request: Request) -> Result | None:
        try:
            stateful_set = await self.manager.client.get(
                STATEFULSET, request.name, namespace=request.namespace
            )
        except errors.NotFound:
            return None
        meta = stateful_set.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        uid = str(meta.get("uid"))
        spec = stateful_set.get("spec") or {}
        status = stateful_set.get("status") or {}
        history = History(
            self.client,
            stateful_set,
            (await self.manager.client.list(CONTROLLER_REVISION, namespace=request.namespace)).items,
        )
        update_revision = await history.for_template(spec.get("template") or {})
        update_name = _name(update_revision)
        current = history.named(str(status.get("currentRevision") or "")) or update_revision
        current_name = _name(current)

        pattern = re.compile(rf"^{re.escape(request.name)}-(0|[1-9][0-9]*)$")
        listed = await self.manager.client.list(POD, namespace=request.namespace)
        pods: dict[int, Obj] = {}
        for pod in listed.items:
            match = pattern.match(_name(pod))
            if match and controlled_by(pod, uid):
                pods[int(match[1])] = pod
        replicas = int(spec.get("replicas", 1))
        parallel = spec.get("podManagementPolicy") == "Parallel"
        strategy = spec.get("updateStrategy") or {}
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)

        # Ended pods are deleted, to be made again.
        for index, pod in list(pods.items()):
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") and not _deleting(pod):
                await delete_pod(self.client, pod)
                del pods[index]
        # Missing pods, in order: below the partition at the current revision, the rest at the new.
        for index in range(replicas):
            if index in pods:
                if not parallel and not (_running_and_ready(pods[index])):
                    break
                continue
            revision = current if index < partition else update_revision
            pods[index] = await self._create(stateful_set, index, revision)
            if not parallel:
                break
        # Pods beyond the replicas, highest first.
        condemned = sorted((i for i in pods if i >= replicas), reverse=True)
        settled = all(_running_and_ready(pods[i]) for i in pods if i < replicas)
        for index in condemned:
            if not parallel and not (settled and all(_running_and_ready(pods[i]) for i in pods)):
                break
            if not _deleting(pods[index]):
                await delete_pod(self.client, pods[index])
            if not parallel:
                break
        # Rolling update: the highest pod at or above the partition not at the new revision.
        if strategy.get("type", "RollingUpdate") == "RollingUpdate" and all(
            index in pods and _running_and_ready(pods[index]) for index in range(replicas)
        ):
            for index in sorted((i for i in pods if partition <= i < replicas), reverse=True):
                if _revision(pods[index]) != update_name:
                    await delete_pod(self.client, pods[index])
                    break

        in_range = [pods[i] for i in pods if i < replicas and active(pods[i])]
        updated = sum(1 for pod in in_range if _revision(pod) == update_name)
        ready_count = sum(1 for pod in in_range if ready(pod))
        if updated == replicas and ready_count == replicas:
            current_name = update_name
        new_status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len([p for p in pods.values() if active(p)]),
            "readyReplicas": ready_count or None,
            "availableReplicas": ready_count,
            "currentReplicas": sum(1 for pod in in_range if _revision(pod) == current_name) or None,
            "updatedReplicas": updated or None,
            "currentRevision": current_name,
            "updateRevision": update_name,
            "collisionCount": status.get("collisionCount", 0),
        }
        await write_status(self.client, STATEFULSET, stateful_set, new_status)
        limit = int(spec.get("revisionHistoryLimit", 10))
        await history.truncate(limit, {current_name, update_name, *(_revision(p) for p in pods.values())})
        return None

    async def _create(self, stateful_set: Obj, index: int, revision: Obj) -> Obj:
        meta = stateful_set.get("metadata") or {}
        spec = stateful_set.get("spec") or {}
        name = f"{meta.get('name')}-{index}"
        labels = {POD_NAME_LABEL: name, POD_INDEX_LABEL: str(index), HASH_LABEL: _name(revision)}
        pod = pod_from_template(stateful_set, template_of(revision), labels)
        pod["metadata"].pop("generateName")
        pod["metadata"]["name"] = name
        pod_spec = pod["spec"]
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        volumes = [v for v in pod_spec.get("volumes") or () if isinstance(v, dict)]
        for claim in spec.get("volumeClaimTemplates") or ():
            claim_name = str((claim.get("metadata") or {}).get("name"))
            full_name = f"{claim_name}-{name}"
            await self._ensure_claim(stateful_set, claim, full_name)
            volumes = [v for v in volumes if v.get("name") != claim_name]
            volumes.append({"name": claim_name, "persistentVolumeClaim": {"claimName": full_name}})
        if volumes:
            pod_spec["volumes"] = volumes
        try:
            return await create_pod(self.client, self.recorder, stateful_set, pod)
        except errors.AlreadyExists:
            # Made by an earlier reconcile whose write the cache has not shown yet.
            return await self.client.get(POD, name, namespace=meta.get("namespace"))

    async def _ensure_claim(self, stateful_set: Obj, claim: Obj, name: str) -> None:
        meta = stateful_set.get("metadata") or {}
        claim_meta = dict(claim.get("metadata") or {})
        selector = ((stateful_set.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        claim_meta.update(
            {
                "name": name,
                "namespace": meta.get("namespace"),
                "labels": {**(claim_meta.get("labels") or {}), **selector},
            }
        )
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": claim_meta,
            "spec": claim.get("spec") or {},
        }
        with contextlib.suppress(errors.AlreadyExists):
            await self.client.create(body)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _revision(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(HASH_LABEL, ""))


def _deleting(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and ready(pod) and not _deleting(pod)
