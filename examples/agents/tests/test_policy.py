"""AgentPolicies on the simulating server, enforced by the operator's validating webhooks (served
by its webhook server, called by the API server): a client is refused an Agent, an AgentRun and a
SkillPack a policy does not allow, with the field paths of each thing not allowed; an agent made
before the policy is reported PolicyCompliant False and keeps working — updates that add nothing
forbidden pass, one that adds something is refused; a compliant agent is PolicyCompliant True."""

from __future__ import annotations

from typing import Any

import agentplatform
import pytest
from agentobjects import NoPoliciesCached, agent, condition, exists, ready, runtime
from agentplatform.api.v1alpha1 import Agent, AgentPolicy, AgentRun
from agentplatform.controllers.policy import run_violations

import kubeloop
from kubeloop.testing import eventually, webhooks_installed


def policy(namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentPolicy",
            "metadata": {"name": "house-rules", "namespace": namespace}, "spec": spec}  # fmt: skip


async def test_policies_refuse_what_they_do_not_allow_and_report_what_was_there(
    client: kubeloop.APIClient, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("elder", namespace, f"{namespace}-rt"))  # before any policy
    rules = policy(
        namespace, allowedRuntimes=[f"{namespace}-rt"], allowedImages=["ghcr.io/example/"], modelProviders=["anthropic"],
        maxTimeoutSeconds=600, allowedSkillPacks=["k8s"], reservedEnvNames=["MODEL_API_KEY"],
    )  # fmt: skip
    await client.create(rules)
    manager = kubeloop.Manager(client, webhook_server=kubeloop.webhook.WebhookServer(port=0))
    agentplatform.setup(manager, enforce_policies=True)
    async with manager, webhooks_installed(client, manager):  # the operator, enforcing, from here on

        async def reported() -> None:
            found = await client.get(Agent, "elder", namespace=namespace)
            assert condition(found, "PolicyCompliant") == ("False", "PolicyViolated"), found.status

        await eventually(reported)
        found = await client.get(Agent, "elder", namespace=namespace)
        message = next(c.message for c in found.status.conditions or () if c.type == "PolicyCompliant")  # type: ignore[union-attr]
        assert message == (
            'spec.model.provider: Invalid value: "openai": not allowed by AgentPolicy house-rules (allowed: anthropic)'
        )
        await ready(client, "elder", namespace)  # not broken

        bad = agent("rogue", namespace, f"{namespace}-rt", env=[{"name": "MODEL_API_KEY", "value": "x"}])
        with pytest.raises(kubeloop.errors.Invalid) as refused:
            await client.create(bad)
        said = str(refused.value)
        assert (
            'spec.model.provider: Invalid value: "openai": not allowed by AgentPolicy house-rules (allowed: anthropic)'
            in said
        )
        assert "spec.env[0].name: Forbidden: MODEL_API_KEY is reserved by AgentPolicy house-rules" in said
        assert not await exists(client, Agent, "rogue", namespace)

        run = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentRun",
               "metadata": {"name": "marathon", "namespace": namespace},
               "spec": {"agentRef": "elder", "task": "x", "timeoutSeconds": 3600}}  # fmt: skip
        with pytest.raises(kubeloop.errors.Invalid) as too_long:
            await client.create(run)
        assert (
            "spec.timeoutSeconds: Invalid value: 3600: more than the 600s AgentPolicy house-rules allows"
            in str(too_long.value)
        )
        pack = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "SkillPack",
                "metadata": {"name": "shell", "namespace": namespace}, "spec": {"skills": []}}  # fmt: skip
        with pytest.raises(
            kubeloop.errors.Invalid,
            match=r"metadata.name: Invalid value: \"shell\": not allowed by AgentPolicy",
        ):
            await client.create(pack)

        # The elder agent keeps working: what adds nothing forbidden passes; what does is refused.
        await client.patch(Agent, "elder", {"metadata": {"labels": {"team": "sre"}}}, namespace=namespace)
        with pytest.raises(
            kubeloop.errors.Invalid, match=r"spec.skillPackRefs\[0\]: Invalid value: \"shell\""
        ):
            await client.patch(Agent, "elder", {"spec": {"skillPackRefs": ["shell"]}}, namespace=namespace)

        good = agent("citizen", namespace, f"{namespace}-rt")
        good["spec"]["model"]["provider"] = "anthropic"
        good["spec"]["env"] = []
        await client.create(good)

        async def compliant() -> None:
            assert condition(await client.get(Agent, "citizen", namespace=namespace), "PolicyCompliant") == (
                "True", "Compliant",
            )  # fmt: skip

        await eventually(compliant)


@pytest.mark.parametrize(("timeout", "refused"), [(599, False), (600, False), (601, True)])
def test_max_timeout_seconds_is_the_longest_run_allowed(timeout: int, refused: bool) -> None:
    """The boundary: a run of exactly maxTimeoutSeconds is allowed, one second more is not."""
    rules = AgentPolicy.model_validate(policy("ns", maxTimeoutSeconds=600))
    run = AgentRun.model_validate(
        {
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"agentRef": "a", "task": "x", "timeoutSeconds": timeout},
        }
    )
    causes = run_violations(run, [rules])
    assert [cause.field for cause in causes] == (["spec.timeoutSeconds"] if refused else [])


async def test_a_policy_judges_writes_before_the_operators_cache_shows_it(
    client: kubeloop.APIClient, namespace: str
) -> None:
    """The webhooks read the namespace's policies from the server: with the operator's cache a
    moment behind (showing no policy at all here), a run the policy forbids is refused."""
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("steady", namespace, f"{namespace}-rt"))
    await client.create(policy(namespace, maxTimeoutSeconds=600))
    manager = kubeloop.Manager(client, webhook_server=kubeloop.webhook.WebhookServer(port=0))
    manager.client = NoPoliciesCached(manager.client)  # type: ignore[assignment]
    agentplatform.setup(manager, enforce_policies=True)
    async with manager, webhooks_installed(client, manager):
        run = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentRun",
               "metadata": {"name": "overlong", "namespace": namespace},
               "spec": {"agentRef": "steady", "task": "x", "timeoutSeconds": 3600}}  # fmt: skip
        with pytest.raises(kubeloop.errors.Invalid, match="more than the 600s AgentPolicy house-rules allows"):
            await client.create(run)
        assert not await exists(client, AgentRun, "overlong", namespace)
