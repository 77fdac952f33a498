"""An Agent's chat channels: what decides whether a message starts a run, and what runs for each
channel.

Each channel of ``spec.channels`` becomes, owned by the agent:

- a Deployment ``<agent>-channel-<type>`` running the platform's image for that type (or the
  channel's ``image``), with the channel's Secret as files in ``CHANNEL_CREDENTIALS_DIR`` (one
  per key: no environment variable holds a credential) and where to post messages (``INBOUND_URL``: the operator's ``/channels/<ns>/<agent>/<type>``)
  and with what: ``INBOUND_TOKEN_FILE``, a token of the channel's ServiceAccount for the
  audience ``agents.kubeloop.dev/inbound`` (projected, refreshed by the kubelet; the endpoint
  takes it for this channel only), and ``INBOUND_CA_FILE``, the CA the endpoint's certificate
  is signed by (from the ConfigMap ``<agent>-channel-<type>``, when the platform has one);
- for the types whose chat calls the channel (``SERVING_TYPES``: all but telegram), a
  Service of the same name in front of the pods, which listen on ``PORT`` (8080) of ``POD_IP``
  and are Ready once they do (what exposes the Service to the chat — an Ingress, a tunnel — is
  the cluster's admin's);
- a ServiceAccount of the same name, and a Role and RoleBinding that let it read exactly its
  agent's runs, by name (the runs' replies are what it posts back): the Role follows the runs as
  they come and go, and holds no rule while there are none — a rule with no names would allow
  every run.

A channel's status is Connected once its Deployment is available, Error while its pod cannot
start, in the kubelet's words (its Secret missing: ``FailedMount: MountVolume.SetUp failed for
volume "credentials" : secret "x" not found``, from the pod's Events; an image that cannot be
pulled), Pending otherwise; an agent with a Pending channel is
looked at again every ``recheck_seconds``, since a pod that cannot start changes nothing a watch
would see. The operator never reads Secrets. A channel taken out of the spec takes its objects
with it.

:func:`admit` is the channel's rule for a message: denied users, then allowed users, then the
trigger (a keyword the text holds as a word, in any case, or ``@name``, a mention, taken out of
the task). The inbound endpoint answers with it at once, and the reconciler that makes the run
applies it again to the agent as it is then.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import GROUP, Agent, AgentRun, ChannelSpec, ChannelType
from .builders import (
    TMP_MOUNT,
    TMP_VOLUME,
    deployment_ready,
    http_port,
    labels,
    named,
    restricted_container,
    restricted_pod,
    set_deployment,
    set_service,
)
from .indexes import AGENT_INDEX

CHANNEL_TYPES: tuple[str, ...] = get_args(ChannelType)
#: The label saying which channel of its agent an object serves (and which channel a run came from).
CHANNEL_LABEL = f"{GROUP}/channel"
#: Why a pod's container may wait for good, until something changes (the kubelet's reasons).
STUCK = (
    "CreateContainerConfigError",
    "CreateContainerError",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
)
#: The audience of the tokens channels post with: no other audience's token is taken, and these
#: are no good against the API server.
INBOUND_AUDIENCE = f"{GROUP}/inbound"
#: Where a channel's container finds its inbound token and the endpoint's CA.
INBOUND_MOUNT = f"/var/run/secrets/{GROUP}/inbound"
#: Where a channel's container finds its Secret's keys, a file each.
CREDENTIALS_MOUNT = f"/var/run/secrets/{GROUP}/channel"
#: How long a channel's inbound token lives before the kubelet refreshes it.
INBOUND_TOKEN_SECONDS = 3600
#: The images the platform runs for each type, unless ChannelSettings or the channel say otherwise.
DEFAULT_IMAGES = {kind: f"ghcr.io/kubeloop-dev/agent-channel-{kind}:0.1.0" for kind in CHANNEL_TYPES}
#: The types whose chat calls the channel (a webhook's sender, Slack's Events API, WhatsApp's
#: Cloud API, Discord's interactions): their pods serve on this port, behind a Service of the
#: channel's name. Telegram's long polling calls out and serves nothing.
SERVING_TYPES = frozenset({"webhook", "slack", "whatsapp", "discord"})
CHANNEL_PORT = 8080


@dataclass(frozen=True)
class ChannelSettings:
    """The platform's settings for channels: an image per type, and the base URL of the
    operator's inbound endpoint as the channel pods reach it."""

    images: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_IMAGES))
    inbound_url: str = "https://agents-operator.agents-system.svc:8082"
    #: The CA (PEM) the endpoint's certificate is signed by, handed to the channels (None: the
    #: one the endpoint keeps in a Secret, if it does; else they trust their image's roots).
    inbound_ca: str | None = None
    #: How often an agent with a Pending channel is looked at again: a pod that cannot start
    #: changes no Deployment, so no watch would say so.
    recheck_seconds: float = 10.0
    #: How long a finished channel run is kept for its channel to read the reply, whatever the
    #: agent's ``runHistoryLimit``.
    reply_retention_seconds: float = 300.0

    @classmethod
    def from_env(cls) -> ChannelSettings:
        """``AGENTS_CHANNEL_IMAGE_<TYPE>``, ``AGENTS_INBOUND_URL`` and ``AGENTS_INBOUND_CA_FILE``
        (read once, at start) over the defaults."""
        images = dict(DEFAULT_IMAGES)
        for kind in CHANNEL_TYPES:
            images[kind] = os.environ.get(f"AGENTS_CHANNEL_IMAGE_{kind.upper()}") or images[kind]
        ca_file = os.environ.get("AGENTS_INBOUND_CA_FILE")
        ca = pathlib.Path(ca_file).read_text() if ca_file else None
        return cls(images, os.environ.get("AGENTS_INBOUND_URL") or cls.inbound_url, ca)

    def pending(self, statuses: list[dict[str, Any]] | None) -> bool:
        return any(status["phase"] == "Pending" for status in statuses or ())


class InboundTrust:
    """The CA the inbound endpoint's certificate is signed by, as the channels are told it: the
    settings' (a file), or the one the endpoint keeps in a Secret, known once it has provisioned
    its certificate (``pending`` until then: the channels wait rather than roll out twice)."""

    def __init__(self, ca: str | None = None) -> None:
        self.ca = ca
        self.pending = False

    def expect(self) -> None:
        """The endpoint will say its CA (it provisions a certificate)."""
        self.pending = True

    def provisioned(self, ca: str) -> None:
        self.ca, self.pending = ca, False


@dataclass(frozen=True)
class Admission:
    accepted: bool
    #: Why not (empty when accepted).
    reason: str
    #: The run's task: the text, without the mention that triggered it.
    task: str


def admit(channel: ChannelSpec, text: str, user: str) -> Admission:
    """Whether a message of ``user`` on ``channel`` starts a run, and its task."""
    if user in channel.deny_users:
        return Admission(False, f"{user} is denied on this channel", "")
    if channel.allow_users and user not in channel.allow_users:
        return Admission(False, f"{user} is not among the channel's allowed users", "")
    trigger = channel.trigger
    task = text.strip()
    if trigger:
        if trigger.startswith("@"):
            mention = re.compile(rf"(?<![\w@]){re.escape(trigger)}(?![\w-])", re.IGNORECASE)
            if not mention.search(text):
                return Admission(False, f"the message does not mention {trigger}", "")
            task = " ".join(mention.sub(" ", text).split())
        elif not re.search(rf"(?<!\w){re.escape(trigger)}(?!\w)", text, re.IGNORECASE):
            return Admission(False, f"the message does not hold the keyword {trigger!r}", "")
    if not task:
        return Admission(False, "the message has no task besides its trigger", "")
    return Admission(True, "", task)


def channel_name(agent: str, kind: str) -> str:
    return f"{agent}-channel-{kind}"


class AgentChannels:
    """Writes an agent's channel objects and says how each channel is doing."""

    def __init__(self, manager: kubeloop.Manager, settings: ChannelSettings, trust: InboundTrust) -> None:
        self.client = manager.client
        #: Pods are read past the cache (the operator caches no pods).
        self.reader = manager.api_reader
        self.settings = settings
        self.trust = trust
        permissions = manager.permissions
        permissions.allow(kinds.Pod, "list")
        permissions.allow(kinds.Event, "list")  # why a pod's volume does not mount
        for kind in (kinds.ServiceAccount, kinds.Role, kinds.RoleBinding):
            permissions.allow(kind, "get", "list", "watch", "create", "update", "delete")
        permissions.allow(kinds.Deployment, "delete")

    async def reconcile(self, agent: Agent) -> list[dict[str, Any]] | None:
        """Converge the channels' objects; their statuses (None: the agent has no channel)."""
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        channels = agent.spec.channels or []
        await self._remove_others(agent, {channel.type for channel in channels})
        if not channels:
            return None
        runs = sorted(
            run.metadata.name or ""
            for run in await self.client.list(
                AgentRun, namespace=namespace, field_selector=f"{AGENT_INDEX}={name}"
            )
        )
        if self.trust.pending:  # looked at again in recheck_seconds (the statuses say Pending)
            waiting = "waiting for the inbound endpoint's certificate"
            return [
                {"type": c.type, "phase": "Pending", "message": waiting}
                for c in sorted(channels, key=lambda c: c.type)
            ]
        statuses = []
        for channel in sorted(channels, key=lambda c: c.type):
            deployment = await self._converge(agent, channel, runs)
            selector = {**labels("channel", name), CHANNEL_LABEL: channel.type}
            statuses.append({"type": channel.type, **await self._phase(namespace, selector, deployment)})
        return statuses

    async def _converge(self, agent: Agent, channel: ChannelSpec, runs: list[str]) -> kubeloop.Obj:
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        own = channel_name(name, channel.type)
        selector = {**labels("channel", name), CHANNEL_LABEL: channel.type}

        def owned(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector

        def role(obj: kubeloop.Obj) -> None:
            owned(obj)
            rules = [
                {"apiGroups": [GROUP], "resources": ["agentruns"], "verbs": ["get"], "resourceNames": runs}
            ]
            obj["rules"] = rules if runs else []

        def binding(obj: kubeloop.Obj) -> None:
            owned(obj)
            obj["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": own}
            obj["subjects"] = [{"kind": "ServiceAccount", "name": own, "namespace": namespace}]

        inbound = f"{self.settings.inbound_url.rstrip('/')}/channels/{namespace}/{name}/{channel.type}"
        env: list[dict[str, Any]] = [
            {"name": "AGENT_NAME", "value": name},
            {"name": "AGENT_NAMESPACE", "value": namespace},
            {"name": "CHANNEL_TYPE", "value": channel.type},
            {"name": "INBOUND_URL", "value": inbound},
            {"name": "INBOUND_TOKEN_FILE", "value": f"{INBOUND_MOUNT}/token"},
            {"name": "CHANNEL_CREDENTIALS_DIR", "value": CREDENTIALS_MOUNT},
        ]
        credentials: list[dict[str, Any]] = [
            {
                "serviceAccountToken": {
                    "audience": INBOUND_AUDIENCE,
                    "expirationSeconds": INBOUND_TOKEN_SECONDS,
                    "path": "token",
                }
            }
        ]
        ca = self.trust.ca
        if ca is not None:
            env.append({"name": "INBOUND_CA_FILE", "value": f"{INBOUND_MOUNT}/ca.crt"})
            credentials.append({"configMap": {"name": own, "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        serving = channel.type in SERVING_TYPES
        if serving:  # where it listens: its port, its own address (a process node's pods share ports)
            env.append({"name": "PORT", "value": str(CHANNEL_PORT)})
            env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}})
        container = {
            "name": "channel",
            "image": channel.image or self.settings.images.get(channel.type) or DEFAULT_IMAGES[channel.type],
            "env": env,
            "securityContext": restricted_container(),
            "volumeMounts": [
                TMP_MOUNT,
                {"name": "credentials", "mountPath": CREDENTIALS_MOUNT, "readOnly": True},
                {"name": "inbound", "mountPath": INBOUND_MOUNT, "readOnly": True},
            ],
        }
        if serving:  # Ready once it listens: its Service sends nothing to a pod that does not
            container["ports"] = http_port(CHANNEL_PORT)
            container["readinessProbe"] = {
                "tcpSocket": {"port": CHANNEL_PORT},
                "periodSeconds": 2, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3,
            }  # fmt: skip
        volumes = [
            TMP_VOLUME,
            {"name": "credentials", "secret": {"secretName": channel.secret_ref.name, "defaultMode": 420}},
            {"name": "inbound", "projected": {"sources": credentials, "defaultMode": 420}},
        ]

        def deployment(obj: kubeloop.Obj) -> None:
            owned(obj)
            set_deployment(
                obj, replicas=1, selector=selector, annotations={}, container=container, volumes=volumes
            )
            pod = obj["spec"]["template"]["spec"]
            pod["serviceAccountName"] = own
            pod["securityContext"] = restricted_pod()

        client = self.client
        mine = {"controlled_by": agent}  # a name someone else took first is theirs: left alone
        if ca is not None:

            def trust(obj: kubeloop.Obj) -> None:
                owned(obj)
                obj["data"] = {"ca.crt": ca}

            await kubeloop.create_or_update(client, named(kinds.ConfigMap, own, namespace), trust, **mine)
        await kubeloop.create_or_update(client, named(kinds.ServiceAccount, own, namespace), owned, **mine)
        await kubeloop.create_or_update(client, named(kinds.Role, own, namespace), role, **mine)
        await kubeloop.create_or_update(client, named(kinds.RoleBinding, own, namespace), binding, **mine)
        _, made = await kubeloop.create_or_update(
            client, named(kinds.Deployment, own, namespace), deployment, **mine
        )
        if serving:

            def service(obj: kubeloop.Obj) -> None:
                owned(obj)
                set_service(obj, selector, CHANNEL_PORT)

            await kubeloop.create_or_update(client, named(kinds.Service, own, namespace), service, **mine)
        return made

    async def _phase(
        self, namespace: str, selector: dict[str, str], deployment: kubeloop.Obj
    ) -> dict[str, str]:
        """Connected once the Deployment is available; Error while its pod cannot start, in the
        kubelet's words (a missing Secret: ``secret "x" not found``); else Pending."""
        ready, _, why = deployment_ready(deployment)
        if ready:
            return {"phase": "Connected", "message": ""}
        label_selector = ",".join(f"{key}={value}" for key, value in sorted(selector.items()))
        pods = await self.reader.list(kinds.Pod, namespace=namespace, label_selector=label_selector)
        for pod in pods.items:
            for container in (pod.get("status") or {}).get("containerStatuses") or ():
                waiting = (container.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in STUCK:
                    return {"phase": "Error", "message": f"{waiting['reason']}: {waiting.get('message', '')}"}
                if waiting.get("reason") == "ContainerCreating":
                    unmounted = await self._failed_mount(namespace, pod["metadata"]["name"])
                    if unmounted is not None:
                        return {"phase": "Error", "message": f"FailedMount: {unmounted}"}
        return {"phase": "Pending", "message": why}

    async def _failed_mount(self, namespace: str, pod: str) -> str | None:
        """What the kubelet last said of a volume of ``pod`` it cannot mount (its Events)."""
        events = await self.reader.list(
            kinds.Event, namespace=namespace, field_selector=f"involvedObject.name={pod},reason=FailedMount"
        )
        said = sorted(
            events.items,
            key=lambda event: str(event.get("lastTimestamp") or event.get("eventTime") or ""),
        )
        return str(said[-1].get("message") or "") if said else None

    async def _remove_others(self, agent: Agent, kept: set[str]) -> None:
        """Delete the objects of the agent's channels that are no longer in its spec (only what
        the agent controls: a label alone is not ownership)."""
        selector = f"app.kubernetes.io/name=channel,app.kubernetes.io/instance={agent.metadata.name}"
        for kind in (
            kinds.Deployment, kinds.Service, kinds.ConfigMap, kinds.RoleBinding, kinds.Role, kinds.ServiceAccount
        ):  # fmt: skip
            for obj in await self.client.list(
                kind, namespace=agent.metadata.namespace, label_selector=selector
            ):
                if obj["metadata"].get("labels", {}).get(
                    CHANNEL_LABEL
                ) not in kept and kubeloop.is_controlled_by(obj, agent):
                    with contextlib.suppress(kubeloop.errors.NotFound):
                        await self.client.delete(obj)
