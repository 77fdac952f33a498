"""`kubeloop rbac examples/agents` prints a ClusterRole that is enough: the operator runs as a
ServiceAccount bound to only that role (the server enforces RBAC as a cluster does), as two
replicas with leader election on as deployed; the leader's agents become Ready, its runs succeed
(creating their own Roles), its schedules plan and a deleted agent's runs go — with no request
refused — while the standby reconciles nothing; when the leader stops, the standby takes the
Lease and carries on."""

from __future__ import annotations

import logging
import pathlib
import subprocess
import sys
from collections.abc import Awaitable
from typing import Any

import agentplatform
import pytest
import yaml
from agentobjects import agent, agent_run, exists, finished, ready, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun, AgentSchedule

import kubeloop
from kubeloop import kinds
from kubeloop.testing import ServerThread, eventually

AGENTS = pathlib.Path(__file__).parents[3] / "examples" / "agents"


def generated_role() -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "rbac", str(AGENTS), "--name", "agents-operator"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    role = yaml.safe_load(result.stdout)
    assert isinstance(role, dict)
    return role


def test_the_generated_role_names_what_the_controllers_watch_own_and_write() -> None:
    role = generated_role()
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "agents-operator")
    granted = {
        (group, resource): rule["verbs"]
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    write = ["get", "list", "watch", "create", "update", "patch", "delete"]
    assert granted[("apps", "deployments")] == write  # owned
    assert granted[("batch", "jobs")] == write
    assert granted[("agents.kubeloop.dev", "servingruntimes")] == ["get", "list", "watch"]  # watched only
    assert granted[("agents.kubeloop.dev", "agents/status")] == ["get", "update", "patch"]
    assert granted[("rbac.authorization.k8s.io", "roles")] == write  # runs create them; channels own them
    assert ("", "secrets") not in granted  # the operator never reads a Secret
    # Named by resource: the kind is served only where agent-sandbox is installed.
    assert granted[("agents.x-k8s.io", "sandboxes")] == ["get", "list", "watch", "create", "delete"]
    assert granted[("", "pods")] == ["get", "list"]  # a run's pods, and a Sandbox's
    assert granted[("", "events")] == ["list", "create", "patch"]  # why a channel's volume does not mount
    assert granted[("coordination.k8s.io", "leases")] == ["get", "create", "update"]
    assert ("", "secrets") not in granted


async def test_the_operator_runs_as_a_service_account_bound_to_only_that_role(
    cluster: ServerThread, client: kubeloop.APIClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    role = generated_role()
    role["metadata"]["name"] = f"{namespace}-operator"
    await client.create(role)
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "operator", "namespace": namespace},
        }
    )
    token_request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    issued = await client.create(
        token_request, of=kinds.ServiceAccount, name="operator", subresource="token", namespace=namespace
    )
    config = kubeloop.load_config(cluster.kubeconfig)
    config = config.with_token(issued["status"]["token"])
    async with kubeloop.APIClient(config) as operator_client:
        with pytest.raises(kubeloop.errors.Forbidden):  # the server enforces RBAC: nothing yet
            await operator_client.list(Agent, namespace=namespace)
        await client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{namespace}-operator"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": f"{namespace}-operator",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}],
            }
        )

        async def may_list() -> bool:
            await operator_client.list(Agent, namespace=namespace)  # an empty list, once allowed
            return True

        await eventually(may_list, timeout=10)

        def replica(identity: str) -> kubeloop.Manager:
            election = kubeloop.LeaderElectionConfig(
                "agents.kubeloop.dev",
                namespace=namespace,
                identity=identity,
                lease_duration=15.0,  # upstream's defaults: a busy machine fences no write
                renew_deadline=10.0,
                retry_period=0.2,
                release_on_cancel=True,  # the role lets a leader empty the Lease as it stops
            )
            manager = kubeloop.Manager(operator_client, leader_election=election)
            agentplatform.setup(manager)
            return manager

        async def holder() -> str:
            lease = await client.get(kinds.Lease, "agents.kubeloop.dev", namespace=namespace)
            return str(lease["spec"]["holderIdentity"])

        caplog.set_level(logging.WARNING)
        leader, standby = replica("replica-a"), replica("replica-b")
        async with leader:
            await eventually(lambda: _expect(holder(), "replica-a"), timeout=10)
            await standby.start()
            await client.create(runtime(f"{namespace}-rt"))
            await client.create(agent("restricted", namespace, f"{namespace}-rt"))
            await ready(client, "restricted", namespace)
            await client.create(agent_run("job", namespace, "restricted"))
            run = await finished(client, "job", namespace)
            assert run.status is not None and run.status.phase == "Succeeded"
            assert await exists(client, kinds.Role, "job", namespace)
            await client.create(
                {
                    "apiVersion": "agents.kubeloop.dev/v1alpha1",
                    "kind": "AgentSchedule",
                    "metadata": {"name": "nightly", "namespace": namespace},
                    "spec": {"agentRef": "restricted", "schedule": "0 3 * * *", "task": "report"},
                }
            )

            async def planned() -> None:
                found = await client.get(AgentSchedule, "nightly", namespace=namespace)
                assert found.status is not None and found.status.next_schedule_time

            await eventually(planned, timeout=20)
            await client.delete(Agent, "restricted", namespace=namespace)

            async def gone() -> None:
                assert [run.metadata.name for run in await client.list(AgentRun, namespace=namespace)] == []
                assert not await exists(client, Agent, "restricted", namespace)

            await eventually(gone, timeout=20)
            assert sum(sum(c.results.values()) for c in standby.controllers.values()) == 0
        try:  # the leader has stopped and emptied the Lease: the standby takes it
            await eventually(lambda: _expect(holder(), "replica-b"), timeout=10)
            await client.create(agent("successor", namespace, f"{namespace}-rt"))
            await ready(client, "successor", namespace)
        finally:
            await standby.stop()
        refused = [r.getMessage() for r in caplog.records if "forbidden" in r.getMessage().lower()]
        assert refused == []
        for manager in (leader, standby):
            for controller in manager.controllers.values():
                assert controller.results.get("error", 0) == 0, controller.name


async def _expect(value: Awaitable[str], expected: str) -> None:
    assert await value == expected
