"""The core group's defaults (``pkg/apis/core/v1/defaults.go``) and create-time statuses: a pod's
spec (policies, containers, probes, volumes, env fieldRefs) and phase and QoS class, Services,
Secrets (``stringData`` merged), Namespaces, PersistentVolumes and their claims,
ReplicationControllers and PodTemplates. apps and batch default their pod templates here.
"""

from __future__ import annotations

import base64

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = [
    "namespace",
    "namespace_status",
    "pending_status",
    "persistent_volume",
    "persistent_volume_claim",
    "pod",
    "pod_status",
    "pod_template",
    "pod_template_defaults",
    "replication_controller",
    "secret",
    "service",
    "service_status",
]


def _pod_spec_defaults(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for volume in spec.get("volumes") or ():
        if isinstance(volume, dict):
            _volume_defaults(volume)
    for container in spec.get("ephemeralContainers") or ():
        if isinstance(container, dict):
            _env_defaults(container)
    for container in [*spec.get("containers", ()), *spec.get("initContainers", ())]:
        if not isinstance(container, dict):
            continue
        _env_defaults(container)
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = container.get("image")
        if "imagePullPolicy" not in container and isinstance(image, str):
            tagless = "@" not in image and ":" not in image.rsplit("/", 1)[-1]
            container["imagePullPolicy"] = (
                "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
            )
        container.setdefault("resources", {})
        for port in container.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
        for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = container.get(probe_name)
            if isinstance(probe, dict):
                _probe_defaults(probe)


def _field_ref_defaults(holder: object) -> None:
    """SetDefaults_ObjectFieldSelector: a ``fieldRef`` names ``apiVersion: v1`` unless it says."""
    if isinstance(holder, dict) and isinstance(holder.get("fieldRef"), dict):
        holder["fieldRef"].setdefault("apiVersion", "v1")


def _env_defaults(container: Obj) -> None:
    for variable in container.get("env") or ():
        if isinstance(variable, dict):
            _field_ref_defaults(variable.get("valueFrom"))


def _downward_api_defaults(source: object) -> None:
    if isinstance(source, dict):
        for item in source.get("items") or ():
            _field_ref_defaults(item)


#: Volume sources whose files get mode 0644 unless they say otherwise (SetDefaults_*VolumeSource).
_MODE_DEFAULTED_SOURCES = ("secret", "configMap", "projected", "downwardAPI")


def _volume_defaults(volume: Obj) -> None:
    """SetDefaults_Volume: a volume with no source is an ``emptyDir``; secret, configMap,
    projected and downwardAPI volumes get ``defaultMode`` 0644 (420)."""
    if set(volume) <= {"name"}:
        volume["emptyDir"] = {}
        return
    for source in _MODE_DEFAULTED_SOURCES:
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", 0o644)
    _downward_api_defaults(volume.get("downwardAPI"))
    projected = volume.get("projected")
    if isinstance(projected, dict):
        for projection in projected.get("sources") or ():
            if isinstance(projection, dict):
                _downward_api_defaults(projection.get("downwardAPI"))


def _probe_defaults(probe: Obj) -> None:
    """SetDefaults_Probe and SetDefaults_HTTPGetAction."""
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http_get = probe.get("httpGet")
    if isinstance(http_get, dict):
        http_get.setdefault("path", "/")
        http_get.setdefault("scheme", "HTTP")


def pod_template_defaults(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        template.setdefault("metadata", {})
        pod_spec = template.get("spec")
        if isinstance(pod_spec, dict):
            _pod_spec_defaults(pod_spec)


def pod(obj: Obj) -> None:
    """SetDefaults_Pod and SetDefaults_PodSpec."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _pod_spec_defaults(spec)
        spec.setdefault("enableServiceLinks", True)


def service(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "targetPort" not in port and "port" in port:
                port["targetPort"] = port["port"]


def secret(obj: Obj) -> None:
    obj.setdefault("type", "Opaque")
    _merge_string_data(obj)


def _merge_string_data(secret: Obj) -> None:
    """A Secret's write-only ``stringData`` goes into ``data`` (base64), over keys of the same name,
    and is not stored: upstream's v1 → internal conversion."""
    string_data = secret.pop("stringData", None)
    if not isinstance(string_data, dict) or not string_data:
        return
    data = secret.get("data")
    merged: Obj = dict(data) if isinstance(data, dict) else {}
    for key, value in string_data.items():
        if isinstance(value, str):
            merged[key] = base64.b64encode(value.encode()).decode("ascii")
    secret["data"] = merged


def namespace(obj: Obj) -> None:
    """Every Namespace is labelled with its name (``kubernetes.io/metadata.name``, set on every
    write as upstream's namespace strategy does), so selectors can pick namespaces by name."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        return
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        labels = metadata["labels"] = {}
    labels["kubernetes.io/metadata.name"] = metadata["name"]


def namespace_status(obj: Obj) -> None:
    """A new Namespace is Active and carries the ``kubernetes`` finalizer."""
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec["finalizers"] = ["kubernetes"]
    obj["status"] = {"phase": "Active"}


def pod_status(obj: Obj) -> None:
    """A new Pod is Pending, with its QoS class."""
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj)}


def service_status(obj: Obj) -> None:
    obj["status"] = {"loadBalancer": {}}


def _qos_class(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    requests_seen = False
    guaranteed = True
    for container in containers:
        if not isinstance(container, dict):
            continue
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if requests or limits:
            requests_seen = True
        for resource in ("cpu", "memory"):
            if resource not in limits or (resource in requests and requests[resource] != limits[resource]):
                guaranteed = False
    if not requests_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def persistent_volume_claim(obj: Obj) -> None:
    spec = spec_of(obj)
    if spec is not None:
        spec.setdefault("volumeMode", "Filesystem")


def persistent_volume(obj: Obj) -> None:
    spec = spec_of(obj)
    if spec is not None:
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")


def pending_status(obj: Obj) -> None:
    """PersistentVolumes and their claims start Pending."""
    obj["status"] = {"phase": "Pending"}


def replication_controller(obj: Obj) -> None:
    """SetDefaults_ReplicationController: selector and labels from the template's labels."""
    spec = spec_of(obj)
    if spec is None:
        return
    template = spec.get("template")
    labels = (template.get("metadata") or {}).get("labels") if isinstance(template, dict) else None
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = obj.setdefault("metadata", {})
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
    spec.setdefault("replicas", 1)
    spec.setdefault("minReadySeconds", 0)
    pod_template_defaults(spec)


def pod_template(obj: Obj) -> None:
    pod_template_defaults(obj)
