"""The Job controller: a Job's pods, and its status and conditions as kube-controller-manager's.

A reconciler of Jobs that owns Pods. It keeps ``parallelism`` pods running until ``completions``
have succeeded (without ``completions``: until one has, and none runs), labelled as upstream
labels them (``batch.kubernetes.io/job-name``, ``controller-uid``, ...) and owned by the Job.
More failed pods than ``backoffLimit`` (default 6), or a run longer than
``activeDeadlineSeconds``, fails the Job (reasons BackoffLimitExceeded, DeadlineExceeded) and
deletes its running pods. The status counts active, ready, succeeded and failed pods, with
``startTime``, ``completionTime`` and the conditions ``Complete`` or ``Failed`` (after
``SuccessCriteriaMet`` or ``FailureTarget``, as Kubernetes 1.31+). A suspended Job runs nothing.
Pods just created and not yet in the cache are remembered (upstream's expectations), so a
reconcile never creates them twice.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.podcontrol import (
    CreateRefused,
    Expectations,
    active,
    controlled_by,
    create_pod,
    pod_from_template,
    ready,
)
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllermanager.jobs")

JOB = kinds.Job
POD = kinds.Pod
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
DEFAULT_BACKOFF_LIMIT = 6


class JobController:
    """Registers its reconciler with ``manager`` (a controller named ``job``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self.recorder = manager.event_recorder("job-controller")
        self._expected = Expectations()
        Builder(manager).named("job").for_(JOB).owns(POD).with_options(max_concurrent_reconciles=4).complete(
            self.reconcile
        )

    async def reconcile(self, request: Request) -> Result | None:
        try:
            job = await self.manager.client.get(JOB, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = job.get("metadata") or {}
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            self._expected.forget(uid)
            return None
        status = job.get("status") or {}
        if _finished(status):
            self._expected.forget(uid)
            return None
        spec = job.get("spec") or {}
        listed = await self.manager.client.list(
            POD, namespace=request.namespace, match_labels={JOB_NAME_LABEL: request.name}
        )
        pods = [pod for pod in listed.items if controlled_by(pod, uid)]
        expected = self._expected.observe(uid, pods)
        succeeded = sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Failed")
        running = [pod for pod in pods if active(pod)]
        ready_count = sum(1 for pod in running if ready(pod))
        now = timestamps.now()
        new_status: dict[str, Any] = {
            "startTime": status.get("startTime") or now,
            "active": len(running),
            "ready": ready_count,
            "succeeded": succeeded,
            "failed": failed,
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
        conditions = [dict(c) for c in status.get("conditions") or () if isinstance(c, dict)]
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1))
        backoff_limit = int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
        deadline = spec.get("activeDeadlineSeconds")
        started = timestamps.parse_time(new_status["startTime"]) or datetime.now(UTC)
        running_for = (datetime.now(UTC) - started).total_seconds()
        requeue: float | None = None
        refused = False

        if failed > backoff_limit:
            await self._fail(
                job,
                running,
                conditions,
                now,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
            new_status["active"] = new_status["ready"] = 0
        elif deadline is not None and not spec.get("suspend") and running_for >= float(deadline):
            await self._fail(
                job,
                running,
                conditions,
                now,
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
            new_status["active"] = new_status["ready"] = 0
        elif (completions is not None and succeeded >= int(completions)) or (
            completions is None and succeeded >= 1 and not running
        ):
            _set_condition(
                conditions,
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            )
            _set_condition(
                conditions, "Complete", "CompletionsReached", "Reached expected number of succeeded pods", now
            )
            new_status["completionTime"] = now
        elif spec.get("suspend"):
            for pod in running:
                await self._delete_pod(pod)
            new_status["active"] = new_status["ready"] = 0
            _set_condition(conditions, "Suspended", "JobSuspended", "Job suspended", now)
        else:
            conditions = [c for c in conditions if c.get("type") != "Suspended"]
            if completions is None:
                wanted = 0 if succeeded else parallelism
            else:
                wanted = min(parallelism, int(completions) - succeeded)
            missing = wanted - len(running) - len(expected)
            for _ in range(max(0, missing)):
                try:
                    self._expected.created(uid, await self._create_pod(job))
                except CreateRefused:
                    refused = True  # a FailedCreate event says why; tried again with back-off
                    break
            new_status["active"] = len(running) + len(expected)  # created, not yet in the cache
            if deadline is not None:
                requeue = max(0.0, float(deadline) - running_for)
        new_status["conditions"] = conditions
        if not conditions:
            new_status.pop("conditions")
        await self._write_status(job, new_status)
        if refused:
            return Result(requeue=True)
        return Result(requeue_after=requeue) if requeue is not None else None

    async def _create_pod(self, job: Obj) -> Obj:
        meta = job.get("metadata") or {}
        name, uid = str(meta.get("name")), str(meta.get("uid"))
        labels = {CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid, "job-name": name}
        template = (job.get("spec") or {}).get("template") or {}
        return await create_pod(self.client, self.recorder, job, pod_from_template(job, template, labels))

    async def _fail(
        self, job: Obj, running: list[Obj], conditions: list[Obj], now: str, reason: str, message: str
    ) -> None:
        for pod in running:
            await self._delete_pod(pod)
        _set_condition(conditions, "FailureTarget", reason, message, now)
        _set_condition(conditions, "Failed", reason, message, now)

    async def _delete_pod(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        with contextlib.suppress(errors.NotFound):
            await self.client.delete(POD, str(meta.get("name")), namespace=meta.get("namespace"))

    async def _write_status(self, job: Obj, status: Obj) -> None:
        current = job.get("status") or {}
        if all(current.get(key) == value for key, value in status.items() if key != "conditions") and (
            current.get("conditions") == status.get("conditions")
        ):
            return
        meta = job.get("metadata") or {}
        with contextlib.suppress(errors.NotFound):
            await self.client.patch(
                JOB,
                str(meta.get("name")),
                {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status},
                namespace=meta.get("namespace"),
                subresource="status",
            )


def _finished(status: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or ()
        if isinstance(c, dict)
    )


def _set_condition(conditions: list[Obj], kind: str, reason: str, message: str, now: str) -> None:
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != "True":
                condition["lastTransitionTime"] = now
            condition.update({"status": "True", "reason": reason, "message": message, "lastProbeTime": now})
            return
    conditions.append(
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )
