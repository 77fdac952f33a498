"""Server-side Tables of the core, apps, batch and RBAC kinds: upstream's columns and cells, ages
as ``duration.HumanDuration`` renders them, and PartialObjectMetadata."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.groups import builtin_resources
from kubeloop.apiserver.printing import tables
from kubeloop.apiserver.printing.cells import human_duration
from tests.apiserver.printing.printed import to_table

NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def ago(seconds: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1, "1s"),
        (70, "70s"),
        (190, "3m10s"),
        (70 * 60, "70m"),
        (47 * 3600, "47h"),
        (49 * 3600, "2d1h"),
        ((8 * 24 + 2) * 3600, "8d"),
        (367 * 24 * 3600, "367d"),
        ((365 * 2 * 24 + 25) * 3600, "2y1d"),
        ((365 * 8 * 24 + 2) * 3600, "8y"),
        (-2, "<invalid>"),
        (-1.999, "0s"),
        (0, "0s"),
        (0.999, "0s"),
        (119.999, "119s"),
        (120, "2m"),
        (121, "2m1s"),
        (5, "5s"),
        (182, "3m2s"),
        (599.999, "9m59s"),
        (600, "10m"),
        (601, "10m"),
        (3 * 3600 - 0.001, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600 - 0.001, "7h59m"),
        (8 * 3600 + 59 * 60, "8h"),
        (2 * 86400 - 0.001, "47h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (8 * 86400 - 0.001, "7d23h"),
        (2 * 365 * 86400 - 0.001, "729d"),
        (2 * 365 * 86400, "2y"),
        (2 * 365 * 86400 + 86400, "2y1d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def pods() -> ResourceType:
    resource = ResourceCatalog(builtin_resources()).lookup("", "v1", "pods")
    assert resource is not None
    return resource


def pod(name: str, status: dict[str, Any], containers: int = 1, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": ago(300), **metadata},
        "spec": {"containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)]},
        "status": status,
    }


def running(name: str, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ago(100)}},
    }


def cells(resource: ResourceType, obj: dict[str, Any]) -> list[Any]:
    table = to_table(resource, [obj], now=NOW)
    row_cells: list[Any] = table["rows"][0]["cells"]
    return row_cells


def test_pod_table_columns() -> None:
    table = to_table(pods(), [], now=NOW, resource_version="7")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "7"}
    assert table["rows"] == []
    columns = [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
        ("Restarts", "string", 0),
        ("Age", "string", 0),
        ("IP", "string", 1),
        ("Node", "string", 1),
        ("Nominated Node", "string", 1),
        ("Readiness Gates", "string", 1),
    ]
    assert table["columnDefinitions"][0]["format"] == "name"
    assert all(c["description"] for c in table["columnDefinitions"])


def test_pod_rows() -> None:
    running_pod = pod(
        "web",
        {
            "phase": "Running",
            "podIPs": [{"ip": "10.1.0.5"}],
            "containerStatuses": [running("c0"), running("c1", ready=False)],
        },
        containers=2,
    )
    running_pod["spec"]["nodeName"] = "node-1"
    assert cells(pods(), running_pod) == [
        "web",
        "1/2",
        "Running",
        "0",
        "5m",
        "10.1.0.5",
        "node-1",
        "<none>",
        "<none>",
    ]

    pending = pod("new", {"phase": "Pending"}, creationTimestamp=ago(5))
    assert cells(pods(), pending)[:5] == ["new", "0/1", "Pending", "0", "5s"]

    crashing = pod(
        "crash",
        {
            "phase": "Running",
            "podIP": "10.1.0.6",
            "containerStatuses": [
                {
                    "name": "c0",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(42)}},
                }
            ],
        },
    )
    assert cells(pods(), crashing)[:6] == [
        "crash",
        "0/1",
        "CrashLoopBackOff",
        "4 (42s ago)",
        "5m",
        "10.1.0.6",
    ]

    terminating = pod(
        "bye",
        {"phase": "Running", "containerStatuses": [running("c0")]},
        deletionTimestamp=ago(1),
    )
    assert cells(pods(), terminating)[:3] == ["bye", "1/1", "Terminating"]

    done = pod(
        "done",
        {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "c0",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            ],
        },
        deletionTimestamp=ago(1),
    )
    row = to_table(pods(), [done], now=NOW)["rows"][0]
    assert row["cells"][:3] == ["done", "0/1", "Completed"]
    assert row["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]

    oom = pod(
        "oom",
        {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "c0",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 137, "signal": 9}},
                }
            ],
        },
    )
    assert cells(pods(), oom)[2] == "Signal:9"

    evicted = pod("evicted", {"phase": "Failed", "reason": "Evicted"})
    assert cells(pods(), evicted)[2] == "Evicted"


def test_pod_init_containers_and_gates() -> None:
    initializing = pod(
        "init",
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "i0", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "i1", "ready": False, "restartCount": 0, "state": {"running": {}}},
            ],
        },
    )
    initializing["spec"]["initContainers"] = [{"name": "i0"}, {"name": "i1"}]
    assert cells(pods(), initializing)[:3] == ["init", "0/1", "Init:1/2"]

    crash_init = pod(
        "init-crash",
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "i0",
                    "ready": False,
                    "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ],
        },
    )
    crash_init["spec"]["initContainers"] = [{"name": "i0"}]
    assert cells(pods(), crash_init)[2:4] == ["Init:CrashLoopBackOff", "2"]

    sidecar = pod(
        "sidecar",
        {
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "gate/x", "status": "True"}],
            "initContainerStatuses": [
                {"name": "s", "ready": True, "started": True, "restartCount": 1, "state": {"running": {}}}
            ],
            "containerStatuses": [running("c0")],
        },
    )
    sidecar["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always"}]
    sidecar["spec"]["readinessGates"] = [{"conditionType": "gate/x"}, {"conditionType": "gate/y"}]
    result = cells(pods(), sidecar)
    assert result[1:4] == ["2/2", "Running", "1"]
    assert result[8] == "1/2"


def test_include_object_variants() -> None:
    obj = pod("web", {"phase": "Running"}, resourceVersion="12", labels={"app": "web"})
    metadata_row = to_table(pods(), [obj], now=NOW)["rows"][0]
    assert metadata_row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }
    assert to_table(pods(), [obj], include_object="Object", now=NOW)["rows"][0]["object"] == obj
    assert "object" not in to_table(pods(), [obj], include_object="None", now=NOW)["rows"][0]
    single = to_table(pods(), [obj], now=NOW)
    assert single["metadata"] == {"resourceVersion": "12"}
    listed = to_table(pods(), [obj, obj], resource_version="20", continue_token="abc", now=NOW)
    assert listed["metadata"] == {"resourceVersion": "20", "continue": "abc"}


def test_partial_object_metadata_list() -> None:
    obj = pod("web", {"phase": "Running"}, resourceVersion="12")
    listing = tables.to_partial_object_metadata_list(pods(), [obj], "30", "next")
    assert listing == {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "30", "continue": "next"},
        "items": [
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
        ],
    }


def resource(group: str, plural: str) -> ResourceType:
    found = next((r for r in builtin_resources() if r.group == group and r.plural == plural), None)
    assert found is not None
    return found


def column_names(group: str, plural: str) -> list[str]:
    return [c["name"] for c in to_table(resource(group, plural), [], now=NOW)["columnDefinitions"]]


def test_deployment_rows() -> None:
    deployment = {
        "metadata": {"name": "web", "creationTimestamp": ago(3 * 86400 + 5 * 3600)},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "template": {
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.27"},
                        {"name": "log", "image": "busybox"},
                    ]
                }
            },
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert column_names("apps", "deployments") == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert cells(resource("apps", "deployments"), deployment) == [
        "web",
        "2/3",
        3,
        2,
        "3d5h",
        "nginx,log",
        "nginx:1.27,busybox",
        "app=web,tier in (a,b)",
    ]
    fresh = {"metadata": {"name": "new", "creationTimestamp": ago(2)}, "spec": {"replicas": 1}}
    assert cells(resource("apps", "deployments"), fresh)[:5] == ["new", "0/1", 0, 0, "2s"]


def test_workload_rows() -> None:
    rs = {
        "metadata": {"name": "web-abc", "creationTimestamp": ago(60)},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    assert column_names("apps", "replicasets")[:5] == ["Name", "Desired", "Current", "Ready", "Age"]
    assert cells(resource("apps", "replicasets"), rs)[:5] == ["web-abc", 2, 2, 1, "60s"]
    sts = {
        "metadata": {"name": "db", "creationTimestamp": ago(60)},
        "spec": {"replicas": 3},
        "status": {"readyReplicas": 3},
    }
    assert column_names("apps", "statefulsets") == ["Name", "Ready", "Age", "Containers", "Images"]
    assert cells(resource("apps", "statefulsets"), sts)[:3] == ["db", "3/3", "60s"]
    ds = {
        "metadata": {"name": "agent", "creationTimestamp": ago(60)},
        "spec": {"template": {"spec": {"nodeSelector": {"os": "linux", "arch": "amd64"}}}},
        "status": {
            "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3,
            "numberReady": 2,
            "updatedNumberScheduled": 3,
            "numberAvailable": 2,
        },
    }
    assert column_names("apps", "daemonsets")[:8] == [
        "Name",
        "Desired",
        "Current",
        "Ready",
        "Up-to-date",
        "Available",
        "Node Selector",
        "Age",
    ]
    assert cells(resource("apps", "daemonsets"), ds)[:8] == [
        "agent",
        3,
        3,
        2,
        3,
        2,
        "arch=amd64,os=linux",
        "60s",
    ]


def test_job_and_cronjob_rows() -> None:
    job = {
        "metadata": {"name": "pi", "creationTimestamp": ago(600)},
        "spec": {"completions": 3, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
        "status": {
            "succeeded": 3,
            "startTime": ago(590),
            "completionTime": ago(500),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert column_names("batch", "jobs")[:5] == ["Name", "Status", "Completions", "Duration", "Age"]
    assert cells(resource("batch", "jobs"), job)[:5] == ["pi", "Complete", "3/3", "90s", "10m"]
    parallel = {"metadata": {"name": "p", "creationTimestamp": ago(10)}, "spec": {"parallelism": 2}}
    assert cells(resource("batch", "jobs"), parallel)[:4] == ["p", "Running", "0/1 of 2", ""]
    cronjob = {
        "metadata": {"name": "tick", "creationTimestamp": ago(7200)},
        "spec": {
            "schedule": "*/5 * * * *",
            "suspend": False,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}},
        },
        "status": {"active": [{"name": "tick-1"}], "lastScheduleTime": ago(65)},
    }
    assert column_names("batch", "cronjobs")[:7] == [
        "Name",
        "Schedule",
        "Timezone",
        "Suspend",
        "Active",
        "Last Schedule",
        "Age",
    ]
    assert cells(resource("batch", "cronjobs"), cronjob)[:7] == [
        "tick",
        "*/5 * * * *",
        "<none>",
        "False",
        1,
        "65s",
        "120m",
    ]


def test_core_rows() -> None:
    svc = {
        "metadata": {"name": "web", "creationTimestamp": ago(30)},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.10",
            "selector": {"app": "web"},
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        },
    }
    assert column_names("", "services") == [
        "Name",
        "Type",
        "Cluster-IP",
        "External-IP",
        "Port(s)",
        "Age",
        "Selector",
    ]
    assert cells(resource("", "services"), svc) == [
        "web",
        "NodePort",
        "10.96.0.10",
        "<none>",
        "80:30080/TCP,53/UDP",
        "30s",
        "app=web",
    ]
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": []}}
    assert cells(resource("", "services"), lb)[1:5] == ["LoadBalancer", "<none>", "<pending>", "<none>"]
    cm = {
        "metadata": {"name": "cfg", "creationTimestamp": ago(30)},
        "data": {"a": "1", "b": "2"},
        "binaryData": {"c": ""},
    }
    assert cells(resource("", "configmaps"), cm) == ["cfg", 3, "30s"]
    secret = {
        "metadata": {"name": "s", "creationTimestamp": ago(30)},
        "type": "Opaque",
        "data": {"a": "MQ=="},
    }
    assert column_names("", "secrets") == ["Name", "Type", "Data", "Age"]
    assert cells(resource("", "secrets"), secret) == ["s", "Opaque", 1, "30s"]
    ns = {"metadata": {"name": "dev", "creationTimestamp": ago(30)}, "status": {"phase": "Terminating"}}
    assert cells(resource("", "namespaces"), ns) == ["dev", "Terminating", "30s"]
    sa = {"metadata": {"name": "default", "creationTimestamp": ago(30)}}
    assert cells(resource("", "serviceaccounts"), sa) == ["default", 0, "30s"]
    ep = {
        "metadata": {"name": "web", "creationTimestamp": ago(30)},
        "subsets": [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(5)], "ports": [{"port": 80}]}],
    }
    assert cells(resource("", "endpoints"), ep) == [
        "web",
        "10.0.0.0:80,10.0.0.1:80,10.0.0.2:80 + 2 more...",
        "30s",
    ]
    assert cells(resource("", "endpoints"), {"metadata": {"name": "none"}})[1] == "<none>"
    lease = {
        "metadata": {"name": "leader", "creationTimestamp": ago(30)},
        "spec": {"holderIdentity": "pod-1"},
    }
    assert cells(resource("coordination.k8s.io", "leases"), lease) == ["leader", "pod-1", "30s"]


def test_event_rows() -> None:
    event = {
        "metadata": {"name": "web.17a", "creationTimestamp": ago(600)},
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled",
        "type": "Normal",
        "message": "Pulled image  \n",
        "source": {"component": "kubelet", "host": "node-1"},
        "count": 4,
        "firstTimestamp": ago(600),
        "lastTimestamp": ago(30),
    }
    assert column_names("", "events") == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    expected = [
        "30s",
        "Normal",
        "Pulled",
        "pod/web",
        "spec.containers{c}",
        "kubelet, node-1",
        "Pulled image",
        "10m",
        4,
        "web.17a",
    ]
    assert cells(resource("", "events"), event) == expected
    v1 = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "x"},
        "eventTime": ago(20),
        "regarding": {"kind": "Deployment", "name": "web"},
        "reason": "ScalingReplicaSet",
        "type": "Normal",
        "note": "Scaled up",
        "reportingController": "deployment-controller",
        "series": {"count": 7, "lastObservedTime": ago(3)},
    }
    assert cells(resource("events.k8s.io", "events"), v1) == [
        "3s",
        "Normal",
        "ScalingReplicaSet",
        "deployment/web",
        "",
        "deployment-controller",
        "Scaled up",
        "20s",
        7,
        "x",
    ]


def test_rbac_rows() -> None:
    binding = {
        "metadata": {"name": "rb", "creationTimestamp": ago(30)},
        "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "User", "name": "bob"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns1"},
        ],
    }
    assert column_names("rbac.authorization.k8s.io", "rolebindings") == [
        "Name",
        "Role",
        "Age",
        "Users",
        "Groups",
        "ServiceAccounts",
    ]
    assert cells(resource("rbac.authorization.k8s.io", "clusterrolebindings"), binding) == [
        "rb",
        "ClusterRole/view",
        "30s",
        "alice, bob",
        "devs",
        "ns1/sa",
    ]
    role = {"metadata": {"name": "reader", "creationTimestamp": "2024-04-30T10:00:00+02:00"}}
    table = to_table(resource("rbac.authorization.k8s.io", "roles"), [role], now=NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    assert table["rows"][0]["cells"] == ["reader", "2024-04-30T08:00:00Z"]


def test_custom_resources_without_printer_columns_get_name_and_age() -> None:
    crd = ResourceType(
        "stable.example.com",
        "v1",
        "crontabs",
        "crontab",
        "CronTab",
        True,
        definition="crontabs.stable.example.com",
    )
    table = to_table(crd, [{"metadata": {"name": "c", "creationTimestamp": ago(3600 * 5)}}], now=NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Age", "date"),
    ]
    assert table["rows"][0]["cells"] == ["c", "5h"]
    assert to_table(crd, [{"metadata": {"name": "d"}}], now=NOW)["rows"][0]["cells"] == [
        "d",
        "<unknown>",
    ]
