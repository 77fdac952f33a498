"""The Deployment controller: ReplicaSets per pod template, rolled as the strategy says.

A reconciler of Deployments that owns ReplicaSets. The ReplicaSet of the current template is
``<deployment>-<pod-template-hash>`` (the hash also labels its selector and pods, and its
``deployment.kubernetes.io/revision`` annotation is one above the highest so far). A
RollingUpdate scales it up within ``maxSurge`` and the older ones down while at least
``replicas - maxUnavailable`` pods are available (unavailable old pods go first); Recreate
empties the old ones before the new one starts. Old ReplicaSets beyond
``revisionHistoryLimit`` are deleted once empty. The status sums the ReplicaSets' counts
(``updatedReplicas`` from the new one), and its conditions are upstream's: Available
(MinimumReplicasAvailable / MinimumReplicasUnavailable) and Progressing (NewReplicaSetCreated,
ReplicaSetUpdated, NewReplicaSetAvailable) — what ``kubectl rollout status`` reads — and
ReplicaFailure, copied from a ReplicaSet whose pods the server refuses. A paused
Deployment is left as it is. Progress deadlines are not enforced.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from typing import Any

import orjson

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.podcontrol import controlled_by
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllermanager.deployments")

DEPLOYMENT = kinds.Deployment
REPLICASET = kinds.ReplicaSet
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Obj) -> str:
    """A short name-safe hash of a pod template (FNV-1a over its JSON, safe-encoded as upstream's)."""
    digest = 0x811C9DC5
    for byte in orjson.dumps(template, option=orjson.OPT_SORT_KEYS):
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(ch) % len(_SAFE)] for ch in str(digest))


def scaled(value: Any, total: int, *, round_up: bool) -> int:
    """An int-or-percent (``maxSurge``, ``maxUnavailable``) of ``total``."""
    if isinstance(value, str) and value.endswith("%"):
        share = total * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value) if value is not None else 0


class DeploymentController:
    """Registers its reconciler with ``manager`` (a controller named ``deployment``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        Builder(manager).named("deployment").for_(DEPLOYMENT).owns(REPLICASET).with_options(
            max_concurrent_reconciles=4
        ).complete(self.reconcile)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            deployment = await self.manager.client.get(DEPLOYMENT, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = deployment.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        uid = str(meta.get("uid"))
        spec = deployment.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        listed = await self.manager.client.list(REPLICASET, namespace=request.namespace)
        sets = sorted(
            (rs for rs in listed.items if controlled_by(rs, uid)),
            key=lambda rs: str((rs.get("metadata") or {}).get("creationTimestamp")),
        )
        new = next((rs for rs in sets if _template_of(rs) == template), None)
        olds = [rs for rs in sets if rs is not new]
        if spec.get("paused"):
            await self._write_status(deployment, new, sets, replicas, created=False)
            return None
        strategy = spec.get("strategy") or {}
        rolling = strategy.get("rollingUpdate") or {}
        max_surge = scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
        max_unavailable = scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
        if max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1
        recreate = strategy.get("type") == "Recreate"
        if recreate:
            max_surge, max_unavailable = 0, replicas
        sizes = {_name(rs): int((rs.get("spec") or {}).get("replicas", 0)) for rs in sets}
        created = False
        if new is None:
            if recreate:
                start = (
                    replicas
                    if not any(sizes.values()) and not any(_count(rs, "replicas") for rs in olds)
                    else 0
                )
            else:
                start = max(0, min(replicas, replicas + max_surge - sum(sizes.values())))
            new = await self._create_replica_set(deployment, template, start, max_surge, sets)
            sizes[_name(new)] = start
            created = True
        elif recreate:
            if not any(sizes[_name(rs)] for rs in olds) and not any(_count(rs, "replicas") for rs in olds):
                await self._scale(new, replicas, sizes, replicas + max_surge)
        else:
            target = sizes[_name(new)]
            if target < replicas:
                room = replicas + max_surge - sum(sizes.values())
                target = min(replicas, target + max(0, room))
            elif target > replicas:
                target = replicas
            await self._scale(new, target, sizes, replicas + max_surge)
        await self._scale_down_olds(new, olds, sizes, replicas, max_unavailable)
        await self._prune_history(olds, sizes, spec.get("revisionHistoryLimit", 10))
        await self._write_status(
            deployment, new, sets, replicas, created=created, max_unavailable=max_unavailable
        )
        return None

    async def _create_replica_set(
        self, deployment: Obj, template: Obj, replicas: int, max_surge: int, sets: list[Obj]
    ) -> Obj:
        meta = deployment.get("metadata") or {}
        spec = deployment.get("spec") or {}
        hashed = template_hash(template)
        revision = 1 + max((_revision(rs) for rs in sets), default=0)
        labelled = copy.deepcopy(template)
        labelled.setdefault("metadata", {})
        labelled["metadata"]["labels"] = {**(labelled["metadata"].get("labels") or {}), HASH_LABEL: hashed}
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: hashed}
        desired = int(spec.get("replicas", 1))
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta.get('name')}-{hashed}",
                "namespace": meta.get("namespace"),
                "labels": labelled["metadata"]["labels"],
                "annotations": {
                    REVISION: str(revision),
                    DESIRED: str(desired),
                    MAX_REPLICAS: str(desired + max_surge),
                },
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": meta.get("name"),
                        "uid": meta.get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": labelled,
            },
        }
        try:
            created = await self.client.create(body)
        except errors.AlreadyExists:
            # Made by an earlier reconcile and not in the cache yet: carry on with it.
            name = f"{meta.get('name')}-{hashed}"
            created = await self.client.get(REPLICASET, name, namespace=meta.get("namespace"))
            if not controlled_by(created, str(meta.get("uid"))):
                raise
        if (meta.get("annotations") or {}).get(REVISION) != str(revision):
            with contextlib.suppress(errors.NotFound, errors.Conflict):
                await self.client.patch(
                    DEPLOYMENT,
                    str(meta.get("name")),
                    {"metadata": {"annotations": {REVISION: str(revision)}}},
                    namespace=meta.get("namespace"),
                )
        return created

    async def _scale(self, replica_set: Obj, replicas: int, sizes: dict[str, int], max_replicas: int) -> None:
        name = _name(replica_set)
        if sizes.get(name) == replicas:
            return
        sizes[name] = replicas
        meta = replica_set.get("metadata") or {}
        annotations = {MAX_REPLICAS: str(max_replicas)}
        with contextlib.suppress(errors.NotFound):
            await self.client.patch(
                REPLICASET,
                name,
                {"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}},
                namespace=meta.get("namespace"),
            )

    async def _scale_down_olds(
        self, new: Obj, olds: list[Obj], sizes: dict[str, int], replicas: int, max_unavailable: int
    ) -> None:
        if not any(sizes[_name(rs)] for rs in olds):
            return
        min_available = replicas - max_unavailable
        new_unavailable = max(0, sizes[_name(new)] - _count(new, "availableReplicas"))
        budget = sum(sizes.values()) - min_available - new_unavailable
        # Unavailable old pods first: they serve nothing.
        for rs in olds:
            if budget <= 0:
                break
            unhealthy = sizes[_name(rs)] - _count(rs, "availableReplicas")
            if unhealthy > 0:
                step = min(unhealthy, budget)
                await self._scale(rs, sizes[_name(rs)] - step, sizes, sizes[_name(rs)])
                budget -= step
        available = sum(min(_count(rs, "availableReplicas"), sizes[_name(rs)]) for rs in [new, *olds])
        removable = available - min_available
        for rs in olds:
            if removable <= 0:
                break
            step = min(sizes[_name(rs)], removable)
            if step > 0:
                await self._scale(rs, sizes[_name(rs)] - step, sizes, sizes[_name(rs)])
                removable -= step

    async def _prune_history(self, olds: list[Obj], sizes: dict[str, int], limit: Any) -> None:
        empty = [rs for rs in olds if sizes[_name(rs)] == 0 and _count(rs, "replicas") == 0]
        for rs in empty[: max(0, len(empty) - int(limit))]:  # oldest first
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(
                    REPLICASET, _name(rs), namespace=(rs.get("metadata") or {}).get("namespace")
                )

    async def _write_status(
        self,
        deployment: Obj,
        new: Obj | None,
        sets: list[Obj],
        replicas: int,
        *,
        created: bool,
        max_unavailable: int = 0,
    ) -> None:
        meta = deployment.get("metadata") or {}
        current = deployment.get("status") or {}
        every = [*sets, *([new] if new is not None and new not in sets else [])]
        total = sum(_count(rs, "replicas") for rs in every)
        updated = _count(new, "replicas") if new is not None else 0
        ready = sum(_count(rs, "readyReplicas") for rs in every)
        available = sum(_count(rs, "availableReplicas") for rs in every)
        desired_total = sum(int((rs.get("spec") or {}).get("replicas", 0)) for rs in every)
        now = timestamps.now()
        conditions = {c.get("type"): dict(c) for c in current.get("conditions") or () if isinstance(c, dict)}
        if available >= replicas - max_unavailable:
            _condition(
                conditions,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            )
        else:
            _condition(
                conditions,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            )
        if new is not None:
            name = _name(new)
            if updated == replicas and available >= replicas and total == updated:
                reason, message = (
                    "NewReplicaSetAvailable",
                    f'ReplicaSet "{name}" has successfully progressed.',
                )
            elif created:
                reason, message = "NewReplicaSetCreated", f'Created new replica set "{name}"'
            else:
                reason, message = "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.'
            _condition(conditions, "Progressing", "True", reason, message, now)
        # A ReplicaSet's pods refused (ReplicaFailure) is the Deployment's too, the new set's first.
        failure = next((c for rs in [*([new] if new is not None else []), *sets] for c in _conditions(rs)
                        if c.get("type") == "ReplicaFailure"), None)  # fmt: skip
        if failure is not None:
            conditions["ReplicaFailure"] = dict(failure)
        else:
            conditions.pop("ReplicaFailure", None)
        status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": total or None,
            "updatedReplicas": updated or None,
            "readyReplicas": ready or None,
            "availableReplicas": available or None,
            "unavailableReplicas": max(0, desired_total - available) or None,
            "conditions": [
                conditions[kind] for kind in ("Available", "Progressing", "ReplicaFailure") if kind in conditions
            ],
        }
        unchanged = all(
            current.get(key) == value for key, value in status.items() if key != "conditions"
        ) and [
            (c.get("type"), c.get("status"), c.get("reason")) for c in current.get("conditions") or ()
        ] == [(c.get("type"), c.get("status"), c.get("reason")) for c in status["conditions"]]
        if unchanged:
            return
        with contextlib.suppress(errors.NotFound):
            await self.client.patch(
                DEPLOYMENT,
                str(meta.get("name")),
                {"status": status},
                namespace=meta.get("namespace"),
                subresource="status",
            )


def _conditions(obj: Obj) -> list[Obj]:
    return [c for c in (obj.get("status") or {}).get("conditions") or () if isinstance(c, dict)]


def _template_of(replica_set: Obj) -> Obj:
    """A ReplicaSet's pod template without the hash label: comparable with its Deployment's."""
    template = copy.deepcopy((replica_set.get("spec") or {}).get("template") or {})
    labels = (template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return template


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _count(obj: Obj | None, field: str) -> int:
    value = ((obj or {}).get("status") or {}).get(field)
    return int(value) if isinstance(value, int) else 0


def _revision(obj: Obj) -> int:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0")
    return int(value) if str(value).isdigit() else 0


def _condition(
    conditions: dict[Any, Obj], kind: str, status: str, reason: str, message: str, now: str
) -> None:
    old = conditions.get(kind)
    if old is not None and old.get("status") == status and old.get("reason") == reason:
        old["message"] = message
        return
    transition = old.get("lastTransitionTime") if old is not None and old.get("status") == status else now
    conditions[kind] = {
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": transition or now,
        "reason": reason,
        "message": message,
    }
