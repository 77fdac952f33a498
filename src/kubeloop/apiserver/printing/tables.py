"""Server-side printing for ``kubectl get``: meta.k8s.io/v1 Tables with upstream's columns.

Columns and cells follow kube-apiserver's printers (kubernetes ``pkg/printers/internalversion``),
which the server always runs in wide mode: the ``priority: 1`` columns are in every row and
kubectl shows them only with ``-o wide``. Built-in kinds upstream has no printer for (Roles,
LimitRanges, CRDs) use the generic convertor (Name, Created At); custom resources without
``additionalPrinterColumns`` get Name and Age. Objects are printed in the form upstream's
printers read (core Events, autoscaling/v2 HorizontalPodAutoscalers). Ages are rendered like apimachinery's ``duration.HumanDuration``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kubeloop.api import timestamps
from kubeloop.api.timestamps import parse_time
from kubeloop.apiserver.catalog import eventconversion, hpaconversion, schemas
from kubeloop.apiserver.catalog.resources import PrinterColumn, ResourceType
from kubeloop.apiserver.printing import jsonpath

Obj = Mapping[str, Any]
Cell = str | int | float | bool | None
CellFn = Callable[[Obj, datetime.datetime], Cell]

META_API_VERSION = "meta.k8s.io/v1"


# --------------------------------------------------------------------------- durations and times


def human_duration(seconds: float) -> str:
    """apimachinery ``duration.HumanDuration``: "5s", "3m2s", "15m", "5h3m", "2d3h", "40d", "3y20d"."""
    whole = int(seconds)  # truncates toward zero, like Go's int(d.Seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def _since(value: Any, now: datetime.datetime) -> str:
    """``translateTimestampSince``: "<unknown>" for a missing timestamp."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


# --------------------------------------------------------------------------- field access


def _get(obj: Any, path: str, default: Any = None) -> Any:
    node = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return default
        node = node.get(part)
        if node is None:
            return default
    return node


def _str(obj: Obj, path: str, default: str = "") -> str:
    value = _get(obj, path)
    return default if value is None else str(value)


def _int(obj: Obj, path: str, default: int = 0) -> int:
    value = _get(obj, path)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _list(obj: Obj, path: str) -> list[Any]:
    value = _get(obj, path)
    return list(value) if isinstance(value, list) else []


def _map(obj: Obj, path: str) -> Mapping[str, Any]:
    value = _get(obj, path)
    return value if isinstance(value, Mapping) else {}


def _name(obj: Obj, now: datetime.datetime) -> Cell:
    return _str(obj, "metadata.name")


def _age(obj: Obj, now: datetime.datetime) -> Cell:
    return _since(_get(obj, "metadata.creationTimestamp"), now)


def format_labels(labels: Mapping[str, Any]) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    text = ",".join(f"{key}={labels[key]}" for key in sorted(labels))
    return text or "<none>"


def format_label_selector(selector: Any) -> str:
    """``metav1.LabelSelectorAsSelector(selector).String()`` ("" for a nil or empty selector)."""
    if not isinstance(selector, Mapping):
        return ""
    requirements: list[tuple[str, str]] = []
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        requirements.extend((str(k), f"{k}={v}") for k, v in match_labels.items())
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, Mapping):
            continue
        key = str(expression.get("key", ""))
        operator = expression.get("operator")
        values = ",".join(sorted(str(v) for v in expression.get("values") or ()))
        if operator == "In":
            requirements.append((key, f"{key} in ({values})"))
        elif operator == "NotIn":
            requirements.append((key, f"{key} notin ({values})"))
        elif operator == "Exists":
            requirements.append((key, key))
        elif operator == "DoesNotExist":
            requirements.append((key, f"!{key}"))
        else:
            return "<error>"
    return ",".join(text for _key, text in sorted(requirements, key=lambda r: r[0]))


def _selector_or_none(selector: Any) -> str:
    """``metav1.FormatLabelSelector``."""
    return format_label_selector(selector) or "<none>"


def _containers(obj: Obj, path: str) -> tuple[str, str]:
    """``layoutContainerCells``: comma-separated container names and images."""
    containers = [c for c in _list(obj, path) if isinstance(c, Mapping)]
    return (
        ",".join(str(c.get("name") or "") for c in containers),
        ",".join(str(c.get("image") or "") for c in containers),
    )


def _bool_ptr(value: Any) -> str:
    """``printBoolPtr``."""
    if value is None:
        return "<unset>"
    return "True" if value else "False"


# --------------------------------------------------------------------------- pods


def _has_condition(obj: Obj, path: str, kind: str) -> bool:
    for condition in _list(obj, path):
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition.get("status") == "True"
    return False


def _terminated_at(status: Mapping[str, Any]) -> datetime.datetime | None:
    return parse_time(_get(status, "lastState.terminated.finishedAt"))


def _later(a: datetime.datetime | None, b: datetime.datetime | None) -> datetime.datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _restartable_init(container: Any) -> bool:
    return isinstance(container, Mapping) and container.get("restartPolicy") == "Always"


@dataclass(frozen=True)
class PodSummary:
    ready: str
    status: str
    restarts: str


def pod_summary(pod: Obj, now: datetime.datetime) -> PodSummary:
    """Ready, Status and Restarts of a pod, as upstream's ``printPod`` computes them."""
    restarts = 0
    restartable_restarts = 0
    total = len(_list(pod, "spec.containers"))
    ready = 0
    last_restart: datetime.datetime | None = None
    last_restartable_restart: datetime.datetime | None = None
    phase = _str(pod, "status.phase")
    reason = _str(pod, "status.reason") or phase
    for condition in _list(pod, "status.conditions"):
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("reason") == "SchedulingGated"
        ):
            reason = "SchedulingGated"

    init_list = [c for c in _list(pod, "spec.initContainers") if isinstance(c, Mapping)]
    init_specs = {str(c.get("name")): c for c in init_list}
    total += sum(1 for c in init_list if _restartable_init(c))

    initializing = False
    for index, status in enumerate(_list(pod, "status.initContainerStatuses")):
        if not isinstance(status, Mapping):
            continue
        restarts += _int(status, "restartCount")
        last_restart = _later(last_restart, _terminated_at(status))
        restartable = _restartable_init(init_specs.get(str(status.get("name"))))
        if restartable:
            restartable_restarts += _int(status, "restartCount")
            last_restartable_restart = _later(last_restartable_restart, _terminated_at(status))
        terminated = _map(status, "state.terminated")
        waiting = _map(status, "state.waiting")
        if terminated and _int(terminated, "exitCode") == 0:
            continue
        if restartable and status.get("started") is True:
            if status.get("ready"):
                ready += 1
            continue
        if terminated:
            if not terminated.get("reason"):
                signal = _int(terminated, "signal")
                reason = (
                    f"Init:Signal:{signal}" if signal else f"Init:ExitCode:{_int(terminated, 'exitCode')}"
                )
            else:
                reason = f"Init:{terminated['reason']}"
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_list)}"
        initializing = True
        break

    if not initializing or _has_condition(pod, "status.conditions", "Initialized"):
        restarts = restartable_restarts
        last_restart = last_restartable_restart
        has_running = False
        for status in reversed(_list(pod, "status.containerStatuses")):
            if not isinstance(status, Mapping):
                continue
            restarts += _int(status, "restartCount")
            last_restart = _later(last_restart, _terminated_at(status))
            waiting = _map(status, "state.waiting")
            terminated = _map(status, "state.terminated")
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated:
                signal = _int(terminated, "signal")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{_int(terminated, 'exitCode')}"
            elif status.get("ready") and isinstance(_get(status, "state.running"), Mapping):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _has_condition(pod, "status.conditions", "Ready") else "NotReady"

    if _get(pod, "metadata.deletionTimestamp"):
        if _str(pod, "status.reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return PodSummary(f"{ready}/{total}", reason, restarts_text)


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
    ips = _list(pod, "status.podIPs")
    ip = _str(ips[0], "ip") if ips and isinstance(ips[0], Mapping) else _str(pod, "status.podIP")
    return ip or "<none>"


def _readiness_gates(pod: Obj, now: datetime.datetime) -> Cell:
    gates = [g for g in _list(pod, "spec.readinessGates") if isinstance(g, Mapping)]
    if not gates:
        return "<none>"
    conditions = [c for c in _list(pod, "status.conditions") if isinstance(c, Mapping)]
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


# --------------------------------------------------------------------------- other kinds


def _job_status(job: Obj, now: datetime.datetime) -> Cell:
    if _has_condition(job, "status.conditions", "Complete"):
        return "Complete"
    if _has_condition(job, "status.conditions", "Failed"):
        return "Failed"
    if _get(job, "metadata.deletionTimestamp"):
        return "Terminating"
    if _has_condition(job, "status.conditions", "Suspended"):
        return "Suspended"
    if _has_condition(job, "status.conditions", "FailureTarget"):
        return "FailureTarget"
    return "Running"


def _job_completions(job: Obj, now: datetime.datetime) -> Cell:
    succeeded = _int(job, "status.succeeded")
    if _get(job, "spec.completions") is not None:
        return f"{succeeded}/{_int(job, 'spec.completions')}"
    parallelism = _int(job, "spec.parallelism")
    if parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def _job_duration(job: Obj, now: datetime.datetime) -> Cell:
    start = parse_time(_get(job, "status.startTime"))
    if start is None:
        return ""
    end = parse_time(_get(job, "status.completionTime")) or now
    return human_duration((end - start).total_seconds())


def _last_schedule(cronjob: Obj, now: datetime.datetime) -> Cell:
    value = _get(cronjob, "status.lastScheduleTime")
    return "<none>" if value is None else _since(value, now)


def _service_type(svc: Obj) -> str:
    return _str(svc, "spec.type") or "ClusterIP"


def _cluster_ip(svc: Obj, now: datetime.datetime) -> Cell:
    ips = _list(svc, "spec.clusterIPs")
    if ips:
        return str(ips[0])
    return _str(svc, "spec.clusterIP") or "<none>"


def _external_ip(svc: Obj, now: datetime.datetime) -> Cell:
    kind = _service_type(svc)
    external = [str(ip) for ip in _list(svc, "spec.externalIPs")]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        found: set[str] = set()
        for ingress in _list(svc, "status.loadBalancer.ingress"):
            if isinstance(ingress, Mapping):
                value = ingress.get("ip") or ingress.get("hostname")
                if value:
                    found.add(str(value))
        balancer = ",".join(sorted(found))  # wide mode: not clipped
        if external:
            return ",".join([*(balancer.split(",") if balancer else []), *external])
        return balancer or "<pending>"
    if kind == "ExternalName":
        return _str(svc, "spec.externalName")
    return "<unknown>"


def _service_ports(svc: Obj, now: datetime.datetime) -> Cell:
    pieces = []
    for port in _list(svc, "spec.ports"):
        if not isinstance(port, Mapping):
            continue
        protocol = port.get("protocol") or "TCP"
        node_port = _int(port, "nodePort")
        if node_port > 0:
            pieces.append(f"{_int(port, 'port')}:{node_port}/{protocol}")
        else:
            pieces.append(f"{_int(port, 'port')}/{protocol}")
    return ",".join(pieces) or "<none>"


def _endpoints(obj: Obj, now: datetime.datetime) -> Cell:
    """``formatEndpoints``: at most three addresses, then "+ N more..."."""
    subsets = [s for s in _list(obj, "subsets") if isinstance(s, Mapping)]
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
                shown.append(f"{host}:{_int(port, 'port')}")
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text


def _core_event(obj: Obj) -> Obj:
    """Events are printed from their core/v1 form (events.k8s.io/v1 is a view of the same object)."""
    if obj.get("apiVersion") == eventconversion.EVENTS_V1_API_VERSION or "regarding" in obj or "note" in obj:
        return eventconversion.events_v1_to_core(obj)
    return obj


def _event_first_seen(event: Obj, now: datetime.datetime) -> str:
    if parse_time(_get(event, "firstTimestamp")) is not None:
        return _since(_get(event, "firstTimestamp"), now)
    return _since(_get(event, "eventTime"), now)


def _event_last_seen(event: Obj, now: datetime.datetime) -> Cell:
    if isinstance(_get(event, "series"), Mapping):
        return _since(_get(event, "series.lastObservedTime"), now)
    if parse_time(_get(event, "lastTimestamp")) is not None:
        return _since(_get(event, "lastTimestamp"), now)
    return _event_first_seen(event, now)


def _event_count(event: Obj, now: datetime.datetime) -> Cell:
    if isinstance(_get(event, "series"), Mapping):
        return _int(event, "series.count")
    return _int(event, "count") or 1  # singleton events have no count in the new API


def _event_object(event: Obj, now: datetime.datetime) -> Cell:
    kind = _str(event, "involvedObject.kind").lower()
    name = _str(event, "involvedObject.name")
    return f"{kind}/{name}" if name else kind


def _event_source(event: Obj, now: datetime.datetime) -> Cell:
    component = _str(event, "source.component") or _str(event, "reportingComponent")
    instance = _str(event, "source.host") or _str(event, "reportingInstance")
    return f"{component}, {instance}" if instance else component


def _subjects(obj: Obj, kind: str) -> str:
    """One column of ``rbac.SubjectsStrings``."""
    names = []
    for subject in _list(obj, "subjects"):
        if isinstance(subject, Mapping) and subject.get("kind") == kind:
            if kind == "ServiceAccount":
                names.append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
            else:
                names.append(str(subject.get("name", "")))
    return ", ".join(names)


def _created_at(obj: Obj, now: datetime.datetime) -> Cell:
    when = parse_time(_get(obj, "metadata.creationTimestamp"))
    if when is None:
        return "0001-01-01T00:00:00Z"
    return timestamps.format_time(when)


# --------------------------------------------------------------------------- column sets


@dataclass(frozen=True)
class Column:
    """One TableColumnDefinition and how to compute its cell."""

    name: str
    type: str
    cell: CellFn
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def _doc(definition: str, field: str) -> str:
    """The description upstream's printers take from the API types' SwaggerDoc."""
    node = schemas.definitions().get(definition) or {}
    props = node.get("properties") or {}
    prop = props.get(field) or {}
    return str(prop.get("description") or "")


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_CORE = "io.k8s.api.core.v1."
_APPS = "io.k8s.api.apps.v1."
_BATCH = "io.k8s.api.batch.v1."
_TEMPLATE_NAMES = "Names of each container in the template."
_TEMPLATE_IMAGES = "Images referenced by each container in the template."
_READY_PODS = "Number of the pod with ready state"


def _name_column() -> Column:
    return Column("Name", "string", _name, _doc(_OBJECT_META, "name"), format="name")


def _age_column(kind: str = "string") -> Column:
    return Column("Age", kind, _age, _doc(_OBJECT_META, "creationTimestamp"))


def _field(
    title: str,
    definition: str,
    path: str,
    type: str = "string",
    priority: int = 0,
    *,
    default: str = "",
    cell: CellFn | None = None,
) -> Column:
    """A column showing the field at ``path`` (as text, or as a number for ``"integer"``; ``default``
    when it is absent), described as upstream's API docs describe that field of ``definition``."""
    if cell is None:
        if type == "integer":

            def cell(obj: Obj, now: datetime.datetime) -> Cell:
                return _int(obj, path)
        else:

            def cell(obj: Obj, now: datetime.datetime) -> Cell:
                return _str(obj, path, default)

    return Column(title, type, cell, _doc(definition, path.rsplit(".", 1)[-1]), priority)


def _template_columns(path: str, selector: str | None, selector_doc: str = "") -> list[Column]:
    columns = [
        Column("Containers", "string", lambda o, n: _containers(o, path)[0], _TEMPLATE_NAMES, 1),
        Column("Images", "string", lambda o, n: _containers(o, path)[1], _TEMPLATE_IMAGES, 1),
    ]
    if selector is not None:
        columns.append(
            Column("Selector", "string", lambda o, n: _selector_or_none(_get(o, selector)), selector_doc, 1)
        )
    return columns


def _ready_of(desired_default: int) -> CellFn:
    return lambda o, n: f"{_int(o, 'status.readyReplicas')}/{_int(o, 'spec.replicas', desired_default)}"


def _pod_columns() -> list[Column]:
    return [
        _name_column(),
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
        _age_column(),
        Column("IP", "string", _pod_ip, _doc(_CORE + "PodStatus", "podIP"), 1),
        Column(
            "Node",
            "string",
            lambda o, n: _str(o, "spec.nodeName") or "<none>",
            _doc(_CORE + "PodSpec", "nodeName"),
            1,
        ),
        Column(
            "Nominated Node",
            "string",
            lambda o, n: _str(o, "status.nominatedNodeName") or "<none>",
            _doc(_CORE + "PodStatus", "nominatedNodeName"),
            1,
        ),
        Column("Readiness Gates", "string", _readiness_gates, _doc(_CORE + "PodSpec", "readinessGates"), 1),
    ]


def _deployment_columns() -> list[Column]:
    return [
        _name_column(),
        Column("Ready", "string", _ready_of(1), _READY_PODS),
        Column(
            "Up-to-date",
            "string",
            lambda o, n: _int(o, "status.updatedReplicas"),
            _doc(_APPS + "DeploymentStatus", "updatedReplicas"),
        ),
        Column(
            "Available",
            "string",
            lambda o, n: _int(o, "status.availableReplicas"),
            _doc(_APPS + "DeploymentStatus", "availableReplicas"),
        ),
        _age_column(),
        *_template_columns("spec.template.spec.containers", None),
        Column(
            "Selector",
            "string",
            lambda o, n: format_label_selector(_get(o, "spec.selector")),
            _doc(_APPS + "DeploymentSpec", "selector"),
            1,
        ),
    ]


def _replicaset_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "Desired",
            "integer",
            lambda o, n: _int(o, "spec.replicas", 1),
            _doc(_APPS + "ReplicaSetSpec", "replicas"),
        ),
        _field("Current", _APPS + "ReplicaSetStatus", "status.replicas", "integer"),
        _field("Ready", _APPS + "ReplicaSetStatus", "status.readyReplicas", "integer"),
        _age_column(),
        *_template_columns(
            "spec.template.spec.containers", "spec.selector", _doc(_APPS + "ReplicaSetSpec", "selector")
        ),
    ]


def _statefulset_columns() -> list[Column]:
    return [
        _name_column(),
        Column("Ready", "string", _ready_of(1), _READY_PODS),
        _age_column(),
        *_template_columns("spec.template.spec.containers", None),
    ]


def _daemonset_columns() -> list[Column]:
    status = _APPS + "DaemonSetStatus"

    def count(field: str) -> CellFn:
        return lambda o, n: _int(o, f"status.{field}")

    return [
        _name_column(),
        Column("Desired", "integer", count("desiredNumberScheduled"), _doc(status, "desiredNumberScheduled")),
        Column("Current", "integer", count("currentNumberScheduled"), _doc(status, "currentNumberScheduled")),
        Column("Ready", "integer", count("numberReady"), _doc(status, "numberReady")),
        Column(
            "Up-to-date", "integer", count("updatedNumberScheduled"), _doc(status, "updatedNumberScheduled")
        ),
        Column("Available", "integer", count("numberAvailable"), _doc(status, "numberAvailable")),
        Column(
            "Node Selector",
            "string",
            lambda o, n: format_labels(_map(o, "spec.template.spec.nodeSelector")),
            _doc(_CORE + "PodSpec", "nodeSelector"),
        ),
        _age_column(),
        *_template_columns(
            "spec.template.spec.containers", "spec.selector", _doc(_APPS + "DaemonSetSpec", "selector")
        ),
    ]


def _job_columns() -> list[Column]:
    return [
        _name_column(),
        Column("Status", "string", _job_status, "Status of the job."),
        Column("Completions", "string", _job_completions, _doc(_BATCH + "JobStatus", "succeeded")),
        Column("Duration", "string", _job_duration, "Time required to complete the job."),
        _age_column(),
        *_template_columns(
            "spec.template.spec.containers", "spec.selector", _doc(_BATCH + "JobSpec", "selector")
        ),
    ]


def _cronjob_columns() -> list[Column]:
    spec = _BATCH + "CronJobSpec"
    return [
        _name_column(),
        _field("Schedule", spec, "spec.schedule"),
        _field("Timezone", spec, "spec.timeZone", default="<none>"),
        Column("Suspend", "boolean", lambda o, n: _bool_ptr(_get(o, "spec.suspend")), _doc(spec, "suspend")),
        Column(
            "Active",
            "integer",
            lambda o, n: len(_list(o, "status.active")),
            _doc(_BATCH + "CronJobStatus", "active"),
        ),
        Column("Last Schedule", "string", _last_schedule, _doc(_BATCH + "CronJobStatus", "lastScheduleTime")),
        _age_column(),
        *_template_columns(
            "spec.jobTemplate.spec.template.spec.containers",
            "spec.jobTemplate.spec.selector",
            _doc(_BATCH + "JobSpec", "selector"),
        ),
    ]


def _service_columns() -> list[Column]:
    spec = _CORE + "ServiceSpec"
    return [
        _name_column(),
        Column("Type", "string", lambda o, n: _service_type(o), _doc(spec, "type")),
        Column("Cluster-IP", "string", _cluster_ip, _doc(spec, "clusterIP")),
        Column("External-IP", "string", _external_ip, _doc(spec, "externalIPs")),
        Column("Port(s)", "string", _service_ports, _doc(spec, "ports")),
        _age_column(),
        Column(
            "Selector",
            "string",
            lambda o, n: format_labels(_map(o, "spec.selector")),
            _doc(spec, "selector"),
            1,
        ),
    ]


def _event_columns() -> list[Column]:
    event = _CORE + "Event"
    return [
        Column("Last Seen", "string", _event_last_seen, _doc(event, "lastTimestamp")),
        _field("Type", event, "type"),
        _field("Reason", event, "reason"),
        Column("Object", "string", _event_object, _doc(event, "involvedObject")),
        _field("Subobject", _CORE + "ObjectReference", "involvedObject.fieldPath", "string", 1),
        Column("Source", "string", _event_source, _doc(event, "source"), 1),
        Column("Message", "string", lambda o, n: _str(o, "message").strip(), _doc(event, "message")),
        Column("First Seen", "string", _event_first_seen, _doc(event, "firstTimestamp"), 1),
        Column("Count", "string", _event_count, _doc(event, "count"), 1),
        Column("Name", "string", _name, _doc(_OBJECT_META, "name"), 1, "name"),
    ]


def _binding_columns(kind: str) -> list[Column]:
    what = kind[0].lower() + kind[1:]
    return [
        _name_column(),
        Column(
            "Role",
            "string",
            lambda o, n: f"{_str(o, 'roleRef.kind')}/{_str(o, 'roleRef.name')}",
            _doc(f"io.k8s.api.rbac.v1.{kind}", "roleRef"),
        ),
        _age_column(),
        Column("Users", "string", lambda o, n: _subjects(o, "User"), f"Users in the {what}", 1),
        Column("Groups", "string", lambda o, n: _subjects(o, "Group"), f"Groups in the {what}", 1),
        Column(
            "ServiceAccounts",
            "string",
            lambda o, n: _subjects(o, "ServiceAccount"),
            f"ServiceAccounts in the {what}",
            1,
        ),
    ]


def _generic_columns() -> list[Column]:
    """apiserver's default table convertor (kinds without a printer, e.g. Role)."""
    return [
        _name_column(),
        Column("Created At", "date", _created_at, _doc(_OBJECT_META, "creationTimestamp")),
    ]


def _default_columns() -> list[Column]:
    """A custom resource without additionalPrinterColumns."""
    return [_name_column(), _age_column("date")]


def _configmap_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "Data",
            "string",
            lambda o, n: len(_map(o, "data")) + len(_map(o, "binaryData")),
            _doc(_CORE + "ConfigMap", "data"),
        ),
        _age_column(),
    ]


def _secret_columns() -> list[Column]:
    return [
        _name_column(),
        _field("Type", _CORE + "Secret", "type"),
        Column("Data", "string", lambda o, n: len(_map(o, "data")), _doc(_CORE + "Secret", "data")),
        _age_column(),
    ]


def _namespace_columns() -> list[Column]:
    return [
        _name_column(),
        Column("Status", "string", lambda o, n: _str(o, "status.phase"), "The status of the namespace"),
        _age_column(),
    ]


def _node_status(obj: Obj, now: datetime.datetime) -> Cell:
    ready = next(
        (c for c in _list(obj, "status.conditions") if isinstance(c, dict) and c.get("type") == "Ready"), None
    )
    status = "Ready" if ready is not None and ready.get("status") == "True" else "NotReady"
    if ready is None:
        status = "Unknown"
    if _get(obj, "spec.unschedulable") is True:
        status += ",SchedulingDisabled"
    return status


def _node_roles(obj: Obj, now: datetime.datetime) -> Cell:
    labels = _get(obj, "metadata.labels") or {}
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
            for a in _list(obj, "status.addresses")
            if isinstance(a, dict) and a.get("type") == kind
        ]
        return str(found[0]) if found else "<none>"

    return cell


def _node_columns() -> list[Column]:
    info = _CORE + "NodeSystemInfo"
    return [
        _name_column(),
        Column("Status", "string", _node_status, "The status of the node"),
        Column("Roles", "string", _node_roles, "The roles of the node"),
        _age_column(),
        _field("Version", info, "status.nodeInfo.kubeletVersion"),
        Column("Internal-IP", "string", _node_address("InternalIP"), "List of internal IPs for the node.", 1),
        Column("External-IP", "string", _node_address("ExternalIP"), "List of external IPs for the node.", 1),
        _field("OS-Image", info, "status.nodeInfo.osImage", "string", 1),
        _field("Kernel-Version", info, "status.nodeInfo.kernelVersion", "string", 1),
        _field("Container-Runtime", info, "status.nodeInfo.containerRuntimeVersion", "string", 1),
    ]


def _serviceaccount_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "Secrets",
            "string",
            lambda o, n: len(_list(o, "secrets")),
            _doc(_CORE + "ServiceAccount", "secrets"),
        ),
        _age_column(),
    ]


def _endpoints_columns() -> list[Column]:
    return [
        _name_column(),
        Column("Endpoints", "string", _endpoints, _doc(_CORE + "Endpoints", "subsets")),
        _age_column(),
    ]


def _lease_columns() -> list[Column]:
    return [
        _name_column(),
        _field("Holder", "io.k8s.api.coordination.v1.LeaseSpec", "spec.holderIdentity"),
        _age_column(),
    ]


def _component_status(obj: Obj, now: datetime.datetime) -> Cell:
    healthy = [c for c in _list(obj, "conditions") if isinstance(c, dict) and c.get("type") == "Healthy"]
    if not healthy:
        return "Unknown"
    return "Healthy" if healthy[0].get("status") == "True" else "Unhealthy"


def _component_condition(field: str) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        healthy = [c for c in _list(obj, "conditions") if isinstance(c, dict) and c.get("type") == "Healthy"]
        return str(healthy[0].get(field) or "") if healthy else ""

    return cell


def _componentstatus_columns() -> list[Column]:
    return [
        _name_column(),
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
    return ",".join(short.get(str(m), str(m)) for m in _list(obj, path))


def _pvc_columns() -> list[Column]:
    claim = _CORE + "PersistentVolumeClaimSpec"
    return [
        _name_column(),
        _field("Status", _CORE + "PersistentVolumeClaimStatus", "status.phase"),
        _field("Volume", claim, "spec.volumeName"),
        Column(
            "Capacity",
            "string",
            lambda o, n: str(_map(o, "status.capacity").get("storage", "")),
            _doc(_CORE + "PersistentVolumeClaimStatus", "capacity"),
        ),
        Column(
            "Access Modes",
            "string",
            lambda o, n: _access_modes(o, "status.accessModes"),
            _doc(claim, "accessModes"),
        ),
        _field("StorageClass", claim, "spec.storageClassName"),
        _field("VolumeAttributesClass", claim, "spec.volumeAttributesClassName", default="<unset>"),
        _age_column(),
        _field("VolumeMode", claim, "spec.volumeMode", "string", 1),
    ]


def _pv_claim(obj: Obj, now: datetime.datetime) -> Cell:
    ref = _map(obj, "spec.claimRef")
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""


def _pv_columns() -> list[Column]:
    spec = _CORE + "PersistentVolumeSpec"
    return [
        _name_column(),
        Column(
            "Capacity",
            "string",
            lambda o, n: str(_map(o, "spec.capacity").get("storage", "")),
            _doc(spec, "capacity"),
        ),
        Column(
            "Access Modes",
            "string",
            lambda o, n: _access_modes(o, "spec.accessModes"),
            _doc(spec, "accessModes"),
        ),
        _field("Reclaim Policy", spec, "spec.persistentVolumeReclaimPolicy"),
        _field("Status", _CORE + "PersistentVolumeStatus", "status.phase"),
        Column("Claim", "string", _pv_claim, _doc(spec, "claimRef")),
        _field("StorageClass", spec, "spec.storageClassName"),
        _field("VolumeAttributesClass", spec, "spec.volumeAttributesClassName", default="<unset>"),
        _field("Reason", _CORE + "PersistentVolumeStatus", "status.reason"),
        _age_column(),
        _field("VolumeMode", spec, "spec.volumeMode", "string", 1),
    ]


def _replicationcontroller_columns() -> list[Column]:
    status = _CORE + "ReplicationControllerStatus"
    return [
        _name_column(),
        _field("Desired", _CORE + "ReplicationControllerSpec", "spec.replicas", "integer"),
        _field("Current", status, "status.replicas", "integer"),
        _field("Ready", status, "status.readyReplicas", "integer"),
        _age_column(),
        *_template_columns("spec.template.spec.containers", None),
        Column(
            "Selector",
            "string",
            lambda o, n: format_labels(_map(o, "spec.selector")),
            _doc(_CORE + "ReplicationControllerSpec", "selector"),
            1,
        ),
    ]


def _pdb_columns() -> list[Column]:
    spec = "io.k8s.api.policy.v1.PodDisruptionBudgetSpec"
    return [
        _name_column(),
        Column(
            "Min Available",
            "string",
            lambda o, n: str(_get(o, "spec.minAvailable", "N/A")),
            _doc(spec, "minAvailable"),
        ),
        Column(
            "Max Unavailable",
            "string",
            lambda o, n: str(_get(o, "spec.maxUnavailable", "N/A")),
            _doc(spec, "maxUnavailable"),
        ),
        _field(
            "Allowed Disruptions",
            "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
            "status.disruptionsAllowed",
            "integer",
        ),
        _age_column(),
    ]


def _storage_class_name(obj: Obj, now: datetime.datetime) -> Cell:
    default = _map(obj, "metadata.annotations").get("storageclass.kubernetes.io/is-default-class") == "true"
    return _str(obj, "metadata.name") + (" (default)" if default else "")


def _storageclass_columns() -> list[Column]:
    kind = "io.k8s.api.storage.v1.StorageClass"
    return [
        Column(
            "Name",
            "string",
            _storage_class_name,
            _doc(_OBJECT_META, "name"),
            format="name",
        ),
        _field("Provisioner", kind, "provisioner"),
        _field("ReclaimPolicy", kind, "reclaimPolicy"),
        _field("VolumeBindingMode", kind, "volumeBindingMode"),
        Column(
            "AllowVolumeExpansion",
            "string",
            lambda o, n: str(bool(_get(o, "allowVolumeExpansion", False))).lower(),
            _doc(kind, "allowVolumeExpansion"),
        ),
        _age_column(),
    ]


def _priorityclass_columns() -> list[Column]:
    kind = "io.k8s.api.scheduling.v1.PriorityClass"
    return [
        _name_column(),
        _field("Value", kind, "value", "integer"),
        Column(
            "Global-Default",
            "boolean",
            lambda o, n: bool(_get(o, "globalDefault", False)),
            _doc(kind, "globalDefault"),
        ),
        _age_column(),
        _field("PreemptionPolicy", kind, "preemptionPolicy"),
    ]


# --------------------------------------------------------------------------- the other API groups

_AUTOSCALING = "io.k8s.api.autoscaling.v2."
_MORE = "{} + {} more..."


def _quantity_text(value: Any) -> str:
    """A quantity as a cell (as stored; Go prints a nil one as ``<nil>``)."""
    return "<nil>" if value is None else str(value)


def _hpa_metric(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """One entry of ``formatHPAMetrics``."""
    kind = spec.get("type")
    if kind in ("External", "Object"):
        key = kind.lower()
        target = _map(spec, f"{key}.target")
        current = _map(status, key)
        if target.get("averageValue") is not None:
            now = _get(current, "current.averageValue")
            return f"{'<unknown>' if now is None else now}/{target['averageValue']} (avg)"
        now = _quantity_text(_get(current, "current.value")) if current else "<unknown>"
        return f"{now}/{_quantity_text(target.get('value'))}"
    if kind == "Pods":
        current = _map(status, "pods")
        now = _quantity_text(_get(current, "current.averageValue")) if current else "<unknown>"
        return f"{now}/{_quantity_text(_get(spec, 'pods.target.averageValue'))}"
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        source = _map(spec, key)
        target = _map(source, "target")
        current = _map(status, key)
        name = source.get("name", "")
        if target.get("averageValue") is not None:
            now = _quantity_text(_get(current, "current.averageValue")) if current else "<unknown>"
            return f"{name}: {now}/{target['averageValue']}"
        utilization = _get(current, "current.averageUtilization")
        now = "<unknown>" if utilization is None else f"{utilization}%"
        wanted = target.get("averageUtilization")
        return f"{name}: {now}/{'<auto>' if wanted is None else f'{wanted}%'}"
    return "<unknown type>"


def _hpa_targets(obj: Obj, now: datetime.datetime) -> Cell:
    """``formatHPAMetrics``: each metric's current/target (statuses matched by position), two at most."""
    specs = [m for m in _list(obj, "spec.metrics") if isinstance(m, Mapping)]
    if not specs:
        return "<none>"
    statuses = _list(obj, "status.currentMetrics")
    entries = [
        _hpa_metric(spec, statuses[i] if i < len(statuses) and isinstance(statuses[i], Mapping) else {})
        for i, spec in enumerate(specs)
    ]
    text = ", ".join(entries[:2])
    return _MORE.format(text, len(entries) - 2) if len(entries) > 2 else text


def _hpa_columns() -> list[Column]:
    spec, status = (
        _AUTOSCALING + "HorizontalPodAutoscalerSpec",
        _AUTOSCALING + "HorizontalPodAutoscalerStatus",
    )
    return [
        _name_column(),
        Column(
            "Reference",
            "string",
            lambda o, n: f"{_str(o, 'spec.scaleTargetRef.kind')}/{_str(o, 'spec.scaleTargetRef.name')}",
            _doc(spec, "scaleTargetRef"),
        ),
        Column("Targets", "string", _hpa_targets, _doc(spec, "metrics")),
        _field("MinPods", spec, "spec.minReplicas", default="<unset>"),
        Column("MaxPods", "string", lambda o, n: _int(o, "spec.maxReplicas"), _doc(spec, "maxReplicas")),
        Column(
            "Replicas",
            "string",
            lambda o, n: _int(o, "status.currentReplicas"),
            _doc(status, "currentReplicas"),
        ),
        _age_column(),
    ]


def _ingress_hosts(obj: Obj, now: datetime.datetime) -> Cell:
    """``formatHosts``: the first three hosts, ``*`` when no rule names one."""
    rules = _list(obj, "spec.rules")
    hosts = [str(r.get("host")) for r in rules[:3] if isinstance(r, Mapping) and r.get("host")]
    if not hosts:
        return "*"
    text = ",".join(hosts)
    return _MORE.format(text, len(rules) - 3) if len(rules) > 3 else text


def _ingress_address(obj: Obj, now: datetime.datetime) -> Cell:
    addresses = {
        str(entry.get("ip") or entry.get("hostname"))
        for entry in _list(obj, "status.loadBalancer.ingress")
        if isinstance(entry, Mapping) and (entry.get("ip") or entry.get("hostname"))
    }
    return ",".join(sorted(addresses))


def _ingress_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "Class",
            "string",
            lambda o, n: _str(o, "spec.ingressClassName", "<none>"),
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        Column(
            "Hosts",
            "string",
            _ingress_hosts,
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        Column(
            "Address",
            "string",
            _ingress_address,
            "Address is a list containing ingress points for the load-balancer",
        ),
        Column(
            "Ports",
            "string",
            lambda o, n: "80, 443" if _list(o, "spec.tls") else "80",
            "Ports of TLS configurations that open",
        ),
        _age_column(),
    ]


def _ingress_class_name(obj: Obj, now: datetime.datetime) -> Cell:
    default = _map(obj, "metadata.annotations").get("ingressclass.kubernetes.io/is-default-class") == "true"
    return _str(obj, "metadata.name") + (" (default)" if default else "")


def _ingress_class_parameters(obj: Obj, now: datetime.datetime) -> Cell:
    parameters = _map(obj, "spec.parameters")
    if not parameters:
        return "<none>"
    group = parameters.get("apiGroup")
    return f"{parameters.get('kind', '')}{'' if group is None else '.' + str(group)}/{parameters.get('name', '')}"


def _ingressclass_columns() -> list[Column]:
    return [
        Column("Name", "string", _ingress_class_name, _doc(_OBJECT_META, "name"), format="name"),
        Column(
            "Controller",
            "string",
            lambda o, n: _str(o, "spec.controller"),
            "Controller that is responsible for handling this class",
        ),
        Column(
            "Parameters",
            "string",
            _ingress_class_parameters,
            "A reference to a resource with additional parameters",
        ),
        _age_column(),
    ]


def _networkpolicy_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "Pod-Selector",
            "string",
            lambda o, n: _selector_or_none(_get(o, "spec.podSelector")),
            _doc("io.k8s.api.networking.v1.NetworkPolicySpec", "podSelector"),
        ),
        _age_column(),
    ]


def _with_more(items: Sequence[str], total: int, limit: int = 3) -> str:
    """``listWithMoreString``: the first ``limit`` items, ``<unset>`` when there are none."""
    text = ",".join(items[:limit])
    if total > limit:
        return _MORE.format(text, total - limit)
    return text or "<unset>"


def _slice_ports(obj: Obj, now: datetime.datetime) -> Cell:
    ports = [p for p in _list(obj, "ports") if isinstance(p, Mapping)]
    shown = [str(p["port"]) if p.get("port") is not None else str(p.get("name") or "*") for p in ports]
    return _with_more(shown, len(ports))


def _slice_endpoints(obj: Obj, now: datetime.datetime) -> Cell:
    addresses = [
        str(address)
        for endpoint in _list(obj, "endpoints")
        if isinstance(endpoint, Mapping)
        for address in endpoint.get("addresses") or ()
    ]
    return _with_more(addresses, len(addresses))


def _endpointslice_columns() -> list[Column]:
    kind = "io.k8s.api.discovery.v1.EndpointSlice"
    return [
        _name_column(),
        _field("AddressType", kind, "addressType"),
        Column("Ports", "string", _slice_ports, _doc(kind, "ports")),
        Column("Endpoints", "string", _slice_endpoints, _doc(kind, "endpoints")),
        _age_column(),
    ]


def _csr_condition(obj: Obj, now: datetime.datetime) -> Cell:
    """``extractCSRStatus``: Approved, Denied or Pending, then Failed and Issued."""
    types = {c.get("type") for c in _list(obj, "status.conditions") if isinstance(c, Mapping)}
    text = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        text += ",Failed"
    if _get(obj, "status.certificate"):
        text += ",Issued"
    return text


def _csr_duration(obj: Obj, now: datetime.datetime) -> Cell:
    seconds = _get(obj, "spec.expirationSeconds")
    return "<none>" if seconds is None else human_duration(_int(obj, "spec.expirationSeconds"))


def _csr_columns() -> list[Column]:
    spec = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec"
    return [
        _name_column(),
        _age_column(),
        Column(
            "SignerName",
            "string",
            lambda o, n: _str(o, "spec.signerName") or "<none>",
            _doc(spec, "signerName"),
        ),
        Column("Requestor", "string", lambda o, n: _str(o, "spec.username"), _doc(spec, "request")),
        Column("RequestedDuration", "string", _csr_duration, _doc(spec, "expirationSeconds")),
        Column(
            "Condition",
            "string",
            _csr_condition,
            _doc("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "conditions"),
        ),
    ]


def _clustertrustbundle_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "SignerName",
            "string",
            lambda o, n: _str(o, "spec.signerName") or "<none>",
            _doc("io.k8s.api.certificates.v1.ClusterTrustBundleSpec", "signerName"),
        ),
    ]


def _pod_certificate_state(obj: Obj, now: datetime.datetime) -> Cell:
    state = "Pending"
    for condition in _list(obj, "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") in ("Issued", "Denied", "Failed"):
            state = str(condition["type"])
    return state


def _spec_text(field: str) -> CellFn:
    return lambda o, n: _str(o, f"spec.{field}")


def _podcertificaterequest_columns() -> list[Column]:
    spec = "io.k8s.api.certificates.v1.PodCertificateRequestSpec"
    return [
        _name_column(),
        *(
            Column(title, "string", _spec_text(field), _doc(spec, field))
            for title, field in (
                ("PodName", "podName"),
                ("ServiceAccountName", "serviceAccountName"),
                ("NodeName", "nodeName"),
                ("SignerName", "signerName"),
            )
        ),
        Column(
            "State", "string", _pod_certificate_state, "Is the request Pending, Issued, Denied, or Failed?"
        ),
        Column(
            "UnverifiedUserAnnotations",
            "string",
            lambda o, n: format_labels(_map(o, "spec.unverifiedUserAnnotations")),
            _doc(spec, "unverifiedUserAnnotations"),
        ),
    ]


def _controller_of(obj: Obj, now: datetime.datetime) -> Cell:
    for ref in _list(obj, "metadata.ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", ""))
            return f"{(kind + '.' + group if group else kind).lower()}/{ref.get('name', '')}"
    return "<none>"


def _controllerrevision_columns() -> list[Column]:
    return [
        _name_column(),
        Column("Controller", "string", _controller_of, "Controller of the object"),
        Column(
            "Revision",
            "string",
            lambda o, n: _int(o, "revision"),
            _doc(_APPS + "ControllerRevision", "revision"),
        ),
        _age_column(),
    ]


def _podtemplate_columns() -> list[Column]:
    path = "template.spec.containers"
    return [
        _name_column(),
        Column("Containers", "string", lambda o, n: _containers(o, path)[0], _TEMPLATE_NAMES),
        Column("Images", "string", lambda o, n: _containers(o, path)[1], _TEMPLATE_IMAGES),
        Column(
            "Pod Labels",
            "string",
            lambda o, n: format_labels(_map(o, "template.metadata.labels")),
            "The labels for the pod template.",
        ),
    ]


def _quota(limits: bool) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        hard, used = _map(obj, "status.hard"), _map(obj, "status.used")
        parts = [
            f"{name}: {used.get(name, '0')}/{hard[name]}"
            for name in sorted(hard)
            if (len(name.split(".")) > 1 and name.split(".")[0] == "limits") == limits
        ]
        return ", ".join(parts)

    return cell


def _resourcequota_columns() -> list[Column]:
    return [
        _name_column(),
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
        _age_column(),
    ]


def _count_column(title: str, path: str, description: str) -> Column:
    return Column(title, "integer", lambda o, n: len(_list(o, path)), description)


def _webhook_columns() -> list[Column]:
    return [
        _name_column(),
        _count_column(
            "Webhooks",
            "webhooks",
            "Webhooks indicates the number of webhooks registered in this configuration",
        ),
        _age_column(),
    ]


def _param_kind(obj: Obj, now: datetime.datetime) -> Cell:
    kind = _map(obj, "spec.paramKind")
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}" if kind else "<unset>"


def _admission_policy_columns(title: str, path: str, description: str) -> Callable[[], list[Column]]:
    def columns() -> list[Column]:
        return [
            _name_column(),
            _count_column(title, path, description),
            Column(
                "ParamKind",
                "string",
                _param_kind,
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            _age_column(),
        ]

    return columns


def _go_label_selector(selector: Mapping[str, Any]) -> str:
    """The generated ``LabelSelector.String()`` of Go."""
    labels = _map(selector, "matchLabels")
    label_text = "".join(f"{key}: {labels[key]}," for key in sorted(labels))
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(str(v) for v in e.get('values') or ())}],}},"
        for e in _list(selector, "matchExpressions")
        if isinstance(e, Mapping)
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{label_text}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )


def _param_ref(obj: Obj, now: datetime.datetime) -> Cell:
    ref = _map(obj, "spec.paramRef")
    if not ref:
        return "<unset>"
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if isinstance(ref.get("selector"), Mapping):
        return _go_label_selector(ref["selector"])
    return "<unset>"


def _policy_binding_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "PolicyName",
            "string",
            lambda o, n: _str(o, "spec.policyName"),
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        Column(
            "ParamRef",
            "string",
            _param_ref,
            "ParamRef indicates the param resource which sets the configuration param",
        ),
        _age_column(),
    ]


def _apiservice_available(obj: Obj, now: datetime.datetime) -> Cell:
    for condition in _list(obj, "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") == "Available":
            status = str(condition.get("status", ""))
            if status == "True":
                return "True"
            return f"{status} ({condition['reason']})" if condition.get("reason") else status
    return "Unknown"


def _apiservice_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "Service",
            "string",
            lambda o, n: (
                f"{_str(o, 'spec.service.namespace')}/{_str(o, 'spec.service.name')}"
                if _map(o, "spec.service")
                else "Local"
            ),
            "The reference to the service that hosts this API endpoint.",
        ),
        Column("Available", "string", _apiservice_available, "Whether this service is available."),
        _age_column(),
    ]


_FLOWCONTROL = "io.k8s.api.flowcontrol.v1."


def _dangling(obj: Obj, now: datetime.datetime) -> Cell:
    for condition in _list(obj, "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") == "Dangling":
            return str(condition.get("status", ""))
    return "?"


def _flowschema_columns() -> list[Column]:
    spec = _FLOWCONTROL + "FlowSchemaSpec"
    return [
        _name_column(),
        _field(
            "PriorityLevel",
            _FLOWCONTROL + "PriorityLevelConfigurationReference",
            "spec.priorityLevelConfiguration.name",
        ),
        Column(
            "MatchingPrecedence",
            "string",
            lambda o, n: _int(o, "spec.matchingPrecedence"),
            _doc(spec, "matchingPrecedence"),
        ),
        Column(
            "DistinguisherMethod",
            "string",
            lambda o, n: _str(o, "spec.distinguisherMethod.type") or "<none>",
            _doc(spec, "distinguisherMethod"),
        ),
        _age_column(),
        Column(
            "MissingPL", "string", _dangling, "references a broken or non-existent PriorityLevelConfiguration"
        ),
    ]


def _limited(path: str) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        value = _get(obj, path)
        return "<none>" if value is None else _int(obj, path)

    return cell


def _prioritylevel_columns() -> list[Column]:
    queuing = _FLOWCONTROL + "QueuingConfiguration"
    base = "spec.limited.limitResponse.queuing."
    return [
        _name_column(),
        _field("Type", _FLOWCONTROL + "PriorityLevelConfigurationSpec", "spec.type"),
        Column(
            "NominalConcurrencyShares",
            "string",
            _limited("spec.limited.nominalConcurrencyShares"),
            _doc(_FLOWCONTROL + "LimitedPriorityLevelConfiguration", "nominalConcurrencyShares"),
        ),
        Column("Queues", "string", _limited(base + "queues"), _doc(queuing, "queues")),
        Column("HandSize", "string", _limited(base + "handSize"), _doc(queuing, "handSize")),
        Column(
            "QueueLengthLimit",
            "string",
            _limited(base + "queueLengthLimit"),
            _doc(queuing, "queueLengthLimit"),
        ),
        _age_column(),
    ]


def _runtimeclass_columns() -> list[Column]:
    # Upstream's description is ObjectMeta's (missing) "handler" doc: empty.
    return [_name_column(), Column("Handler", "string", lambda o, n: _str(o, "handler"), ""), _age_column()]


_STORAGE = "io.k8s.api.storage.v1."


def _csidriver_columns() -> list[Column]:
    spec = _STORAGE + "CSIDriverSpec"

    def flag(field: str, default: bool) -> CellFn:
        return lambda o, n: bool(_get(o, f"spec.{field}", default))

    def audiences(obj: Obj, now: datetime.datetime) -> Cell:
        requests = _get(obj, "spec.tokenRequests")
        if not isinstance(requests, list):
            return "<unset>"
        return ",".join(str(r.get("audience", "")) for r in requests if isinstance(r, Mapping))

    return [
        _name_column(),
        Column("AttachRequired", "boolean", flag("attachRequired", True), _doc(spec, "attachRequired")),
        Column("PodInfoOnMount", "boolean", flag("podInfoOnMount", False), _doc(spec, "podInfoOnMount")),
        Column("StorageCapacity", "boolean", flag("storageCapacity", False), _doc(spec, "storageCapacity")),
        Column("TokenRequests", "string", audiences, _doc(spec, "tokenRequests")),
        Column(
            "RequiresRepublish", "boolean", flag("requiresRepublish", False), _doc(spec, "requiresRepublish")
        ),
        Column(
            "Modes",
            "string",
            lambda o, n: ",".join(str(m) for m in _list(o, "spec.volumeLifecycleModes")) or "<none>",
            _doc(spec, "volumeLifecycleModes"),
        ),
        _age_column(),
    ]


def _csinode_columns() -> list[Column]:
    return [
        _name_column(),
        _count_column(
            "Drivers", "spec.drivers", "Drivers indicates the number of CSI drivers registered on the node"
        ),
        _age_column(),
    ]


def _csistoragecapacity_columns() -> list[Column]:
    kind = _STORAGE + "CSIStorageCapacity"
    return [
        _name_column(),
        _field("StorageClassName", kind, "storageClassName"),
        _field("Capacity", kind, "capacity", default="<unset>"),
    ]


def _volumeattachment_columns() -> list[Column]:
    spec = _STORAGE + "VolumeAttachmentSpec"
    return [
        _name_column(),
        Column(
            "Attacher", "string", lambda o, n: _str(o, "spec.attacher"), _doc(spec, "attacher"), format="name"
        ),
        _field("PV", _STORAGE + "VolumeAttachmentSource", "spec.source.persistentVolumeName"),
        _field("Node", spec, "spec.nodeName"),
        Column(
            "Attached",
            "boolean",
            lambda o, n: bool(_get(o, "status.attached", False)),
            _doc(_STORAGE + "VolumeAttachmentStatus", "attached"),
        ),
        _age_column(),
    ]


def _volumeattributesclass_columns() -> list[Column]:
    return [
        _name_column(),
        _field("DriverName", _STORAGE + "VolumeAttributesClass", "driverName"),
        _age_column(),
    ]


def _migration_status(obj: Obj, now: datetime.datetime) -> Cell:
    status = "Unknown"
    for condition in _list(obj, "status.conditions"):
        if (
            isinstance(condition, Mapping)
            and condition.get("status") == "True"
            and condition.get("type") in ("Running", "Failed", "Succeeded")
        ):
            status = str(condition["type"])
    return status


def _storageversionmigration_columns() -> list[Column]:
    def group_resource(obj: Obj, now: datetime.datetime) -> Cell:
        resource, group = _str(obj, "spec.resource.resource"), _str(obj, "spec.resource.group")
        return f"{resource}.{group}" if group else resource

    return [
        Column("Name", "string", _name, _doc(_OBJECT_META, "name")),
        Column("Resource", "string", group_resource, "GroupResource to migrate"),
        Column("Status", "string", _migration_status, "Status of the migration"),
    ]


def _ipaddress_parent(obj: Obj, now: datetime.datetime) -> Cell:
    ref = _map(obj, "spec.parentRef")
    if not ref:
        return "<none>"
    resource, group = str(ref.get("resource", "")), str(ref.get("group", ""))
    text = (f"{resource}.{group}" if group else resource).lower()
    if ref.get("namespace"):
        text += f"/{ref['namespace']}"
    return f"{text}/{ref.get('name', '')}"


def _ipaddress_columns() -> list[Column]:
    # Upstream declares two columns and fills three cells (the age); kubectl shows the two.
    return [
        _name_column(),
        Column(
            "ParentRef",
            "string",
            _ipaddress_parent,
            _doc("io.k8s.api.networking.v1.IPAddressSpec", "parentRef"),
        ),
    ]


def _servicecidr_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "CIDRs",
            "string",
            lambda o, n: ",".join(str(c) for c in _list(o, "spec.cidrs")),
            _doc("io.k8s.api.networking.v1.ServiceCIDRSpec", "cidrs"),
        ),
        _age_column(),
    ]


_RESOURCE = "io.k8s.api.resource.v1."


def _name_and_age() -> list[Column]:
    return [_name_column(), _age_column()]


def _devicetaintrule_columns() -> list[Column]:
    taint = _RESOURCE + "DeviceTaint"

    def added(obj: Obj, now: datetime.datetime) -> Cell:
        value = _get(obj, "spec.taint.timeAdded")
        return "" if value is None else _since(value, now)

    return [
        _name_column(),
        _field("Key", taint, "spec.taint.key"),
        _field("Value", taint, "spec.taint.value"),
        _field("Effect", taint, "spec.taint.effect"),
        Column("TimeAdded", "string", added, _doc(taint, "timeAdded")),
        _age_column(),
    ]


def _claim_state(obj: Obj, now: datetime.datetime) -> Cell:
    states = []
    deleted = _get(obj, "metadata.deletionTimestamp") is not None
    if deleted:
        states.append("deleted")
    if _get(obj, "status.allocation") is None:
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if _list(obj, "status.reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _resourceclaim_columns() -> list[Column]:
    return [
        _name_column(),
        Column(
            "State",
            "string",
            _claim_state,
            "A summary of the current state (allocated, pending, reserved, etc.).",
        ),
        _age_column(),
    ]


def _resourceslice_columns() -> list[Column]:
    spec = _RESOURCE + "ResourceSliceSpec"
    return [
        _name_column(),
        _field("Node", spec, "spec.nodeName"),
        _field("Driver", spec, "spec.driver"),
        _field("Pool", _RESOURCE + "ResourcePool", "spec.pool.name"),
        _age_column(),
    ]


#: Custom resources without printer columns: Name and Age.
_DEFAULT_KEY = ("*", "*")
#: Built-in kinds without a printer: apiserver's default table convertor.
_BUILTIN_DEFAULT_KEY = ("*", "builtin")
_COLUMN_SETS: dict[tuple[str, str], Callable[[], list[Column]]] = {
    ("", "pods"): _pod_columns,
    ("apps", "deployments"): _deployment_columns,
    ("apps", "replicasets"): _replicaset_columns,
    ("apps", "statefulsets"): _statefulset_columns,
    ("apps", "daemonsets"): _daemonset_columns,
    ("batch", "jobs"): _job_columns,
    ("batch", "cronjobs"): _cronjob_columns,
    ("", "services"): _service_columns,
    ("", "configmaps"): _configmap_columns,
    ("", "secrets"): _secret_columns,
    ("", "namespaces"): _namespace_columns,
    ("", "nodes"): _node_columns,
    ("", "serviceaccounts"): _serviceaccount_columns,
    ("", "events"): _event_columns,
    ("events.k8s.io", "events"): _event_columns,
    ("", "endpoints"): _endpoints_columns,
    ("coordination.k8s.io", "leases"): _lease_columns,
    ("", "componentstatuses"): _componentstatus_columns,
    ("", "persistentvolumeclaims"): _pvc_columns,
    ("", "persistentvolumes"): _pv_columns,
    ("", "replicationcontrollers"): _replicationcontroller_columns,
    ("policy", "poddisruptionbudgets"): _pdb_columns,
    ("storage.k8s.io", "storageclasses"): _storageclass_columns,
    ("scheduling.k8s.io", "priorityclasses"): _priorityclass_columns,
    ("rbac.authorization.k8s.io", "roles"): _generic_columns,
    ("rbac.authorization.k8s.io", "clusterroles"): _generic_columns,
    ("rbac.authorization.k8s.io", "rolebindings"): lambda: _binding_columns("RoleBinding"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): lambda: _binding_columns("ClusterRoleBinding"),
    ("autoscaling", "horizontalpodautoscalers"): _hpa_columns,
    ("networking.k8s.io", "ingresses"): _ingress_columns,
    ("networking.k8s.io", "ingressclasses"): _ingressclass_columns,
    ("networking.k8s.io", "networkpolicies"): _networkpolicy_columns,
    ("networking.k8s.io", "ipaddresses"): _ipaddress_columns,
    ("networking.k8s.io", "servicecidrs"): _servicecidr_columns,
    ("discovery.k8s.io", "endpointslices"): _endpointslice_columns,
    ("certificates.k8s.io", "certificatesigningrequests"): _csr_columns,
    ("certificates.k8s.io", "clustertrustbundles"): _clustertrustbundle_columns,
    ("certificates.k8s.io", "podcertificaterequests"): _podcertificaterequest_columns,
    ("apps", "controllerrevisions"): _controllerrevision_columns,
    ("", "podtemplates"): _podtemplate_columns,
    ("", "resourcequotas"): _resourcequota_columns,
    ("", "limitranges"): _generic_columns,
    ("apiextensions.k8s.io", "customresourcedefinitions"): _generic_columns,
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): _webhook_columns,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): _webhook_columns,
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): _admission_policy_columns(
        "Validations",
        "spec.validations",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"): _admission_policy_columns(
        "Mutations",
        "spec.mutations",
        "Mutation indicates the number of mutations rules defined in this configuration",
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): _policy_binding_columns,
    ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"): _policy_binding_columns,
    ("apiregistration.k8s.io", "apiservices"): _apiservice_columns,
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): _flowschema_columns,
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): _prioritylevel_columns,
    ("node.k8s.io", "runtimeclasses"): _runtimeclass_columns,
    ("storage.k8s.io", "csidrivers"): _csidriver_columns,
    ("storage.k8s.io", "csinodes"): _csinode_columns,
    ("storage.k8s.io", "csistoragecapacities"): _csistoragecapacity_columns,
    ("storage.k8s.io", "volumeattachments"): _volumeattachment_columns,
    ("storage.k8s.io", "volumeattributesclasses"): _volumeattributesclass_columns,
    ("storagemigration.k8s.io", "storageversionmigrations"): _storageversionmigration_columns,
    ("resource.k8s.io", "deviceclasses"): _name_and_age,
    ("resource.k8s.io", "resourceclaimtemplates"): _name_and_age,
    ("resource.k8s.io", "devicetaintrules"): _devicetaintrule_columns,
    ("resource.k8s.io", "resourceclaims"): _resourceclaim_columns,
    ("resource.k8s.io", "resourceslices"): _resourceslice_columns,
    _BUILTIN_DEFAULT_KEY: _generic_columns,
}
_column_cache: dict[tuple[str, str], list[Column]] = {}


def _custom_cell(column: PrinterColumn) -> CellFn:
    """A cell of a CRD's column: the first value its JSONPath finds, by the column's type."""
    try:
        steps = jsonpath.compile_path(column.json_path)
    except jsonpath.JSONPathError:
        steps = None

    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        if steps is None:
            return None
        values = jsonpath.find(obj, steps)
        if not values:
            return None
        value = values[0]
        if column.type == "date":
            return _since(value, now) if isinstance(value, str) else None
        if column.type == "integer":
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        if column.type == "number":
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if column.type == "boolean":
            return value if isinstance(value, bool) else None
        if isinstance(value, dict | list):
            return orjson.dumps(value).decode()
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return cell


def _custom_columns(resource: ResourceType) -> list[Column]:
    """NAME and the CRD's additionalPrinterColumns (NAME and AGE when it declares none)."""
    declared = resource.printer_columns or ()
    if not declared:
        return [_name_column(), _age_column("date")]
    return [
        _name_column(),
        *(Column(c.name, c.type, _custom_cell(c), c.description, c.priority, c.format) for c in declared),
    ]


def columns_for(resource: ResourceType) -> list[Column]:
    """The columns of a resource's Table (built once per kind of printer)."""
    if resource.printer_columns is not None:
        return _custom_columns(resource)
    key = (resource.group, resource.plural)
    if key not in _COLUMN_SETS:
        key = _DEFAULT_KEY if resource.definition else _BUILTIN_DEFAULT_KEY
    columns = _column_cache.get(key)
    if columns is None:
        columns = _column_cache[key] = _COLUMN_SETS.get(key, _default_columns)()
    return columns


# --------------------------------------------------------------------------- tables


def partial_object_metadata(obj: Obj) -> dict[str, Any]:
    """meta.k8s.io/v1 PartialObjectMetadata of an object."""
    metadata = obj.get("metadata")
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": META_API_VERSION,
        "metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
    }


def _list_meta(
    resource_version: str, continue_token: str, remaining_item_count: int | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    if remaining_item_count is not None:
        metadata["remainingItemCount"] = remaining_item_count
    return metadata


def _printed_form(resource: ResourceType, obj: Obj) -> Obj:
    """The form a kind's printer reads, as upstream prints the internal version: core Events,
    autoscaling/v2 HorizontalPodAutoscalers."""
    if resource.plural == "events":
        return _core_event(obj)
    if (
        resource.plural == "horizontalpodautoscalers"
        and obj.get("apiVersion") == hpaconversion.V1_API_VERSION
    ):
        return hpaconversion.v1_to_v2(obj)
    return obj


def _row(
    resource: ResourceType, columns: Sequence[Column], obj: Obj, include_object: str, now: datetime.datetime
) -> dict[str, Any]:
    view = _printed_form(resource, obj)
    row: dict[str, Any] = {"cells": [column.cell(view, now) for column in columns]}
    _last_summary.clear()
    if resource.group == "" and resource.plural == "pods":
        phase = _str(obj, "status.phase")
        if phase in _POD_CONDITIONS:
            row["conditions"] = [
                {"type": "Completed", "status": "True", "reason": phase, "message": _POD_CONDITIONS[phase]}
            ]
    if include_object == "Metadata":
        row["object"] = partial_object_metadata(obj)
    elif include_object == "Object":
        row["object"] = obj
    return row


def to_table(
    resource: ResourceType,
    objects: Sequence[Obj],
    *,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    now: datetime.datetime | None = None,
    remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of ``objects``.

    ``include_object`` is the ``includeObject`` parameter: ``Metadata`` (the default; each row
    carries a PartialObjectMetadata), ``Object`` (the full object) or ``None`` (no object). Without
    a ``resource_version``, a one-object table (GET, watch events) takes the object's.
    """
    now = now or datetime.datetime.now(datetime.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)
    columns = columns_for(resource)
    if not resource_version and len(objects) == 1:
        resource_version = _str(objects[0], "metadata.resourceVersion")
    return {
        "kind": "Table",
        "apiVersion": META_API_VERSION,
        "metadata": _list_meta(resource_version, continue_token, remaining_item_count),
        "columnDefinitions": [column.definition() for column in columns],
        "rows": [_row(resource, columns, obj, include_object, now) for obj in objects],
    }


def to_partial_object_metadata_list(
    resource: ResourceType,
    objects: Sequence[Obj],
    resource_version: str,
    continue_token: str,
    remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """meta.k8s.io/v1 PartialObjectMetadataList (``as=PartialObjectMetadataList``)."""
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_API_VERSION,
        "metadata": _list_meta(resource_version, continue_token, remaining_item_count),
        "items": [partial_object_metadata(obj) for obj in objects],
    }
