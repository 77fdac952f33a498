"""The TTL-after-finished controller (kube-controller-manager's ``ttlafterfinished``): a Job with
``spec.ttlSecondsAfterFinished`` is deleted that many seconds after it finished — after the
lastTransitionTime of its Complete or Failed condition — in the foreground (its pods go first),
and only the Job that was judged (a uid precondition). A Job not yet due is looked at again when
it is; one whose TTL is changed meanwhile is judged by the new value.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

from kubeloop import errors, kinds
from kubeloop.api.object import Obj
from kubeloop.api.timestamps import parse_time
from kubeloop.client.calloptions import Preconditions
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

JOB = kinds.Job


def finished_at(job: Obj) -> datetime | None:
    """When the Job finished: its Complete or Failed condition's transition (None: it has not)."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if (
            isinstance(condition, dict)
            and condition.get("type") in ("Complete", "Failed")
            and condition.get("status") == "True"
        ):
            return parse_time(condition.get("lastTransitionTime"))
    return None


def expires_at(job: Obj) -> datetime | None:
    """When a finished Job with a TTL is due for deletion (None: never)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = finished_at(job)
    if not isinstance(ttl, int) or finished is None:
        return None
    return finished + timedelta(seconds=ttl)


class TTLAfterFinishedController:
    """Registers its reconciler with ``manager`` (a controller named ``ttl-after-finished``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        Builder(manager).named("ttl-after-finished").for_(JOB).complete(self.reconcile)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            job = await self.manager.client.get(JOB, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return None
        due = expires_at(job)
        if due is None:
            return None
        now = datetime.now(UTC)
        if due > now:
            return Result(requeue_after=(due - now).total_seconds())
        # The cache may be behind: judge the Job as the server has it before deleting it.
        try:
            fresh = await self.client.get(JOB, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        due = expires_at(fresh)
        if due is None:
            return None
        if due > now:
            return Result(requeue_after=(due - now).total_seconds())
        with contextlib.suppress(errors.NotFound, errors.Conflict):
            await self.client.delete(
                JOB,
                request.name,
                namespace=request.namespace,
                propagation_policy="Foreground",
                preconditions=Preconditions(uid=str(fresh["metadata"]["uid"])),
            )
        return None
