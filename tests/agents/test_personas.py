"""PersonaPacks: a pack makes its agents and schedules (a schedule's agent pointed at the
pack's agent), the agents become Ready, an entry removed from the pack is pruned, and a second
reconcile of a converged pack writes nothing."""

from __future__ import annotations

from typing import Any

import agentplatform
from agentplatform.api import Agent, AgentSchedule, PersonaPack

import kubeloop
from kubeloop.testing import eventually
from tests.agents.conftest import agent, assert_writes_nothing, ready, runtime


def pack(namespace: str, runtime_name: str, agents: list[str], schedules: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "PersonaPack",
        "metadata": {"name": "sre", "namespace": namespace},
        "spec": {
            "agents": [
                {"name": name, "spec": agent(name, namespace, runtime_name)["spec"]} for name in agents
            ],
            "schedules": [
                {
                    "name": name,
                    "spec": {"agentRef": target, "schedule": "0 * * * *", "task": "check the cluster"},
                }
                for name, target in schedules.items()
            ],
        },
    }


async def names(
    client: kubeloop.APIClient, kind: type[Agent] | type[AgentSchedule], namespace: str
) -> list[str]:
    return sorted(obj.metadata.name or "" for obj in await client.list(kind, namespace=namespace))


async def test_a_pack_makes_its_agents_and_schedules_and_prunes_removed_entries(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    rt = f"{namespace}-rt"
    await client.create(runtime(rt))
    await client.create(
        pack(namespace, rt, ["triage", "postmortem"], {"hourly": "triage", "other": "elsewhere"})
    )

    async def made() -> None:
        assert await names(client, Agent, namespace) == ["sre-postmortem", "sre-triage"]
        assert await names(client, AgentSchedule, namespace) == ["sre-hourly", "sre-other"]

    await eventually(made, timeout=20)
    await ready(client, "sre-triage", namespace)
    hourly = await client.get(AgentSchedule, "sre-hourly", namespace=namespace)
    assert hourly.spec.agent_ref == "sre-triage"  # the pack's agent
    other = await client.get(AgentSchedule, "sre-other", namespace=namespace)
    assert other.spec.agent_ref == "elsewhere"  # not the pack's: left as written
    triage = await client.get(Agent, "sre-triage", namespace=namespace)
    assert [(ref.kind, ref.name, ref.controller) for ref in triage.metadata.owner_references or ()] == [
        ("PersonaPack", "sre", True)
    ]

    async def reported() -> None:
        found = await client.get(PersonaPack, "sre", namespace=namespace)
        assert found.status is not None and found.status.agents == ["sre-postmortem", "sre-triage"]

    await eventually(reported, timeout=20)
    await assert_writes_nothing(
        platform.personas.reconcile, platform.personas.client, kubeloop.Request(namespace, "sre")
    )

    smaller = pack(namespace, rt, ["triage"], {"hourly": "triage"})
    await client.patch(PersonaPack, "sre", {"spec": smaller["spec"]}, namespace=namespace)

    async def pruned() -> None:
        assert await names(client, Agent, namespace) == ["sre-triage"]
        assert await names(client, AgentSchedule, namespace) == ["sre-hourly"]

    await eventually(pruned, timeout=20)
