"""The namespace controller (kube-controller-manager's, written with kubeloop): a deleted namespace
is emptied of every kind — custom resources too —, reports what holds it in upstream's
conditions, refuses new content with 403, and goes once its content is gone; with kubectl 1.27
and 1.33, `kubectl delete namespace` returns once it is."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

import kubeloop
from kubeloop import GroupVersionKind
from kubeloop.testing import eventually
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread

NAMESPACE = GroupVersionKind("", "v1", "Namespace")
CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
HOLD = "example.com/hold"


class Sprocket(kubeloop.CustomResource, group="ns.example.com", version="v1"):
    spec: dict[str, str] = {}


def conditions(namespace: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["message"])
        for c in namespace.get("status", {}).get("conditions", ())
    }


async def test_a_deleted_namespace_is_emptied_reports_what_holds_it_and_goes(
    kube_client: kubeloop.APIClient,
) -> None:
    await kubeloop.crd.install_crds(kube_client, Sprocket)
    ns = "doomed"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await kube_client.create(Sprocket(metadata=kubeloop.ObjectMeta(name="s1", namespace=ns)))
    await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "held", "namespace": ns, "finalizers": [HOLD]},
        }
    )
    await kube_client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns}}
    )
    await kube_client.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": ns},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        }
    )

    marked = await kube_client.delete(NAMESPACE, ns)
    assert marked["status"]["phase"] == "Terminating"
    with pytest.raises(kubeloop.errors.Forbidden) as refused:
        await kube_client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": ns}}
        )
    assert str(refused.value) == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {ns} because it is being terminated'
    )

    async def held_by_one_configmap() -> dict[str, Any]:
        namespace = await kube_client.get(NAMESPACE, ns)
        assert conditions(namespace) == {
            "NamespaceDeletionDiscoveryFailure": (
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            "NamespaceDeletionGroupVersionParsingFailure": (
                "False",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
            "NamespaceDeletionContentFailure": (
                "False",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
            "NamespaceContentRemaining": (
                "True",
                "SomeResourcesRemain",
                "Some resources are remaining: configmaps. has 1 resource instances",
            ),
            "NamespaceFinalizersRemaining": (
                "True",
                "SomeFinalizerRemain",
                "Some finalizers are remaining: example.com/hold in 1 resource instances",
            ),
        }
        return namespace

    waiting = await eventually(held_by_one_configmap)
    assert waiting["spec"]["finalizers"] == ["kubernetes"]
    # Everything without a finalizer is gone already: the custom resource, the secret, the deployment.
    for kind, name in (
        (Sprocket.__gvk__, "s1"),
        (GroupVersionKind("", "v1", "Secret"), "s"),
        (GroupVersionKind("apps", "v1", "Deployment"), "d"),
    ):
        with pytest.raises(kubeloop.errors.NotFound):
            await kube_client.get(kind, name, namespace=ns)
    held = await kube_client.get(CONFIGMAP, "held", namespace=ns)
    assert held["metadata"]["deletionTimestamp"]

    await kube_client.patch(CONFIGMAP, "held", {"metadata": {"finalizers": None}}, namespace=ns)

    async def namespace_gone() -> None:
        try:
            found = await kube_client.get(NAMESPACE, ns)
        except kubeloop.errors.NotFound:
            return
        raise AssertionError(f"namespace {ns} is still there: {found.get('status')}")

    await eventually(namespace_gone)
    # The name is free again, for a namespace that starts empty.
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert len(await kube_client.list(CONFIGMAP, namespace=ns)) == 0
    await kube_client.delete(NAMESPACE, ns)
    await eventually(namespace_gone)


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


def test_kubectl_delete_namespace_completes_and_removes_its_custom_resources(
    kubectl: Kubectl, tmp_path: pathlib.Path
) -> None:
    crd = tmp_path / "crd.json"
    crd.write_text(json.dumps(Sprocket.crd()))
    kubectl("apply", "-f", str(crd))
    ns = f"gone-{pathlib.Path(kubectl.argv[0]).suffix.lstrip('.').replace('.', '-')}"
    kubectl("create", "namespace", ns)
    manifest = {
        "apiVersion": "ns.example.com/v1",
        "kind": "Sprocket",
        "metadata": {"name": "s", "namespace": ns},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    kubectl("create", "configmap", "c", "-n", ns)
    deleted = kubectl("delete", "namespace", ns)
    assert f'namespace "{ns}" deleted' in deleted.stdout
    # kubectl waited: the namespace and everything in it are gone.
    assert kubectl("get", "namespace", ns, check=False).returncode != 0
    kubectl("create", "namespace", ns)
    assert kubectl("get", "sprockets", "-n", ns, "-o", "name").stdout.strip() == ""
    kubectl("delete", "namespace", ns)
