"""The run webhook over real HTTP: a post with the token starts exactly one run (a retried
delivery, posted again or twice at once, starts no second, nor does one posted after the agent
pruned its run), the run succeeds; posts without the token, with a bad body, without a delivery
id or for a namespace the endpoint does not serve are refused naming what is wrong, and start
nothing. Given a certificate, the endpoint speaks only HTTPS and follows a rotation."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import agentplatform
import aiohttp
import orjson
import pytest
from agentobjects import agent, exists, finished, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun
from agentplatform.controllers import runwebhook
from agentplatform.controllers.runwebhook import TRIGGER_LABEL, WebhookOptions, run_name
from prometheus_client import generate_latest

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually, settled, write_serving_certificate

TOKEN = "s3cret-token"


@pytest.fixture
async def platform(client: kubeloop.APIClient, namespace: str) -> AsyncIterator[tuple[str, kubeloop.Manager]]:
    """The platform with its webhook on a free port: the endpoint's URL and the manager."""
    manager = kubeloop.Manager(client)
    options = WebhookOptions(TOKEN, bind_address="127.0.0.1:0", namespace=namespace)
    platform = agentplatform.setup(manager, webhook_options=options)
    assert platform.webhook is not None
    async with manager:
        await asyncio.wait_for(platform.webhook.serving.wait(), 10)
        yield f"http://127.0.0.1:{platform.webhook.port}/runs", manager


@pytest.fixture
def webhook(platform: tuple[str, kubeloop.Manager]) -> str:
    return platform[0]


async def post(
    url: str, body: Any, *, token: str | None = TOKEN, delivery: str | None = "d-1", ca: bytes | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if delivery is not None:
        headers["X-Delivery-ID"] = delivery
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    tls = ssl.create_default_context(cadata=ca.decode()) if ca is not None else True
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=data, headers=headers, ssl=tls) as response,
    ):
        return response.status, await response.json()


async def webhook_runs(client: kubeloop.APIClient, namespace: str) -> list[str]:
    runs = await client.list(AgentRun, namespace=namespace, label_selector=f"{TRIGGER_LABEL}=webhook")
    return sorted(run.metadata.name or "" for run in runs)


async def test_a_delivery_starts_exactly_one_run(
    client: kubeloop.APIClient, namespace: str, webhook: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("triage", namespace, f"{namespace}-rt"))
    body = {"agent": "triage", "task": "Why is checkout slow?", "timeoutSeconds": 60}
    # The chat bot's first attempt, and a retry sent before the first was answered.
    (first, answer), (second, _) = await asyncio.gather(post(webhook, body), post(webhook, body))
    assert {first, second} <= {200, 202} and 202 in (first, second)
    assert answer == {"run": run_name("d-1"), "namespace": namespace} | (
        {"duplicate": True} if first == 200 else {}
    )
    run = await finished(client, run_name("d-1"), namespace)
    assert run.status is not None and run.status.phase == "Succeeded"
    assert (run.spec.agent_ref, run.spec.task, run.spec.timeout_seconds) == ("triage", body["task"], 60)
    assert (run.metadata.annotations or {})["agents.kubeloop.dev/delivery-id"] == "d-1"

    # A retry after the run exists is answered as a duplicate; another delivery is a new run.
    status, answer = await post(webhook, body)
    assert (status, answer["duplicate"]) == (200, True)
    status, answer = await post(webhook, {**body, "namespace": namespace}, delivery="d-2")
    assert status == 202 and answer["run"] == run_name("d-2")
    await eventually(
        lambda: _expect(client, namespace, sorted([run_name("d-1"), run_name("d-2")])), timeout=20
    )


async def _expect(client: kubeloop.APIClient, namespace: str, names: list[str]) -> None:
    assert await webhook_runs(client, namespace) == names


@pytest.mark.parametrize(
    ("body", "token", "delivery", "status", "error"),
    [
        ({"agent": "a", "task": "t"}, None, "d", 401, "a valid bearer token is required"),
        ({"agent": "a", "task": "t"}, "wrong", "d", 401, "a valid bearer token is required"),
        ({"agent": "a", "task": "t"}, TOKEN, None, 400, "the X-Delivery-ID header is required"),
        (b"{not json", TOKEN, "d", 400, "the body is not JSON"),
        ([1, 2], TOKEN, "d", 400, "the body must be a JSON object"),
        ({"task": "t"}, TOKEN, "d", 400, "agent: Required value"),
        ({"agent": "a", "task": ""}, TOKEN, "d", 400, "task: Required value"),
        ({"agent": "a", "task": "t", "timeoutSeconds": 0}, TOKEN, "d", 400, "timeoutSeconds: Invalid value"),
        (
            {"agent": "a", "task": "t", "timeoutSeconds": True},
            TOKEN,
            "d",
            400,
            "timeoutSeconds: Invalid value",
        ),
        ({"agent": "a", "task": "t" * 100_000}, TOKEN, "d", 413, "larger than 65536 bytes"),
    ],
)
async def test_refused_posts_say_why_and_start_nothing(
    client: kubeloop.APIClient,
    namespace: str,
    platform: tuple[str, kubeloop.Manager],
    body: Any,
    token: str | None,
    delivery: str | None,
    status: int,
    error: str,
) -> None:
    webhook, manager = platform
    got, answer = await post(webhook, body, token=token, delivery=delivery)
    assert got == status and error in answer["error"]
    await settled(manager)  # whatever the post set going has run its course
    assert await webhook_runs(client, namespace) == []


async def test_pending_deliveries_are_bounded(
    client: kubeloop.APIClient,
    namespace: str,
    platform: tuple[str, kubeloop.Manager],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deliveries waiting for their runs are held in memory: at the bound a post is answered
    429 with Retry-After, and holds nothing more."""
    url, manager = platform
    monkeypatch.setattr(runwebhook, "MAX_PENDING", 2)
    controller = manager.controllers["webhook"]
    await controller.stop()  # nothing makes the runs: the deliveries stay pending
    body = {"agent": "triage", "task": "x"}
    assert (await post(url, body, delivery="a"))[0] == 202
    assert (await post(url, body, delivery="b"))[0] == 202
    status, answer = await post(url, body, delivery="c")
    assert status == 429 and answer == {"error": "2 deliveries are waiting for their runs; try again"}
    assert (await post(url, body, delivery="a"))[0] == 202  # the same delivery again: already held


async def test_runs_of_agents_that_do_not_exist_are_counted_without_their_name(
    client: kubeloop.APIClient, namespace: str, platform: tuple[str, kubeloop.Manager]
) -> None:
    """A run may name any agent: a metric labelled by every name a tenant writes would grow
    without bound, so a run of an agent that does not exist is counted under agent=""."""
    _, manager = platform
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentRun",
         "metadata": {"name": "ghost-run", "namespace": namespace}, "spec": {"agentRef": "ghost-1234", "task": "x"}}
    )  # fmt: skip

    async def counted() -> None:
        text = generate_latest(manager.metrics.registry).decode()
        assert 'agentplatform_runs_total{agent="",phase="Pending"}' in text
        assert "ghost-1234" not in text

    await eventually(counted)


async def test_a_delivery_whose_run_was_pruned_is_still_a_duplicate(
    client: kubeloop.APIClient, namespace: str, webhook: str
) -> None:
    """The agent keeps no finished run (runHistoryLimit 0): the record of a delivery is then the
    agent's ledger, which the endpoint reads, and which goes with the agent."""
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("triage", namespace, f"{namespace}-rt", runHistoryLimit=0))
    body = {"agent": "triage", "task": "Why is checkout slow?"}
    assert (await post(webhook, body, delivery="once"))[0] == 202
    name = run_name("once")

    async def pruned() -> None:
        assert not await exists(client, AgentRun, name, namespace)
        ledger = await client.get(kinds.ConfigMap, "triage-deliveries", namespace=namespace)
        assert name in ledger["data"]
        assert kubeloop.is_controlled_by(ledger, await client.get(Agent, "triage", namespace=namespace))

    await eventually(pruned, timeout=20)
    status, answer = await post(webhook, body, delivery="once")  # the sender's late retry
    assert (status, answer) == (200, {"run": name, "namespace": namespace, "duplicate": True})
    assert not await exists(client, AgentRun, name, namespace)
    assert (await post(webhook, body, delivery="twice"))[0] == 202  # another delivery is new work


async def test_runs_go_only_to_the_namespaces_the_endpoint_serves(
    client: kubeloop.APIClient, namespace: str
) -> None:
    """One token is every sender's: it makes runs in the default namespace and those named,
    never in another tenant's."""
    manager = kubeloop.Manager(client)
    options = WebhookOptions(TOKEN, bind_address="127.0.0.1:0", namespace=namespace, namespaces=("also",))
    webhook = agentplatform.setup(manager, webhook_options=options).webhook
    assert webhook is not None
    async with manager:
        await asyncio.wait_for(webhook.serving.wait(), 10)
        url = f"http://127.0.0.1:{webhook.port}/runs"
        body = {"agent": "a", "task": "t", "namespace": "kube-system"}
        status, answer = await post(url, body)
        assert status == 403
        assert answer == {"error": "namespace: Forbidden: this endpoint makes no runs in 'kube-system'"}
        assert (await post(url, {**body, "namespace": namespace}, delivery="mine"))[0] == 202
        assert (await post(url, {**body, "namespace": "also"}, delivery="named"))[0] == 202
        await settled(manager)
        assert await client.list(AgentRun, namespace="kube-system") == []
        assert await webhook_runs(client, namespace) == [run_name("mine")]


async def test_with_a_certificate_the_endpoint_speaks_only_https_and_follows_rotation(
    client: kubeloop.APIClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    ca = write_serving_certificate(tmp_path)
    manager = kubeloop.Manager(client)
    options = WebhookOptions(TOKEN, bind_address="127.0.0.1:0", namespace=namespace, cert_dir=str(tmp_path))
    webhook = agentplatform.setup(manager, webhook_options=options).webhook
    assert webhook is not None
    async with manager:
        await asyncio.wait_for(webhook.serving.wait(), 10)
        url = f"https://127.0.0.1:{webhook.port}/runs"
        body = {"agent": "a", "task": "t"}
        assert (await post(url, body, ca=ca))[0] == 202
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await post(url, body)  # the system's roots do not vouch for it
        with pytest.raises(aiohttp.ClientError):
            await post(url.replace("https", "http"), body)  # plain HTTP gets no answer

        rotated = write_serving_certificate(tmp_path)

        async def serves_the_new_one() -> None:
            assert (await post(url, body, ca=rotated, delivery="d-2"))[0] == 202

        await eventually(serves_the_new_one)
