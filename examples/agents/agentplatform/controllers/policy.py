"""AgentPolicies enforced: what :func:`agent_violations`, :func:`run_violations` and
:func:`pack_violations` find against a namespace's policies, denied by the operator's validating
webhooks on Agents, AgentRuns and SkillPacks with the field paths of what is not allowed.

An update is denied only for what it makes newly not allowed: an object written before a policy
keeps working (the operator's own updates of it, a label added by a user), and the Agent
controller reports it in a ``PolicyCompliant`` condition instead (:func:`compliance`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import kubeloop
from kubeloop import field
from kubeloop.errors import StatusCause

from ..api.v1alpha1 import Agent, AgentPolicy, AgentRun, AgentSpec, ServingRuntime, SkillPack


def _allows(allowed: Sequence[str] | None, value: str) -> bool:
    return allowed is None or value in allowed


def _shown(policy: AgentPolicy, allowed: Iterable[str]) -> str:
    return (
        f"not allowed by AgentPolicy {policy.metadata.name} (allowed: {', '.join(sorted(allowed)) or 'none'})"
    )


def agent_violations(
    spec: AgentSpec, image: str | None, policies: Sequence[AgentPolicy]
) -> list[StatusCause]:
    """What in an agent's spec its namespace's ``policies`` do not allow (``image``: its
    runtime's, None when the runtime is not known)."""
    causes: list[StatusCause] = []
    for policy in policies:
        rules = policy.spec
        if not _allows(rules.allowed_runtimes, spec.runtime_ref):
            causes.append(
                field.invalid(
                    "spec.runtimeRef", spec.runtime_ref, _shown(policy, rules.allowed_runtimes or ())
                )
            )
        if (
            image is not None
            and rules.allowed_images is not None
            and not any(image.startswith(p) for p in rules.allowed_images)
        ):
            detail = f"its runtime's image {image} is " + _shown(policy, rules.allowed_images)
            causes.append(field.invalid("spec.runtimeRef", spec.runtime_ref, detail))
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


async def compliance(client: kubeloop.Client, agent: Agent) -> tuple[str, str, str]:
    """The agent's ``PolicyCompliant`` condition: status, reason and message."""
    causes = await _agent_causes(client, agent)
    if not causes:
        return "True", "Compliant", "no AgentPolicy of the namespace forbids what it uses"
    return "False", "PolicyViolated", "; ".join(f"{cause.field}: {cause.message}" for cause in causes)


async def _policies(client: kubeloop.Client, namespace: str) -> list[AgentPolicy]:
    return list((await client.list(AgentPolicy, namespace=namespace)).items)


async def _agent_causes(client: kubeloop.Client, agent: Agent) -> list[StatusCause]:
    policies = await _policies(client, agent.metadata.namespace or "")
    if not policies:
        return []
    try:
        image: str | None = (await client.get(ServingRuntime, agent.spec.runtime_ref)).spec.image
    except kubeloop.errors.NotFound:
        image = None
    return agent_violations(agent.spec, image, policies)


class AgentPolicyValidator:
    def __init__(self, client: kubeloop.Client) -> None:
        self.client = client

    async def validate_create(self, agent: Agent) -> None:
        _deny(agent, await _agent_causes(self.client, agent))

    async def validate_update(self, old: Agent, new: Agent) -> None:
        _deny(new, _new(await _agent_causes(self.client, old), await _agent_causes(self.client, new)))


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


def _deny(obj: Any, causes: list[StatusCause]) -> None:
    if causes:
        raise kubeloop.webhook.invalid(obj, *causes)


def setup(manager: kubeloop.Manager) -> None:
    """The validating webhooks of Agents, AgentRuns and SkillPacks (served by the manager's
    webhook server; their configurations come from ``kubeloop webhook``)."""
    client = manager.client
    kubeloop.WebhookBuilder(manager).for_(Agent).with_validator(AgentPolicyValidator(client)).complete()
    kubeloop.WebhookBuilder(manager).for_(AgentRun).with_validator(RunPolicyValidator(client)).complete()
    kubeloop.WebhookBuilder(manager).for_(SkillPack).with_validator(
        SkillPackPolicyValidator(client)
    ).complete()
    manager.permissions.allow(AgentPolicy, "get", "list", "watch")
