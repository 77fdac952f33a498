"""The registry's own CPU per write, without HTTP: a custom resource's ``/status`` merge patch
(B2's second write) and a ConfigMap create with an owner reference (B2's first), each N times
in one event loop through ``Registry.patch`` / ``Registry.create`` of an in-memory server; and
the ``/status`` patch of a larger custom resource, the agent platform's Agent (its CRD from
``examples/agents``, with its root CEL rule, and a ~1.5 KB spec): what a status write costs
when the object is more than a few fields.

Prints one JSON line: µs of process CPU per write, the median of ``--rounds`` rounds, and each
round's. Compare it with B2's server CPU per request
(~400 µs over HTTPS) to see what HTTP, TLS and the response cost beside the registry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import orjson
import yaml
from b2_custom_resources import Widget, WidgetSpec

import kubeloop
from kubeloop.apiserver.registry.verboptions import WriteOptions
from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.gcpause import tune_for_serving


async def measure(count: int, rounds: int) -> dict[str, Any]:
    async with APIServer(ServerOptions(memory=True, port=0, controllers=False)) as server:
        tune_for_serving()  # as `kubeloop apiserver` does once it has started
        registry = server.registry
        assert registry is not None
        options = WriteOptions(field_manager="bench")
        resources = {(r.group, r.plural): r for r in registry.catalog.all()}
        await registry.create(
            resources["apiextensions.k8s.io", "customresourcedefinitions"], None, Widget.crd(), options
        )
        widgets = next(r for r in registry.catalog.all() if r.plural == "widgets")
        config_maps = resources["", "configmaps"]
        for index in range(count):
            widget = Widget(metadata=kubeloop.ObjectMeta(name=f"w{index}"), spec=WidgetSpec(size=index))
            await registry.create(widgets, "default", widget.to_dict(), options)
        patches: list[float] = []
        creates: list[float] = []
        for round_ in range(rounds):  # the median of a few rounds: this machine is noisy
            status = orjson.dumps({"status": {"observedGeneration": round_ + 1}})
            started = time.process_time()
            for index in range(count):
                await registry.patch(
                    widgets,
                    "default",
                    f"w{index}",
                    "application/merge-patch+json",
                    status,
                    options,
                    subresource="status",
                )
            patches.append((time.process_time() - started) / count * 1e6)
            started = time.process_time()
            for index in range(count):
                owner = {
                    "apiVersion": f"{widgets.group}/v1",
                    "kind": "Widget",
                    "name": f"w{index}",
                    "uid": "u",
                }
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": f"cm{round_}-{index}",
                        "ownerReferences": [{**owner, "controller": True}],
                    },
                    "data": {"size": str(index)},
                }
                await registry.create(config_maps, "default", body, options)
            creates.append((time.process_time() - started) / count * 1e6)
        agent_patches = await agent_status_patches(registry, options, resources, count, rounds)
        return {
            "cr_status_patch_us": round(statistics.median(patches), 1),
            "configmap_create_us": round(statistics.median(creates), 1),
            "agent_status_patch_us": round(statistics.median(agent_patches), 1),
            "cr_status_patch_rounds_us": [round(value, 1) for value in patches],
            "configmap_create_rounds_us": [round(value, 1) for value in creates],
            "agent_status_patch_rounds_us": [round(value, 1) for value in agent_patches],
        }


AGENT_CRD = pathlib.Path(__file__).parent.parent / "examples/agents/config/crd/agents.kubeloop.dev_agents.yaml"
AGENT_SPEC: dict[str, Any] = {
    "model": {"provider": "openai", "name": "gpt-4o", "apiKeySecretRef": {"name": "k", "key": "api-key"}},
    "systemPrompt": "You answer questions about the release. " * 20,
    "allowTools": ["read", "search", "summarise", "draft"],
    "denyTools": ["shell"],
    "env": [{"name": f"SETTING_{index}", "value": "v" * 20} for index in range(10)],
    "maxTokens": 1000,
    "maxTurns": 10,
    "skillPackRefs": [f"skills-{index}" for index in range(5)],
    "replicas": 1,
    "runtimeRef": "python",
}


async def agent_status_patches(
    registry: Any, options: WriteOptions, resources: dict[tuple[str, str], Any], count: int, rounds: int
) -> list[float]:
    """µs of CPU per ``/status`` merge patch of ``count`` Agents, per round."""
    crd = yaml.safe_load(AGENT_CRD.read_text())
    await registry.create(resources["apiextensions.k8s.io", "customresourcedefinitions"], None, crd, options)
    agents = next(r for r in registry.catalog.all() if r.plural == "agents")
    api_version = f"{agents.group}/{agents.version}"
    for index in range(count):
        agent = {"apiVersion": api_version, "kind": "Agent", "metadata": {"name": f"a{index}"}, "spec": AGENT_SPEC}
        await registry.create(agents, "default", agent, options)
    measured: list[float] = []
    for round_ in range(rounds):
        status = orjson.dumps({"status": {"observedGeneration": round_ + 1}})
        started = time.process_time()
        for index in range(count):
            await registry.patch(
                agents, "default", f"a{index}", "application/merge-patch+json", status, options, subresource="status"
            )
        measured.append((time.process_time() - started) / count * 1e6)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = asyncio.run(measure(args.count, args.rounds))
    print(json.dumps({"bench": "registry_writes", "count": args.count, "rounds": args.rounds, **results}))


if __name__ == "__main__":
    main()
