"""An Agent's chat channels end to end on the simulating server, through the operator's real
inbound endpoint: each channel is a hardened Deployment with its Secret as its environment,
Error in the kubelet's words while the Secret is missing, Connected once it runs (the operator
never reads the Secret); its ServiceAccount may read
exactly its agent's runs; a removed channel takes its objects. A message the channel's rule
takes becomes one run (a retried delivery no second) whose trigger names the channel, the user
and the thread, and whose reply is recorded when it ends; a message it refuses is answered with
why and starts nothing; the metrics endpoint counts both; a converged agent with channels
writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import agentplatform
import aiohttp
import orjson
import pytest
from agentobjects import agent, assert_writes_nothing, exists, finished, ready, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun, ChannelSpec
from agentplatform.controllers.channels import ChannelSettings, admit
from agentplatform.controllers.runwebhook import WebhookOptions, channel_run_name

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually, fake_manager, intercepted

TOKEN = "chat-token"
SETTINGS = ChannelSettings(
    images={"slack": "example.com/slack-bridge:2"}, inbound_url="http://operator.test:8082"
)


@pytest.fixture
async def operator(
    client: kubeloop.APIClient, namespace: str
) -> AsyncIterator[tuple[str, str, agentplatform.Platform]]:
    """The platform with its inbound endpoint and metrics on free ports: their URLs."""
    manager = kubeloop.Manager(client, metrics_bind_address="127.0.0.1:0")
    options = WebhookOptions(TOKEN, bind_address="127.0.0.1:0", namespace=namespace)
    platform = agentplatform.setup(manager, webhook_options=options, channel_settings=SETTINGS)
    assert platform.webhook is not None
    async with manager:
        await asyncio.wait_for(platform.webhook.serving.wait(), 10)
        yield (
            f"http://127.0.0.1:{platform.webhook.port}",
            f"http://{manager.metrics_address}/metrics",
            platform,
        )


def slack(**channel: Any) -> dict[str, Any]:
    return {"type": "slack", "secretRef": {"name": "slack-creds"}, **channel}


def secret(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "stringData": {"SLACK_BOT_TOKEN": "xoxb-test"}}  # fmt: skip


async def post(
    url: str, body: Any, *, delivery: str = "m-1", token: str = TOKEN
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}", "X-Delivery-ID": delivery}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=orjson.dumps(body), headers=headers) as answer,
    ):
        return answer.status, await answer.json()


async def channel_status(client: kubeloop.APIClient, name: str, namespace: str) -> list[dict[str, Any]]:
    found = await client.get(Agent, name, namespace=namespace)
    return [c.to_dict() for c in (found.status.channels if found.status else None) or ()]


async def test_a_channel_is_a_hardened_deployment_connected_once_its_secret_exists(
    client: kubeloop.APIClient, operator: tuple[str, str, agentplatform.Platform], namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("helper", namespace, f"{namespace}-rt", channels=[slack(), {"type": "webhook", "secretRef": {"name": "hook"}, "image": "example.com/hook:1"}]))  # fmt: skip

    async def missing_secrets() -> None:
        assert await channel_status(client, "helper", namespace) == [
            {
                "type": "slack",
                "phase": "Error",
                "message": 'CreateContainerConfigError: secret "slack-creds" not found',
            },
            {
                "type": "webhook",
                "phase": "Error",
                "message": 'CreateContainerConfigError: secret "hook" not found',
            },
        ]

    await eventually(missing_secrets)
    deployment = await client.get(kinds.Deployment, "helper-channel-slack", namespace=namespace)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "example.com/slack-bridge:2"
    assert container["envFrom"] == [{"secretRef": {"name": "slack-creds"}}]
    env = {var["name"]: var.get("value") for var in container["env"]}
    assert env["INBOUND_URL"] == f"http://operator.test:8082/channels/{namespace}/helper/slack"
    assert env["CHANNEL_TYPE"] == "slack" and env["AGENT_NAME"] == "helper"
    assert pod["serviceAccountName"] == "helper-channel-slack"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
    }  # fmt: skip
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    hook = await client.get(kinds.Deployment, "helper-channel-webhook", namespace=namespace)
    assert hook["spec"]["template"]["spec"]["containers"][0]["image"] == "example.com/hook:1"
    (owner,) = deployment["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Agent", "helper")
    role = await client.get(kinds.Role, "helper-channel-slack", namespace=namespace)
    assert role.get("rules") in (None, [])  # no run yet: no rule (one with no names would allow all)

    await client.create(secret("slack-creds", namespace))

    async def slack_connected() -> None:
        statuses = await channel_status(client, "helper", namespace)
        assert statuses[0] == {"type": "slack", "phase": "Connected", "message": ""}, statuses

    await eventually(slack_connected, timeout=20)

    # Take the webhook channel out: its Deployment, ServiceAccount, Role and binding go.
    await client.patch(Agent, "helper", {"spec": {"channels": [slack()]}}, namespace=namespace)

    async def webhook_channel_gone() -> None:
        for kind in (kinds.Deployment, kinds.ServiceAccount, kinds.Role, kinds.RoleBinding):
            assert not await exists(client, kind, "helper-channel-webhook", namespace), kind
        assert [c["type"] for c in await channel_status(client, "helper", namespace)] == ["slack"]

    await eventually(webhook_channel_gone)
    assert await exists(client, kinds.Deployment, "helper-channel-slack", namespace)
    await ready(client, "helper", namespace)
    await assert_writes_nothing(operator[2].agents, kubeloop.Request(namespace, "helper"))


async def test_messages_the_channel_takes_become_runs_with_a_reply(
    client: kubeloop.APIClient, operator: tuple[str, str, agentplatform.Platform], namespace: str
) -> None:
    endpoint, metrics, _ = operator
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(secret("slack-creds", namespace))
    channel = slack(trigger="@triage", allowUsers=["alice", "bob"], denyUsers=["bob"])
    await client.create(agent("triage", namespace, f"{namespace}-rt", channels=[channel]))
    await client.create(agent("other", namespace, f"{namespace}-rt"))
    await ready(client, "triage", namespace)
    url = f"{endpoint}/channels/{namespace}/triage/slack"

    message = {"text": "@triage why is checkout slow?", "user": "alice", "thread": "T-42"}
    (first, answer), (second, _) = await asyncio.gather(post(url, message), post(url, message))
    name = channel_run_name(namespace, "triage", "slack", "m-1")
    assert sorted((first, second)) == [200, 202]  # the retry, posted at once, is a duplicate
    assert answer["run"] == name and answer["accepted"] is True
    run = await finished(client, name, namespace)
    assert run.spec.task == "why is checkout slow?"  # the mention is not the task
    assert run.spec.trigger is not None
    assert run.spec.trigger.to_dict() == {"channel": "slack", "user": "alice", "thread": "T-42"}
    assert run.status is not None and run.status.phase == "Succeeded"
    assert run.status.reply == "(the agent finished without an answer)"
    assert (run.metadata.labels or {})["agents.kubeloop.dev/channel"] == "slack"
    assert (await post(url, message))[1]["duplicate"] is True

    refusals = [
        ({"text": "@triage deploy it", "user": "bob"}, "bob is denied on this channel"),
        ({"text": "@triage deploy it", "user": "carol"}, "carol is not among the channel's allowed users"),
        ({"text": "triage: deploy it", "user": "alice"}, "the message does not mention @triage"),
        ({"text": "@triage", "user": "alice"}, "the message has no task besides its trigger"),
    ]
    for index, (body, reason) in enumerate(refusals):
        assert await post(url, body, delivery=f"r-{index}") == (200, {"accepted": False, "reason": reason})
    assert (await post(f"{endpoint}/channels/{namespace}/other/slack", message))[0] == 404
    assert (await post(f"{endpoint}/channels/{namespace}/triage/irc", message))[0] == 400
    assert (await post(url, message, token="wrong"))[0] == 401
    runs = await client.list(AgentRun, namespace=namespace)
    assert [r.metadata.name for r in runs] == [name]  # the refused messages started nothing

    async with aiohttp.ClientSession() as session, session.get(metrics) as scraped:
        text = await scraped.text()
    labels = 'agent="triage",outcome="{}",type="slack"'
    assert f"agentplatform_channel_messages_total{{{labels.format('accepted')}}} 1.0" in text
    assert f"agentplatform_channel_messages_total{{{labels.format('refused')}}} 4.0" in text
    assert f"agentplatform_channel_messages_total{{{labels.format('duplicate')}}} 2.0" in text

    # The channel's ServiceAccount may read this run, and no run of another agent.
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentRun",
         "metadata": {"name": "elsewhere", "namespace": namespace}, "spec": {"agentRef": "other", "task": "x"}}
    )  # fmt: skip

    async def may_read(run_name: str) -> bool:
        review = await client.create({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": f"system:serviceaccount:{namespace}:triage-channel-slack",
                     "resourceAttributes": {"namespace": namespace, "verb": "get", "group": "agents.kubeloop.dev",
                                            "resource": "agentruns", "name": run_name}},
        })  # fmt: skip
        return bool(review["status"]["allowed"])

    await eventually(lambda: may_read(name))
    assert not await may_read("elsewhere")
    assert not await may_read("some-future-run")


async def test_a_failed_run_from_a_channel_replies_why(
    client: kubeloop.APIClient, operator: tuple[str, str, agentplatform.Platform], namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("triage", namespace, f"{namespace}-rt", channels=[slack()]))
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentRun",
         "metadata": {"name": "doomed", "namespace": namespace, "annotations": {"kubeloop.dev/outcome": "Failed"}},
         "spec": {"agentRef": "triage", "task": "x", "trigger": {"channel": "slack", "user": "alice"}}}
    )  # fmt: skip
    run = await finished(client, "doomed", namespace)
    assert run.status is not None and run.status.phase == "Failed"
    assert run.status.reply is not None and run.status.reply.startswith("The run failed (JobFailed")


@pytest.mark.parametrize(
    ("channel", "text", "user", "expected"),
    [
        ({}, "hello", "anyone", (True, "", "hello")),
        ({"trigger": "deploy"}, "please DEPLOY now", "a", (True, "", "please DEPLOY now")),
        ({"trigger": "deploy"}, "redeployment", "a", (False, "the message does not hold the keyword 'deploy'", "")),
        ({"trigger": "@bot"}, "hey @Bot, status?", "a", (True, "", "hey , status?")),
        ({"trigger": "@bot"}, "mail me at x@bot.example", "a", (False, "the message does not mention @bot", "")),
        ({"allowUsers": ["a"], "denyUsers": ["a"]}, "hi", "a", (False, "a is denied on this channel", "")),
    ],
)  # fmt: skip
def test_the_channels_rule(
    channel: dict[str, Any], text: str, user: str, expected: tuple[bool, str, str]
) -> None:
    admission = admit(ChannelSpec.model_validate(slack(**channel)), text, user)
    assert (admission.accepted, admission.reason, admission.task) == expected


async def test_a_channel_the_server_refuses_is_reported_not_retried() -> None:
    """One reconcile at a time (``fake_manager``), the API server refusing the channel's
    Deployment (injected with ``intercepted``): the agent says so — Ready False, Invalid, the
    server's words — and the reconcile ends without an error to retry."""
    made: dict[str, agentplatform.Platform] = {}

    def setup(manager: kubeloop.Manager) -> None:
        made["platform"] = agentplatform.setup(manager, channel_settings=SETTINGS)

    refusal = 'Deployment.apps "typo-channel-slack" is invalid: spec.template.spec.containers[0].envFrom[0].secretRef.name: Invalid value'

    async def create(through: Any, obj: Any, **options: Any) -> Any:
        if obj.get("kind") == "Deployment" and obj["metadata"]["name"].endswith("-channel-slack"):
            raise kubeloop.errors.Invalid(refusal)
        return await through.create(obj, **options)

    objects = [runtime("rt"), agent("typo", "lab", "rt", channels=[slack()])]
    async with fake_manager(setup, *objects, crds=agentplatform.CUSTOM_RESOURCES) as manager:
        channels = made["platform"].agents.channels
        channels.client = intercepted(channels.client, create=create)
        controller = manager.controllers["agent"]
        await controller.reconcile_once(kubeloop.Request("lab", "typo"))  # the finalizer
        assert await controller.reconcile_once(kubeloop.Request("lab", "typo")) is None  # no error, no retry
        found = await manager.api_reader.get(Agent, "typo", namespace="lab")
        ready = next(
            c for c in (found.status.conditions if found.status else None) or () if c.type == "Ready"
        )
        assert (ready.status, ready.reason, ready.message) == ("False", "Invalid", refusal)
