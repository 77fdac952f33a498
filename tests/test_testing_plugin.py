"""The kubeloop pytest plugin's fixtures, used the way an operator's own tests would use them."""

from __future__ import annotations

from kubeloop.api.models import core_v1, meta_v1
from kubeloop.client.rest import APIClient
from kubeloop.testing.server import ServerThread


async def test_plugin_fixtures(
    kube_apiserver: ServerThread, kube_client: APIClient, kube_namespace: str
) -> None:
    assert kube_apiserver.url.startswith("https://127.0.0.1:")
    namespace = await kube_client.get(core_v1.Namespace, kube_namespace)
    assert namespace.status is not None and namespace.status.phase == "Active"
    created = await kube_client.create(
        core_v1.ConfigMap(
            metadata=meta_v1.ObjectMeta(name="from-plugin", namespace=kube_namespace), data={"a": "1"}
        )
    )
    assert created.metadata.namespace == kube_namespace


async def test_each_test_gets_its_own_namespace(kube_namespace: str, kube_client: APIClient) -> None:
    listed = await kube_client.list(core_v1.ConfigMap, namespace=kube_namespace)
    assert listed.items == []  # nothing from the previous test's namespace
