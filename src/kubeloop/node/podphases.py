"""The statuses a simulated pod goes through, as a kubelet writes them: its containers waiting
(ContainerCreating, a volume or a variable's source missing), running and ready, and ended
(Succeeded or Failed, with each container's exit code and the pod's message).
"""

from __future__ import annotations

from typing import Any

from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.node.podruns import containers_of


def waiting_statuses(pod: Obj, waiting: Obj) -> list[Obj]:
    """The containers' statuses while they wait (``waiting``: reason and message)."""
    return [
        {
            "name": c.get("name"),
            "image": c.get("image"),
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {"waiting": waiting},
        }
        for c in containers_of(pod)
    ]


def running_status(pod: Obj) -> Obj:
    now = timestamps.now()
    status = dict(pod.get("status") or {})
    status["phase"] = "Running"
    status["conditions"] = [
        pod_condition("PodReadyToStartContainers", "True", now),
        pod_condition("Initialized", "True", now),
        pod_condition("Ready", "True", now),
        pod_condition("ContainersReady", "True", now),
        pod_condition("PodScheduled", "True", now),
    ]
    status["containerStatuses"] = [
        {
            "name": c.get("name"),
            "image": c.get("image"),
            "imageID": f"simulated://{c.get('image')}",
            "containerID": f"kubeloop://{c.get('name')}",
            "ready": True,
            "restartCount": 0,
            "started": True,
            "state": {"running": {"startedAt": now}},
        }
        for c in containers_of(pod)
    ]
    return status


def ended_status(pod: Obj, failed: bool, message: str) -> Obj:
    now = timestamps.now()
    status = dict(pod.get("status") or {})
    status["phase"] = "Failed" if failed else "Succeeded"
    reason = "PodFailed" if failed else "PodCompleted"
    status["conditions"] = [
        pod_condition("PodReadyToStartContainers", "False", now),
        pod_condition("Initialized", "True", now, reason),
        pod_condition("Ready", "False", now, reason),
        pod_condition("ContainersReady", "False", now, reason),
        pod_condition("PodScheduled", "True", now),
    ]
    started = next(
        (
            s.get("state", {}).get("running", {}).get("startedAt")
            for s in status.get("containerStatuses") or ()
        ),
        now,
    )
    terminated: dict[str, Any] = {
        "exitCode": 1 if failed else 0,
        "reason": "Error" if failed else "Completed",
        "startedAt": started,
        "finishedAt": now,
        "containerID": "",
    }
    if message:
        terminated["message"] = message
    status["containerStatuses"] = [
        {
            "name": c.get("name"),
            "image": c.get("image"),
            "imageID": f"simulated://{c.get('image')}",
            "containerID": f"kubeloop://{c.get('name')}",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {"terminated": {**terminated, "containerID": f"kubeloop://{c.get('name')}"}},
        }
        for c in containers_of(pod)
    ]
    return status


def pod_condition(kind: str, status: str, now: str, reason: str = "", message: str = "") -> Obj:
    condition: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition
