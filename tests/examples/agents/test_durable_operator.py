"""The agent platform operator against `kubeloop apiserver --simulate --data-dir`, SIGKILLed
under it and restarted."""

from __future__ import annotations

import pathlib
import signal
import socket

import agentplatform
from agentobjects import agent, pod_hash, ready, runtime
from agentplatform.api.v1alpha1 import ServingRuntime

import kubeloop
from kubeloop.testing import eventually
from tests.apiserver.storage.test_durability import apiserver


async def test_the_operator_rides_out_a_sigkilled_durable_server(tmp_path: pathlib.Path) -> None:
    """The operator against `kubeloop apiserver --simulate --data-dir` that is SIGKILLed after an
    agent is Ready and restarted on the same directory and port: the operator's watches resume,
    a runtime edit made after the restart rolls the agent, and the agent is Ready again."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    data = tmp_path / "data"
    with apiserver(data, "--simulate", "--port", port) as (proc, _):
        client = kubeloop.APIClient(kubeloop.load_config(str(data / "kubeconfig")))
        await kubeloop.crd.install_crds(client, *agentplatform.CUSTOM_RESOURCES)
        manager = kubeloop.Manager(client)
        agentplatform.setup(manager)
        async with manager:
            await client.create(runtime("durable-rt"))
            await client.create(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm", "namespace": "default"},
                 "stringData": {"token": "t"}}
            )  # fmt: skip
            await client.create(agent("survivor", "default", "durable-rt"))
            await ready(client, "survivor", "default")
            before = await pod_hash(client, "survivor", "default")
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            with apiserver(data, "--simulate", "--port", port):
                patch = {"spec": {"image": "ghcr.io/example/agent:2"}}
                await eventually(lambda: client.patch(ServingRuntime, "durable-rt", patch), timeout=20)

                async def rolled() -> None:
                    assert await pod_hash(client, "survivor", "default") != before

                await eventually(rolled, timeout=30)

                async def ready_on_the_new_hash() -> None:
                    found = await ready(client, "survivor", "default")
                    assert found.status is not None
                    assert found.status.config_hash == await pod_hash(client, "survivor", "default")

                await eventually(ready_on_the_new_hash, timeout=30)
        await client.close()
