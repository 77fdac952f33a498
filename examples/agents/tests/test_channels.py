"""An Agent's chat channels end to end on the simulating server, through the operator's real
inbound endpoint: each channel is a hardened Deployment with its Secret as files (no variable
holds a credential), Error in the kubelet's words while the Secret is missing, Connected once it runs (the operator
never reads the Secret); its ServiceAccount may read
exactly its agent's runs; a removed channel takes its objects. A message the channel's rule
takes, posted with the channel's own credential (a token of its ServiceAccount for the inbound
audience: no other account's, no other audience's, not the shared token of ``/runs``), becomes
one run (a retried delivery no second) whose trigger names the channel, the user and the thread, and whose reply is recorded when it ends; a message it refuses is answered with
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
from agentobjects import (
    agent,
    assert_writes_nothing,
    condition,
    exists,
    finished,
    inbound_token,
    ready,
    runtime,
)
from agentplatform.api.v1alpha1 import Agent, AgentRun, ChannelSpec
from agentplatform.controllers import runwebhook
from agentplatform.controllers.channels import ChannelSettings, admit
from agentplatform.controllers.runwebhook import WebhookOptions, channel_run_name

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually, fake_manager, intercepted, unavailable

TOKEN = "chat-token"
#: The API server's audience (its tokens' issuer): a token for it is no channel's credential.
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
SETTINGS = ChannelSettings(
    images={"slack": "example.com/slack-bridge:2"},
    inbound_url="https://operator.test:8082",
    inbound_ca="-----BEGIN CERTIFICATE-----\nthe endpoint's CA\n-----END CERTIFICATE-----\n",
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


async def post(url: str, body: Any, *, token: str, delivery: str = "m-1") -> tuple[int, dict[str, Any]]:
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
                "message": 'FailedMount: MountVolume.SetUp failed for volume "credentials" : secret "slack-creds" not found',
            },
            {
                "type": "webhook",
                "phase": "Error",
                "message": 'FailedMount: MountVolume.SetUp failed for volume "credentials" : secret "hook" not found',
            },
        ]

    await eventually(missing_secrets)
    deployment = await client.get(kinds.Deployment, "helper-channel-slack", namespace=namespace)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "example.com/slack-bridge:2"
    # The channel's Secret as files, a key each: no variable holds a credential.
    assert "envFrom" not in container
    assert [var["valueFrom"] for var in container["env"] if "valueFrom" in var] == [
        {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}  # where it listens: no credential
    ]
    # Slack calls it: it listens on its port, Ready once it does, behind a Service of its name.
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["tcpSocket"] == {"port": 8080}
    service = await client.get(kinds.Service, "helper-channel-slack", namespace=namespace)
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["port"] == 8080
    (credentials,) = [volume for volume in pod["volumes"] if volume["name"] == "credentials"]
    assert credentials["secret"] == {"secretName": "slack-creds", "defaultMode": 420}
    env = {var["name"]: var.get("value") for var in container["env"]}
    assert env["INBOUND_URL"] == f"https://operator.test:8082/channels/{namespace}/helper/slack"
    # Its credential for the endpoint, and the CA to check the endpoint by, as files.
    mount = "/var/run/secrets/agents.kubeloop.dev/inbound"
    assert (env["INBOUND_TOKEN_FILE"], env["INBOUND_CA_FILE"]) == (f"{mount}/token", f"{mount}/ca.crt")
    assert env["CHANNEL_CREDENTIALS_DIR"] == "/var/run/secrets/agents.kubeloop.dev/channel"
    assert {"name": "inbound", "mountPath": mount, "readOnly": True} in container["volumeMounts"]
    (inbound,) = [volume for volume in pod["volumes"] if volume["name"] == "inbound"]
    assert inbound["projected"]["sources"] == [
        {"serviceAccountToken": {"audience": "agents.kubeloop.dev/inbound", "expirationSeconds": 3600, "path": "token"}},
        {"configMap": {"name": "helper-channel-slack", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]  # fmt: skip
    trust = await client.get(kinds.ConfigMap, "helper-channel-slack", namespace=namespace)
    assert trust["data"] == {"ca.crt": SETTINGS.inbound_ca}
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

    # Take the webhook channel out: its Deployment, ConfigMap, ServiceAccount, Role and binding go.
    await client.patch(Agent, "helper", {"spec": {"channels": [slack()]}}, namespace=namespace)

    async def webhook_channel_gone() -> None:
        for kind in (kinds.Deployment, kinds.ConfigMap, kinds.ServiceAccount, kinds.Role, kinds.RoleBinding):
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
    token = await inbound_token(client, "triage-channel-slack", namespace)

    message = {"text": "@triage why is checkout slow?", "user": "alice", "thread": "T-42"}
    (first, answer), (second, _) = await asyncio.gather(
        post(url, message, token=token), post(url, message, token=token)
    )
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
    assert (await post(url, message, token=token))[1]["duplicate"] is True

    refusals = [
        ({"text": "@triage deploy it", "user": "bob"}, "bob is denied on this channel"),
        ({"text": "@triage deploy it", "user": "carol"}, "carol is not among the channel's allowed users"),
        ({"text": "triage: deploy it", "user": "alice"}, "the message does not mention @triage"),
        ({"text": "@triage", "user": "alice"}, "the message has no task besides its trigger"),
    ]
    for index, (body, reason) in enumerate(refusals):
        assert await post(url, body, token=token, delivery=f"r-{index}") == (
            200,
            {"accepted": False, "reason": reason},
        )
    other_url = f"{endpoint}/channels/{namespace}/other/slack"
    assert (await post(other_url, message, token=token))[0] == 403  # triage's token is not other's
    # A tenant's account of a channel's name, for an agent without that channel.
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "other-channel-slack", "namespace": namespace},
        }
    )
    other = await inbound_token(client, "other-channel-slack", namespace)
    assert (await post(other_url, message, token=other))[0] == 404  # other has no slack channel
    assert (await post(f"{endpoint}/channels/{namespace}/triage/irc", message, token=token))[0] == 403
    assert (await post(url, message, token="wrong", delivery="x"))[0] == 401
    assert (await post(url, message, token=TOKEN, delivery="x"))[0] == 401  # the shared token of /runs
    for_the_api = await inbound_token(client, "triage-channel-slack", namespace, audience=API_AUDIENCE)
    assert (await post(url, message, token=for_the_api, delivery="x"))[0] == 401
    await eventually(lambda: client.get(kinds.ServiceAccount, "default", namespace=namespace))
    default = await inbound_token(client, "default", namespace)
    status, refused = await post(url, message, token=default, delivery="x")
    assert status == 403 and refused["error"] == (
        f"system:serviceaccount:{namespace}:default may not post as the channel "
        f"system:serviceaccount:{namespace}:triage-channel-slack"
    )
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

    # The same channel of an agent of the same name in another namespace: not this one's.
    elsewhere = f"{namespace}-b"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": elsewhere}})
    await client.create(secret("slack-creds", elsewhere))
    await client.create(agent("triage", elsewhere, f"{namespace}-rt", channels=[channel]))
    await eventually(lambda: client.get(kinds.ServiceAccount, "triage-channel-slack", namespace=elsewhere))
    theirs = await inbound_token(client, "triage-channel-slack", elsewhere)
    assert (await post(url, message, token=theirs, delivery="x"))[0] == 403
    assert (await post(url.replace(namespace, elsewhere), message, token=theirs, delivery="y"))[0] == 202


async def test_an_account_of_a_channels_name_made_by_someone_else_posts_nothing(
    client: kubeloop.APIClient, operator: tuple[str, str, agentplatform.Platform], namespace: str
) -> None:
    """A tenant who makes the ServiceAccount ``<agent>-channel-<type>`` before the agent has it:
    the agent leaves it alone (NameConflict), and its tokens are no credential of the channel."""
    endpoint, _, _ = operator
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "ops-channel-slack", "namespace": namespace},
        }
    )
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(secret("slack-creds", namespace))
    await client.create(agent("ops", namespace, f"{namespace}-rt", channels=[slack()]))

    async def conflict() -> None:
        found = await client.get(Agent, "ops", namespace=namespace)
        assert condition(found, "Ready") == ("False", "NameConflict")

    await eventually(conflict)
    planted = await inbound_token(client, "ops-channel-slack", namespace)
    status, refused = await post(
        f"{endpoint}/channels/{namespace}/ops/slack", {"text": "deploy", "user": "mallory"}, token=planted
    )
    assert status == 403
    assert refused["error"].endswith(f"is not the account Agent {namespace}/ops made")
    assert await client.list(AgentRun, namespace=namespace) == []


async def test_a_post_whose_token_cannot_be_reviewed_is_answered_503(
    client: kubeloop.APIClient, operator: tuple[str, str, agentplatform.Platform], namespace: str
) -> None:
    """The API server failing the TokenReview (a 503 here, injected) is no client's mistake: the
    channel is told to come back (Retry-After), and nothing starts."""
    endpoint, _, platform = operator
    assert platform.webhook is not None

    async def review_fails(through: Any, obj: Any, **options: Any) -> Any:
        if obj.get("kind") == "TokenReview":
            raise unavailable()
        return await through.create(obj, **options)

    platform.webhook.client = intercepted(platform.webhook.client, create=review_fails)
    headers = {"Authorization": "Bearer any", "X-Delivery-ID": "m-1"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{endpoint}/channels/{namespace}/x/slack", json={"text": "t", "user": "u"}, headers=headers
        ) as answer,
    ):
        assert (answer.status, answer.headers["Retry-After"]) == (503, "5")
        assert await answer.json() == {"error": "the API server did not review the token; try again"}
    assert await client.list(AgentRun, namespace=namespace) == []


async def test_token_reviews_are_remembered_and_bounded(
    client: kubeloop.APIClient,
    operator: tuple[str, str, agentplatform.Platform],
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A channel's token is reviewed once a minute, not once a post; made-up tokens cost the API
    server at most MAX_REVIEWS reviews at a time: one past them is answered 429."""
    endpoint, _, platform = operator
    assert platform.webhook is not None
    reviews: list[str] = []
    held, both_asked = asyncio.Event(), asyncio.Event()

    async def counted(through: Any, obj: Any, **options: Any) -> Any:
        if obj.get("kind") == "TokenReview":
            reviews.append(obj["spec"]["token"])
            if obj["spec"]["token"].startswith("held-"):
                if len(reviews) == 3:
                    both_asked.set()
                await held.wait()
        return await through.create(obj, **options)

    platform.webhook.client = intercepted(platform.webhook.client, create=counted)
    url = f"{endpoint}/channels/{namespace}/x/slack"
    body = {"text": "t", "user": "u"}
    for delivery in ("a", "b", "c"):
        assert (await post(url, body, token="made-up", delivery=delivery))[0] == 401
    assert reviews == ["made-up"]  # refused once, remembered
    monkeypatch.setattr(runwebhook, "MAX_REVIEWS", 2)
    waiting = [asyncio.create_task(post(url, body, token=f"held-{i}", delivery=f"h{i}")) for i in range(2)]
    await both_asked.wait()  # both held reviews are asked
    status, answer = await post(url, body, token="one-more", delivery="m")
    assert (status, answer) == (429, {"error": "2 tokens are being reviewed; try again"})
    held.set()
    assert [(await task)[0] for task in waiting] == [401, 401]
    assert "one-more" not in reviews


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

    refusal = 'Deployment.apps "typo-channel-slack" is invalid: spec.template.spec.volumes[1].secret.secretName: Invalid value'

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
