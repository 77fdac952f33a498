"""The Table cells of the kinds beyond core, apps and batch, as kube-apiserver's printers
(``pkg/printers/internalversion``) compute them: what ``kubectl get`` shows for each."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups import builtin_resources
from tests.apiserver.printing.printed import columns_for, to_table

NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)
AN_HOUR_AGO = "2024-05-01T11:00:00Z"


def resource(group: str, plural: str, version: str = "") -> ResourceType:
    return next(
        r
        for r in builtin_resources()
        if r.group == group and r.plural == plural and (not version or r.version == version)
    )


def cells(group: str, plural: str, obj: dict[str, Any], version: str = "") -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("name", "x")
    obj["metadata"].setdefault("creationTimestamp", AN_HOUR_AGO)
    table = to_table(resource(group, plural, version), [obj], now=NOW)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


def _metric(name: str, target: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": name, "target": target}}


def test_autoscaler_targets_name_each_resource_and_show_two() -> None:
    autoscaler = {
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 5,
            "metrics": [
                _metric("cpu", {"type": "Utilization", "averageUtilization": 80}),
                _metric("memory", {"type": "AverageValue", "averageValue": "500Mi"}),
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "1k"},
                    },
                },
            ],
        },
        "status": {
            "currentReplicas": 3,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 10}}}
            ],
        },
    }
    row = cells("autoscaling", "horizontalpodautoscalers", autoscaler, "v2")
    assert row == {
        "Name": "x",
        "Reference": "Deployment/web",
        "Targets": "cpu: 10%/80%, memory: <unknown>/500Mi + 1 more...",
        "MinPods": "2",
        "MaxPods": 5,
        "Replicas": 3,
        "Age": "60m",
    }
    external = {
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "q"},
                        "target": {"type": "AverageValue", "averageValue": "30"},
                    },
                },
                {
                    "type": "Object",
                    "object": {"metric": {"name": "rps"}, "target": {"type": "Value", "value": "10"}},
                },
            ],
        },
        "status": {
            "currentMetrics": [
                {"type": "External", "external": {"current": {"averageValue": "12"}}},
                {"type": "Object", "object": {"current": {"value": "7"}}},
            ]
        },
    }
    row = cells("autoscaling", "horizontalpodautoscalers", external, "v2")
    assert (row["Targets"], row["MinPods"]) == ("12/30 (avg), 7/10", "<unset>")


def test_a_v1_autoscaler_prints_as_its_v2_form() -> None:
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "targetCPUUtilizationPercentage": 70,
        },
        "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 35},
    }
    row = cells("autoscaling", "horizontalpodautoscalers", v1, "v1")
    assert (row["Targets"], row["MinPods"], row["MaxPods"]) == ("cpu: 35%/70%", "1", 4)


def test_ingresses_and_their_classes() -> None:
    ingress = {
        "spec": {
            "ingressClassName": "nginx",
            "rules": [{"host": "a.example.com"}, {}, {"host": "b.example.com"}, {"host": "c.example.com"}],
            "tls": [{"hosts": ["a.example.com"]}],
        },
        "status": {
            "loadBalancer": {
                "ingress": [{"ip": "10.0.0.2"}, {"hostname": "lb.example.com"}, {"ip": "10.0.0.2"}]
            }
        },
    }
    assert cells("networking.k8s.io", "ingresses", ingress) == {
        "Name": "x",
        "Class": "nginx",
        "Hosts": "a.example.com,b.example.com + 1 more...",
        "Address": "10.0.0.2,lb.example.com",
        "Ports": "80, 443",
        "Age": "60m",
    }
    bare = cells("networking.k8s.io", "ingresses", {"spec": {"defaultBackend": {}}})
    assert (bare["Class"], bare["Hosts"], bare["Address"], bare["Ports"]) == ("<none>", "*", "", "80")
    default = {
        "metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {
            "controller": "k8s.io/ingress-nginx",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "Params", "name": "p"},
        },
    }
    assert cells("networking.k8s.io", "ingressclasses", default) == {
        "Name": "nginx (default)",
        "Controller": "k8s.io/ingress-nginx",
        "Parameters": "Params.k8s.example.com/p",
        "Age": "60m",
    }


def test_endpoint_slices_show_three_ports_and_addresses() -> None:
    endpoint_slice = {
        "addressType": "IPv4",
        "ports": [{"port": 80}, {"name": "metrics"}, {}, {"port": 9090}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}],
    }
    row = cells("discovery.k8s.io", "endpointslices", endpoint_slice)
    assert (row["AddressType"], row["Ports"], row["Endpoints"]) == (
        "IPv4",
        "80,metrics,* + 1 more...",
        "10.0.0.1,10.0.0.2,10.0.0.3",
    )
    empty = cells("discovery.k8s.io", "endpointslices", {"addressType": "IPv4"})
    assert (empty["Ports"], empty["Endpoints"]) == ("<unset>", "<unset>")


@pytest.mark.parametrize(
    ("conditions", "certificate", "expected"),
    [
        ([], None, "Pending"),
        ([{"type": "Approved", "status": "True"}], "Y2VydA==", "Approved,Issued"),
        ([{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}], None, "Denied,Failed"),
    ],
)
def test_certificate_signing_request_conditions(
    conditions: list[Any], certificate: str | None, expected: str
) -> None:
    status: dict[str, Any] = {"conditions": conditions}
    if certificate:
        status["certificate"] = certificate
    csr = {
        "spec": {
            "signerName": "kubernetes.io/kube-apiserver-client",
            "username": "alice",
            "expirationSeconds": 86400,
        },
        "status": status,
    }
    row = cells("certificates.k8s.io", "certificatesigningrequests", csr)
    assert list(row) == ["Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"]
    assert (row["Requestor"], row["RequestedDuration"], row["Condition"]) == ("alice", "24h", expected)


def test_controller_revisions_name_their_controller() -> None:
    revision = {
        "metadata": {
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True, "uid": "u"}
            ]
        },
        "revision": 3,
    }
    row = cells("apps", "controllerrevisions", revision)
    assert (row["Controller"], row["Revision"]) == ("statefulset.apps/db", 3)
    assert cells("apps", "controllerrevisions", {"revision": 1})["Controller"] == "<none>"


def test_resource_quotas_split_requests_and_limits() -> None:
    quota = {
        "status": {
            "hard": {"pods": "10", "limits.cpu": "4", "requests.cpu": "2"},
            "used": {"pods": "3", "limits.cpu": "1"},
        }
    }
    row = cells("", "resourcequotas", quota)
    assert (row["Request"], row["Limit"]) == ("pods: 3/10, requests.cpu: 0/2", "limits.cpu: 1/4")


def test_kinds_without_a_printer_get_the_default_convertor() -> None:
    for group, plural in (("", "limitranges"), ("apiextensions.k8s.io", "customresourcedefinitions")):
        assert cells(group, plural, {}) == {"Name": "x", "Created At": AN_HOUR_AGO}


def test_flow_control_and_api_services() -> None:
    schema = {
        "spec": {
            "priorityLevelConfiguration": {"name": "workload-low"},
            "matchingPrecedence": 9000,
            "distinguisherMethod": {"type": "ByUser"},
        },
        "status": {"conditions": [{"type": "Dangling", "status": "False"}]},
    }
    assert cells("flowcontrol.apiserver.k8s.io", "flowschemas", schema) == {
        "Name": "x",
        "PriorityLevel": "workload-low",
        "MatchingPrecedence": 9000,
        "DistinguisherMethod": "ByUser",
        "Age": "60m",
        "MissingPL": "False",
    }
    limited = {
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 30,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50},
                },
            },
        }
    }
    row = cells("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", limited)
    assert [
        row[k] for k in ("Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit")
    ] == [
        "Limited",
        30,
        64,
        6,
        50,
    ]
    exempt = cells(
        "flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", {"spec": {"type": "Exempt"}}
    )
    assert exempt["Queues"] == "<none>" and exempt["NominalConcurrencyShares"] == "<none>"
    service = {
        "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
        "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]},
    }
    row = cells("apiregistration.k8s.io", "apiservices", service)
    assert (row["Service"], row["Available"]) == ("kube-system/metrics-server", "False (MissingEndpoints)")
    local = cells("apiregistration.k8s.io", "apiservices", {"spec": {}})
    assert (local["Service"], local["Available"]) == ("Local", "Unknown")


def test_admission_policies_and_bindings() -> None:
    policy = {
        "spec": {
            "validations": [{"expression": "true"}] * 2,
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        }
    }
    row = cells("admissionregistration.k8s.io", "validatingadmissionpolicies", policy)
    assert (row["Validations"], row["ParamKind"]) == (2, "v1/ConfigMap")
    for param_ref, expected in (
        (None, "<unset>"),
        ({"name": "limits", "namespace": "prod"}, "prod/limits"),
        ({"name": "limits"}, "*/limits"),
        (
            {"selector": {"matchLabels": {"b": "2", "a": "1"}}},
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{},}",
        ),
    ):
        spec: dict[str, Any] = {"policyName": "p"}
        if param_ref is not None:
            spec["paramRef"] = param_ref
        assert (
            cells("admissionregistration.k8s.io", "validatingadmissionpolicybindings", {"spec": spec})[
                "ParamRef"
            ]
            == expected
        )
    hooks = {"webhooks": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    assert cells("admissionregistration.k8s.io", "mutatingwebhookconfigurations", hooks)["Webhooks"] == 3


def test_storage_and_networking_kinds() -> None:
    driver = cells(
        "storage.k8s.io",
        "csidrivers",
        {
            "spec": {
                "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
                "volumeLifecycleModes": ["Persistent"],
            }
        },
    )
    assert [driver[k] for k in ("AttachRequired", "PodInfoOnMount", "TokenRequests", "Modes")] == [
        True,
        False,
        "a,b",
        "Persistent",
    ]
    assert cells("storage.k8s.io", "csidrivers", {"spec": {}})["TokenRequests"] == "<unset>"
    address = {
        "spec": {
            "parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}
        }
    }
    assert cells("networking.k8s.io", "ipaddresses", address) == {
        "Name": "x",
        "ParentRef": "services/default/kubernetes",
    }
    cidr = cells("networking.k8s.io", "servicecidrs", {"spec": {"cidrs": ["10.96.0.0/12", "fd00::/108"]}})
    assert cidr["CIDRs"] == "10.96.0.0/12,fd00::/108"
    migration = {
        "spec": {"resource": {"group": "apps", "resource": "deployments"}},
        "status": {
            "conditions": [{"type": "Running", "status": "True"}, {"type": "Succeeded", "status": "True"}]
        },
    }
    assert cells("storagemigration.k8s.io", "storageversionmigrations", migration) == {
        "Name": "x",
        "Resource": "deployments.apps",
        "Status": "Succeeded",
    }


@pytest.mark.parametrize(
    ("status", "deleted", "expected"),
    [
        ({}, False, "pending"),
        ({}, True, "deleted"),
        ({"allocation": {}}, False, "allocated"),
        (
            {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]},
            True,
            "deleted,allocated,reserved",
        ),
    ],
)
def test_resource_claim_states(status: dict[str, Any], deleted: bool, expected: str) -> None:
    claim: dict[str, Any] = {"metadata": {}, "status": status}
    if deleted:
        claim["metadata"]["deletionTimestamp"] = AN_HOUR_AGO
    assert cells("resource.k8s.io", "resourceclaims", claim)["State"] == expected


def test_every_builtin_column_is_described_as_upstream_describes_its_field() -> None:
    """Column descriptions come from the API types' docs, as upstream's printers take them."""
    from kubeloop.apiserver.catalog import schemas

    undescribed = {
        (r.plural, c.name)
        for r in builtin_resources()
        for c in columns_for(r)
        if not c.definition()["description"]
    }
    assert undescribed == {("runtimeclasses", "Handler")}  # upstream's printer has none either

    def field_doc(definition: str, field: str) -> str:
        return str(schemas.definitions()[definition]["properties"][field]["description"])

    def described(group: str, plural: str, column: str) -> str:
        return next(c.description for c in columns_for(resource(group, plural)) if c.name == column)

    assert described("apps", "replicasets", "Current") == field_doc(
        "io.k8s.api.apps.v1.ReplicaSetStatus", "replicas"
    )
    assert described("batch", "cronjobs", "Timezone") == field_doc(
        "io.k8s.api.batch.v1.CronJobSpec", "timeZone"
    )
    assert described("", "events", "Reason") == field_doc("io.k8s.api.core.v1.Event", "reason")
