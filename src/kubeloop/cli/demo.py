"""``kubeloop demo``: the embedded server with sample objects, shown serving.

Until the controller runtime and the agent platform operator land, the demo shows exactly what
exists: an HTTPS Kubernetes API with a kubeconfig any client can use, objects created over the
REST API, and a watch reporting the changes made to them.
"""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from typing import Any

import aiohttp
import orjson

from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.lifecycle import cancel_and_wait

SAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
    (
        "/api/v1/namespaces/demo/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "greeting", "labels": {"app": "hello"}},
            "data": {"message": "hello from kubeloop"},
        },
    ),
    (
        "/apis/apps/v1/namespaces/demo/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "hello", "labels": {"app": "hello"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "hello"}},
                "template": {
                    "metadata": {"labels": {"app": "hello"}},
                    "spec": {"containers": [{"name": "hello", "image": "nginx:1.27"}]},
                },
            },
        },
    ),
]


async def run_demo(*, once: bool, data_dir: pathlib.Path | None, port: int) -> int:
    options = ServerOptions(memory=data_dir is None, data_dir=data_dir, port=port, simulate=True)
    async with APIServer(options) as server:
        assert server.credentials is not None
        print(f"kubeloop demo: embedded API server ready at {server.url}")
        print(
            f"  kubeconfig: {server.kubeconfig_path}   (try: kubectl --kubeconfig {server.kubeconfig_path} get all -A)"
        )
        ssl_context = ssl.create_default_context(cadata=server.credentials.ca_cert_pem.decode())
        headers = {"Authorization": f"Bearer {server.credentials.admin_token}"}
        async with aiohttp.ClientSession(base_url=server.url, headers=headers) as session:
            watch_ready = asyncio.Event()
            printing = asyncio.Event()
            seen: list[str] = []
            watcher = asyncio.create_task(_watch(session, ssl_context, seen, watch_ready, printing))
            await watch_ready.wait()
            for path, body in SAMPLES:
                async with session.post(
                    path,
                    data=orjson.dumps(body),
                    ssl=ssl_context,
                    headers={"Content-Type": "application/json"},
                ) as response:
                    created = await response.json()
                    if response.status not in (200, 201):
                        if response.status == 409:
                            continue
                        print(f"  create {path} failed: {created.get('message')}")
                        return 1
                    meta = created["metadata"]
                    print(
                        f"  created {created['kind']:<11} {meta.get('namespace', '-'):<8} {meta['name']:<10} "
                        f"uid={meta['uid'][:8]} resourceVersion={meta['resourceVersion']}"
                    )
            patch = {"spec": {"replicas": 3}}
            async with session.patch(
                "/apis/apps/v1/namespaces/demo/deployments/hello",
                data=orjson.dumps(patch),
                ssl=ssl_context,
                headers={"Content-Type": "application/strategic-merge-patch+json"},
            ) as response:
                patched = await response.json()
                print(
                    f"  patched Deployment demo/hello: replicas={patched['spec']['replicas']} "
                    f"generation={patched['metadata']['generation']}"
                )
            await asyncio.sleep(0.2)
            print("  the watch on namespace demo saw: " + ", ".join(seen))
            if once:
                await cancel_and_wait([watcher])
                return 0
            print("serving until Ctrl-C; changes in namespace demo are printed as they happen", flush=True)
            printing.set()
            try:
                await watcher
            finally:
                await cancel_and_wait([watcher])
    return 0


async def _watch(
    session: aiohttp.ClientSession,
    ssl_context: ssl.SSLContext,
    seen: list[str],
    ready: asyncio.Event,
    printing: asyncio.Event,
) -> None:
    paths = ["/api/v1/namespaces/demo/configmaps", "/apis/apps/v1/namespaces/demo/deployments"]

    async def one(path: str, started: asyncio.Event) -> None:
        async with session.get(
            path,
            params={"watch": "1", "resourceVersion": "1"},
            ssl=ssl_context,
            timeout=aiohttp.ClientTimeout(total=None),
        ) as response:
            started.set()
            async for line in response.content:
                event = orjson.loads(line)
                obj = event["object"]
                text = f"{event['type']} {obj.get('kind')}/{obj['metadata'].get('name')}"
                seen.append(text)
                if printing.is_set():
                    print(
                        f"  watch: {text} resourceVersion={obj['metadata'].get('resourceVersion')}",
                        flush=True,
                    )

    events = [asyncio.Event() for _ in paths]
    tasks = [asyncio.create_task(one(p, e)) for p, e in zip(paths, events, strict=True)]
    try:
        for e in events:
            await e.wait()
        ready.set()
        await asyncio.gather(*tasks)
    finally:
        await cancel_and_wait(tasks)
