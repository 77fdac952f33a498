"""The blocking facade: the same calls, typed or not, and a watch iterated with a plain for."""

from __future__ import annotations

import threading

import pytest

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.models import core_v1, meta_v1
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.sync import SyncClient
from tests.conftest import Client as HttpClient
from tests.conftest import ServerThread

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def test_sync_client_verbs_and_watch(shared_server: ServerThread, api: HttpClient, namespace: str) -> None:
    with SyncClient(load_kubeconfig(shared_server.kubeconfig)) as client:
        created = client.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="s", namespace=namespace)))
        assert isinstance(created, core_v1.ConfigMap)
        start = client.list(CONFIGMAP, namespace=namespace).resource_version
        assert client.patch(CONFIGMAP, "s", {"data": {"k": "v"}}, namespace=namespace)["data"] == {"k": "v"}
        assert client.get(core_v1.ConfigMap, "s", namespace=namespace).data == {"k": "v"}

        # Another writer (over plain HTTP) while this thread iterates the watch.
        writer = threading.Timer(0.2, lambda: api.delete(f"/api/v1/namespaces/{namespace}/configmaps/s"))
        writer.start()
        seen = []
        for event in client.watch(CONFIGMAP, namespace=namespace, resource_version=start):
            seen.append(event.type)
            if event.type == "DELETED":
                break
        assert seen == ["MODIFIED", "DELETED"]
        with pytest.raises(errors.NotFound):
            client.get(CONFIGMAP, "s", namespace=namespace)
