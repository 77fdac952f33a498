"""Apply configurations (client-go's ``applyconfigurations``): every field optional, only the
fields set are sent, ``None`` sent as null, for every built-in kind (generated) and a custom
resource (derived from its model); ``extract_<kind>`` gives back what one field manager owns.
Against the embedded server, two managers own different fields of one object and neither
takes the other's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kubeloop
from kubeloop import applyconfigurations as ac
from kubeloop.api.applyconfiguration import ObjectApplyConfiguration, owned_fields
from kubeloop.models import apps_v1


def test_only_the_fields_set_are_sent_and_none_is_null() -> None:
    spec = ac.apps_v1.DeploymentSpec(replicas=5)
    assert spec.to_dict() == {"replicas": 5}
    assert ac.apps_v1.DeploymentSpec().to_dict() == {}
    assert ac.apps_v1.DeploymentSpec(replicas=None).to_dict() == {"replicas": None}
    assert ac.apps_v1.DeploymentSpec(replicas=0).to_dict() == {"replicas": 0}  # zero is set
    scale = ac.apps_v1.Deployment(metadata=ac.meta_v1.ObjectMeta(name="web", namespace="ns"), spec=spec)
    assert scale.to_dict() == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"replicas": 5},
    }
    # Nested parts are configurations too: a container with only its name and image.
    template = ac.core_v1.PodTemplateSpec(
        spec=ac.core_v1.PodSpec(containers=[ac.core_v1.Container(name="c", image="nginx:2")])
    )
    assert template.to_dict() == {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
    # A typed model cannot say as much: its required selector and template must be given.
    with pytest.raises(ValueError, match="selector"):
        apps_v1.DeploymentSpec(replicas=5)


def test_every_built_in_kind_has_a_configuration_and_an_extractor() -> None:
    for name in kubeloop.models.__all__:
        models = getattr(kubeloop.models, name)
        configs = getattr(ac, name)
        for attribute in models.__all__:  # each class made as it is asked for (lazyclasses)
            model = getattr(models, attribute)
            if isinstance(model, type) and issubclass(model, kubeloop.KubeObject) and model.__module__ == models.__name__:
                config = getattr(configs, attribute)
                assert issubclass(config, ObjectApplyConfiguration) and config.__model__ is model
                assert config.__gvk__ == model.__gvk__
                assert kubeloop.apply_configuration(model) is config
                snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", attribute))
                assert callable(getattr(configs, f"extract_{snake.lower()}")), attribute


def deployment(name: str, namespace: str, image: str = "nginx:1") -> Any:
    """What a deployer owns: everything but the replica count (an autoscaler's)."""
    return ac.apps_v1.Deployment(
        metadata=ac.meta_v1.ObjectMeta(name=name, namespace=namespace, labels={"app": name}),
        spec=ac.apps_v1.DeploymentSpec(
            selector=ac.meta_v1.LabelSelector(match_labels={"app": name}),
            template=ac.core_v1.PodTemplateSpec(
                metadata=ac.meta_v1.ObjectMeta(labels={"app": name}),
                spec=ac.core_v1.PodSpec(containers=[ac.core_v1.Container(name="web", image=image)]),
            ),
        ),
    )


def managers(obj: Any) -> dict[str, Any]:
    return {entry.manager: entry.fields_v1 for entry in obj.metadata.managed_fields or () if entry.operation == "Apply"}


async def test_two_managers_own_different_fields_and_neither_takes_the_others(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    created = await kube_client.apply(deployment("web", kube_namespace), field_manager="deployer")
    assert isinstance(created, apps_v1.Deployment)  # answered with the kind's model
    assert created.spec is not None and created.spec.replicas == 1  # the server's default

    scale = ac.apps_v1.Deployment(
        metadata=ac.meta_v1.ObjectMeta(name="web", namespace=kube_namespace),
        spec=ac.apps_v1.DeploymentSpec(replicas=5),
    )
    scaled = await kube_client.apply(scale, field_manager="autoscaler")  # no conflict: nobody owned it
    assert scaled.spec is not None and scaled.spec.replicas == 5
    owners = managers(scaled)
    assert owners["autoscaler"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in owners["deployer"]["f:spec"]

    # The deployer changes its image and sends again everything it owns: the replicas stay.
    mine = ac.apps_v1.extract_deployment(scaled, "deployer")
    assert mine.to_dict() == deployment("web", kube_namespace).to_dict()
    assert mine.spec is not None and mine.spec.template is not None and mine.spec.template.spec is not None
    mine.spec.template.spec.containers = [ac.core_v1.Container(name="web", image="nginx:2")]
    rolled = await kube_client.apply(mine, field_manager="deployer")
    assert rolled.spec is not None and rolled.spec.replicas == 5
    assert rolled.spec.template.spec is not None and rolled.spec.template.spec.containers[0].image == "nginx:2"

    # What the autoscaler owns, extracted, is the replica count and the object's identity only.
    theirs = ac.apps_v1.extract_deployment(rolled, "autoscaler")
    assert theirs.to_dict() == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": kube_namespace},
        "spec": {"replicas": 5},
    }
    # Its replicas changed through the extracted configuration: nothing of the deployer's moves.
    assert theirs.spec is not None
    theirs.spec.replicas = 2
    again = await kube_client.apply(theirs, field_manager="autoscaler")
    assert again.spec is not None and again.spec.replicas == 2
    assert managers(again)["deployer"] == managers(rolled)["deployer"]

    # A manager that owns nothing extracts the identity alone; the deployer taking the replicas
    # without force is a conflict naming the autoscaler.
    assert ac.apps_v1.extract_deployment(again.to_dict(), "nobody").to_dict()["metadata"] == {
        "name": "web",
        "namespace": kube_namespace,
    }
    grab = deployment("web", kube_namespace)
    assert grab.spec is not None
    grab.spec.replicas = 9
    with pytest.raises(kubeloop.errors.Conflict, match="autoscaler"):
        await kube_client.apply(grab, field_manager="deployer")


class GizmoSpec(kubeloop.KubeModel):
    size: int
    color: str | None = None
    parts: list[GizmoPart] = []


class GizmoPart(kubeloop.KubeModel):
    name: str
    count: int = 1


class Gizmo(kubeloop.CustomResource, group="applyconfig.kubeloop.test", version="v1"):
    spec: GizmoSpec


GizmoSpec.model_rebuild()


async def test_a_custom_resources_configuration_is_derived_from_its_model(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    await kubeloop.crd.install_crds(kube_client, Gizmo)
    GizmoApply = kubeloop.apply_configuration(Gizmo)
    assert kubeloop.apply_configuration(Gizmo) is GizmoApply  # derived once
    spec_config = GizmoApply.model_fields["spec"].annotation
    meta = ac.meta_v1.ObjectMeta(name="g", namespace=kube_namespace)
    sizer = GizmoApply(metadata=meta, spec={"size": 3})
    assert sizer.to_dict() == {
        "apiVersion": "applyconfig.kubeloop.test/v1",
        "kind": "Gizmo",
        "metadata": {"name": "g", "namespace": kube_namespace},
        "spec": {"size": 3},  # parts, defaulted in the model, is not sent
    }
    assert spec_config is not None
    await kube_client.apply(sizer, field_manager="sizer")
    painter = GizmoApply(metadata=meta, spec={"color": "red", "parts": [{"name": "wheel", "count": 4}]})
    painted = await kube_client.apply(painter, field_manager="painter")
    assert isinstance(painted, Gizmo)
    assert painted.spec.size == 3 and painted.spec.color == "red" and painted.spec.parts[0].count == 4

    assert kubeloop.extract(GizmoApply, painted, "sizer").to_dict()["spec"] == {"size": 3}
    assert kubeloop.extract(GizmoApply, painted, "painter").to_dict()["spec"] == {
        "color": "red",
        "parts": [{"name": "wheel", "count": 4}],
    }
    # The painter's list is atomic (a plain list in the model): the sizer taking it is a conflict.
    with pytest.raises(kubeloop.errors.Conflict, match="painter"):
        await kube_client.apply(GizmoApply(metadata=meta, spec={"parts": []}), field_manager="sizer")


# FieldsV1, as the server writes it: ``f:`` fields, ``k:`` keyed list items, ``v:`` set values.
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.dictionaries(st.text("abc", min_size=1, max_size=2), inner, max_size=3),
    max_leaves=12,
)


def _every_field(value: Any) -> Any:
    if isinstance(value, dict) and value:
        return {f"f:{key}": _every_field(item) for key, item in value.items()}
    return {}


@given(_json.filter(lambda value: isinstance(value, dict)))
def test_a_manager_owning_every_field_extracts_the_whole_object(value: dict[str, Any]) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": value}
    entry = {"manager": "m", "operation": "Apply", "fieldsV1": {"f:data": _every_field(value)}}
    owned = owned_fields({**obj, "metadata": {"name": "x", "managedFields": [entry]}}, "m")
    assert owned == obj
    assert owned_fields({**obj, "metadata": {"name": "x", "managedFields": [entry]}}, "other") == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
    }


def test_keyed_and_set_list_items_are_picked_by_their_keys_and_values() -> None:
    obj = {
        "metadata": {
            "name": "p",
            "managedFields": [
                {
                    "manager": "m",
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:spec": {
                            "f:containers": {'k:{"name":"b"}': {".": {}, "f:image": {}}},
                            "f:finalizers": {'v:"x"': {}},
                            "f:tolerations": {".": {}},
                        }
                    },
                },
                {"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {"f:nodeName": {}}}},
                {"manager": "m", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {}}},
            ],
        },
        "spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2", "tty": True}],
            "finalizers": ["y", "x"],
            "tolerations": [{"key": "k"}],
            "nodeName": "n",
        },
        "status": {"phase": "Running"},
    }
    assert owned_fields(obj, "m") == {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "b", "image": "2"}], "finalizers": ["x"], "tolerations": []},
    }
    assert owned_fields(obj, "m", "status") == {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
