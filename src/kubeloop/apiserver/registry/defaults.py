"""Defaulting and create-time status of built-in kinds (upstream's SetDefaults_* and the status
their ``PrepareForCreate`` seeds), kept to the fields clients read back: a Deployment's strategy and
replicas, a Pod's phase and policies, a Namespace's phase and finalizer, a Service's type. One
function per kind; ``strategies`` says which kind uses which.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from kubeloop.api.object import Obj


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


def _template_defaults(spec: Obj) -> None:
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


def _apps_spec(obj: Obj, *, replicas: bool) -> Obj | None:
    """The spec of an apps/v1 workload, with what all of them default."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if replicas:
        spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    return spec


def deployment(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=True)
    if spec is None:
        return
    spec.setdefault("progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    _template_defaults(spec)


def replica_set(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=True)
    if spec is None:
        return
    spec.pop("revisionHistoryLimit", None)
    _template_defaults(spec)


def stateful_set(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=True)
    if spec is None:
        return
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = _strategy(spec, "updateStrategy")
    if strategy is not None:
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
        rolling = strategy.get("rollingUpdate")
        if (
            strategy["type"] == "RollingUpdate"
            and isinstance(rolling, dict)
            and rolling.get("partition") is None
        ):
            rolling["partition"] = 0
    _template_defaults(spec)


def daemon_set(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=False)
    if spec is None:
        return
    strategy = _strategy(spec, "updateStrategy")
    if strategy is not None:
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
            rolling = strategy["rollingUpdate"]
            if isinstance(rolling, dict):
                if rolling.get("maxUnavailable") is None:
                    rolling["maxUnavailable"] = 1
                if rolling.get("maxSurge") is None:
                    rolling["maxSurge"] = 0
    _template_defaults(spec)


def _strategy(spec: Obj, name: str) -> Obj | None:
    """``spec[name]`` to default field by field (a struct in Go: absent or null is empty)."""
    if spec.get(name) is None:
        spec[name] = {}
    strategy = spec[name]
    return strategy if isinstance(strategy, dict) else None


def job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if "completions" not in spec and spec.get("parallelism") == 1:
        spec["completions"] = 1
    _template_defaults(spec)


def cron_job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)


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


def namespace_status(obj: Obj) -> None:
    """A new Namespace is Active and carries the ``kubernetes`` finalizer."""
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec["finalizers"] = ["kubernetes"]
    obj["status"] = {"phase": "Active"}


def pod_status(obj: Obj) -> None:
    """A new Pod is Pending, with its QoS class."""
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj)}


def empty_status(obj: Obj) -> None:
    """Workloads start with an empty status, which their controllers fill."""
    obj["status"] = {}


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


# ---------------------------------------------------------------- the rest of the catalog


def _spec(obj: Obj) -> Obj | None:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else None


def persistent_volume_claim(obj: Obj) -> None:
    spec = _spec(obj)
    if spec is not None:
        spec.setdefault("volumeMode", "Filesystem")


def persistent_volume(obj: Obj) -> None:
    spec = _spec(obj)
    if spec is not None:
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")


def pending_status(obj: Obj) -> None:
    """PersistentVolumes and their claims start Pending."""
    obj["status"] = {"phase": "Pending"}


def replication_controller(obj: Obj) -> None:
    """SetDefaults_ReplicationController: selector and labels from the template's labels."""
    spec = _spec(obj)
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
    _template_defaults(spec)


def pod_template(obj: Obj) -> None:
    _template_defaults(obj)


#: autoscaling/v2 ``GenerateHPAScaleUpRules`` / ``GenerateHPAScaleDownRules``: each direction's
#: stabilization window and policies when a behavior leaves them out.
_SCALING_DEFAULTS: Mapping[str, tuple[int, tuple[tuple[str, int, int], ...]]] = {
    "scaleUp": (0, (("Pods", 4, 15), ("Percent", 100, 15))),
    "scaleDown": (300, (("Percent", 100, 15),)),
}


def horizontal_pod_autoscaler(obj: Obj) -> None:
    """autoscaling/v2: one replica at least, 80% CPU when no metric is given, and a behavior's
    missing scaling rules filled in as the HPA controller would apply them."""
    spec = _spec(obj)
    if spec is None:
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]
    behavior = spec.get("behavior")
    if not isinstance(behavior, dict):
        return
    for direction, (window, policies) in _SCALING_DEFAULTS.items():
        rules = behavior.get(direction)
        if not isinstance(rules, dict):
            rules = behavior[direction] = {}
        if rules.get("stabilizationWindowSeconds") is None:
            rules["stabilizationWindowSeconds"] = window
        if rules.get("selectPolicy") is None:
            rules["selectPolicy"] = "Max"
        if rules.get("policies") is None:
            rules["policies"] = [{"type": t, "value": v, "periodSeconds": p} for t, v, p in policies]


def network_policy(obj: Obj) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or ():
            for port in (rule.get("ports") or ()) if isinstance(rule, dict) else ():
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


_RBAC_GROUP = "rbac.authorization.k8s.io"


def role_binding(obj: Obj) -> None:
    """SetDefaults_RoleBinding / _ClusterRoleBinding / _Subject: the roleRef's group, and each
    User or Group subject's, is rbac.authorization.k8s.io when left out."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = _RBAC_GROUP
    for subject in obj.get("subjects") or ():
        if (
            isinstance(subject, dict)
            and not subject.get("apiGroup")
            and subject.get("kind") in ("User", "Group")
        ):
            subject["apiGroup"] = _RBAC_GROUP


def endpoint_slice(obj: Obj) -> None:
    for port in obj.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("name", "")
            port.setdefault("protocol", "TCP")


def storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def csi_driver(obj: Obj) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    spec.setdefault("attachRequired", True)
    spec.setdefault("podInfoOnMount", False)
    spec.setdefault("storageCapacity", False)
    spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
    spec.setdefault("volumeLifecycleModes", ["Persistent"])
    spec.setdefault("requiresRepublish", False)
    spec.setdefault("seLinuxMount", False)


def priority_class(obj: Obj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def flow_schema(obj: Obj) -> None:
    spec = _spec(obj)
    if spec is not None and not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = 1000


def priority_level_configuration(obj: Obj) -> None:
    limited = (_spec(obj) or {}).get("limited")
    if isinstance(limited, dict):
        limited.setdefault("nominalConcurrencyShares", 30)
        limited.setdefault("lendablePercent", 0)


def admission_policy(obj: Obj) -> None:
    """Validating and mutating admission policies: Fail on errors, Equivalent matching,
    selectors that select everything."""
    spec = _spec(obj)
    if spec is None:
        return
    spec.setdefault("failurePolicy", "Fail")
    constraints = spec.get("matchConstraints")
    if isinstance(constraints, dict):
        constraints.setdefault("matchPolicy", "Equivalent")
        constraints.setdefault("namespaceSelector", {})
        constraints.setdefault("objectSelector", {})


def resource_claim_spec(spec: Obj | None) -> None:
    devices = (spec or {}).get("devices")
    for request in (devices.get("requests") or ()) if isinstance(devices, dict) else ():
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if isinstance(exactly, dict):
            exactly.setdefault("allocationMode", "ExactCount")
            if exactly["allocationMode"] == "ExactCount":
                exactly.setdefault("count", 1)


def resource_claim(obj: Obj) -> None:
    resource_claim_spec(_spec(obj))


def resource_claim_template(obj: Obj) -> None:
    spec = _spec(obj)
    inner = spec.get("spec") if spec is not None else None
    resource_claim_spec(inner if isinstance(inner, dict) else None)
