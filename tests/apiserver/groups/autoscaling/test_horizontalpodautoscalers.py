"""HorizontalPodAutoscalers in both served versions: autoscaling/v2 is stored, autoscaling/v1
is a view of it converted as upstream's ``pkg/apis/autoscaling/v1/conversion.go`` does (what v1
cannot say travels in annotations, so a v1 client's read-modify-write loses nothing), the
defaults and validation of ``pkg/apis/autoscaling``, and the table kubectl prints."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.groups.autoscaling import hpaconversion
from kubeloop.apiserver.groups.autoscaling.hpaconversion import v1_to_v2, v2_to_v1
from kubeloop.apiserver.openapi.discoverydocs import storage_version_hash
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread

V1 = "/apis/autoscaling/v1/namespaces/{ns}/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"

# ---------------------------------------------------------------------- the conversion

quantities = st.sampled_from(["1", "250m", "100Mi", "3", "1500m", "2Gi"])
names = st.sampled_from(["requests-per-second", "queue-depth", "latency"])
selectors = st.none() | st.just({"matchLabels": {"app": "web"}})


def _metric_identifier(draw: st.DrawFn) -> dict[str, Any]:
    identifier: dict[str, Any] = {"name": draw(names)}
    selector = draw(selectors)
    if selector is not None:
        identifier["selector"] = selector
    return identifier


@st.composite
def metric_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A v2 metric the v1 annotation can carry without loss, with a current status of its kind.

    Shapes v1 cannot tell apart are left out, as upstream loses them too: an Object target with
    an averageValue gains a value of "0", a Resource status without an averageValue gains "0".
    """
    kind = draw(st.sampled_from(["Object", "Pods", "Resource", "ContainerResource", "External"]))
    if kind == "Object":
        source = {
            "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
            "metric": _metric_identifier(draw),
            "target": {"type": "Value", "value": draw(quantities)},
        }
        current = {
            "describedObject": source["describedObject"],
            "metric": source["metric"],
            "current": {"value": draw(quantities)},
        }
        return {"type": kind, "object": source}, {"type": kind, "object": current}
    if kind == "Pods":
        identifier = _metric_identifier(draw)
        source = {"metric": identifier, "target": {"type": "AverageValue", "averageValue": draw(quantities)}}
        current = {"metric": identifier, "current": {"averageValue": draw(quantities)}}
        return {"type": kind, "pods": source}, {"type": kind, "pods": current}
    if kind == "External":
        identifier = _metric_identifier(draw)
        if draw(st.booleans()):
            target = {"type": "Value", "value": draw(quantities)}
        else:
            target = {"type": "AverageValue", "averageValue": draw(quantities)}
        current = {"metric": identifier, "current": {"value": draw(quantities)}}
        return {"type": kind, "external": {"metric": identifier, "target": target}}, {
            "type": kind,
            "external": current,
        }
    key = "resource" if kind == "Resource" else "containerResource"
    resource = draw(
        st.sampled_from(["memory", "ephemeral-storage"] if kind == "Resource" else ["cpu", "memory"])
    )
    if draw(st.booleans()):
        target = {"type": "Utilization", "averageUtilization": draw(st.integers(1, 100))}
    else:
        target = {"type": "AverageValue", "averageValue": draw(quantities)}
    spec: dict[str, Any] = {"name": resource}
    status: dict[str, Any] = {"name": resource}
    if key == "containerResource":
        spec["container"] = status["container"] = "app"
    spec["target"] = target
    status["current"] = {"averageValue": draw(quantities), "averageUtilization": draw(st.integers(0, 200))}
    return {"type": kind, key: spec}, {"type": kind, key: status}


scaling_rules = st.fixed_dictionaries(
    {},
    optional={
        "stabilizationWindowSeconds": st.integers(0, 3600),
        "selectPolicy": st.sampled_from(["Max", "Min", "Disabled"]),
        "policies": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["Pods", "Percent"]),
                    "value": st.integers(1, 100),
                    "periodSeconds": st.integers(1, 1800),
                }
            ),
            min_size=1,
            max_size=2,
        ),
        "tolerance": st.sampled_from(["50m", "100m"]),
    },
)


@st.composite
def v2_autoscalers(draw: st.DrawFn) -> dict[str, Any]:
    pairs = draw(st.lists(metric_pairs(), max_size=3))
    metrics = [spec for spec, _ in pairs]
    current = [status for _, status in pairs]
    cpu = draw(st.none() | st.integers(1, 100))
    if cpu is not None:
        # The CPU utilization target goes last: it is v1's own field, and upstream puts it after
        # the annotation's metrics when it converts back.
        metrics.append(
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}},
            }
        )
        current.append(
            {
                "type": "Resource",
                "resource": {"name": "cpu", "current": {"averageValue": "120m", "averageUtilization": cpu}},
            }
        )
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": draw(st.integers(1, 3)),
        "maxReplicas": draw(st.integers(3, 10)),
        "metrics": metrics
        or [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ],
    }
    behavior = draw(
        st.none() | st.fixed_dictionaries({}, optional={"scaleUp": scaling_rules, "scaleDown": scaling_rules})
    )
    if behavior:
        spec["behavior"] = behavior
    status: dict[str, Any] = {"desiredReplicas": draw(st.integers(0, 5))}
    if draw(st.booleans()):
        status["currentReplicas"] = draw(st.integers(1, 5))
        status["observedGeneration"] = 2
        status["lastScaleTime"] = "2026-01-02T03:04:05Z"
    if current and draw(st.booleans()):
        status["currentMetrics"] = current
    if draw(st.booleans()):
        status["conditions"] = [
            {
                "type": "AbleToScale",
                "status": "True",
                "reason": "ReadyForNewScale",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
            }
        ]
    annotations = draw(st.none() | st.just({"team": "web"}))
    metadata: dict[str, Any] = {"name": "web", "namespace": "prod", "resourceVersion": "9"}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


@settings(max_examples=300, deadline=None)
@given(v2_autoscalers())
def test_a_v2_autoscaler_survives_the_v1_view(autoscaler: dict[str, Any]) -> None:
    # What a v1 client reads and writes back unchanged is the object v2 stored.
    original = copy.deepcopy(autoscaler)
    served = v2_to_v1(autoscaler)
    assert autoscaler == original, "the conversion does not touch its input"
    assert served["apiVersion"] == "autoscaling/v1"
    assert set(served["spec"]) <= {
        "scaleTargetRef",
        "minReplicas",
        "maxReplicas",
        "targetCPUUtilizationPercentage",
    }
    assert v1_to_v2(json.loads(json.dumps(served))) == original


@settings(max_examples=200, deadline=None)
@given(v2_autoscalers())
def test_the_v1_view_shows_the_cpu_target_and_hides_nothing_else(autoscaler: dict[str, Any]) -> None:
    served = v2_to_v1(autoscaler)
    metrics = autoscaler["spec"]["metrics"]
    cpu = [m for m in metrics if m.get("resource", {}).get("name") == "cpu"]
    annotations = served["metadata"].get("annotations", {})
    if cpu:
        assert (
            served["spec"]["targetCPUUtilizationPercentage"]
            == cpu[0]["resource"]["target"]["averageUtilization"]
        )
        assert len(json.loads(annotations.get(hpaconversion.METRICS_ANNOTATION, "[]"))) == len(metrics) - 1
    else:
        assert "targetCPUUtilizationPercentage" not in served["spec"]
        assert len(json.loads(annotations[hpaconversion.METRICS_ANNOTATION])) == len(metrics)
    assert (hpaconversion.BEHAVIOR_ANNOTATION in annotations) == ("behavior" in autoscaler["spec"])
    assert (hpaconversion.CONDITIONS_ANNOTATION in annotations) == ("conditions" in autoscaler["status"])
    assert served["status"]["desiredReplicas"] == autoscaler["status"]["desiredReplicas"]
    assert served["status"]["currentReplicas"] == autoscaler["status"].get("currentReplicas", 0)


def test_a_v1_autoscaler_without_a_target_gets_the_implicit_80_percent() -> None:
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 4},
    }
    assert v1_to_v2(v1)["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]


def test_the_behavior_annotation_is_read_as_go_reads_it() -> None:
    # Go's field names, matched case-insensitively; missing policy fields are Go's zero values.
    behavior = {"scaleDown": {"stabilizationwindowseconds": 60, "Policies": [{"Type": "Pods", "Value": 2}]}}
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": {hpaconversion.BEHAVIOR_ANNOTATION: json.dumps(behavior)}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 4},
    }
    converted = v1_to_v2(v1)
    assert converted["spec"]["behavior"] == {
        "scaleDown": {
            "stabilizationWindowSeconds": 60,
            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 0}],
        }
    }
    assert "annotations" not in converted["metadata"]


@pytest.mark.parametrize("annotation", [hpaconversion.METRICS_ANNOTATION, hpaconversion.BEHAVIOR_ANNOTATION])
def test_an_annotation_that_does_not_decode_is_dropped(annotation: str) -> None:
    v1 = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": {annotation: "{not json", "team": "web"}},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 4,
            "targetCPUUtilizationPercentage": 50,
        },
    }
    converted = v1_to_v2(v1)
    assert converted["metadata"]["annotations"] == {"team": "web"}
    assert [m["resource"]["target"]["averageUtilization"] for m in converted["spec"]["metrics"]] == [50]
    assert "behavior" not in converted["spec"]


# ---------------------------------------------------------------------- the server

WEB_V2: dict[str, Any] = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "maxReplicas": 5,
        "metrics": [
            {
                "type": "Resource",
                "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}},
            },
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
            },
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
    },
}


def test_a_v2_autoscaler_read_and_written_back_through_v1_keeps_everything(
    api: Client, namespace: str
) -> None:
    created = api.post(V2.format(ns=namespace), WEB_V2)
    assert created.status_code == 201, created.text
    stored = created.json()
    # Defaults: one replica at least, and the behavior's missing rules as the controller applies them.
    assert stored["spec"]["minReplicas"] == 1
    assert stored["spec"]["behavior"] == {
        "scaleDown": {
            "stabilizationWindowSeconds": 60,
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        },
    }
    status = api.put(
        f"{V2.format(ns=namespace)}/web/status",
        {
            **stored,
            "status": {
                "currentReplicas": 2,
                "desiredReplicas": 3,
                "currentMetrics": [
                    {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "80Mi"}}},
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "current": {"averageValue": "300m", "averageUtilization": 75},
                        },
                    },
                ],
                "conditions": [{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}],
            },
        },
    )
    assert status.status_code == 200, status.text
    before = status.json()

    v1 = api.get(f"{V1.format(ns=namespace)}/web").json()
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {
        "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
        "minReplicas": 1,
        "maxReplicas": 5,
        "targetCPUUtilizationPercentage": 60,
    }
    assert v1["status"] == {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 75}
    annotations = v1["metadata"]["annotations"]
    assert json.loads(annotations[hpaconversion.METRICS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}}
    ]
    assert (
        json.loads(annotations[hpaconversion.BEHAVIOR_ANNOTATION])["ScaleDown"]["StabilizationWindowSeconds"]
        == 60
    )
    assert json.loads(annotations[hpaconversion.CONDITIONS_ANNOTATION])[0]["type"] == "ScalingActive"

    # A v1 client raises maxReplicas and writes the whole object back.
    v1["spec"]["maxReplicas"] = 7
    updated = api.put(f"{V1.format(ns=namespace)}/web", v1)
    assert updated.status_code == 200, updated.text
    assert updated.json()["spec"]["maxReplicas"] == 7
    after = api.get(f"{V2.format(ns=namespace)}/web").json()
    assert after["spec"] == {**before["spec"], "maxReplicas": 7}
    assert after["status"] == before["status"]
    assert "annotations" not in after["metadata"], "the round-trip annotations are never stored"
    # The v1 write is recorded as a v1 manager's, with the field it changed.
    mine = [e for e in after["metadata"]["managedFields"] if e["apiVersion"] == "autoscaling/v1"]
    assert [e["fieldsV1"] for e in mine] == [{"f:spec": {"f:maxReplicas": {}}}]


def test_a_v1_autoscaler_is_stored_as_v2_and_its_status_written_through_v1(
    api: Client, namespace: str
) -> None:
    body = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "maxReplicas": 3,
        },
    }
    created = api.post(V1.format(ns=namespace), body)
    assert created.status_code == 201, created.text
    assert created.json()["spec"] == {
        "scaleTargetRef": {"kind": "Deployment", "name": "api", "apiVersion": "apps/v1"},
        "minReplicas": 1,
        "maxReplicas": 3,
        "targetCPUUtilizationPercentage": 80,
    }
    assert created.json()["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    v2 = api.get(f"{V2.format(ns=namespace)}/api").json()
    assert v2["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]
    assert v2["status"] == {"desiredReplicas": 0}

    served = created.json()
    served["status"] = {"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 41}
    written = api.put(f"{V1.format(ns=namespace)}/api/status", served)
    assert written.status_code == 200, written.text
    v2 = api.get(f"{V2.format(ns=namespace)}/api").json()
    assert v2["status"]["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 41}}}
    ]
    listed = api.get(V1.format(ns=namespace)).json()
    assert listed["apiVersion"] == "autoscaling/v1" and listed["kind"] == "HorizontalPodAutoscalerList"
    assert [item["status"].get("currentCPUUtilizationPercentage") for item in listed["items"]] == [41]


def test_a_v1_watch_sends_v1_objects(api: Client, namespace: str) -> None:
    created = api.post(V2.format(ns=namespace), WEB_V2)
    assert created.status_code == 201
    rv = created.json()["metadata"]["resourceVersion"]
    patched = api.patch(
        f"{V2.format(ns=namespace)}/web", {"spec": {"maxReplicas": 9}}, "application/merge-patch+json"
    )
    assert patched.status_code == 200
    with api.get(
        V1.format(ns=namespace),
        params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "2"},
        stream=True,
    ) as response:
        event = json.loads(next(response.iter_lines()))
    assert event["type"] == "MODIFIED"
    assert event["object"]["apiVersion"] == "autoscaling/v1"
    assert event["object"]["spec"]["maxReplicas"] == 9
    assert event["object"]["spec"]["targetCPUUtilizationPercentage"] == 60


def test_discovery_prefers_v2_and_both_versions_name_the_v2_storage(api: Client) -> None:
    group = api.get("/apis/autoscaling").json()
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    hashes = {}
    for version in ("v1", "v2"):
        resources = api.get(f"/apis/autoscaling/{version}").json()["resources"]
        entry = next(r for r in resources if r["name"] == "horizontalpodautoscalers")
        assert entry["shortNames"] == ["hpa"] and entry["categories"] == ["all"]
        hashes[version] = entry["storageVersionHash"]
    assert (
        hashes["v1"] == hashes["v2"] == storage_version_hash("autoscaling", "v2", "HorizontalPodAutoscaler")
    )


INVALID_CASES = [
    pytest.param(
        V2,
        {"minReplicas": 0, "maxReplicas": 0},
        {
            "spec.minReplicas": "Invalid value: 0: must be greater than or equal to 1",
            "spec.maxReplicas": "Invalid value: 0: must be greater than 0",
        },
        id="replicas",
    ),
    pytest.param(
        V2,
        {"minReplicas": 4, "maxReplicas": 2},
        {"spec.maxReplicas": "Invalid value: 2: must be greater than or equal to `minReplicas`"},
        id="max-below-min",
    ),
    pytest.param(
        V2,
        {"scaleTargetRef": {"kind": "", "name": "a/b"}},
        {
            "spec.scaleTargetRef.kind": "Required value",
            "spec.scaleTargetRef.name": "Invalid value: \"a/b\": may not contain '/'",
        },
        id="target-reference",
    ),
    pytest.param(
        V2,
        {
            "metrics": [
                {
                    "type": "Pods",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ]
        },
        {
            "spec.metrics[0].pods": "Required value: must populate information for the given metric source",
        },
        id="metric-source",
    ),
    pytest.param(
        V2,
        {
            "metrics": [
                {
                    "type": "External",
                    "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "-1"}},
                }
            ]
        },
        {"spec.metrics[0].external.target.value": 'Invalid value: "-1": must be positive'},
        id="negative-target",
    ),
    pytest.param(
        V2,
        {
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 4000, "policies": []},
                "scaleDown": {"policies": [{"type": "Nodes", "value": 0, "periodSeconds": 2000}]},
            }
        },
        {
            "spec.behavior.scaleUp.stabilizationWindowSeconds": "Invalid value: 4000: must be less than or equal to 3600",
            "spec.behavior.scaleUp.policies": "Required value: must specify at least one Policy",
            "spec.behavior.scaleDown.policies[0].type": 'Unsupported value: "Nodes": supported values: "Percent", "Pods"',
            "spec.behavior.scaleDown.policies[0].value": "Invalid value: 0: must be greater than zero",
            "spec.behavior.scaleDown.policies[0].periodSeconds": "Invalid value: 2000: must be less than or equal to 1800",
        },
        id="behavior",
    ),
    pytest.param(
        V1,
        {"minReplicas": 0, "targetCPUUtilizationPercentage": 0},
        {
            "spec.minReplicas": "Invalid value: 0: must be greater than or equal to 1",
            # Upstream validates the internal (v2) form, so a v1 client sees v2's path.
            "spec.metrics[0].resource.target.averageUtilization": "Invalid value: 0: must be greater than 0",
        },
        id="v1",
    ),
]


@pytest.mark.parametrize(("path", "spec", "expected"), INVALID_CASES)
def test_invalid_autoscalers_are_422s_naming_each_field(
    api: Client, namespace: str, path: str, spec: dict[str, Any], expected: dict[str, str]
) -> None:
    version = path.split("/")[3]
    body = {
        "apiVersion": f"autoscaling/{version}",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "bad"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3, **spec},
    }
    response = api.post(path.format(ns=namespace), body)
    assert response.status_code == 422, response.text
    status = response.json()
    assert status["reason"] == "Invalid"
    causes = {cause["field"]: cause["message"] for cause in status["details"]["causes"]}
    assert causes == expected
    assert api.get(f"{path.format(ns=namespace)}/bad").status_code == 404


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


@pytest.mark.kubectl
def test_kubectl_autoscales_and_reads_both_versions(kubectl: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    kubectl("create", "deployment", "web", "--image=nginx:1.27", *ns)
    kubectl("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=60", *ns)
    table = kubectl("get", "hpa", *ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert table[1].split()[:7] == ["web", "Deployment/web", "cpu:", "<unknown>/60%", "2", "5", "0"]
    v1 = json.loads(
        kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "web", *ns, "-o", "json").stdout
    )
    assert (v1["apiVersion"], v1["spec"]["targetCPUUtilizationPercentage"]) == ("autoscaling/v1", 60)
    v2 = json.loads(
        kubectl("get", "horizontalpodautoscalers.v2.autoscaling", "web", *ns, "-o", "json").stdout
    )
    assert v2["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 60}
    # An edit through v1 keeps what only v2 says.
    kubectl(
        "patch",
        "horizontalpodautoscalers.v2.autoscaling",
        "web",
        *ns,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}}),
    )
    kubectl(
        "patch",
        "horizontalpodautoscalers.v1.autoscaling",
        "web",
        *ns,
        "--type=merge",
        "-p",
        '{"spec": {"maxReplicas": 8}}',
    )
    v2 = json.loads(
        kubectl("get", "horizontalpodautoscalers.v2.autoscaling", "web", *ns, "-o", "json").stdout
    )
    assert v2["spec"]["maxReplicas"] == 8
    assert v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 30
    described = kubectl("describe", "hpa", "web", *ns).stdout
    assert "Reference:" in described and "Deployment/web" in described
    assert "Min replicas:" in described and "Max replicas:" in described


V1_BODY: dict[str, Any] = {
    "apiVersion": "autoscaling/v1",
    "kind": "HorizontalPodAutoscaler",
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
}


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (hpaconversion.METRICS_ANNOTATION, "[" * 100_000 + "]" * 100_000),
        (hpaconversion.BEHAVIOR_ANNOTATION, '{"ScaleUp":' * 50_000 + "{}" + "}" * 50_000),
        (hpaconversion.METRICS_ANNOTATION, "x" * 200_000),
    ],
    ids=["deep-array", "deep-object", "huge-garbage"],
)
def test_annotations_too_deep_or_not_json_are_ignored_not_a_500(
    api: Client, namespace: str, annotation: str, value: str
) -> None:
    body = {**V1_BODY, "metadata": {"name": "odd", "annotations": {annotation: value}}}
    created = api.post(V1.format(ns=namespace), body)
    assert created.status_code == 201, created.text[:300]
    stored = api.get(f"{V2.format(ns=namespace)}/odd").json()
    assert [m["resource"]["name"] for m in stored["spec"]["metrics"]] == ["cpu"]
    assert "behavior" not in stored["spec"] and "annotations" not in stored["metadata"]


@pytest.mark.parametrize(
    ("subresource", "annotation", "value", "field"),
    [
        (
            "",
            hpaconversion.BEHAVIOR_ANNOTATION,
            '{"ScaleUp":{"StabilizationWindowSeconds":"soon"}}',
            "HPAScalingRules.spec.behavior.scaleUp.stabilizationWindowSeconds",
        ),
        (
            "",
            hpaconversion.METRICS_ANNOTATION,
            '[{"type":"Resource","resource":{"name":7,"targetAverageUtilization":50}}]',
            "ResourceMetricSource.spec.metrics.resource.name",
        ),
        ("/status", hpaconversion.CONDITIONS_ANNOTATION, '[{"type":5}]', "HorizontalPodAutoscalerCondition"),
        (
            "/status",
            hpaconversion.CURRENT_METRICS_ANNOTATION,
            '[{"type":"Pods","pods":{"metricName":"q","currentAverageValue":"lots"}}]',
            "quantities must match",
        ),
    ],
    ids=["behavior-type", "metric-type", "condition-type", "quantity"],
)
def test_annotations_of_the_wrong_types_are_400s_and_write_nothing(
    api: Client, namespace: str, subresource: str, annotation: str, value: str, field: str
) -> None:
    # Upstream unmarshals the annotations into typed structs; so does the server.
    made = api.post(V1.format(ns=namespace), {**V1_BODY, "metadata": {"name": "typed"}}).json()
    before = api.get(f"{V2.format(ns=namespace)}/typed").json()
    body = json.loads(json.dumps(made))
    body["metadata"]["annotations"] = {annotation: value}
    answer = api.put(f"{V1.format(ns=namespace)}/typed{subresource}", body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["reason"] == "BadRequest" and field in answer.json()["message"]
    assert api.get(f"{V2.format(ns=namespace)}/typed").json() == before
