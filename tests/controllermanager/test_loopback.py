"""The embedded server's own controllers reach it as kube-apiserver's loopback client does: over
connections that never leave the process, with no TLS handshake. Before, each informer of theirs
held a TLS connection to the server's port (about sixty), and their handshakes were half the CPU
of an in-process server's start."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.client.config import load_kubeconfig
from kubeloop.testing import ServerThread, eventually, start_server
from tests.apiserver.test_workers import established


@pytest.fixture
def server() -> Iterator[ServerThread]:
    started = start_server(simulate=True)
    try:
        yield started
    finally:
        started.stop()


async def test_the_servers_controllers_hold_no_connection_to_its_port(server: ServerThread) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    config = load_kubeconfig(server.kubeconfig)
    async with kubeloop.APIClient(config) as client:
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                },
            },
        }
        await client.create(deployment)
        # The Deployment, ReplicaSet and kubelet controllers did their work: they are connected.
        async def running() -> None:
            pods = await client.list(kinds.Pod, namespace="default", label_selector="app=web")
            assert [pod["status"].get("phase") for pod in pods.items] == ["Running"]
            assert pods.items[0]["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"

        await eventually(running)
    # With the test's own client closed, no connection to the port is left in this process.
    await eventually(lambda: established(os.getpid(), port) == 0)
