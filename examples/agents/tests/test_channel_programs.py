"""The channel programs for real: an Agent's channel Deployment runs its image as a process on
the process node (``agentruntime.channels.<type>``), which posts its chat's messages to the
operator's inbound endpoint with its projected token and sends back the reply of the run, itself
the runner as a process talking to a test double of a model provider (``fakemodel``).

- ``webhook``: a signed ``POST /messages`` to the channel's pod (through its Service's
  endpoint) is answered with the agent's reply; an unsigned one is refused, a message the
  channel's rule refuses is answered with why, the same delivery again names the same run.
- ``telegram``: against a test double of Telegram's Bot API (``faketelegram``): a message
  polled from it is answered in its chat, as a reply to it, and confirmed.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import agentplatform
import aiohttp
import pytest
from agentobjects import agent, process_node_server, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun
from agentplatform.controllers.channels import ChannelSettings
from agentplatform.controllers.runwebhook import WebhookOptions, channel_run_name
from agentruntime.channels.webhook import signature
from fakemodel import FakeModel, answer
from fakeslack import FakeSlack, signed
from faketelegram import FakeTelegram

import kubeloop
from kubeloop import kinds
from kubeloop.testing import ServerThread, eventually

RUNNER_IMAGE = "ghcr.io/kubeloop/agent-python:0.1"
SIGNING_KEY = "webhook-signing-key"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """This module's server: its node runs the platform's images as processes."""
    server = process_node_server(tmp_path_factory.mktemp("pods"))
    yield server
    server.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def operator(client: kubeloop.APIClient, namespace: str) -> AsyncIterator[agentplatform.Platform]:
    """The platform with its inbound endpoint on the loopback, where channel pods post."""
    port = free_port()
    manager = kubeloop.Manager(client)
    options = WebhookOptions("unused", bind_address=f"127.0.0.1:{port}", namespace=namespace)
    settings = ChannelSettings(inbound_url=f"http://127.0.0.1:{port}")
    platform = agentplatform.setup(manager, webhook_options=options, channel_settings=settings)
    async with manager:
        yield platform


@pytest.fixture
async def model() -> AsyncIterator[FakeModel]:
    fake = await FakeModel([answer("checkout waits on the payment service", 40, 12)] * 4).start()
    yield fake
    await fake.stop()


async def chatty_agent(
    client: kubeloop.APIClient, namespace: str, model: FakeModel, channel: dict[str, Any], secret: dict[str, str]
) -> None:
    await client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "chat", "namespace": namespace},
                         "stringData": secret})  # fmt: skip
    await client.create(runtime(f"{namespace}-rt", RUNNER_IMAGE))
    spec = agent("triage", namespace, f"{namespace}-rt", channels=[{"secretRef": {"name": "chat"}, **channel}])
    spec["spec"]["model"] = {"provider": "openai", "name": "fake-model", "baseURL": model.url,
                             "authSecretRef": {"name": "llm", "key": "token"}}  # fmt: skip
    await client.create(spec)

    async def connected() -> None:
        found = await client.get(Agent, "triage", namespace=namespace)
        phases = [c.phase for c in (found.status.channels if found.status else None) or ()]
        assert phases == ["Connected"], found.status

    await eventually(connected, timeout=60)


async def test_a_webhook_channel_answers_a_signed_post_with_the_agents_reply(
    client: kubeloop.APIClient, operator: agentplatform.Platform, namespace: str, model: FakeModel
) -> None:
    channel = {"type": "webhook", "trigger": "@triage", "allowUsers": ["alice"]}
    await chatty_agent(client, namespace, model, channel, {"WEBHOOK_SIGNING_KEY": SIGNING_KEY})
    endpoints = await client.get(kinds.Endpoints, "triage-channel-webhook", namespace=namespace)
    [address] = [a["ip"] for subset in endpoints.get("subsets") or () for a in subset.get("addresses") or ()]
    url = f"http://{address}:8080/messages"

    async def post(message: dict[str, Any], delivery: str, key: str = SIGNING_KEY) -> tuple[int, dict[str, Any]]:
        body = json.dumps(message).encode()
        headers = {"X-Signature-256": signature(key, body), "X-Delivery-ID": delivery,
                   "Content-Type": "application/json"}  # fmt: skip
        async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as answered:
            return answered.status, await answered.json()

    asked = {"text": "@triage why is checkout slow?", "user": "alice", "thread": "incident-7"}
    run = channel_run_name(namespace, "triage", "webhook", "d-1")
    replied = {"accepted": True, "run": run, "reply": "checkout waits on the payment service"}
    assert await post(asked, "d-1") == (200, replied)
    assert model.requests[0].body["messages"][-1] == {"role": "user", "content": "why is checkout slow?"}
    assert await post(asked, "d-1") == (200, replied)  # the same delivery: the same run, no second
    assert len(model.requests) == 1
    refused = await post({**asked, "user": "mallory"}, "d-2")
    assert refused == (200, {"accepted": False, "reason": "mallory is not among the channel's allowed users"})
    status, said = await post(asked, "d-3", key="not-the-key")
    assert (status, said) == (401, {"error": "the X-Signature-256 header does not match the body"})
    status, said = await post({"text": "@triage hi"}, "d-4")
    assert (status, said) == (400, {"error": "user: a non-empty string is required"})
    assert len(model.requests) == 1  # none of those reached the agent


async def test_a_telegram_channel_answers_in_the_chat_it_was_asked_in(
    client: kubeloop.APIClient, operator: agentplatform.Platform, namespace: str, model: FakeModel
) -> None:
    telegram = await FakeTelegram("123456:bot-token").start()
    try:
        channel = {"type": "telegram", "trigger": "@triage"}
        await chatty_agent(client, namespace, model, channel,
                           {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.url})  # fmt: skip
        message = {"message_id": 7, "from": {"id": 42, "username": "alice"}, "chat": {"id": -1001},
                   "text": "@triage are the nodes healthy?"}  # fmt: skip
        await telegram.send_update({"update_id": 500, "message": message})
        await telegram.send_update({"update_id": 501, "message": {**message, "message_id": 8, "text": "lunch?"}})
        [sent] = await telegram.wait_sent(1)
        assert sent == {"chat_id": -1001, "text": "checkout waits on the payment service",
                        "reply_parameters": {"message_id": 7, "allow_sending_without_reply": True}}  # fmt: skip
        assert model.requests[0].body["messages"][-1] == {"role": "user", "content": "are the nodes healthy?"}
        run = channel_run_name(namespace, "triage", "telegram", "telegram-500")
        trigger = (await client.get(AgentRun, run, namespace=namespace)).spec.trigger
        assert trigger is not None and trigger.to_dict() == {"channel": "telegram", "user": "alice", "thread": "-1001"}

        async def confirmed() -> None:
            assert telegram.offsets[-1] == 502  # both taken (the second refused by the trigger): confirmed

        await eventually(confirmed, timeout=30)
        assert len(model.requests) == 1
    finally:
        await telegram.stop()


async def test_a_slack_channel_answers_a_mention_in_its_thread(
    client: kubeloop.APIClient, operator: agentplatform.Platform, namespace: str, model: FakeModel
) -> None:
    slack = await FakeSlack("xoxb-bot-token").start()
    try:
        secret = {"SLACK_BOT_TOKEN": slack.token, "SLACK_SIGNING_SECRET": "signing-secret", "SLACK_API_URL": slack.url}
        await chatty_agent(client, namespace, model, {"type": "slack", "allowUsers": ["U0ALICE"]}, secret)
        endpoints = await client.get(kinds.Endpoints, "triage-channel-slack", namespace=namespace)
        [address] = [a["ip"] for subset in endpoints.get("subsets") or () for a in subset.get("addresses") or ()]
        url = f"http://{address}:8080/slack/events"

        async def post(payload: dict[str, Any], secret: str = "signing-secret", **sign: Any) -> tuple[int, str]:
            body, headers = signed(secret, payload, **sign)
            async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as answered:
                return answered.status, await answered.text()

        assert await post({"type": "url_verification", "challenge": "c-123"}) == (200, '{"challenge": "c-123"}')
        mention = {"type": "app_mention", "user": "U0ALICE", "text": "<@U0BOT> is the ingress healthy?",
                   "channel": "C0OPS", "ts": "1700000000.000100", "thread_ts": "1700000000.000001"}  # fmt: skip
        event = {"type": "event_callback", "event_id": "Ev01", "event": mention}
        assert (await post(event))[0] == 200
        assert (await post(event))[0] == 200  # Slack's retry of the same event: no second run
        [reply] = await slack.wait_posted(1)
        assert reply == {"channel": "C0OPS", "thread_ts": "1700000000.000001", "text": "checkout waits on the payment service"}
        assert model.requests[0].body["messages"][-1]["content"] == "<@U0BOT> is the ingress healthy?"
        assert (await post(event, secret="forged"))[0] == 401
        assert (await post(event, at=time.time() - 600))[0] == 401  # a replay, too old
        # A bot's own message (its reply, echoed back as an event) starts nothing.
        echoed = {**event, "event_id": "Ev02", "event": {**mention, "bot_id": "B0BOT", "text": "checkout waits"}}
        assert (await post(echoed))[0] == 200
        later = {**event, "event_id": "Ev03", "event": {**mention, "ts": "1700000001.000100", "thread_ts": None}}
        assert (await post(later))[0] == 200
        _, second = await slack.wait_posted(2)
        assert second["thread_ts"] == "1700000001.000100"  # a message outside a thread: its own
        run = channel_run_name(namespace, "triage", "slack", "slack-Ev01")
        found = await client.get(AgentRun, run, namespace=namespace)
        assert found.spec.trigger is not None
        assert found.spec.trigger.to_dict() == {"channel": "slack", "user": "U0ALICE", "thread": "1700000000.000001"}
        runs = {r.metadata.name for r in await client.list(AgentRun, namespace=namespace)}
        assert runs == {run, channel_run_name(namespace, "triage", "slack", "slack-Ev03")}  # not the echo's
    finally:
        await slack.stop()
