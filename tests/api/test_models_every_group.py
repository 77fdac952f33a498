"""Every built-in API group typed: a model and a ``kubeloop.kinds`` constant for each kind of each
GA group-version the server's discovery lists, models that build objects the server accepts and
read back what it holds, field for field."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from kubeloop import kinds, models
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import scheme
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.models import (
    apiextensions_v1,
    authorization_v1,
    autoscaling_v1,
    autoscaling_v2,
    core_v1,
    discovery_v1,
    events_v1,
    meta_v1,
    networking_v1,
    policy_v1,
    rbac_v1,
    scheduling_v1,
    storage_v1,
)
from tests.conftest import ServerThread


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


async def served_kinds(client: APIClient) -> dict[GroupVersionKind, tuple[str, bool, set[str]]]:
    """GVK → (plural, namespaced, verbs) of every built-in top-level resource in a GA
    group-version, read from the server's discovery as kubectl reads it (the groups of the CRDs
    other tests leave on the shared server are not built in)."""

    async def resources(path: str, group: str, version: str) -> None:
        _, body = await client.request("GET", path)
        for resource in orjson.loads(body)["resources"]:
            if "/" not in resource["name"]:
                gvk = GroupVersionKind(group, version, resource["kind"])
                found[gvk] = (resource["name"], resource["namespaced"], set(resource["verbs"]))

    found: dict[GroupVersionKind, tuple[str, bool, set[str]]] = {}
    await resources("/api/v1", "", "v1")
    _, body = await client.request("GET", "/apis")
    _, crds = await client.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    custom = {crd["spec"]["group"] for crd in orjson.loads(crds)["items"]}
    for group in orjson.loads(body)["groups"]:
        if group["name"] in custom:
            continue
        for version in group["versions"]:
            if version["version"].lstrip("v").isdigit():
                await resources(f"/apis/{version['groupVersion']}", group["name"], version["version"])
    return found


async def test_every_served_kind_has_a_model_and_a_constant(client: APIClient) -> None:
    served = await served_kinds(client)
    assert len(served) >= 70
    constants = {value for value in vars(kinds).values() if isinstance(value, GroupVersionKind)}
    for gvk in served:
        cls = scheme.class_for(gvk)
        assert cls is not None, f"no model for {gvk}"
        assert cls.__gvk__ == gvk and cls.__name__ == gvk.kind
        assert cls.__module__ == f"kubeloop.api.models.{(gvk.group.split('.')[0] or 'core')}_{gvk.version}"
        # The model class is reachable through the public facade under the same name.
        assert getattr(getattr(models, cls.__module__.rsplit(".", 1)[1]), gvk.kind) is cls
        # A constant for each kind; where two group-versions share a name, the preferred one.
        named = getattr(kinds, gvk.kind)
        assert named == gvk or (named in served and named.kind == gvk.kind), gvk
    assert constants <= set(served)
    assert kinds.Event == GroupVersionKind("", "v1", "Event")
    assert kinds.HorizontalPodAutoscaler == GroupVersionKind("autoscaling", "v2", "HorizontalPodAutoscaler")


def test_importing_a_group_loads_only_it() -> None:
    code = (
        "import sys\n"
        "from kubeloop.models import rbac_v1\n"
        "rbac_v1.Role\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('kubeloop.api.models.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['meta_v1', 'rbac_v1']"


def built_objects(namespace: str) -> list[Any]:
    """One object of each newly typed group, built from the models alone."""
    meta = meta_v1.ObjectMeta
    labels = {"app": "web"}
    return [
        rbac_v1.Role(
            metadata=meta(name="reader", namespace=namespace),
            rules=[rbac_v1.PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list"])],
        ),
        rbac_v1.RoleBinding(
            metadata=meta(name="reader", namespace=namespace),
            role_ref=rbac_v1.RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="reader"),
            subjects=[rbac_v1.Subject(kind="ServiceAccount", name="default", namespace=namespace)],
        ),
        networking_v1.NetworkPolicy(
            metadata=meta(name="deny", namespace=namespace),
            spec=networking_v1.NetworkPolicySpec(
                pod_selector=meta_v1.LabelSelector(match_labels=labels), policy_types=["Ingress"]
            ),
        ),
        networking_v1.Ingress(
            metadata=meta(name="web", namespace=namespace),
            spec=networking_v1.IngressSpec(
                default_backend=networking_v1.IngressBackend(
                    service=networking_v1.IngressServiceBackend(
                        name="web", port=networking_v1.ServiceBackendPort(number=80)
                    )
                )
            ),
        ),
        autoscaling_v2.HorizontalPodAutoscaler(
            metadata=meta(name="web", namespace=namespace),
            spec=autoscaling_v2.HorizontalPodAutoscalerSpec(
                scale_target_ref=autoscaling_v2.CrossVersionObjectReference(
                    api_version="apps/v1", kind="Deployment", name="web"
                ),
                min_replicas=1,
                max_replicas=3,
                metrics=[
                    autoscaling_v2.MetricSpec(
                        type="Resource",
                        resource=autoscaling_v2.ResourceMetricSource(
                            name="cpu",
                            target=autoscaling_v2.MetricTarget(type="Utilization", average_utilization=80),
                        ),
                    )
                ],
            ),
        ),
        policy_v1.PodDisruptionBudget(
            metadata=meta(name="web", namespace=namespace),
            spec=policy_v1.PodDisruptionBudgetSpec(
                min_available=1, selector=meta_v1.LabelSelector(match_labels=labels)
            ),
        ),
        discovery_v1.EndpointSlice(
            metadata=meta(name="web-1", namespace=namespace, labels={"kubernetes.io/service-name": "web"}),
            address_type="IPv4",
            endpoints=[discovery_v1.Endpoint(addresses=["10.0.0.1"])],
            ports=[discovery_v1.EndpointPort(name="http", port=80, protocol="TCP")],
        ),
        events_v1.Event(
            metadata=meta(name="web.1", namespace=namespace),
            event_time=datetime(2026, 11, 28, 10, 0, 0, tzinfo=UTC),  # a MicroTime: ".000000" is sent
            reporting_controller="example.com/web",
            reporting_instance="web-1",
            action="Scaled",
            reason="ScalingUp",
            type="Normal",
            regarding=core_v1.ObjectReference(kind="Deployment", name="web", namespace=namespace),
            note="scaled up to 3",
        ),
    ]


async def test_models_of_every_group_build_objects_the_server_takes_and_read_them_back(
    client: APIClient, namespace: str
) -> None:
    for obj in built_objects(namespace):
        created = await client.create(obj)
        assert type(created) is type(obj) and created.metadata.uid
        assert created.to_dict()["spec" if "spec" in created.to_dict() else "metadata"]
        raw = await client.get(type(obj).__gvk__, obj.metadata.name or "", namespace=namespace)
        assert type(obj).from_dict(raw).to_dict() == raw  # what the server holds, field for field

    # The same HorizontalPodAutoscaler read through autoscaling/v1's model.
    v1 = await client.get(autoscaling_v1.HorizontalPodAutoscaler, "web", namespace=namespace)
    assert (
        v1.spec is not None and v1.spec.max_replicas == 3 and v1.spec.target_cpu_utilization_percentage == 80
    )

    cluster_scoped: list[Any] = [
        scheduling_v1.PriorityClass(metadata=meta_v1.ObjectMeta(name=f"{namespace}-high"), value=1000),
        storage_v1.StorageClass(
            metadata=meta_v1.ObjectMeta(name=f"{namespace}-fast"), provisioner="x.io/fast"
        ),
        apiextensions_v1.CustomResourceDefinition(
            metadata=meta_v1.ObjectMeta(name=f"gizmos.{namespace}.example.com"),
            spec=apiextensions_v1.CustomResourceDefinitionSpec(
                group=f"{namespace}.example.com",
                scope="Namespaced",
                names=apiextensions_v1.CustomResourceDefinitionNames(plural="gizmos", kind="Gizmo"),
                versions=[
                    apiextensions_v1.CustomResourceDefinitionVersion(
                        name="v1",
                        served=True,
                        storage=True,
                        schema_=apiextensions_v1.CustomResourceValidation(
                            open_apiv3_schema=apiextensions_v1.JSONSchemaProps(
                                type="object",
                                properties={
                                    "spec": apiextensions_v1.JSONSchemaProps(
                                        type="object", x_kubernetes_preserve_unknown_fields=True
                                    )
                                },
                            )
                        ),
                    )
                ],
            ),
        ),
    ]
    try:
        for obj in cluster_scoped:
            created = await client.create(obj)
            raw = await client.get(type(obj).__gvk__, obj.metadata.name or "")
            assert created.to_dict() == raw == type(obj).from_dict(raw).to_dict()
        crd = await client.get(apiextensions_v1.CustomResourceDefinition, f"gizmos.{namespace}.example.com")
        assert crd.spec is not None
        schema = crd.spec.versions[0].schema_
        assert schema is not None and schema.open_apiv3_schema is not None
        spec = (schema.open_apiv3_schema.properties or {})["spec"]
        assert isinstance(spec, apiextensions_v1.JSONSchemaProps)  # nested schemas are typed too
        assert spec.type == "object" and spec.x_kubernetes_preserve_unknown_fields is True
    finally:
        for obj in cluster_scoped:
            await client.delete(obj)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(member) for key, member in value.items() if member is not None}
    if isinstance(value, list):
        return [_without_nulls(member) for member in value]
    return value


async def test_typed_lists_of_every_kind_round_trip_what_the_server_holds(
    client: APIClient, namespace: str
) -> None:
    for obj in built_objects(namespace):
        await client.create(obj)
    # As the controllers and the kubelet record theirs: no eventTime, null in events.k8s.io/v1.
    reference = core_v1.ObjectReference(kind="Role", name="reader", namespace=namespace)
    await client.create(core_v1.Event(metadata=meta_v1.ObjectMeta(name="recorded", namespace=namespace), involved_object=reference))  # fmt: skip
    kinds_read: set[GroupVersionKind] = set()
    for gvk, (_, _, verbs) in (await served_kinds(client)).items():
        if "list" not in verbs:
            continue
        cls = scheme.class_for(gvk)
        assert cls is not None
        raw = await client.list(gvk)
        typed = await client.list(cls)
        assert all(type(item) is cls for item in typed.items)
        # to_dict leaves null members out; the server may hold some (an events.k8s.io Event made
        # through core/v1, as the controllers make theirs, has "eventTime": null, as upstream's).
        assert [item.to_dict() for item in typed.items] == [_without_nulls(item) for item in raw.items], gvk
        kinds_read |= {gvk} if raw.items else set()
    # Ours, and the cluster's own (Namespaces, FlowSchemas, PriorityLevelConfigurations, APIServices...).
    assert {type(obj).__gvk__ for obj in built_objects(namespace)} < kinds_read and len(kinds_read) >= 15


async def test_a_review_is_created_from_its_model_and_answered_in_it(client: APIClient) -> None:
    review = authorization_v1.SelfSubjectAccessReview(
        spec=authorization_v1.SelfSubjectAccessReviewSpec(
            resource_attributes=authorization_v1.ResourceAttributes(verb="list", resource="pods")
        )
    )
    answered = await client.create(review)
    assert isinstance(answered, authorization_v1.SelfSubjectAccessReview)
    assert answered.status is not None and answered.status.allowed is True


async def test_events_recorded_without_an_event_time_are_read_through_events_v1(
    client: APIClient, namespace: str
) -> None:
    """The kubelet and client-go's old recorder write core/v1 Events without eventTime, which the
    events.k8s.io/v1 view answers as null (as upstream does): its model reads them (the
    schema's "required" would refuse the list, as the official client's models do)."""
    await client.create(
        core_v1.Event(
            metadata=meta_v1.ObjectMeta(name="old-style", namespace=namespace),
            involved_object=core_v1.ObjectReference(kind="Pod", name="p", namespace=namespace),
            reason="Started",
            message="Started container",
            source=core_v1.EventSource(component="kubelet"),
        )
    )
    [event] = (await client.list(events_v1.Event, namespace=namespace)).items
    assert event.event_time is None and event.note == "Started container"
    raw = await client.get(GroupVersionKind("events.k8s.io", "v1", "Event"), "old-style", namespace=namespace)
    assert "eventTime" in raw and raw["eventTime"] is None
