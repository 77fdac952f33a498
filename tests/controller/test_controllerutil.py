"""controllerutil: create-or-update/patch results against the embedded server, owner and
controller references, finalizers and status conditions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.api.model import KubeModel
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.controller import controllerutil as cu
from kubeloop.manager.manager import Manager
from kubeloop.models import apps_v1, meta_v1
from kubeloop.testing import intercepted
from tests.conftest import ServerThread


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


def deployment(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": namespace}}


def fill(replicas: int) -> cu.Mutate:
    """Sets what this "controller" owns, leaving what the server defaulted alone (as mutate functions should)."""

    def mutate(obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec["replicas"] = replicas
        spec.setdefault("selector", {"matchLabels": {"app": "d"}})
        spec.setdefault(
            "template",
            {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        )

    return mutate


async def test_create_or_update_results(client: APIClient, namespace: str) -> None:
    result, obj = await cu.create_or_update(client, deployment(namespace), fill(1))
    assert result == cu.OperationResult.CREATED and obj["metadata"]["uid"]
    result, _ = await cu.create_or_update(client, deployment(namespace), fill(1))
    assert result == cu.OperationResult.UNCHANGED
    result, obj = await cu.create_or_update(client, deployment(namespace), fill(3))
    assert result == cu.OperationResult.UPDATED and obj["spec"]["replicas"] == 3

    def rename(obj: dict[str, Any]) -> None:
        obj["metadata"]["name"] = "other"

    with pytest.raises(ValueError, match="name or namespace"):
        await cu.create_or_update(client, deployment(namespace), rename)


@pytest.mark.parametrize("helper", [cu.create_or_update, cu.create_or_patch])
async def test_an_object_the_cache_has_not_seen_yet_is_updated_not_created_twice(
    client: APIClient, namespace: str, helper: Any
) -> None:
    """A manager's client whose cache lags behind a create: the helper's create meets
    AlreadyExists, reads the object from the server and updates it."""
    manager = Manager(client)
    await cu.create_or_update(client, deployment(namespace), fill(1))  # made, as by an earlier pass

    async def not_cached_yet(through: Any, kind: Any, name: str, **options: Any) -> Any:
        raise errors.NotFound(f'deployments.apps "{name}" not found')

    stale = intercepted(manager.client, get=not_cached_yet)
    result, obj = await helper(stale, deployment(namespace), fill(2))
    assert result == cu.OperationResult.UPDATED and obj["spec"]["replicas"] == 2
    found = await client.get(deployment(namespace), "d", namespace=namespace)
    assert found["spec"]["replicas"] == 2
    await manager.stop()


async def test_create_or_patch_results(client: APIClient, namespace: str) -> None:
    result, _ = await cu.create_or_patch(client, deployment(namespace), fill(1))
    assert result == cu.OperationResult.CREATED

    def status_only(obj: dict[str, Any]) -> None:
        obj["status"] = {"replicas": 1, "observedGeneration": 1}

    result, obj = await cu.create_or_patch(client, deployment(namespace), status_only)
    assert result == cu.OperationResult.UPDATED_STATUS_ONLY and obj["status"]["replicas"] == 1

    def both(obj: dict[str, Any]) -> None:
        fill(2)(obj)
        obj["status"] = {"replicas": 2, "observedGeneration": 2}

    result, obj = await cu.create_or_patch(client, deployment(namespace), both)
    assert result == cu.OperationResult.UPDATED_STATUS
    assert obj["spec"]["replicas"] == 2 and obj["status"]["replicas"] == 2
    result, _ = await cu.create_or_patch(client, deployment(namespace), both)
    assert result == cu.OperationResult.UNCHANGED


def owner(name: str, namespace: str | None = "ns", kind: str = "Deployment") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta}


def test_owner_and_controller_references() -> None:
    child: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
    }
    cu.set_controller_reference(owner("a"), child)
    cu.set_controller_reference(owner("a"), child)  # idempotent
    assert child["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "a",
            "uid": "uid-a",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    with pytest.raises(cu.AlreadyOwnedError):
        cu.set_controller_reference(owner("b"), child)
    cu.set_owner_reference(owner("b"), child)
    assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["a", "b"]
    assert cu.is_controlled_by(child, owner("a")) and not cu.is_controlled_by(
        child, owner("b")
    )  # b only owns
    assert not cu.is_controlled_by(
        child, {"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}}
    )  # no uid
    assert "controller" not in child["metadata"]["ownerReferences"][1]
    with pytest.raises(ValueError, match="cross-namespace"):
        cu.set_owner_reference(owner("x", "elsewhere"), child)
    cu.set_owner_reference(
        owner("cluster-wide", None, "ClusterRole"), child
    )  # cluster-scoped owners are fine
    cluster_child: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    with pytest.raises(ValueError, match="cluster-scoped"):
        cu.set_owner_reference(owner("a"), cluster_child)
    with pytest.raises(ValueError, match="uid"):
        cu.set_owner_reference({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n"}}, child)


def test_owner_references_are_found_and_removed_by_group_kind_and_name() -> None:
    """controller-runtime's HasOwnerReference, RemoveOwnerReference and RemoveControllerReference:
    an owner is matched by API group, kind and name (not version or uid); removing a reference
    that is not there, or a controller reference to an owner that does not control, is an error
    naming both, and changes nothing."""
    child: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}
    assert not cu.has_controller_reference(child) and not cu.has_owner_reference(child, owner("a"))
    cu.set_controller_reference(owner("a"), child)
    cu.set_owner_reference(owner("b"), child)
    renamed_version = {**owner("a"), "apiVersion": "apps/v2", "metadata": {"name": "a", "namespace": "ns", "uid": "other"}}
    assert cu.has_owner_reference(child, renamed_version)  # the group, kind and name are what count
    other_group = {**owner("a"), "apiVersion": "extensions/v1beta1"}
    assert not cu.has_owner_reference(child, other_group) and not cu.has_owner_reference(child, owner("z"))
    assert cu.has_controller_reference(child)
    before = [dict(ref) for ref in child["metadata"]["ownerReferences"]]
    with pytest.raises(ValueError, match=r"^Deployment b is not the controller of ns/c$"):
        cu.remove_controller_reference(owner("b"), child)
    with pytest.raises(ValueError, match=r"^ns/c has no owner reference to Deployment z$"):
        cu.remove_owner_reference(owner("z"), child)
    assert child["metadata"]["ownerReferences"] == before
    cu.remove_controller_reference(owner("a"), child)
    assert not cu.has_controller_reference(child) and [r["name"] for r in child["metadata"]["ownerReferences"]] == ["b"]
    with pytest.raises(ValueError, match=r"^ns/c has no controller reference$"):
        cu.remove_controller_reference(owner("b"), child)
    cu.remove_owner_reference(owner("b"), child)
    assert child["metadata"]["ownerReferences"] == []
    # A model is changed the same way.
    import kubeloop
    from kubeloop.models import core_v1

    typed = core_v1.ConfigMap(metadata=kubeloop.ObjectMeta(name="c", namespace="ns"))
    cu.set_controller_reference(owner("a"), typed)
    assert cu.has_owner_reference(typed, owner("a"))
    cu.remove_controller_reference(owner("a"), typed)
    assert not typed.metadata.owner_references and not cu.has_controller_reference(typed)


_REFERENCES = st.sampled_from(
    [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a", "uid": "uid-a", "controller": True, "blockOwnerDeletion": True},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a", "uid": "uid-old", "controller": True, "blockOwnerDeletion": True},
        {"apiVersion": "apps/v1beta1", "kind": "Deployment", "name": "a", "uid": "uid-a", "controller": True, "blockOwnerDeletion": True},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a", "uid": "uid-a"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a", "uid": "uid-a", "controller": True},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "b", "uid": "uid-b", "controller": True, "blockOwnerDeletion": True},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "b", "uid": "uid-b"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "uid-c", "controller": False},
    ]
)


@given(
    refs=st.lists(_REFERENCES, max_size=3),
    namespace=st.sampled_from(["ns", "other", None]),
    owner_namespace=st.sampled_from(["ns", None]),
)
def test_a_models_controller_reference_is_set_as_its_dicts(
    refs: list[dict[str, Any]], namespace: str | None, owner_namespace: str | None
) -> None:
    """Whatever owner references a model holds, setting its controller reference ends as for its
    JSON form (the same references, or the same error); when the reference is already there as
    it would be set, the model's references are left as they are, not rebuilt."""
    import copy

    from kubeloop.api.model import as_dict
    from kubeloop.models import core_v1

    meta: dict[str, Any] = {"name": "c", **({"namespace": namespace} if namespace else {})}
    if refs:
        meta["ownerReferences"] = copy.deepcopy(refs)
    plain: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    typed = core_v1.ConfigMap.model_validate(copy.deepcopy(plain))
    assert typed.metadata is not None
    held = typed.metadata.owner_references

    def outcome(obj: Any) -> Any:
        try:
            cu.set_controller_reference(owner("a", owner_namespace), obj)
        except (cu.AlreadyOwnedError, ValueError) as error:
            return type(error), str(error)
        return as_dict(obj)["metadata"].get("ownerReferences")

    after = outcome(plain)
    assert outcome(typed) == after
    if refs and after == refs:  # nothing to change: the model's references are not rebuilt
        assert typed.metadata.owner_references is held


class _TeamMeta(KubeModel):
    """A user's metadata model: the fields the helpers read, and one of its own."""

    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    owner_references: list[meta_v1.OwnerReference] | None = None
    team: str | None = None


@pytest.mark.parametrize("meta_class", [meta_v1.ObjectMeta, _TeamMeta])
@pytest.mark.parametrize("namespace", ["ns", "other", None])
@pytest.mark.parametrize("controller", [True, False])
def test_a_models_first_owner_reference_is_set_as_its_dicts(
    meta_class: type[KubeModel], namespace: str | None, controller: bool
) -> None:
    """The first owner reference of a model (the child a reconcile makes) is set without its
    metadata dumped and validated back, as on its JSON form: the same reference, or the same
    error; kubeloop's metadata model and a user's alike, its other fields kept."""
    from kubeloop.api.model import as_dict
    from kubeloop.models import core_v1

    class Labelled(core_v1.ConfigMap):
        metadata: meta_class | None = None  # type: ignore[valid-type]

    set_reference = cu.set_controller_reference if controller else cu.set_owner_reference
    typed = Labelled(metadata=meta_class(name="c", namespace=namespace, labels={"app": "web"}, team="t"))
    plain = as_dict(typed)

    def outcome(obj: Any) -> Any:
        try:
            set_reference(owner("a"), obj)
        except ValueError as error:
            return str(error)
        return as_dict(obj)["metadata"]

    assert outcome(typed) == outcome(plain)
    assert type(typed.metadata) is meta_class
    if namespace == "ns":
        (reference,) = getattr(typed.metadata, "owner_references", None) or ()
        assert (reference.name, reference.controller) == ("a", True if controller else None)


def test_references_from_typed_owners_match_those_from_their_dicts() -> None:
    """Owners given as models (a built-in kind, a custom resource) make the same references as
    their JSON forms, and a namespaced model owner still refuses another namespace's object."""
    import kubeloop
    from kubeloop.models import apps_v1, core_v1

    class Gadget(kubeloop.CustomResource, group="example.com", version="v1"):
        spec: dict[str, Any] = {}

    owners: list[Any] = [
        apps_v1.Deployment(metadata=kubeloop.ObjectMeta(name="d", namespace="ns", uid="uid-d")),
        Gadget(metadata=kubeloop.ObjectMeta(name="g", namespace="ns", uid="uid-g")),
    ]
    for model in owners:
        typed = core_v1.ConfigMap(metadata=kubeloop.ObjectMeta(name="c", namespace="ns"))
        plain: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns"},
        }
        cu.set_controller_reference(model, typed)
        cu.set_controller_reference(model.to_dict(), plain)
        assert typed.to_dict()["metadata"]["ownerReferences"] == plain["metadata"]["ownerReferences"]
        (ref,) = plain["metadata"]["ownerReferences"]
        assert (ref["apiVersion"], ref["kind"]) == (model.to_dict()["apiVersion"], model.to_dict()["kind"])
        elsewhere = core_v1.ConfigMap(metadata=kubeloop.ObjectMeta(name="c", namespace="other"))
        with pytest.raises(ValueError, match="cross-namespace"):
            cu.set_owner_reference(model, elsewhere)
    with pytest.raises(ValueError, match="uid"):
        cu.set_owner_reference(
            Gadget(metadata=kubeloop.ObjectMeta(name="new", namespace="ns")),
            {"metadata": {"namespace": "ns"}},
        )


def test_finalizers() -> None:
    obj: dict[str, Any] = {"metadata": {}}
    assert cu.add_finalizer(obj, "example.com/cleanup")
    assert not cu.add_finalizer(obj, "example.com/cleanup")
    assert cu.contains_finalizer(obj, "example.com/cleanup")
    assert cu.remove_finalizer(obj, "example.com/cleanup")
    assert not cu.remove_finalizer(obj, "example.com/cleanup")
    assert obj["metadata"]["finalizers"] == []


def test_status_conditions() -> None:
    conditions: list[dict[str, Any]] = []
    assert cu.set_status_condition(conditions, "Ready", "False", "Starting", observed_generation=1)
    first_transition = conditions[0]["lastTransitionTime"]
    assert not cu.set_status_condition(conditions, "Ready", "False", "Starting", observed_generation=1)
    assert cu.set_status_condition(conditions, "Ready", "False", "Waiting", "for pods", observed_generation=2)
    assert conditions[0]["lastTransitionTime"] == first_transition  # status unchanged: time unchanged
    assert conditions[0]["observedGeneration"] == 2 and conditions[0]["message"] == "for pods"
    conditions[0]["lastTransitionTime"] = "2000-01-01T00:00:00Z"
    assert cu.set_status_condition(conditions, "Ready", "True", "Running", observed_generation=2)
    assert conditions[0]["lastTransitionTime"] != "2000-01-01T00:00:00Z"
    assert cu.is_status_condition_true(conditions, "Ready")
    assert cu.find_status_condition(conditions, "Other") is None
    assert cu.remove_status_condition(conditions, "Ready") and conditions == []
    with pytest.raises(ValueError):
        cu.set_status_condition(conditions, "Ready", "yes", "R")


def test_condition_helpers_answer_in_the_form_they_were_given() -> None:
    """A typed object's condition comes back as its model's Condition, a dict's as a dict."""
    deployment = apps_v1.Deployment(metadata=meta_v1.ObjectMeta(name="web"))
    assert cu.set_status_condition(deployment, "Available", "True", "MinimumReplicasAvailable")
    found = cu.find_status_condition(deployment, "Available")
    assert isinstance(found, apps_v1.DeploymentCondition)
    assert (found.status, found.reason) == ("True", "MinimumReplicasAvailable")
    assert found is deployment.status.conditions[0]  # the object's own, not a copy
    assert cu.is_status_condition_true(deployment, "Available")
    typed = [
        meta_v1.Condition(
            type="Ready",
            status="False",
            reason="Starting",
            message="",
            lastTransitionTime="2026-01-01T00:00:00Z",
        )
    ]
    assert isinstance(cu.find_status_condition(typed, "Ready"), meta_v1.Condition)
    assert not cu.is_status_condition_true(typed, "Ready")
    as_dict = deployment.to_dict()
    assert cu.find_status_condition(as_dict, "Available") == as_dict["status"]["conditions"][0]
    assert cu.find_status_condition(deployment, "Progressing") is None


@pytest.mark.parametrize("helper", [cu.create_or_update, cu.create_or_patch])
async def test_controlled_by_leaves_someone_elses_object_alone(
    client: APIClient, namespace: str, helper: Any
) -> None:
    owner = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": namespace}}
    )

    def owned(replicas: int) -> cu.Mutate:
        def mutate(obj: dict[str, Any]) -> None:
            cu.set_controller_reference(owner, obj)
            fill(replicas)(obj)

        return mutate

    # Absent: made, and controlled by the owner; then changed as usual.
    result, made = await helper(client, deployment(namespace), owned(1), controlled_by=owner)
    assert result == cu.OperationResult.CREATED and cu.is_controlled_by(made, owner)
    result, _ = await helper(client, deployment(namespace), owned(2), controlled_by=owner)
    assert result == cu.OperationResult.UPDATED
    # Someone else's of the same name (no controller): left alone, nothing sent.
    theirs = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "theirs", "namespace": namespace},
        "data": {"k": "v"},
    }
    stored = await client.create(theirs)

    def take(obj: dict[str, Any]) -> None:
        cu.set_controller_reference(owner, obj)
        obj["data"] = {"k": "replaced"}

    with pytest.raises(
        cu.NotControlledError, match="ConfigMap theirs exists and is not controlled by ConfigMap owner"
    ):
        await helper(client, dict(theirs), take, controlled_by=owner)
    after = await client.get(theirs, "theirs", namespace=namespace)
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert after["data"] == {"k": "v"} and not after["metadata"].get("ownerReferences")
    # Without controlled_by, controller-runtime's behaviour: the mutate adopts it.
    result, adopted = await helper(client, dict(theirs), take)
    assert result == cu.OperationResult.UPDATED and cu.is_controlled_by(adopted, owner)


def test_helpers_change_a_models_metadata_as_they_change_its_dict() -> None:
    """On a model, the owner-reference and finalizer helpers change that one field of its
    metadata, as on the object's JSON form, and leave the rest as it was (the same instances:
    neither dumped nor validated again)."""
    import kubeloop
    from kubeloop.models import core_v1

    plain: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "uid-c",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {"app": "web"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "uid-s"},
            ],
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-05-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:a": {}}},
                }
            ],
        },
        "data": {"a": "1"},
    }
    typed = core_v1.ConfigMap.from_dict(plain)
    managed, labels = typed.metadata.managed_fields, typed.metadata.labels
    owner = apps_v1.Deployment(metadata=kubeloop.ObjectMeta(name="d", namespace="ns", uid="uid-d"))
    steps = [
        lambda obj: cu.set_controller_reference(owner, obj),
        lambda obj: cu.set_owner_reference(owner.to_dict() | {"metadata": {"name": "e", "namespace": "ns", "uid": "uid-e"}}, obj),
        lambda obj: cu.add_finalizer(obj, "example.com/cleanup"),
        lambda obj: cu.remove_finalizer(obj, "example.com/keep"),
        lambda obj: cu.remove_controller_reference(owner, obj),
        lambda obj: cu.remove_finalizer(obj, "example.com/cleanup"),
    ]
    def answers(obj: Any) -> tuple[bool, ...]:
        return (
            cu.contains_finalizer(obj, "example.com/keep"),
            cu.contains_finalizer(obj, "example.com/cleanup"),
            cu.has_controller_reference(obj),
            cu.is_controlled_by(obj, owner),
            cu.has_owner_reference(obj, owner),
        )

    seen = []
    for step in steps:
        step(typed)
        step(plain)
        assert typed.to_dict() == plain
        assert typed.metadata.managed_fields is managed and typed.metadata.labels is labels
        assert answers(typed) == answers(plain)
        seen.append(answers(plain))
    assert seen == [  # finalizers keep and cleanup, a controller, controlled by owner, owned by it
        (True, False, True, True, True),
        (True, False, True, True, True),
        (True, True, True, True, True),
        (False, True, True, True, True),
        (False, True, False, False, False),
        (False, False, False, False, False),
    ]
    assert [ref.name for ref in typed.metadata.owner_references or ()] == ["s", "e"]
    assert typed.metadata.owner_references is not None and isinstance(
        typed.metadata.owner_references[0], meta_v1.OwnerReference
    )
    assert typed.metadata.finalizers == []
