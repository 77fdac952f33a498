"""The agent platform doing real work: how fast AgentRuns finish when their pods run the agent
runner as processes, what the runner adds to each model turn, and how fast the memory server
searches. Prints one JSON line.

The model is a local stand-in for a provider's Chat Completions endpoint that answers at once
(``examples/agents/tests/fakemodel.py``): what is measured is everything but the model.
Rows:
- `runs`, `create_to_succeeded_ms` (median, p99), `runs_per_s`: RUNS AgentRuns created at once
  on `kubeloop apiserver --simulate --local-image <the platform's images>` (its own process),
  the operator running in this one; each run one model turn, then its answer; timed from its
  create to the status Succeeded as a watch delivers it;
- `runner_turn_ms` (median, p99): a run of TURNS turns, each a memory_search tool call, in this
  process against the same stand-in: the runner's own time per turn, the SDK's HTTP included;
- `memory_search_ms` (median, p99) at `memory_entries` entries: the memory server's store,
  SEARCHES searches of two words each.

There is no peer: kopf has no agent runtime, and Sympozium's runner needs a cluster.
"""

from __future__ import annotations

import asyncio
import io
import json
import pathlib
import random
import statistics
import sys
import tempfile
import time
from typing import Any

from _server import server_process

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples" / "agents"), str(ROOT / "examples" / "agents" / "tests")]

import agentplatform  # noqa: E402
from agentplatform.api.v1alpha1 import AgentRun  # noqa: E402
from agentruntime.images import local_images  # noqa: E402
from agentruntime.memoryserver import MemoryStore  # noqa: E402
from agentruntime.runinput import RunInput  # noqa: E402
from agentruntime.runner import Runner  # noqa: E402
from agentruntime.transcript import Transcript  # noqa: E402
from fakemodel import FakeModel, answer, tool_calls  # noqa: E402

import kubeloop  # noqa: E402

RUNS = 50
TURNS = 40
MEMORY_ENTRIES = 10_000
SEARCHES = 300
NAMESPACE = "bench"
IMAGE = "ghcr.io/kubeloop/agent-python:0.1"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "p99": round(percentile(values, 0.99), 2)}


async def agent_runs() -> dict[str, Any]:
    model = await FakeModel([answer("done")] * RUNS).start()
    args = ["--simulate", *(f"--local-image={spec}" for spec in local_images())]
    try:
        with server_process(controllers=True, extra_args=tuple(args)) as server:
            async with kubeloop.APIClient(kubeloop.load_config(server.kubeconfig)) as client:
                await kubeloop.crd.install_crds(client, *agentplatform.CUSTOM_RESOURCES)
                await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
                await client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key", "namespace": NAMESPACE},
                                     "stringData": {"token": "bench"}})  # fmt: skip
                await client.create({"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "ServingRuntime",
                                     "metadata": {"name": "bench"}, "spec": {"image": IMAGE}})  # fmt: skip
                await client.create({"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "Agent",
                                     "metadata": {"name": "bench", "namespace": NAMESPACE},
                                     "spec": {"runtimeRef": "bench", "replicas": 0,
                                              "model": {"provider": "openai", "name": "fake", "baseURL": model.url,
                                                        "authSecretRef": {"name": "key", "key": "token"}}}})  # fmt: skip
                manager = kubeloop.Manager(client)
                agentplatform.setup(manager)
                async with manager:
                    return await _time_runs(client)
    finally:
        await model.stop()


async def _time_runs(client: kubeloop.APIClient) -> dict[str, Any]:
    created: dict[str, float] = {}
    succeeded: dict[str, float] = {}

    async def watch() -> None:
        async for event in client.watch(AgentRun, namespace=NAMESPACE):
            run = AgentRun.model_validate(event.object)
            if run.status is not None and run.status.phase in ("Succeeded", "Failed"):
                assert run.status.phase == "Succeeded", run.status
                succeeded.setdefault(run.metadata.name or "", time.perf_counter())
                if len(succeeded) == RUNS:
                    return

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # the watch is open before the first create
    began = time.perf_counter()

    async def create(name: str) -> None:
        created[name] = time.perf_counter()
        await client.create({"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentRun",
                             "metadata": {"name": name, "namespace": NAMESPACE},
                             "spec": {"agentRef": "bench", "task": "say done"}})  # fmt: skip

    await asyncio.gather(*(create(f"run-{i}") for i in range(RUNS)))
    await watching  # every run succeeded (its failure raises here)
    elapsed = time.perf_counter() - began
    times = [(succeeded[name] - created[name]) * 1000 for name in created]
    return {"runs": RUNS, "create_to_succeeded_ms": summary(times), "runs_per_s": round(RUNS / elapsed, 2)}


async def runner_turns() -> dict[str, Any]:
    search = ("memory_search", '{"query": "cluster nodes"}')
    model = await FakeModel([tool_calls(search)] * TURNS + [answer("done")]).start()
    try:
        given = RunInput(run="bench", agent="bench", system_prompt="", task="look", provider="openai", model="fake",
                         base_url=model.url, api_key="bench", skills=(), memory="<!-- seed -->\nthe cluster has 3 nodes",
                         memory_url=None, mcp_servers=(), max_turns=TURNS + 1, max_tokens=None, timeout_seconds=None,
                         call_timeout_seconds=30, max_retries=0)  # fmt: skip
        runner = Runner(given, Transcript(io.StringIO()))
        try:
            began = time.perf_counter()
            await runner.run()
            total = time.perf_counter() - began
        finally:
            await runner.close()
        gaps = [b.arrived - a.arrived for a, b in zip(model.requests, model.requests[1:], strict=False)]
        assert len(gaps) == TURNS
        return {"turns": TURNS, "runner_turn_ms": summary([gap * 1000 for gap in gaps]), "run_s": round(total, 3)}
    finally:
        await model.stop()


async def memory_search() -> dict[str, Any]:
    words = [f"w{i}" for i in range(2000)]
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        store = MemoryStore(pathlib.Path(folder) / "memory.db")
        await store.open()
        try:
            for i in range(MEMORY_ENTRIES):
                await store.add(" ".join(rng.choice(words) for _ in range(12)), f"run {i}")
            times = []
            for _ in range(SEARCHES):
                query = f"{rng.choice(words)} {rng.choice(words)}"
                began = time.perf_counter()
                await store.search(query, 5)
                times.append((time.perf_counter() - began) * 1000)
        finally:
            await store.close()
    return {"memory_entries": MEMORY_ENTRIES, "memory_search_ms": summary(times)}


async def main() -> None:
    result: dict[str, Any] = {"bench": "agent_runs"}
    result.update(await memory_search())
    result.update(await runner_turns())
    result.update(await agent_runs())
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
