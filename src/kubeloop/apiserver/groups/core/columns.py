"""Core (v1) kinds' columns, as kubectl's printers print them: pods, services, events, nodes,
volumes and claims, and the rest of the core group.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from kubeloop.api.timestamps import parse_time
from kubeloop.apiserver.groups.core import eventconversion
from kubeloop.apiserver.printing.cells import (
    CORE,
    OBJECT_META,
    TEMPLATE_IMAGES,
    TEMPLATE_NAMES,
    Cell,
    CellFn,
    Column,
    Obj,
    age_column,
    api_doc,
    container_cells,
    field_column,
    format_labels,
    has_condition,
    human_duration,
    int_at,
    later_of,
    list_at,
    map_at,
    name_cell,
    name_column,
    restartable_init,
    since_text,
    template_columns,
    terminated_at,
    text_at,
    value_at,
)


@dataclass(frozen=True)
class PodSummary:
    ready: str
    status: str
    restarts: str


def pod_summary(pod: Obj, now: datetime.datetime) -> PodSummary:
    """Ready, Status and Restarts of a pod, as upstream's ``printPod`` computes them."""
    restarts = 0
    restartable_restarts = 0
    total = len(list_at(pod, "spec.containers"))
    ready = 0
    last_restart: datetime.datetime | None = None
    last_restartable_restart: datetime.datetime | None = None
    phase = text_at(pod, "status.phase")
    reason = text_at(pod, "status.reason") or phase
    for condition in list_at(pod, "status.conditions"):
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("reason") == "SchedulingGated"
        ):
            reason = "SchedulingGated"

    init_list = [c for c in list_at(pod, "spec.initContainers") if isinstance(c, Mapping)]
    init_specs = {str(c.get("name")): c for c in init_list}
    total += sum(1 for c in init_list if restartable_init(c))

    initializing = False
    for index, status in enumerate(list_at(pod, "status.initContainerStatuses")):
        if not isinstance(status, Mapping):
            continue
        restarts += int_at(status, "restartCount")
        last_restart = later_of(last_restart, terminated_at(status))
        restartable = restartable_init(init_specs.get(str(status.get("name"))))
        if restartable:
            restartable_restarts += int_at(status, "restartCount")
            last_restartable_restart = later_of(last_restartable_restart, terminated_at(status))
        terminated = map_at(status, "state.terminated")
        waiting = map_at(status, "state.waiting")
        if terminated and int_at(terminated, "exitCode") == 0:
            continue
        if restartable and status.get("started") is True:
            if status.get("ready"):
                ready += 1
            continue
        if terminated:
            if not terminated.get("reason"):
                signal = int_at(terminated, "signal")
                reason = (
                    f"Init:Signal:{signal}" if signal else f"Init:ExitCode:{int_at(terminated, 'exitCode')}"
                )
            else:
                reason = f"Init:{terminated['reason']}"
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_list)}"
        initializing = True
        break

    if not initializing or has_condition(pod, "status.conditions", "Initialized"):
        restarts = restartable_restarts
        last_restart = last_restartable_restart
        has_running = False
        for status in reversed(list_at(pod, "status.containerStatuses")):
            if not isinstance(status, Mapping):
                continue
            restarts += int_at(status, "restartCount")
            last_restart = later_of(last_restart, terminated_at(status))
            waiting = map_at(status, "state.waiting")
            terminated = map_at(status, "state.terminated")
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated:
                signal = int_at(terminated, "signal")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{int_at(terminated, 'exitCode')}"
            elif status.get("ready") and isinstance(value_at(status, "state.running"), Mapping):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if has_condition(pod, "status.conditions", "Ready") else "NotReady"

    if value_at(pod, "metadata.deletionTimestamp"):
        if text_at(pod, "status.reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return PodSummary(f"{ready}/{total}", reason, restarts_text)


#: The last row's summary: (pod, now, summary), for the cells of the same row.
_last_summary: list[tuple[Obj, datetime.datetime, PodSummary]] = []


def _summary(pod: Obj, now: datetime.datetime) -> PodSummary:
    """``pod_summary``, computed once per row (the Ready, Status and Restarts cells share it)."""
    if _last_summary:
        seen, when, summary = _last_summary[0]
        if seen is pod and when == now:
            return summary
    summary = pod_summary(pod, now)
    _last_summary[:] = [(pod, now, summary)]
    return summary


def _pod_ip(pod: Obj, now: datetime.datetime) -> Cell:
    ips = list_at(pod, "status.podIPs")
    ip = text_at(ips[0], "ip") if ips and isinstance(ips[0], Mapping) else text_at(pod, "status.podIP")
    return ip or "<none>"


def _readiness_gates(pod: Obj, now: datetime.datetime) -> Cell:
    gates = [g for g in list_at(pod, "spec.readinessGates") if isinstance(g, Mapping)]
    if not gates:
        return "<none>"
    conditions = [c for c in list_at(pod, "status.conditions") if isinstance(c, Mapping)]
    true = 0
    for gate in gates:
        for condition in conditions:
            if condition.get("type") == gate.get("conditionType"):
                true += condition.get("status") == "True"
                break
    return f"{true}/{len(gates)}"


_POD_CONDITIONS = {
    "Succeeded": "The pod has completed successfully.",
    "Failed": "The pod failed.",
}


def pod_row_conditions(pod: Obj) -> list[Obj] | None:
    """A pod's row is Completed once the pod has ended (kubectl greys it out)."""
    phase = text_at(pod, "status.phase")
    if phase not in _POD_CONDITIONS:
        return None
    return [{"type": "Completed", "status": "True", "reason": phase, "message": _POD_CONDITIONS[phase]}]


def _service_type(svc: Obj) -> str:
    return text_at(svc, "spec.type") or "ClusterIP"


def _cluster_ip(svc: Obj, now: datetime.datetime) -> Cell:
    ips = list_at(svc, "spec.clusterIPs")
    if ips:
        return str(ips[0])
    return text_at(svc, "spec.clusterIP") or "<none>"


def _external_ip(svc: Obj, now: datetime.datetime) -> Cell:
    kind = _service_type(svc)
    external = [str(ip) for ip in list_at(svc, "spec.externalIPs")]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        found: set[str] = set()
        for ingress in list_at(svc, "status.loadBalancer.ingress"):
            if isinstance(ingress, Mapping):
                value = ingress.get("ip") or ingress.get("hostname")
                if value:
                    found.add(str(value))
        balancer = ",".join(sorted(found))  # wide mode: not clipped
        if external:
            return ",".join([*(balancer.split(",") if balancer else []), *external])
        return balancer or "<pending>"
    if kind == "ExternalName":
        return text_at(svc, "spec.externalName")
    return "<unknown>"


def _service_ports(svc: Obj, now: datetime.datetime) -> Cell:
    pieces = []
    for port in list_at(svc, "spec.ports"):
        if not isinstance(port, Mapping):
            continue
        protocol = port.get("protocol") or "TCP"
        node_port = int_at(port, "nodePort")
        if node_port > 0:
            pieces.append(f"{int_at(port, 'port')}:{node_port}/{protocol}")
        else:
            pieces.append(f"{int_at(port, 'port')}/{protocol}")
    return ",".join(pieces) or "<none>"


def _endpoints(obj: Obj, now: datetime.datetime) -> Cell:
    """``formatEndpoints``: at most three addresses, then "+ N more..."."""
    subsets = [s for s in list_at(obj, "subsets") if isinstance(s, Mapping)]
    if not subsets:
        return "<none>"
    shown: list[str] = []
    limit, count, more = 3, 0, False
    for subset in subsets:
        addresses = [a for a in subset.get("addresses") or () if isinstance(a, Mapping)]
        ports = [p for p in subset.get("ports") or () if isinstance(p, Mapping)]
        if not ports:
            count += len(addresses)
            for address in addresses:
                if len(shown) == limit:
                    more = True
                    break
                shown.append(str(address.get("ip", "")))
            continue
        for port in ports:
            count += len(addresses)
            for address in addresses:
                if len(shown) == limit:
                    more = True
                    break
                ip = str(address.get("ip", ""))
                host = f"[{ip}]" if ":" in ip else ip
                shown.append(f"{host}:{int_at(port, 'port')}")
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text


def core_event(obj: Obj) -> Obj:
    """Events are printed from their core/v1 form (events.k8s.io/v1 is a view of the same object)."""
    if obj.get("apiVersion") == eventconversion.EVENTS_V1_API_VERSION or "regarding" in obj or "note" in obj:
        return eventconversion.events_v1_to_core(obj)
    return obj


def _event_first_seen(event: Obj, now: datetime.datetime) -> str:
    if parse_time(value_at(event, "firstTimestamp")) is not None:
        return since_text(value_at(event, "firstTimestamp"), now)
    return since_text(value_at(event, "eventTime"), now)


def _event_last_seen(event: Obj, now: datetime.datetime) -> Cell:
    if isinstance(value_at(event, "series"), Mapping):
        return since_text(value_at(event, "series.lastObservedTime"), now)
    if parse_time(value_at(event, "lastTimestamp")) is not None:
        return since_text(value_at(event, "lastTimestamp"), now)
    return _event_first_seen(event, now)


def _event_count(event: Obj, now: datetime.datetime) -> Cell:
    if isinstance(value_at(event, "series"), Mapping):
        return int_at(event, "series.count")
    return int_at(event, "count") or 1  # singleton events have no count in the new API


def _event_object(event: Obj, now: datetime.datetime) -> Cell:
    kind = text_at(event, "involvedObject.kind").lower()
    name = text_at(event, "involvedObject.name")
    return f"{kind}/{name}" if name else kind


def _event_source(event: Obj, now: datetime.datetime) -> Cell:
    component = text_at(event, "source.component") or text_at(event, "reportingComponent")
    instance = text_at(event, "source.host") or text_at(event, "reportingInstance")
    return f"{component}, {instance}" if instance else component


def pod_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Ready",
            "string",
            lambda o, n: _summary(o, n).ready,
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        Column(
            "Status",
            "string",
            lambda o, n: _summary(o, n).status,
            "The aggregate status of the containers in this pod.",
        ),
        Column(
            "Restarts",
            "string",
            lambda o, n: _summary(o, n).restarts,
            "The number of times the containers in this pod have been restarted and when the last "
            "container in this pod has restarted.",
        ),
        age_column(),
        Column("IP", "string", _pod_ip, api_doc(CORE + "PodStatus", "podIP"), 1),
        Column(
            "Node",
            "string",
            lambda o, n: text_at(o, "spec.nodeName") or "<none>",
            api_doc(CORE + "PodSpec", "nodeName"),
            1,
        ),
        Column(
            "Nominated Node",
            "string",
            lambda o, n: text_at(o, "status.nominatedNodeName") or "<none>",
            api_doc(CORE + "PodStatus", "nominatedNodeName"),
            1,
        ),
        Column("Readiness Gates", "string", _readiness_gates, api_doc(CORE + "PodSpec", "readinessGates"), 1),
    ]


def service_columns() -> list[Column]:
    spec = CORE + "ServiceSpec"
    return [
        name_column(),
        Column("Type", "string", lambda o, n: _service_type(o), api_doc(spec, "type")),
        Column("Cluster-IP", "string", _cluster_ip, api_doc(spec, "clusterIP")),
        Column("External-IP", "string", _external_ip, api_doc(spec, "externalIPs")),
        Column("Port(s)", "string", _service_ports, api_doc(spec, "ports")),
        age_column(),
        Column(
            "Selector",
            "string",
            lambda o, n: format_labels(map_at(o, "spec.selector")),
            api_doc(spec, "selector"),
            1,
        ),
    ]


def event_columns() -> list[Column]:
    event = CORE + "Event"
    return [
        Column("Last Seen", "string", _event_last_seen, api_doc(event, "lastTimestamp")),
        field_column("Type", event, "type"),
        field_column("Reason", event, "reason"),
        Column("Object", "string", _event_object, api_doc(event, "involvedObject")),
        field_column("Subobject", CORE + "ObjectReference", "involvedObject.fieldPath", "string", 1),
        Column("Source", "string", _event_source, api_doc(event, "source"), 1),
        Column("Message", "string", lambda o, n: text_at(o, "message").strip(), api_doc(event, "message")),
        Column("First Seen", "string", _event_first_seen, api_doc(event, "firstTimestamp"), 1),
        Column("Count", "string", _event_count, api_doc(event, "count"), 1),
        Column("Name", "string", name_cell, api_doc(OBJECT_META, "name"), 1, "name"),
    ]


def configmap_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Data",
            "string",
            lambda o, n: len(map_at(o, "data")) + len(map_at(o, "binaryData")),
            api_doc(CORE + "ConfigMap", "data"),
        ),
        age_column(),
    ]


def secret_columns() -> list[Column]:
    return [
        name_column(),
        field_column("Type", CORE + "Secret", "type"),
        Column("Data", "string", lambda o, n: len(map_at(o, "data")), api_doc(CORE + "Secret", "data")),
        age_column(),
    ]


def namespace_columns() -> list[Column]:
    return [
        name_column(),
        Column("Status", "string", lambda o, n: text_at(o, "status.phase"), "The status of the namespace"),
        age_column(),
    ]


def _node_status(obj: Obj, now: datetime.datetime) -> Cell:
    ready = next(
        (c for c in list_at(obj, "status.conditions") if isinstance(c, dict) and c.get("type") == "Ready"),
        None,
    )
    status = "Ready" if ready is not None and ready.get("status") == "True" else "NotReady"
    if ready is None:
        status = "Unknown"
    if value_at(obj, "spec.unschedulable") is True:
        status += ",SchedulingDisabled"
    return status


def _node_roles(obj: Obj, now: datetime.datetime) -> Cell:
    labels = value_at(obj, "metadata.labels") or {}
    roles = sorted(
        key.removeprefix("node-role.kubernetes.io/")
        for key in labels
        if key.startswith("node-role.kubernetes.io/") and key != "node-role.kubernetes.io/"
    )
    if labels.get("kubernetes.io/role"):
        roles = sorted({*roles, str(labels["kubernetes.io/role"])})
    return ",".join(roles) or "<none>"


def _node_address(kind: str) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        found = [
            a.get("address")
            for a in list_at(obj, "status.addresses")
            if isinstance(a, dict) and a.get("type") == kind
        ]
        return str(found[0]) if found else "<none>"

    return cell


def node_columns() -> list[Column]:
    info = CORE + "NodeSystemInfo"
    return [
        name_column(),
        Column("Status", "string", _node_status, "The status of the node"),
        Column("Roles", "string", _node_roles, "The roles of the node"),
        age_column(),
        field_column("Version", info, "status.nodeInfo.kubeletVersion"),
        Column("Internal-IP", "string", _node_address("InternalIP"), "List of internal IPs for the node.", 1),
        Column("External-IP", "string", _node_address("ExternalIP"), "List of external IPs for the node.", 1),
        field_column("OS-Image", info, "status.nodeInfo.osImage", "string", 1),
        field_column("Kernel-Version", info, "status.nodeInfo.kernelVersion", "string", 1),
        field_column("Container-Runtime", info, "status.nodeInfo.containerRuntimeVersion", "string", 1),
    ]


def serviceaccount_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Secrets",
            "string",
            lambda o, n: len(list_at(o, "secrets")),
            api_doc(CORE + "ServiceAccount", "secrets"),
        ),
        age_column(),
    ]


def endpoints_columns() -> list[Column]:
    return [
        name_column(),
        Column("Endpoints", "string", _endpoints, api_doc(CORE + "Endpoints", "subsets")),
        age_column(),
    ]


def _component_status(obj: Obj, now: datetime.datetime) -> Cell:
    healthy = [c for c in list_at(obj, "conditions") if isinstance(c, dict) and c.get("type") == "Healthy"]
    if not healthy:
        return "Unknown"
    return "Healthy" if healthy[0].get("status") == "True" else "Unhealthy"


def _component_condition(field: str) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        healthy = [
            c for c in list_at(obj, "conditions") if isinstance(c, dict) and c.get("type") == "Healthy"
        ]
        return str(healthy[0].get(field) or "") if healthy else ""

    return cell


def componentstatus_columns() -> list[Column]:
    return [
        name_column(),
        Column("Status", "string", _component_status, "Status of the component conditions"),
        Column("Message", "string", _component_condition("message"), "Message of the component conditions"),
        Column("Error", "string", _component_condition("error"), "Error of the component conditions"),
    ]


def _access_modes(obj: Obj, path: str) -> str:
    short = {
        "ReadWriteOnce": "RWO",
        "ReadOnlyMany": "ROX",
        "ReadWriteMany": "RWX",
        "ReadWriteOncePod": "RWOP",
    }
    return ",".join(short.get(str(m), str(m)) for m in list_at(obj, path))


def pvc_columns() -> list[Column]:
    claim = CORE + "PersistentVolumeClaimSpec"
    return [
        name_column(),
        field_column("Status", CORE + "PersistentVolumeClaimStatus", "status.phase"),
        field_column("Volume", claim, "spec.volumeName"),
        Column(
            "Capacity",
            "string",
            lambda o, n: str(map_at(o, "status.capacity").get("storage", "")),
            api_doc(CORE + "PersistentVolumeClaimStatus", "capacity"),
        ),
        Column(
            "Access Modes",
            "string",
            lambda o, n: _access_modes(o, "status.accessModes"),
            api_doc(claim, "accessModes"),
        ),
        field_column("StorageClass", claim, "spec.storageClassName"),
        field_column("VolumeAttributesClass", claim, "spec.volumeAttributesClassName", default="<unset>"),
        age_column(),
        field_column("VolumeMode", claim, "spec.volumeMode", "string", 1),
    ]


def _pv_claim(obj: Obj, now: datetime.datetime) -> Cell:
    ref = map_at(obj, "spec.claimRef")
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""


def pv_columns() -> list[Column]:
    spec = CORE + "PersistentVolumeSpec"
    return [
        name_column(),
        Column(
            "Capacity",
            "string",
            lambda o, n: str(map_at(o, "spec.capacity").get("storage", "")),
            api_doc(spec, "capacity"),
        ),
        Column(
            "Access Modes",
            "string",
            lambda o, n: _access_modes(o, "spec.accessModes"),
            api_doc(spec, "accessModes"),
        ),
        field_column("Reclaim Policy", spec, "spec.persistentVolumeReclaimPolicy"),
        field_column("Status", CORE + "PersistentVolumeStatus", "status.phase"),
        Column("Claim", "string", _pv_claim, api_doc(spec, "claimRef")),
        field_column("StorageClass", spec, "spec.storageClassName"),
        field_column("VolumeAttributesClass", spec, "spec.volumeAttributesClassName", default="<unset>"),
        field_column("Reason", CORE + "PersistentVolumeStatus", "status.reason"),
        age_column(),
        field_column("VolumeMode", spec, "spec.volumeMode", "string", 1),
    ]


def replicationcontroller_columns() -> list[Column]:
    status = CORE + "ReplicationControllerStatus"
    return [
        name_column(),
        field_column("Desired", CORE + "ReplicationControllerSpec", "spec.replicas", "integer"),
        field_column("Current", status, "status.replicas", "integer"),
        field_column("Ready", status, "status.readyReplicas", "integer"),
        age_column(),
        *template_columns("spec.template.spec.containers", None),
        Column(
            "Selector",
            "string",
            lambda o, n: format_labels(map_at(o, "spec.selector")),
            api_doc(CORE + "ReplicationControllerSpec", "selector"),
            1,
        ),
    ]


def podtemplate_columns() -> list[Column]:
    path = "template.spec.containers"
    return [
        name_column(),
        Column("Containers", "string", lambda o, n: container_cells(o, path)[0], TEMPLATE_NAMES),
        Column("Images", "string", lambda o, n: container_cells(o, path)[1], TEMPLATE_IMAGES),
        Column(
            "Pod Labels",
            "string",
            lambda o, n: format_labels(map_at(o, "template.metadata.labels")),
            "The labels for the pod template.",
        ),
    ]


def _quota(limits: bool) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        hard, used = map_at(obj, "status.hard"), map_at(obj, "status.used")
        parts = [
            f"{name}: {used.get(name, '0')}/{hard[name]}"
            for name in sorted(hard)
            if (len(name.split(".")) > 1 and name.split(".")[0] == "limits") == limits
        ]
        return ", ".join(parts)

    return cell


def resourcequota_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Request",
            "string",
            _quota(limits=False),
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        Column(
            "Limit",
            "string",
            _quota(limits=True),
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention "
            "on the node.",
        ),
        age_column(),
    ]
