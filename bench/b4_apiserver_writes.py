"""B4 — embedded server throughput: small ConfigMap creates from 50 concurrent clients while 100
watchers measure the delay from a write's acknowledgement to its watch event (an event that
arrives before the write's answer is read counts as 0).

The server runs as its own process (`kubeloop apiserver`, durable: SQLite WAL, fsync per group
commit); the load generator runs here. Prints one JSON line. Targets: ≥ 5,000 writes/s durable;
watch p99 ≤ 50 ms at that load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import sys
import time

import aiohttp
import orjson

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _server import server_process


async def run(
    url: str, token: str, ca: str | None, *, clients: int, watchers: int, seconds: float
) -> dict[str, object]:
    ssl_context: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else False
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=clients + watchers + 10, ssl=ssl_context)
    acked: dict[str, float] = {}
    sent: dict[str, float] = {}
    #: (name, when its event arrived) at the sampled watchers; an event may come before the
    #: answer to its POST is read, which counts as no delay.
    arrivals: list[tuple[str, float]] = []
    async with aiohttp.ClientSession(base_url=url, headers=headers, connector=connector) as session:
        async with session.get("/api/v1/namespaces/default/configmaps", params={"limit": "1"}) as response:
            rv = (await response.json())["metadata"]["resourceVersion"]
        ready = asyncio.Semaphore(0)

        async def watcher(index: int) -> None:
            params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": str(int(seconds) + 30)}
            async with session.get(
                "/api/v1/namespaces/default/configmaps",
                params=params,
                timeout=aiohttp.ClientTimeout(total=None),
            ) as response:
                ready.release()
                async for line in response.content:
                    # Sampled: every 10th watcher records, so recording doesn't dominate the client.
                    if index % 10 == 0:
                        now = time.perf_counter()
                        arrivals.append((orjson.loads(line)["object"]["metadata"]["name"], now))

        watch_tasks = [asyncio.create_task(watcher(i)) for i in range(watchers)]
        for _ in range(watchers):
            await ready.acquire()
        deadline = time.perf_counter() + seconds
        done = 0
        errors = 0

        async def writer(index: int) -> None:
            nonlocal done, errors
            i = 0
            while time.perf_counter() < deadline:
                name = f"b4-{index}-{i}"
                body = orjson.dumps(
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
                )
                sent[name] = time.perf_counter()
                async with session.post("/api/v1/namespaces/default/configmaps", data=body) as response:
                    await response.read()
                    if response.status == 201:
                        acked[name] = time.perf_counter()
                        done += 1
                    else:
                        errors += 1
                i += 1

        started = time.perf_counter()
        await asyncio.gather(*(writer(i) for i in range(clients)))
        elapsed = time.perf_counter() - started
        await asyncio.sleep(1.0)
        for task in watch_tasks:
            task.cancel()
        await asyncio.gather(*watch_tasks, return_exceptions=True)
    delays = sorted(max(0.0, arrived - acked[name]) for name, arrived in arrivals if name in acked)
    from_request = sorted(arrived - sent[name] for name, arrived in arrivals if name in acked)

    def pct(p: float, values: list[float] = delays) -> float | None:
        return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 2) if values else None

    return {
        "writes": done,
        "errors": errors,
        "writes_per_s": round(done / elapsed, 1),
        "watch_delay_p50_ms": pct(0.50),
        "watch_delay_p99_ms": pct(0.99),
        "watch_samples": len(delays),
        # From sending the POST to the event: what a watcher waits for a write it caused.
        "watch_from_request_p50_ms": pct(0.50, from_request),
        "watch_from_request_p99_ms": pct(0.99, from_request),
        "median_delay_ms": round(statistics.median(delays) * 1000, 2) if delays else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--insecure-http", action="store_true", help="plain HTTP (isolates TLS cost)")
    args = parser.parse_args()
    with server_process(fsync=not args.no_fsync, tls=not args.insecure_http) as server:
        result = asyncio.run(
            run(
                server.url,
                server.token,
                server.ca_file,
                clients=args.clients,
                watchers=args.watchers,
                seconds=args.seconds,
            )
        )
    print(
        json.dumps(
            {
                "bench": "B4",
                "durable": not args.no_fsync,
                "tls": not args.insecure_http,
                "clients": args.clients,
                "watchers": args.watchers,
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()
