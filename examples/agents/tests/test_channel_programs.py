"""The channel programs for real: an Agent's channel Deployment runs its image as a process on
the process node (``agentruntime.channels.<type>``), which posts its chat's messages to the
operator's inbound endpoint with its projected token and sends back the reply of the run, itself
the runner as a process talking to a test double of a model provider (``fakemodel``).

- ``webhook``: a signed ``POST /messages`` to the channel's pod (through its Service's
  endpoint) is answered with the agent's reply; an unsigned one is refused, a message the
  channel's rule refuses is answered with why, the same delivery again names the same run.
- ``telegram``: against a test double of Telegram's Bot API (``faketelegram``): a message
  polled from it is answered in its chat, as a reply to it, and confirmed.
- ``slack``, ``whatsapp``, ``discord``: the test posts, signed, what the service would (events,
  notifications, interactions), and a test double of the service's API (``fakeslack``,
  ``recordingapi``) records the answers: in the thread, to the sender, in place of the deferred
  response. Forged signatures are refused, and ask nothing.
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
from agentruntime.channels.whatsapp import signature as whatsapp_signature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fakemodel import FakeModel, answer
from fakeslack import fake_slack, signed
from faketelegram import FakeTelegram
from recordingapi import RecordingAPI

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


async def serving(client: kubeloop.APIClient, service: str, namespace: str) -> str:
    """The address of the one pod behind ``service``."""
    endpoints = await client.get(kinds.Endpoints, service, namespace=namespace)
    [address] = [a["ip"] for subset in endpoints.get("subsets") or () for a in subset.get("addresses") or ()]
    return str(address)


async def test_a_webhook_channel_answers_a_signed_post_with_the_agents_reply(
    client: kubeloop.APIClient, operator: agentplatform.Platform, namespace: str, model: FakeModel
) -> None:
    channel = {"type": "webhook", "trigger": "@triage", "allowUsers": ["alice"]}
    await chatty_agent(client, namespace, model, channel, {"WEBHOOK_SIGNING_KEY": SIGNING_KEY})
    url = f"http://{await serving(client, 'triage-channel-webhook', namespace)}:8080/messages"

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
    slack = await fake_slack("xoxb-bot-token").start()
    try:
        secret = {"SLACK_BOT_TOKEN": "xoxb-bot-token", "SLACK_SIGNING_SECRET": "signing-secret",
                  "SLACK_API_URL": f"{slack.url}/api/"}  # fmt: skip
        await chatty_agent(client, namespace, model, {"type": "slack", "allowUsers": ["U0ALICE"]}, secret)
        url = f"http://{await serving(client, 'triage-channel-slack', namespace)}:8080/slack/events"

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
        [reply] = [posted.body for posted in await slack.wait_recorded(1)]
        assert reply == {"channel": "C0OPS", "thread_ts": "1700000000.000001", "text": "checkout waits on the payment service"}
        assert model.requests[0].body["messages"][-1]["content"] == "<@U0BOT> is the ingress healthy?"
        assert (await post(event, secret="forged"))[0] == 401
        assert (await post(event, at=time.time() - 600))[0] == 401  # a replay, too old
        # A bot's own message (its reply, echoed back as an event) starts nothing.
        echoed = {**event, "event_id": "Ev02", "event": {**mention, "bot_id": "B0BOT", "text": "checkout waits"}}
        assert (await post(echoed))[0] == 200
        later = {**event, "event_id": "Ev03", "event": {**mention, "ts": "1700000001.000100", "thread_ts": None}}
        assert (await post(later))[0] == 200
        second = (await slack.wait_recorded(2))[1].body
        assert second["thread_ts"] == "1700000001.000100"  # a message outside a thread: its own
        run = channel_run_name(namespace, "triage", "slack", "slack-Ev01")
        found = await client.get(AgentRun, run, namespace=namespace)
        assert found.spec.trigger is not None
        assert found.spec.trigger.to_dict() == {"channel": "slack", "user": "U0ALICE", "thread": "1700000000.000001"}
        runs = {r.metadata.name for r in await client.list(AgentRun, namespace=namespace)}
        assert runs == {run, channel_run_name(namespace, "triage", "slack", "slack-Ev03")}  # not the echo's
    finally:
        await slack.stop()


async def test_a_whatsapp_channel_answers_the_sender(
    client: kubeloop.APIClient, operator: agentplatform.Platform, namespace: str, model: FakeModel
) -> None:
    """Against a test double of Meta's Cloud API (``recordingapi``): Meta's verification, then a
    signed notification whose text message is answered to its sender."""
    graph = await RecordingAPI({("POST", "/v21.0/{number}/messages"): lambda body: {"messages": [{"id": "wamid.R"}]}},
                               token="wa-token").start()  # fmt: skip
    try:
        secret = {"WHATSAPP_VERIFY_TOKEN": "verify-me", "WHATSAPP_APP_SECRET": "app-secret",
                  "WHATSAPP_TOKEN": "wa-token", "WHATSAPP_API_URL": graph.url}  # fmt: skip
        await chatty_agent(client, namespace, model, {"type": "whatsapp", "allowUsers": ["15550001111"]}, secret)
        base = f"http://{await serving(client, 'triage-channel-whatsapp', namespace)}:8080/whatsapp/webhook"
        async with aiohttp.ClientSession() as session:
            verify = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "1158201444"}
            async with session.get(base, params=verify) as answered:
                assert (answered.status, await answered.text()) == (200, "1158201444")
            async with session.get(base, params={**verify, "hub.verify_token": "guess"}) as answered:
                assert answered.status == 403
            message = {"from": "15550001111", "id": "wamid.ABC", "timestamp": "1700000000", "type": "text",
                       "text": {"body": "is the database up?"}}  # fmt: skip
            value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "106540352242922"},
                     "messages": [message]}  # fmt: skip
            body = json.dumps({"object": "whatsapp_business_account",
                               "entry": [{"id": "1", "changes": [{"field": "messages", "value": value}]}]}).encode()  # fmt: skip
            for key in ("forged", "app-secret"):
                headers = {"X-Hub-Signature-256": whatsapp_signature(key, body), "Content-Type": "application/json"}
                async with session.post(base, data=body, headers=headers) as answered:
                    assert answered.status == (401 if key == "forged" else 200)
        [sent] = await graph.wait_recorded(1)
        assert sent.path == "/v21.0/106540352242922/messages" and sent.authorization == "Bearer wa-token"
        assert sent.body == {"messaging_product": "whatsapp", "to": "15550001111", "type": "text",
                             "text": {"body": "checkout waits on the payment service"},
                             "context": {"message_id": "wamid.ABC"}}  # fmt: skip
        assert model.requests[0].body["messages"][-1] == {"role": "user", "content": "is the database up?"}
        assert len(model.requests) == 1  # the forged post asked nothing
    finally:
        await graph.stop()


async def test_a_discord_channel_answers_a_slash_command(
    client: kubeloop.APIClient, operator: agentplatform.Platform, namespace: str, model: FakeModel
) -> None:
    """Against a test double of Discord's interaction webhooks (``recordingapi``): a PING, then
    ``/ask`` deferred and answered by editing the response; a refused one is answered with why."""
    discord = await RecordingAPI({("PATCH", "/webhooks/{app}/{token}/messages/@original"): lambda body: {"id": "m1", **body}}).start()
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    try:
        secret = {"DISCORD_PUBLIC_KEY": public, "DISCORD_API_URL": discord.url}
        await chatty_agent(client, namespace, model, {"type": "discord", "denyUsers": ["mallory"]}, secret)
        url = f"http://{await serving(client, 'triage-channel-discord', namespace)}:8080/discord/interactions"

        async def interact(interaction: dict[str, Any], signer: Ed25519PrivateKey = key) -> tuple[int, Any]:
            body, timestamp = json.dumps(interaction).encode(), str(int(time.time()))
            headers = {"X-Signature-Ed25519": signer.sign(timestamp.encode() + body).hex(),
                       "X-Signature-Timestamp": timestamp, "Content-Type": "application/json"}  # fmt: skip
            async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as answered:
                return answered.status, await answered.json()

        assert await interact({"type": 1}) == (200, {"type": 1})
        assert (await interact({"type": 1}, signer=Ed25519PrivateKey.generate()))[0] == 401
        ask = {"type": 2, "id": "1200", "application_id": "app-9", "token": "itoken-1", "channel_id": "C77",
               "member": {"user": {"id": "42", "username": "alice"}},
               "data": {"name": "ask", "options": [{"name": "question", "type": 3, "value": "why is the queue long?"}]}}  # fmt: skip
        assert await interact(ask) == (200, {"type": 5})
        refused = {**ask, "id": "1201", "token": "itoken-2", "member": {"user": {"id": "66", "username": "mallory"}}}
        assert await interact(refused) == (200, {"type": 5})
        answers = {r.path: r.body for r in await discord.wait_recorded(2)}
        assert answers == {
            "/webhooks/app-9/itoken-1/messages/@original": {"content": "checkout waits on the payment service"},
            "/webhooks/app-9/itoken-2/messages/@original": {"content": "Not asked: mallory is denied on this channel."},
        }
        assert model.requests[0].body["messages"][-1] == {"role": "user", "content": "why is the queue long?"}
        run = await client.get(AgentRun, channel_run_name(namespace, "triage", "discord", "discord-1200"), namespace=namespace)
        assert run.spec.trigger is not None and run.spec.trigger.to_dict() == {"channel": "discord", "user": "alice", "thread": "C77"}
    finally:
        await discord.stop()
