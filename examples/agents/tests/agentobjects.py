"""What the agent platform's tests share: one simulating server (fast pod timings), a fresh
namespace per test, the CRDs installed and the platform running in a manager (fixtures, which
each folder's conftest.py takes in), the platform's objects to create, and waits on them.

Written with kubeloop's public testing kit only, as an operator author's tests are."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import agentplatform
import pytest
from agentplatform.api.v1alpha1 import Agent, AgentPolicy, AgentRun
from agentplatform.controllers.builders import CONFIG_HASH
from agentplatform.controllers.channels import INBOUND_AUDIENCE
from agentruntime.images import local_images

import kubeloop
from kubeloop import kinds
from kubeloop.testing import ServerThread, SimulationOptions, eventually, settled, start_server

FAST = SimulationOptions(
    pod_start_seconds=0.05, pod_run_seconds=0.2, node_check_seconds=0.2, config_retry_seconds=0.1
)


@pytest.fixture(scope="session")
def cluster() -> Iterator[ServerThread]:
    server = start_server(simulate=True, simulation=FAST)
    yield server
    server.stop()


def process_node_server(pods_dir: pathlib.Path) -> ServerThread:
    """A server whose node runs the platform's images as processes (the runner, the memory
    server, mcp-kubernetes, the channels: ``agentruntime.images``), its pods' folders in ``pods_dir``."""
    options = SimulationOptions(
        pod_start_seconds=0.05,
        node_check_seconds=0.2,
        config_retry_seconds=0.1,
        local_images=local_images(),
        pods_dir=pods_dir,
    )
    return start_server(simulate=True, simulation=options)


@pytest.fixture
async def client(cluster: ServerThread) -> AsyncIterator[kubeloop.APIClient]:
    async with kubeloop.APIClient(kubeloop.load_config(cluster.kubeconfig)) as api:
        await kubeloop.crd.install_crds(api, *agentplatform.CUSTOM_RESOURCES)
        yield api


_namespaces = iter(range(1, 1_000))


@pytest.fixture
async def namespace(client: kubeloop.APIClient) -> str:
    """A fresh namespace per test on this module's simulating server."""
    name = f"agents{next(_namespaces)}"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # The model credentials agent() names: without them, the simulated kubelet, as a real one,
    # would start no agent pod (CreateContainerConfigError).
    await client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm", "namespace": name},
         "stringData": {"token": "test-token"}}
    )  # fmt: skip
    return name


@pytest.fixture
async def platform(client: kubeloop.APIClient) -> AsyncIterator[agentplatform.Platform]:
    manager = kubeloop.Manager(client)
    platform = agentplatform.setup(manager)
    async with manager:
        yield platform


def runtime(name: str, image: str = "ghcr.io/example/agent:1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": name},
        "spec": {"image": image, "env": [{"name": "LOG_LEVEL", "value": "info"}], **spec},
    }


def agent(name: str, namespace: str, runtime_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": runtime_name,
            "model": {
                "provider": "openai",
                "name": "gpt-4o",
                "authSecretRef": {"name": "llm", "key": "token"},
            },
            "systemPrompt": "You answer questions about Kubernetes.",
            "env": [{"name": "LOG_LEVEL", "value": "debug"}],
            **spec,
        },
    }


def condition(obj: Agent, kind: str) -> tuple[str, str]:
    for found in (obj.status.conditions if obj.status else None) or ():
        if found.type == kind:
            return found.status, found.reason
    return "", ""


async def ready(client: kubeloop.APIClient, name: str, namespace: str) -> Agent:
    async def check() -> Agent:
        found = await client.get(Agent, name, namespace=namespace)
        assert condition(found, "Ready") == ("True", "DeploymentReady"), found.status
        return found

    return await eventually(check, timeout=20)


async def exists(
    client: kubeloop.APIClient, kind: kubeloop.GroupVersionKind, name: str, namespace: str
) -> bool:
    try:
        await client.get(kind, name, namespace=namespace)
    except kubeloop.errors.NotFound:
        return False
    return True


async def pod_hash(client: kubeloop.APIClient, name: str, namespace: str) -> str:
    deployment = await client.get(kinds.Deployment, name, namespace=namespace)
    return str(deployment["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH])


class NoPoliciesCached:
    """A client whose cache shows no AgentPolicy (one a moment behind the server: a policy
    just made); everything else passed on."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def list(self, kind: Any, **options: Any) -> Any:
        listed = await self._client.list(kind, **options)
        if kind is AgentPolicy:
            listed.items.clear()
        return listed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def agent_run(name: str, namespace: str, agent_name: str, **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"agentRef": agent_name, "task": "summarise the cluster", **spec},
    }


async def finished(client: kubeloop.APIClient, name: str, namespace: str, timeout: float = 20) -> AgentRun:
    async def check() -> AgentRun:
        found = await client.get(AgentRun, name, namespace=namespace)
        assert found.status is not None and found.status.phase in ("Succeeded", "Failed"), found.status
        return found

    return await eventually(check, timeout=timeout)


async def inbound_token(
    client: kubeloop.APIClient, account: str, namespace: str, audience: str = INBOUND_AUDIENCE
) -> str:
    """A token of ServiceAccount ``account`` for ``audience``: by default what a channel's pod
    has projected to post with (the kubelet asks the TokenRequest API for it)."""
    issued = await client.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": [audience]}},
        of=kinds.ServiceAccount,
        name=account,
        subresource="token",
        namespace=namespace,
    )
    return str(issued["status"]["token"])


def writes(client: kubeloop.Client) -> int:
    """How many writes ``client`` (an API client, or a cached one's writer) has sent."""
    api = client.writer if isinstance(client, kubeloop.CachedClient) else client
    assert isinstance(api, kubeloop.APIClient)
    return sum(n for (method, _), n in api.requests.items() if method != "GET")


class Reconciler(Protocol):
    manager: kubeloop.Manager
    client: kubeloop.Client

    async def reconcile(self, request: kubeloop.Request) -> object: ...


async def assert_writes_nothing(reconciler: Reconciler, request: kubeloop.Request) -> None:
    """Three more reconciles of a converged ``request`` send no write through the reconciler's
    client, once its manager has settled (the other controllers sharing that client are done)."""
    await settled(reconciler.manager)
    before = writes(reconciler.client)
    for _ in range(3):
        await reconciler.reconcile(request)
    assert writes(reconciler.client) == before
