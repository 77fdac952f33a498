"""What an admission webhook costs a write, beside B4: the same small ConfigMap creates with no
webhook, through one validating webhook and through one mutating webhook (a JSON patch adding a
label), against ``kubeloop apiserver --memory`` in its own process.

Two measures per case: the latency of sequential creates (median and p99, and what the webhook
adds to the no-webhook median), and the throughput of creates from 50 concurrent clients. The
webhook server is an aiohttp TLS server in this process on its own thread, answering at once, so
what is measured is the server's side of a call: the AdmissionReview built and encoded, a TLS
keep-alive POST, the answer read and checked, a patch applied and the object decoded again.
There is no peer in this run: kopf serves webhooks but kube-apiserver calls them, and the
embedded server is the only API server here. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import statistics
import sys
import threading
import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _server import server_process

from kubeloop import certs

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PATCH = base64.b64encode(
    orjson.dumps([{"op": "add", "path": "/metadata/labels", "value": {"stamped": "yes"}}])
).decode()


def webhook_server() -> tuple[int, str, threading.Event]:
    """Start the webhook server; (port, its CA bundle, an event that stops it)."""
    credentials = certs.load_or_create_credentials(None, ["localhost"])
    started, stop = threading.Event(), threading.Event()
    port: list[int] = []

    async def review(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        response: dict[str, Any] = {"uid": body["request"]["uid"], "allowed": True}
        if request.match_info["kind"] == "mutating":
            response.update(patchType="JSONPatch", patch=PATCH)
        answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    def run() -> None:
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/{kind}", review)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_ssl_context(credentials))
        loop.run_until_complete(site.start())
        port.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        started.set()
        loop.run_until_complete(asyncio.to_thread(stop.wait))
        loop.run_until_complete(runner.cleanup())

    threading.Thread(target=run, daemon=True).start()
    started.wait(10)
    return port[0], base64.b64encode(credentials.ca_cert_pem).decode(), stop


def configuration(kind: str, port: int, ca_bundle: str) -> dict[str, Any]:
    kind_name = "ValidatingWebhookConfiguration" if kind == "validating" else "MutatingWebhookConfiguration"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind_name,
        "metadata": {"name": f"bench-{kind}"},
        "webhooks": [
            {
                "name": f"{kind}.bench.kubeloop.dev",
                "clientConfig": {"url": f"https://localhost:{port}/{kind}", "caBundle": ca_bundle},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                    }
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


async def measure(
    session: aiohttp.ClientSession, prefix: str, *, sequential: int, clients: int, seconds: float
) -> dict[str, float]:
    path = "/api/v1/namespaces/default/configmaps"
    latencies: list[float] = []
    for index in range(sequential):
        body = orjson.dumps({"metadata": {"name": f"{prefix}-s{index}"}, "data": {"k": "v"}})
        started = time.perf_counter()
        async with session.post(path, data=body) as response:
            await response.read()
            assert response.status == 201, await response.text()
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    done = 0
    deadline = time.perf_counter() + seconds

    async def writer(worker: int) -> None:
        nonlocal done
        index = 0
        while time.perf_counter() < deadline:
            body = orjson.dumps({"metadata": {"name": f"{prefix}-c{worker}-{index}"}, "data": {"k": "v"}})
            async with session.post(path, data=body) as response:
                await response.read()
                assert response.status == 201
            index += 1
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(writer(worker) for worker in range(clients)))
    elapsed = time.perf_counter() - started
    return {
        "median_ms": round(statistics.median(latencies) * 1000, 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 3),
        "writes_per_s": round(done / elapsed, 1),
    }


async def run(url: str, token: str, ca: str, args: argparse.Namespace) -> dict[str, Any]:
    port, ca_bundle, stop = webhook_server()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=args.clients + 5, ssl=ssl.create_default_context(cafile=ca))
    results: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession(base_url=url, headers=headers, connector=connector) as session:
            for case in ("none", "validating", "mutating"):
                if case != "none":
                    made = configuration(case, port, ca_bundle)
                    async with session.post(
                        f"{ADMISSION}/{case}webhookconfigurations", data=orjson.dumps(made)
                    ) as r:
                        assert r.status == 201, await r.text()
                results[case] = await measure(
                    session, case, sequential=args.sequential, clients=args.clients, seconds=args.seconds
                )
                if case != "none":
                    async with session.delete(f"{ADMISSION}/{case}webhookconfigurations/bench-{case}") as r:
                        assert r.status == 200
    finally:
        stop.set()
    for case in ("validating", "mutating"):
        results[case]["added_median_ms"] = round(results[case]["median_ms"] - results["none"]["median_ms"], 3)
        results[case]["throughput_ratio"] = round(
            results[case]["writes_per_s"] / results["none"]["writes_per_s"], 3
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=500, help="creates timed one at a time per case")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients for the throughput")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each throughput run lasts")
    args = parser.parse_args()
    with server_process(memory=True) as server:
        assert server.ca_file is not None
        results = asyncio.run(run(server.url, server.token, server.ca_file, args))
    print(json.dumps({"benchmark": "webhook_admission", **results}))


if __name__ == "__main__":
    main()
