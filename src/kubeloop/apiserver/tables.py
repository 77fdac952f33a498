"""Server-side printing for ``kubectl get``: meta.k8s.io/v1 Tables with upstream's columns."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubeloop.apiserver.resources import ResourceType

Obj = Mapping[str, Any]
Cell = str | int
Column = tuple[str, str, int, Callable[[Obj, datetime.datetime], Cell]]  # name, type, priority, cell


def human_duration(seconds: float) -> str:
    """kubectl's duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _parse_time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _age(obj: Obj, now: datetime.datetime) -> Cell:
    created = _parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return human_duration((now - created).total_seconds()) if created else "<unknown>"


def _name(obj: Obj, now: datetime.datetime) -> Cell:
    return str((obj.get("metadata") or {}).get("name", ""))


def _get(obj: Obj, path: str, default: Any = None) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return default
        node = node.get(part)
    return default if node is None else node


def _int(path: str) -> Callable[[Obj, datetime.datetime], Cell]:
    return lambda obj, now: int(_get(obj, path, 0) or 0)


def _str(path: str, default: str = "<none>") -> Callable[[Obj, datetime.datetime], Cell]:
    return lambda obj, now: str(_get(obj, path, default) or default)


def _pod_ready(obj: Obj, now: datetime.datetime) -> Cell:
    containers = _get(obj, "spec.containers", []) or []
    statuses = _get(obj, "status.containerStatuses", []) or []
    ready = sum(1 for s in statuses if isinstance(s, Mapping) and s.get("ready"))
    return f"{ready}/{len(containers)}"


def _pod_status(obj: Obj, now: datetime.datetime) -> Cell:
    reason = str(_get(obj, "status.reason", "") or _get(obj, "status.phase", "") or "Unknown")
    for status in _get(obj, "status.containerStatuses", []) or []:
        if not isinstance(status, Mapping):
            continue
        state = status.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if _get(obj, "metadata.deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_restarts(obj: Obj, now: datetime.datetime) -> Cell:
    return sum(
        int(s.get("restartCount", 0) or 0)
        for s in _get(obj, "status.containerStatuses", []) or []
        if isinstance(s, Mapping)
    )


def _containers(field: str) -> Callable[[Obj, datetime.datetime], Cell]:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        containers = _get(obj, "spec.template.spec.containers", []) or []
        return ",".join(str(c.get(field, "")) for c in containers if isinstance(c, Mapping)) or "<none>"

    return cell


def _selector(obj: Obj, now: datetime.datetime) -> Cell:
    labels = _get(obj, "spec.selector.matchLabels", {}) or {}
    parts = [f"{k}={v}" for k, v in sorted(labels.items())]
    for expr in _get(obj, "spec.selector.matchExpressions", []) or []:
        if isinstance(expr, Mapping):
            values = ",".join(expr.get("values") or [])
            op = str(expr.get("operator", "")).lower()
            parts.append(f"{expr.get('key')} {op} ({values})" if values else f"{expr.get('key')}")
    return ",".join(parts) or "<none>"


def _ready_of(desired: str) -> Callable[[Obj, datetime.datetime], Cell]:
    return lambda obj, now: (
        f"{int(_get(obj, 'status.readyReplicas', 0) or 0)}/{int(_get(obj, desired, 0) or 0)}"
    )


def _data_count(obj: Obj, now: datetime.datetime) -> Cell:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def _service_ports(obj: Obj, now: datetime.datetime) -> Cell:
    ports = []
    for port in _get(obj, "spec.ports", []) or []:
        if isinstance(port, Mapping):
            text = f"{port.get('port')}"
            if port.get("nodePort"):
                text += f":{port['nodePort']}"
            ports.append(f"{text}/{port.get('protocol', 'TCP')}")
    return ",".join(ports) or "<none>"


def _event_object(obj: Obj, now: datetime.datetime) -> Cell:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _last_seen(obj: Obj, now: datetime.datetime) -> Cell:
    for path in ("lastTimestamp", "eventTime", "deprecatedLastTimestamp", "metadata.creationTimestamp"):
        when = _parse_time(_get(obj, path))
        if when:
            return human_duration((now - when).total_seconds())
    return "<unknown>"


def _job_completions(obj: Obj, now: datetime.datetime) -> Cell:
    return f"{int(_get(obj, 'status.succeeded', 0) or 0)}/{int(_get(obj, 'spec.completions', 1) or 1)}"


def _job_status(obj: Obj, now: datetime.datetime) -> Cell:
    for condition in _get(obj, "status.conditions", []) or []:
        if isinstance(condition, Mapping) and condition.get("status") == "True":
            if condition.get("type") == "Complete":
                return "Complete"
            if condition.get("type") == "Failed":
                return "Failed"
    return "Running"


def _role_ref(obj: Obj, now: datetime.datetime) -> Cell:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


_AGE: Column = ("Age", "string", 0, _age)
_COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("", "pods"): [
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _pod_restarts),
        _AGE,
        ("IP", "string", 1, _str("status.podIP")),
        ("Node", "string", 1, _str("spec.nodeName")),
        ("Nominated Node", "string", 1, _str("status.nominatedNodeName")),
        ("Readiness Gates", "string", 1, lambda o, n: "<none>"),
    ],
    ("apps", "deployments"): [
        ("Ready", "string", 0, _ready_of("spec.replicas")),
        ("Up-to-date", "integer", 0, _int("status.updatedReplicas")),
        ("Available", "integer", 0, _int("status.availableReplicas")),
        _AGE,
        ("Containers", "string", 1, _containers("name")),
        ("Images", "string", 1, _containers("image")),
        ("Selector", "string", 1, _selector),
    ],
    ("apps", "replicasets"): [
        ("Desired", "integer", 0, _int("spec.replicas")),
        ("Current", "integer", 0, _int("status.replicas")),
        ("Ready", "integer", 0, _int("status.readyReplicas")),
        _AGE,
        ("Containers", "string", 1, _containers("name")),
        ("Images", "string", 1, _containers("image")),
        ("Selector", "string", 1, _selector),
    ],
    ("apps", "statefulsets"): [("Ready", "string", 0, _ready_of("spec.replicas")), _AGE],
    ("apps", "daemonsets"): [
        ("Desired", "integer", 0, _int("status.desiredNumberScheduled")),
        ("Current", "integer", 0, _int("status.currentNumberScheduled")),
        ("Ready", "integer", 0, _int("status.numberReady")),
        ("Up-to-date", "integer", 0, _int("status.updatedNumberScheduled")),
        ("Available", "integer", 0, _int("status.numberAvailable")),
        (
            "Node Selector",
            "string",
            0,
            lambda o, n: (
                ",".join(
                    f"{k}={v}"
                    for k, v in sorted((_get(o, "spec.template.spec.nodeSelector", {}) or {}).items())
                )
                or "<none>"
            ),
        ),
        _AGE,
    ],
    ("batch", "jobs"): [
        ("Status", "string", 0, _job_status),
        ("Completions", "string", 0, _job_completions),
        ("Duration", "string", 0, lambda o, n: "0s"),
        _AGE,
    ],
    ("batch", "cronjobs"): [
        ("Schedule", "string", 0, _str("spec.schedule")),
        ("Timezone", "string", 0, _str("spec.timeZone")),
        ("Suspend", "boolean", 0, lambda o, n: str(bool(_get(o, "spec.suspend", False)))),
        ("Active", "integer", 0, lambda o, n: len(_get(o, "status.active", []) or [])),
        ("Last Schedule", "string", 0, lambda o, n: "<none>"),
        _AGE,
    ],
    ("", "services"): [
        ("Type", "string", 0, _str("spec.type", "ClusterIP")),
        ("Cluster-IP", "string", 0, _str("spec.clusterIP")),
        ("External-IP", "string", 0, lambda o, n: "<none>"),
        ("Port(s)", "string", 0, _service_ports),
        _AGE,
    ],
    ("", "configmaps"): [("Data", "integer", 0, _data_count), _AGE],
    ("", "secrets"): [
        ("Type", "string", 0, _str("type", "Opaque")),
        ("Data", "integer", 0, _data_count),
        _AGE,
    ],
    ("", "namespaces"): [("Status", "string", 0, _str("status.phase", "Active")), _AGE],
    ("", "serviceaccounts"): [("Secrets", "integer", 0, lambda o, n: len(o.get("secrets") or [])), _AGE],
    ("", "events"): [
        ("Last Seen", "string", 0, _last_seen),
        ("Type", "string", 0, _str("type", "")),
        ("Reason", "string", 0, _str("reason", "")),
        ("Object", "string", 0, _event_object),
        ("Message", "string", 0, lambda o, n: str(o.get("message") or o.get("note") or "")),
    ],
    ("events.k8s.io", "events"): [
        ("Last Seen", "string", 0, _last_seen),
        ("Type", "string", 0, _str("type", "")),
        ("Reason", "string", 0, _str("reason", "")),
        ("Object", "string", 0, _event_object),
        ("Message", "string", 0, lambda o, n: str(o.get("note") or "")),
    ],
    ("", "endpoints"): [("Endpoints", "string", 0, lambda o, n: "<none>"), _AGE],
    ("coordination.k8s.io", "leases"): [("Holder", "string", 0, _str("spec.holderIdentity", "")), _AGE],
    ("rbac.authorization.k8s.io", "roles"): [("Created At", "string", 0, _str("metadata.creationTimestamp"))],
    ("rbac.authorization.k8s.io", "clusterroles"): [
        ("Created At", "string", 0, _str("metadata.creationTimestamp"))
    ],
    ("rbac.authorization.k8s.io", "rolebindings"): [("Role", "string", 0, _role_ref), _AGE],
    ("rbac.authorization.k8s.io", "clusterrolebindings"): [("Role", "string", 0, _role_ref), _AGE],
}


def columns_for(resource: ResourceType) -> list[Column]:
    return [("Name", "string", 0, _name), *_COLUMNS.get((resource.group, resource.plural), [_AGE])]


def _partial(obj: Obj) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def to_table(
    resource: ResourceType,
    objects: Sequence[Obj],
    *,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    now: datetime.datetime | None = None,
) -> dict[str, Any]:
    now = now or datetime.datetime.now(datetime.UTC)
    columns = columns_for(resource)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [cell(obj, now) for _n, _t, _p, cell in columns]}
        if include_object == "Metadata":
            row["object"] = _partial(obj)
        elif include_object == "Object":
            row["object"] = obj
        rows.append(row)
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": name,
                "priority": priority,
            }
            for name, kind, priority, _cell in columns
        ],
        "rows": rows,
    }


def to_partial_object_metadata_list(
    resource: ResourceType, objects: Sequence[Obj], resource_version: str, continue_token: str
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "items": [_partial(obj) for obj in objects],
    }
