"""What the scheduler and the kubelet say about a pod in Events, in their words, as
``kubectl describe pod`` and ``kubectl events`` show them.

The scheduler (``default-scheduler``, an ``events.k8s.io/v1`` recorder, action ``Binding`` or
``Scheduling``) says where it bound a pod (Scheduled) or why it could not (FailedScheduling). The
kubelet (``kubelet``, its node as ``source.host``) speaks about a container (the Event's
``involvedObject.fieldPath`` names it: ``spec.containers{web}``) each time the container starts:
its image is there (Pulled: the node pulls nothing, every image is present), it was made
(Created) and started (Started); when it cannot be started (Failed: its process cannot be
started, or its environment names a Secret, ConfigMap or key that does not exist), when it waits to start
again after a failure (BackOff), when it is stopped (Killing) and when a probe fails it
(Unhealthy); and, about the pod, when one of its volumes cannot be made (FailedMount).
Upstream's kubelet pulls images, so its Pulling and pull timings never appear here.
"""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.manager.eventsrecorder import EventsV1Recorder
from kubeloop.manager.recorder import NORMAL, WARNING, object_reference
from kubeloop.node.podruns import Record

SCHEDULER = "default-scheduler"
KUBELET = "kubelet"


def container_reference(pod: Obj, container: str) -> dict[str, str]:
    """The ObjectReference of a pod's container, as the kubelet's events name it: the pod, with
    ``fieldPath`` ``spec.containers{name}`` (``spec.initContainers{name}`` for an init
    container, a sidecar's included)."""
    spec = pod.get("spec") or {}
    init = any(isinstance(c, dict) and c.get("name") == container for c in spec.get("initContainers") or ())
    return object_reference(pod, f"spec.{'initContainers' if init else 'containers'}{{{container}}}")


class SchedulerEvents:
    """The scheduler's Events about the pods it places."""

    def __init__(self, recorder: EventsV1Recorder) -> None:
        self.recorder = recorder

    def scheduled(self, pod: Obj, node: str) -> None:
        meta = pod.get("metadata") or {}
        note = f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}"
        self.recorder.eventf(pod, None, NORMAL, "Scheduled", "Binding", note)

    def unschedulable(self, pod: Obj, message: str) -> None:
        self.recorder.eventf(pod, None, WARNING, "FailedScheduling", "Scheduling", message)


class KubeletEvents:
    """The kubelet's Events about the containers it runs, through ``record``."""

    def __init__(self, record: Record) -> None:
        self.record = record

    def started(self, pod: Obj, container: Obj) -> None:
        """A run of ``container`` started: its image present, the container created, started."""
        name = str(container.get("name"))
        ref = container_reference(pod, name)
        self.record(ref, NORMAL, "Pulled", f'Container image "{container.get("image")}" already present on machine')
        self.record(ref, NORMAL, "Created", f"Created container: {name}")
        self.record(ref, NORMAL, "Started", f"Started container {name}")

    def failed(self, pod: Obj, container: str, error: str) -> None:
        """The container could not be started (``error`` says why)."""
        self.record(container_reference(pod, container), WARNING, "Failed", f"Error: {error}")

    def back_off(self, pod: Obj, container: str) -> None:
        """The container ended and waits out its back-off before it starts again."""
        meta = pod.get("metadata") or {}
        self.record(
            container_reference(pod, container),
            WARNING,
            "BackOff",
            f"Back-off restarting failed container {container} in pod "
            f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})",
        )

    def stopping(self, pod: Obj, container: str, why: str = "") -> None:
        """The container is being stopped (``why``: a failed probe's words, else the pod goes)."""
        self.record(container_reference(pod, container), NORMAL, "Killing", why or f"Stopping container {container}")

    def mount_failed(self, pod: Obj, message: str) -> None:
        """A volume of the pod cannot be made (``message``: the kubelet's MountVolume words)."""
        self.record(pod, WARNING, "FailedMount", message)

    def unhealthy(self, pod: Obj, container: str, message: str) -> None:
        """A probe of the container failed (``message``: which, and how)."""
        self.record(container_reference(pod, container), WARNING, "Unhealthy", message)
