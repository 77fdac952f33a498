"""AgentPolicies enforced: what :func:`agent_violations`, :func:`run_violations` and
:func:`pack_violations` find against a namespace's policies, denied by the operator's validating
webhooks on Agents, AgentRuns, SkillPacks, MCPServers and PersonaPacks with the field paths of
what is not allowed.

``allowedImages`` bounds every image the platform runs for an agent: its runtime's, each
channel's (the channel's own or the platform's for its type), each MCP server's and its memory
server's (``PlatformImages``); prefixes match whole path segments (:func:`image_allowed`).

Whatever its policies, an object that names Secrets — an agent's model key, its channels'
credentials, ``secretKeyRef`` variables, an MCP server's or a persona pack's agents' — is admitted
only if the user who writes it may ``get`` each Secret it newly names (a SubjectAccessReview of
the request's user): the platform hands those Secrets to pods, and would otherwise give a user
who may write Agents any Secret of the namespace. The operator's own writes (a persona pack's
agents) were checked when the pack was written.

An update is denied only for what it makes newly not allowed: an object written before a policy
keeps working (the operator's own updates of it, a label added by a user), and the Agent
controller reports it in a ``PolicyCompliant`` condition instead (:func:`compliance`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kubeloop
from kubeloop import field
from kubeloop.errors import StatusCause
from kubeloop.models import core_v1

from ..api.v1alpha1 import (
    Agent,
    AgentPolicy,
    AgentRun,
    AgentSpec,
    MCPServer,
    PersonaPack,
    ServingRuntime,
    SkillPack,
)


@dataclass(frozen=True)
class PlatformImages:
    """The images the platform runs for an agent besides its runtime's and its MCP servers':
    a channel's by type (unless the channel names one) and the persistent memory server's."""

    channels: Mapping[str, str]
    memory_server: str


@dataclass(frozen=True)
class ImageUse:
    """One image an agent would run: where it comes from (a field and its value) and what it is."""

    path: str
    value: str
    image: str
    what: str


def image_allowed(image: str, prefixes: Iterable[str]) -> bool:
    """Whether ``image`` is under one of ``prefixes`` by whole path segments: ``ghcr.io/acme/``
    and ``ghcr.io/acme`` both admit ``ghcr.io/acme/tool:1`` (and the latter ``ghcr.io/acme:1``),
    neither admits ``ghcr.io/acme-evil/tool``."""
    for prefix in prefixes:
        if prefix.endswith(("/", ":", "@")):
            if image.startswith(prefix):
                return True
        elif image == prefix or image.startswith((prefix + "/", prefix + ":", prefix + "@")):
            return True
    return False


def _allows(allowed: Sequence[str] | None, value: str) -> bool:
    return allowed is None or value in allowed


def _shown(policy: AgentPolicy, allowed: Iterable[str]) -> str:
    return (
        f"not allowed by AgentPolicy {policy.metadata.name} (allowed: {', '.join(sorted(allowed)) or 'none'})"
    )


def agent_violations(
    spec: AgentSpec, images: Sequence[ImageUse], policies: Sequence[AgentPolicy]
) -> list[StatusCause]:
    """What in an agent's spec its namespace's ``policies`` do not allow (``images``: what it
    would run, :func:`agent_images`)."""
    causes: list[StatusCause] = []
    for policy in policies:
        rules = policy.spec
        if not _allows(rules.allowed_runtimes, spec.runtime_ref):
            causes.append(
                field.invalid(
                    "spec.runtimeRef", spec.runtime_ref, _shown(policy, rules.allowed_runtimes or ())
                )
            )
        if rules.allowed_images is not None:
            for use in images:
                if not image_allowed(use.image, rules.allowed_images):
                    detail = f"{use.what} {use.image} is " + _shown(policy, rules.allowed_images)
                    causes.append(field.invalid(use.path, use.value, detail))
        if not _allows(rules.model_providers, spec.model.provider):
            causes.append(
                field.invalid(
                    "spec.model.provider", spec.model.provider, _shown(policy, rules.model_providers or ())
                )
            )
        for index, pack in enumerate(spec.skill_pack_refs):
            if not _allows(rules.allowed_skill_packs, pack):
                causes.append(
                    field.invalid(
                        f"spec.skillPackRefs[{index}]", pack, _shown(policy, rules.allowed_skill_packs or ())
                    )
                )
        for index, server in enumerate(spec.mcp_server_refs):
            if not _allows(rules.allowed_mcp_servers, server):
                causes.append(
                    field.invalid(
                        f"spec.mcpServerRefs[{index}]",
                        server,
                        _shown(policy, rules.allowed_mcp_servers or ()),
                    )
                )
        for index, var in enumerate(spec.env or ()):
            if var.name in rules.reserved_env_names:
                causes.append(
                    field.forbidden(
                        f"spec.env[{index}].name",
                        f"{var.name} is reserved by AgentPolicy {policy.metadata.name}",
                    )
                )
    return causes


def run_violations(run: AgentRun, policies: Sequence[AgentPolicy]) -> list[StatusCause]:
    causes = []
    for policy in policies:
        limit = policy.spec.max_timeout_seconds
        if limit is not None and run.spec.timeout_seconds > limit:
            detail = f"more than the {limit}s AgentPolicy {policy.metadata.name} allows"
            causes.append(field.invalid("spec.timeoutSeconds", run.spec.timeout_seconds, detail))
    return causes


def pack_violations(pack: SkillPack, policies: Sequence[AgentPolicy]) -> list[StatusCause]:
    name = pack.metadata.name or ""
    return [
        field.invalid("metadata.name", name, _shown(policy, policy.spec.allowed_skill_packs or ()))
        for policy in policies
        if not _allows(policy.spec.allowed_skill_packs, name)
    ]


def _new(old: Sequence[StatusCause], new: Sequence[StatusCause]) -> list[StatusCause]:
    """The causes of ``new`` that ``old`` did not have: what an update made newly not allowed."""
    before = {(cause.field, cause.message) for cause in old}
    return [cause for cause in new if (cause.field, cause.message) not in before]


async def compliance(client: kubeloop.Client, agent: Agent, platform: PlatformImages) -> tuple[str, str, str]:
    """The agent's ``PolicyCompliant`` condition: status, reason and message."""
    causes = await _agent_causes(client, agent, platform)
    if not causes:
        return "True", "Compliant", "no AgentPolicy of the namespace forbids what it uses"
    return "False", "PolicyViolated", "; ".join(f"{cause.field}: {cause.message}" for cause in causes)


async def _policies(client: kubeloop.Client, namespace: str) -> list[AgentPolicy]:
    return list((await client.list(AgentPolicy, namespace=namespace)).items)


async def agent_images(
    client: kubeloop.Client, namespace: str, spec: AgentSpec, platform: PlatformImages, prefix: str = "spec"
) -> list[ImageUse]:
    """Every image the platform would run for an agent of ``spec`` (what is not known yet, a
    runtime or MCP server that does not exist, runs nothing)."""
    uses: list[ImageUse] = []
    try:
        runtime = await client.get(ServingRuntime, spec.runtime_ref)
        uses.append(
            ImageUse(f"{prefix}.runtimeRef", spec.runtime_ref, runtime.spec.image, "its runtime's image")
        )
    except kubeloop.errors.NotFound:
        pass
    for index, channel in enumerate(spec.channels or ()):
        image = channel.image or platform.channels.get(channel.type, "")
        if image:
            uses.append(
                ImageUse(
                    f"{prefix}.channels[{index}].image", image, image, f"its {channel.type} channel's image"
                )
            )
    for index, name in enumerate(spec.mcp_server_refs):
        try:
            server = await client.get(MCPServer, name, namespace=namespace)
        except kubeloop.errors.NotFound:
            continue
        if server.spec.image:  # one at a URL runs nothing here
            uses.append(
                ImageUse(f"{prefix}.mcpServerRefs[{index}]", name, server.spec.image, "its MCP server's image")
            )
    if spec.memory is not None and spec.memory.enabled and spec.memory.persistent:
        image = platform.memory_server
        uses.append(ImageUse(f"{prefix}.memory.persistent", "true", image, "its memory server's image"))
    return uses


async def _agent_causes(client: kubeloop.Client, agent: Agent, platform: PlatformImages) -> list[StatusCause]:
    namespace = agent.metadata.namespace or ""
    policies = await _policies(client, namespace)
    if not policies:
        return []
    return agent_violations(agent.spec, await agent_images(client, namespace, agent.spec, platform), policies)


# ---------------------------------------------------------------- Secrets an object names


def _env_secrets(env: Sequence[core_v1.EnvVar] | None, prefix: str) -> list[tuple[str, str]]:
    found = []
    for index, variable in enumerate(env or ()):
        source = variable.value_from
        if source is not None and source.secret_key_ref is not None and source.secret_key_ref.name:
            found.append((f"{prefix}.env[{index}].valueFrom.secretKeyRef.name", source.secret_key_ref.name))
    return found


def agent_secrets(spec: AgentSpec, prefix: str = "spec") -> list[tuple[str, str]]:
    """(field path, Secret name) of each Secret an agent of ``spec`` hands to its pods."""
    found = []
    if spec.model.auth_secret_ref is not None:
        found.append((f"{prefix}.model.authSecretRef.name", spec.model.auth_secret_ref.name))
    for index, channel in enumerate(spec.channels or ()):
        found.append((f"{prefix}.channels[{index}].secretRef.name", channel.secret_ref.name))
    return found + _env_secrets(spec.env, prefix)


def pack_secrets(pack: PersonaPack) -> list[tuple[str, str]]:
    return [
        found
        for index, entry in enumerate(pack.spec.agents)
        for found in agent_secrets(entry.spec, f"spec.agents[{index}].spec")
    ]


def _newly_named(old: Sequence[tuple[str, str]], new: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """What ``new`` names that ``old`` did not name at all (a Secret already named may move)."""
    before = {name for _, name in old}
    return [(path, name) for path, name in new if name not in before]


class SecretAccess:
    """Whether the user of the request being admitted may ``get`` Secrets: a SubjectAccessReview
    each, asked as that user (with its groups, uid and extra), as kube-apiserver asks its
    authorizer."""

    def __init__(self, client: kubeloop.Client) -> None:
        self.client = client
        self._operator: str | None = None

    async def _is_the_operator(self, user: str) -> bool:
        """Whether ``user`` is the operator itself (a persona pack's agents, made by it)."""
        if self._operator is None:
            review = await self.client.create(
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
            )
            self._operator = str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")
        return bool(self._operator) and user == self._operator

    async def refused(self, namespace: str, named: Sequence[tuple[str, str]]) -> list[StatusCause]:
        if not named:
            return []
        user_info = kubeloop.webhook.current_request().user_info
        user = str(user_info.get("username") or "")
        if await self._is_the_operator(user):
            return []
        causes = []
        for path, name in named:
            review = await self.client.create(
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": user,
                        "uid": user_info.get("uid") or "",
                        "groups": list(user_info.get("groups") or ()),
                        "extra": dict(user_info.get("extra") or {}),
                        "resourceAttributes": {
                            "namespace": namespace, "verb": "get", "resource": "secrets", "name": name,
                        },
                    },
                }
            )  # fmt: skip
            if not (review.get("status") or {}).get("allowed"):
                causes.append(
                    field.forbidden(
                        path,
                        f'User "{user}" cannot get Secret "{name}" in namespace "{namespace}": '
                        "the platform would hand it to pods",
                    )
                )
        return causes


class AgentPolicyValidator:
    def __init__(self, client: kubeloop.Client, platform: PlatformImages) -> None:
        self.client = client
        self.platform = platform
        self.secrets = SecretAccess(client)

    async def validate_create(self, agent: Agent) -> None:
        refused = await self.secrets.refused(agent.metadata.namespace or "", agent_secrets(agent.spec))
        _deny(agent, [*refused, *await _agent_causes(self.client, agent, self.platform)])

    async def validate_update(self, old: Agent, new: Agent) -> None:
        named = _newly_named(agent_secrets(old.spec), agent_secrets(new.spec))
        key = new.spec.model.auth_secret_ref
        key_named = ("spec.model.authSecretRef.name", key.name) if key is not None else None
        endpoint = (new.spec.model.base_url, new.spec.model.provider)
        if key_named and key_named not in named and endpoint != (old.spec.model.base_url, old.spec.model.provider):
            named.append(key_named)  # the model's key would go to another endpoint: asked again
        refused = await self.secrets.refused(new.metadata.namespace or "", named)
        before = await _agent_causes(self.client, old, self.platform)
        _deny(new, [*refused, *_new(before, await _agent_causes(self.client, new, self.platform))])


class RunPolicyValidator:
    def __init__(self, client: kubeloop.Client) -> None:
        self.client = client

    async def validate_create(self, run: AgentRun) -> None:
        _deny(run, run_violations(run, await _policies(self.client, run.metadata.namespace or "")))


class SkillPackPolicyValidator:
    def __init__(self, client: kubeloop.Client) -> None:
        self.client = client

    async def validate_create(self, pack: SkillPack) -> None:
        _deny(pack, pack_violations(pack, await _policies(self.client, pack.metadata.namespace or "")))


def server_violations(server: MCPServer, policies: Sequence[AgentPolicy]) -> list[StatusCause]:
    """An MCP server's image against ``allowedImages``: it runs whether or not an agent uses it."""
    causes = []
    image = server.spec.image
    for policy in policies:
        allowed = policy.spec.allowed_images
        if image is not None and allowed is not None and not image_allowed(image, allowed):
            causes.append(field.invalid("spec.image", image, _shown(policy, allowed)))
    return causes


def server_secrets(server: MCPServer) -> list[tuple[str, str]]:
    """(field path, Secret name) of each Secret an MCP server hands on: its pods' environment,
    and the headers its callers send (to wherever its URL points)."""
    headers = [
        (f"spec.headers[{index}].secretKeyRef.name", header.secret_key_ref.name)
        for index, header in enumerate(server.spec.headers)
    ]
    return _env_secrets(server.spec.env, "spec") + headers


class MCPServerPolicyValidator:
    def __init__(self, client: kubeloop.Client) -> None:
        self.client = client
        self.secrets = SecretAccess(client)

    async def validate_create(self, server: MCPServer) -> None:
        namespace = server.metadata.namespace or ""
        refused = await self.secrets.refused(namespace, server_secrets(server))
        _deny(server, [*refused, *server_violations(server, await _policies(self.client, namespace))])

    async def validate_update(self, old: MCPServer, new: MCPServer) -> None:
        namespace = new.metadata.namespace or ""
        named = _newly_named(server_secrets(old), server_secrets(new))
        if old.spec.url != new.spec.url:  # its headers would go somewhere new: asked again
            named = server_secrets(new)
        policies = await _policies(self.client, namespace)
        causes = _new(server_violations(old, policies), server_violations(new, policies))
        _deny(new, [*await self.secrets.refused(namespace, named), *causes])


class PersonaPackPolicyValidator:
    """A persona pack's agents are made by the operator: what they name and run is checked
    when the pack is written, against its writer's access and the namespace's policies."""

    def __init__(self, client: kubeloop.Client, platform: PlatformImages) -> None:
        self.client = client
        self.platform = platform
        self.secrets = SecretAccess(client)

    async def _causes(self, pack: PersonaPack) -> list[StatusCause]:
        namespace = pack.metadata.namespace or ""
        policies = await _policies(self.client, namespace)
        if not policies:
            return []
        causes = []
        for index, entry in enumerate(pack.spec.agents):
            prefix = f"spec.agents[{index}].spec"
            images = await agent_images(self.client, namespace, entry.spec, self.platform, prefix)
            for cause in agent_violations(entry.spec, images, policies):
                path = (
                    cause.field if cause.field.startswith(prefix) else cause.field.replace("spec", prefix, 1)
                )
                causes.append(StatusCause(cause.type, cause.message, path))
        return causes

    async def validate_create(self, pack: PersonaPack) -> None:
        refused = await self.secrets.refused(pack.metadata.namespace or "", pack_secrets(pack))
        _deny(pack, [*refused, *await self._causes(pack)])

    async def validate_update(self, old: PersonaPack, new: PersonaPack) -> None:
        named = _newly_named(pack_secrets(old), pack_secrets(new))
        refused = await self.secrets.refused(new.metadata.namespace or "", named)
        _deny(new, [*refused, *_new(await self._causes(old), await self._causes(new))])


def _deny(obj: Any, causes: list[StatusCause]) -> None:
    if causes:
        raise kubeloop.webhook.invalid(obj, *causes)


def setup(manager: kubeloop.Manager, platform: PlatformImages) -> None:
    """The validating webhooks of Agents, AgentRuns, SkillPacks, MCPServers and PersonaPacks
    (served by the manager's webhook server; their configurations come from ``kubeloop
    webhook``)."""
    # Straight from the server: a policy made a moment before a write, not yet in the cache,
    # must judge it (admission of these kinds is rare; a list per request costs little).
    client = manager.api_reader
    validators: list[tuple[Any, object]] = [
        (Agent, AgentPolicyValidator(client, platform)),
        (AgentRun, RunPolicyValidator(client)),
        (SkillPack, SkillPackPolicyValidator(client)),
        (MCPServer, MCPServerPolicyValidator(client)),
        (PersonaPack, PersonaPackPolicyValidator(client, platform)),
    ]
    for kind, validator in validators:
        kubeloop.WebhookBuilder(manager).for_(kind).with_validator(validator).complete()
    manager.permissions.allow(AgentPolicy, "get", "list", "watch")
    # Whether a writer may read the Secrets an object names, and the operator's own name.
    manager.permissions.allow_resource("authorization.k8s.io", "subjectaccessreviews", "create")
    manager.permissions.allow_resource("authentication.k8s.io", "selfsubjectreviews", "create")
