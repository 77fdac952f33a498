"""PersonaPacks: a pack makes its agents and schedules (a schedule's agent pointed at the
pack's agent), the agents become Ready, an entry removed from the pack is pruned, and a second
reconcile of a converged pack writes nothing; an entry the server refuses is reported in status
and an Event, and the others are made."""

from __future__ import annotations

from typing import Any

import agentplatform
from agentobjects import agent, assert_writes_nothing, ready, runtime
from agentplatform.api.v1alpha1 import Agent, AgentSchedule, PersonaPack

import kubeloop
from kubeloop.testing import eventually


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
    await assert_writes_nothing(platform.personas, kubeloop.Request(namespace, "sre"))

    smaller = pack(namespace, rt, ["triage"], {"hourly": "triage"})
    await client.patch(PersonaPack, "sre", {"spec": smaller["spec"]}, namespace=namespace)

    async def pruned() -> None:
        assert await names(client, Agent, namespace) == ["sre-triage"]
        assert await names(client, AgentSchedule, namespace) == ["sre-hourly"]

    await eventually(pruned, timeout=20)


async def test_an_entry_the_server_refuses_is_reported_and_the_rest_made(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    rt = f"{namespace}-rt"
    await client.create(runtime(rt))
    long_name = "l" * 60  # sre-<60 letters>: 64 characters, one more than an Agent's name may have
    await client.create(pack(namespace, rt, ["triage", long_name], {}))

    async def reported() -> PersonaPack:
        found = await client.get(PersonaPack, "sre", namespace=namespace)
        assert found.status is not None and found.status.refused, found.status
        return found

    found = await eventually(reported, timeout=20)
    assert found.status is not None and found.status.agents == ["sre-triage"]
    (message,) = found.status.refused or ()
    assert f'Agent.agents.kubeloop.dev "sre-{long_name}" is invalid' in message
    assert "an Agent's name must be at most 63 characters" in message
    await ready(client, "sre-triage", namespace)

    async def warned() -> list[str]:  # written by the recorder's own task
        events = (await client.list(kubeloop.kinds.Event, namespace=namespace)).items
        messages = [str(e["message"]) for e in events if e["reason"] == "Invalid"]
        assert messages
        return messages

    assert await eventually(warned, timeout=20) == [message]
    assert platform.personas.manager.controllers["personapack"].results.get("error", 0) == 0
