"""History memory: the embedded server's RSS and disk after 300 updates of a 1 MB ConfigMap.

History used to be bounded by event count only: 300 such updates held 1.2 GB after a restart, and
the default window of 100,000 events would have reached 100 GB. Now it is bounded by bytes too
(``--history-bytes``, 128 MiB of JSON by default) and compaction gives the disk back. The server
runs as its own process (durable, TLS); RSS is read from /proc. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import ssl
import sys
import time

import aiohttp
import orjson

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _server import server_process

UPDATES = 300
VALUE_BYTES = 1_000_000  # ConfigMap data may hold 1 MiB


def rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def disk_mb(data_dir: str) -> float:
    return round(sum(p.stat().st_size for p in pathlib.Path(data_dir).glob("state.db*")) / 2**20, 1)


async def update(url: str, token: str, ca: str | None) -> float:
    ssl_context: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else False
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    path = "/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession(
        base_url=url, headers=headers, connector=aiohttp.TCPConnector(ssl=ssl_context)
    ) as session:
        started = time.perf_counter()
        for i in range(UPDATES):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}}
            body["data"] = {"v": f"{i:08d}" + "x" * (VALUE_BYTES - 8)}
            method, target = ("POST", path) if i == 0 else ("PUT", f"{path}/big")
            async with session.request(method, target, data=orjson.dumps(body)) as response:
                await response.read()
                assert response.status in (200, 201), response.status
        return time.perf_counter() - started


def main() -> None:
    with server_process(keep_data=True) as server:
        seconds = asyncio.run(update(server.url, server.token, server.ca_file))
        time.sleep(1.0)
        rss_running = rss_mb(server.pid)
        disk_running = disk_mb(server.data_dir)
    with server_process(data_dir=server.data_dir) as again:
        time.sleep(0.5)
        rss_restarted = rss_mb(again.pid)
        disk_restarted = disk_mb(again.data_dir)
    print(
        json.dumps(
            {
                "bench": "history_memory",
                "updates": UPDATES,
                "object_bytes": VALUE_BYTES,
                "updates_per_s": round(UPDATES / seconds, 1),
                "rss_mb_after_updates": rss_running,
                "rss_mb_after_restart": rss_restarted,
                "disk_mb_after_updates": disk_running,
                "disk_mb_after_restart": disk_restarted,
            }
        )
    )


if __name__ == "__main__":
    main()
