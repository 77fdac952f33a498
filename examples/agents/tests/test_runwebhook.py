"""The run webhook over real HTTP: a post with the token starts exactly one run (a retried
delivery, posted again or twice at once, starts no second), the run succeeds; posts without the
token, with a bad body or without a delivery id are refused naming what is wrong, and start
nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import agentplatform
import aiohttp
import orjson
import pytest
from agentobjects import agent, finished, runtime
from agentplatform.api.v1alpha1 import AgentRun
from agentplatform.controllers import runwebhook
from agentplatform.controllers.runwebhook import TRIGGER_LABEL, WebhookOptions, run_name
from prometheus_client import generate_latest

import kubeloop
from kubeloop.testing import eventually, settled

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
    url: str, body: Any, *, token: str | None = TOKEN, delivery: str | None = "d-1"
) -> tuple[int, dict[str, Any]]:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if delivery is not None:
        headers["X-Delivery-ID"] = delivery
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with aiohttp.ClientSession() as session, session.post(url, data=data, headers=headers) as response:
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
