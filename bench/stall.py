"""Stalls: how long one legal (or hostile) request keeps the embedded server from serving others.

A prober GETs a small ConfigMap every 5 ms on its own connection while one heavy request runs;
the prober runs in a process of its own, so only the server's stalls show; the figure per scenario
is the worst probe latency seen (and the heavy request's own time and
status). The server runs as its own process (durable, TLS). Scenarios: large YAML and JSON bodies,
nesting far beyond the limit, server-side apply and merge patch of a 1 MB object, an
unpaginated list of 20,000 objects (as JSON and as YAML) and a watch that starts with them.

``--runs N`` (default 3) measures N times, each on a new server, and prints one JSON line: per
scenario each run's worst wait and their median; the figure S1 (target in
docs/design/performance.md: ≤ 50 ms) is the median over the runs of each run's worst wait
(``worst_other_request_ms``), and ``worst_of_all_runs_ms`` the largest wait seen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import ssl
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

import aiohttp
import orjson

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _server import server_process

CM_PATH = "/api/v1/namespaces/default/configmaps"


def yaml_configmap(name: str, keys: int) -> bytes:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}", "data:"]
    lines += [f"  key{i:06d}: value-{i:012d}" for i in range(keys)]
    return ("\n".join(lines) + "\n").encode()


def json_configmap(name: str, keys: int) -> bytes:
    data = {f"key{i:06d}": f"value-{i:012d}" for i in range(keys)}
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def nested_json(name: str, depth: int) -> bytes:
    inner = "1"
    for _ in range(depth):
        inner = '{"a":' + inner + "}"
    return (
        f'{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}",'
        f'"annotations":{{"x":"y"}}}},"data":{{}},"extra":{inner}}}'
    ).encode()


def nested_yaml(name: str, depth: int) -> bytes:
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\nextra: "
        + "[" * depth
        + "]" * depth
        + "\n"
    ).encode()


def nested_apply(depth: int) -> bytes:
    return (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata: "
        + "{a: " * depth
        + "1"
        + "}" * depth
        + "\n"
    ).encode()


LIST_OBJECTS = 20_000
LIST_SCENARIO = f"list_{LIST_OBJECTS}_configmaps"
LIST_AS_YAML = f"list_{LIST_OBJECTS}_configmaps_as_yaml"
#: The scenarios whose answer is asked for in YAML (kubectl's -o yaml asks for JSON).
ANSWERED_IN_YAML = {LIST_AS_YAML}


async def populate(session: aiohttp.ClientSession, count: int) -> None:
    """``count`` small ConfigMaps in namespace default, created 500 at a time."""

    async def create(i: int) -> None:
        body = orjson.dumps({"metadata": {"name": f"many{i:05d}"}, "data": {"a": "b" * 200}})
        async with session.post(CM_PATH, data=body, headers={"Content-Type": "application/json"}) as answer:
            await answer.read()

    for start in range(0, count, 500):
        await asyncio.gather(*(create(i) for i in range(start, min(count, start + 500))))


SCENARIOS: dict[str, Callable[[], tuple[str, str, str, bytes]]] = {
    # (method, path, content type, body)
    "yaml_2.9MB_90k_keys": lambda: (
        "POST",
        CM_PATH,
        "application/yaml",
        yaml_configmap("big-yaml", 90_000),
    ),
    "json_2.9MB_87k_keys": lambda: (
        "POST",
        CM_PATH,
        "application/json",
        json_configmap("big-json", 87_000),
    ),
    "json_1MB_30k_keys": lambda: ("POST", CM_PATH, "application/json", json_configmap("ok-json", 30_000)),
    "yaml_1MB_30k_keys": lambda: ("POST", CM_PATH, "application/yaml", yaml_configmap("ok-yaml", 30_000)),
    "json_nested_1000": lambda: ("POST", CM_PATH, "application/json", nested_json("deep-json", 1000)),
    "yaml_nested_2000": lambda: ("POST", CM_PATH, "application/yaml", nested_yaml("deep-yaml", 2000)),
    "apply_nested_1000": lambda: (
        "PATCH",
        CM_PATH + "/applied?fieldManager=bench",
        "application/apply-patch+yaml",
        nested_apply(1000),
    ),
    "apply_1MB_30k_keys": lambda: (
        "PATCH",
        CM_PATH + "/big-apply?fieldManager=bench",
        "application/apply-patch+yaml",
        yaml_configmap("big-apply", 30_000),
    ),
    LIST_SCENARIO: lambda: ("GET", CM_PATH, "application/json", b""),
    LIST_AS_YAML: lambda: ("GET", CM_PATH, "application/json", b""),
    f"watch_from_0_of_{LIST_OBJECTS}_configmaps": lambda: (
        "GET",
        CM_PATH + "?watch=1&timeoutSeconds=1",
        "application/json",
        b"",
    ),
    "merge_patch_1MB_30k_keys": lambda: (
        "PATCH",
        CM_PATH + "/ok-json",
        "application/merge-patch+json",
        orjson.dumps({"data": {f"key{i:06d}": f"patched-{i:011d}" for i in range(30_000)}}),
    ),
}


def prober(url: str, token: str, ca: str | None, commands: Connection) -> None:
    """In its own process (so that the heavy client's work cannot delay it): GET a small object
    every 5 ms between "start" and "stop", and answer "stop" with the worst latency seen."""

    async def run() -> None:
        ssl_context: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else False
        connector = aiohttp.TCPConnector(limit=1, ssl=ssl_context)
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(base_url=url, headers=headers, connector=connector) as probe:
            loop = asyncio.get_running_loop()
            while (await loop.run_in_executor(None, commands.recv)) == "start":
                worst = 0.0
                while not commands.poll():
                    started = time.perf_counter()
                    async with probe.get(CM_PATH + "/probe") as response:
                        await response.read()
                    worst = max(worst, time.perf_counter() - started)
                    await asyncio.sleep(0.005)
                commands.recv()  # "stop"
                commands.send(worst)

    asyncio.run(run())


async def measure(url: str, token: str, ca: str | None, probe: Connection) -> dict[str, object]:
    ssl_context: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else False
    headers = {"Authorization": f"Bearer {token}"}
    results: dict[str, object] = {}
    heavy_connector = aiohttp.TCPConnector(limit=50, ssl=ssl_context)
    async with aiohttp.ClientSession(base_url=url, headers=headers, connector=heavy_connector) as heavy:
        async with heavy.post(
            CM_PATH, data=json_configmap("probe", 1), headers={"Content-Type": "application/json"}
        ):
            pass
        for name, build in SCENARIOS.items():
            if name == LIST_SCENARIO:
                await populate(heavy, LIST_OBJECTS)
            method, path, content_type, body = build()
            probe.send("start")
            await asyncio.sleep(0.2)
            started = time.perf_counter()
            accept = "application/yaml" if name in ANSWERED_IN_YAML else "application/json"
            async with heavy.request(
                method, path, data=body, headers={"Content-Type": content_type, "Accept": accept}
            ) as response:
                answer = await response.read()
                status = response.status
            took = time.perf_counter() - started
            await asyncio.sleep(0.2)
            probe.send("stop")
            worst = float(probe.recv())
            reason = ""
            if status >= 400:
                try:
                    reason = orjson.loads(answer).get("message", "")[:100]
                except orjson.JSONDecodeError:
                    reason = answer[:100].decode(errors="replace")
            results[name] = {
                "status": status,
                "body_bytes": len(body),
                "request_ms": round(took * 1000, 1),
                "worst_other_request_ms": round(worst * 1000, 1),
                "message": reason,
            }
    probe.send("end")
    return results


def measure_on_a_new_server() -> dict[str, object]:
    """Every scenario once, on a server of its own, with the prober in a process of its own."""
    with server_process() as server:
        ours, theirs = multiprocessing.Pipe()
        probing = multiprocessing.get_context("spawn").Process(
            target=prober, args=(server.url, server.token, server.ca_file, theirs)
        )
        probing.start()
        try:
            return asyncio.run(measure(server.url, server.token, server.ca_file, ours))
        finally:
            probing.join(30)
            if probing.is_alive():
                probing.kill()


def worst_wait(scenarios: dict[str, object]) -> float:
    return max(float(s["worst_other_request_ms"]) for s in scenarios.values())  # type: ignore[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs, each on a new server; medians printed")
    args = parser.parse_args()
    runs = [measure_on_a_new_server() for _ in range(args.runs)]
    scenarios: dict[str, object] = {}
    for name in runs[0]:
        each = [run[name] for run in runs]
        waits = [float(s["worst_other_request_ms"]) for s in each]  # type: ignore[index]
        scenarios[name] = {
            **each[-1],  # type: ignore[dict-item]
            "request_ms": statistics.median(float(s["request_ms"]) for s in each),  # type: ignore[index]
            "worst_other_request_ms": statistics.median(waits),
            "each_run_worst_other_request_ms": waits,
        }
    print(
        json.dumps(
            {
                "bench": "stall",
                "runs": args.runs,
                "worst_other_request_ms": statistics.median(worst_wait(run) for run in runs),
                "each_run_worst_other_request_ms": [worst_wait(run) for run in runs],
                "worst_of_all_runs_ms": max(worst_wait(run) for run in runs),
                "scenarios": scenarios,
            }
        )
    )


if __name__ == "__main__":
    main()
