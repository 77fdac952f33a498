"""B4 — embedded server throughput: small ConfigMap creates from 50 concurrent clients while 100
watchers measure the delay from a write's acknowledgement to its watch event (an event that
arrives before the write's answer is read counts as 0), and the server's CPU per write.

The server runs as its own process (`kubeloop apiserver`, durable: SQLite WAL, fsync per group
commit); the load generator runs here (on uvloop, whose TLS is C: on asyncio's own loop the load generator took
the larger share of the two cores), on the same cores: the server's CPU per write says what it
would do with a core of its own. Prints one JSON line, medians of ``--runs``. Targets: ≥ 5,000 writes/s durable;
watch p99 ≤ 50 ms at that load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import sys
import time

import orjson
import uvloop

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _rawhttp import HTTPError, connect, get, post
from _server import server_process


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The live children of process ``pid`` (the server's storage writer)."""
    children: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            children += (int(child) for child in listed.read().split())
    return children


def server_cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time so far of the server process, and of it with its children."""
    own = process_cpu_seconds(pid)
    return own, own + sum(process_cpu_seconds(child) for child in child_pids(pid))


class WatchReader(asyncio.Protocol):
    """One watch connection read as it arrives, with no task and no HTTP client library: a
    thousand of them in this one process must cost it less than the server's fan-out costs the
    server, or the figures measure the load generator. ``arrivals``, when given, gets each
    event's object name and when its chunk arrived."""

    def __init__(self, head_read: asyncio.Future[None], arrivals: list[tuple[str, float]] | None) -> None:
        self.head_read = head_read
        self._arrivals = arrivals
        self._buffer = b""
        self._lines = b""

    def data_received(self, data: bytes) -> None:
        if not self.head_read.done():
            self._buffer += data
            head, found, rest = self._buffer.partition(b"\r\n\r\n")
            if not found:
                return
            if not head.startswith(b"HTTP/1.1 200"):
                self.head_read.set_exception(RuntimeError(head.decode(errors="replace")))
                return
            self.head_read.set_result(None)
            self._buffer, data = b"", rest
        if self._arrivals is None:
            return
        now = time.perf_counter()
        buffer = self._buffer + data
        while True:  # the chunked framing: a size line, the chunk, CRLF
            size_line, found, rest = buffer.partition(b"\r\n")
            if not found:
                break
            size = int(size_line, 16)
            if len(rest) < size + 2:
                break
            self._lines += rest[:size]
            buffer = rest[size + 2 :]
        self._buffer = buffer
        *complete, self._lines = self._lines.split(b"\n")
        for line in complete:
            self._arrivals.append((orjson.loads(line)["object"]["metadata"]["name"], now))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.head_read.done():
            self.head_read.set_exception(exc or ConnectionError("closed before the answer's head"))


async def run(
    url: str,
    token: str,
    ca: str | None,
    *,
    clients: int,
    watchers: int,
    seconds: float,
    server_pid: int,
    rate: float = 0.0,
) -> dict[str, object]:
    ssl_context: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else False
    acked: dict[str, float] = {}
    sent: dict[str, float] = {}
    #: (name, when its event arrived) at the sampled watchers; an event may come before the
    #: answer to its POST is read, which counts as no delay.
    arrivals: list[tuple[str, float]] = []
    # The writers: a keep-alive connection each, requests written whole (`_rawhttp`): on these
    # two cores what the load generator spends is taken from the server it measures.
    connections = [await connect(url, ca) for _ in range(clients)]
    try:
        status, body = await connections[0].send(get(url, "/api/v1/namespaces/default/configmaps?limit=1", token))
        if status != 200:
            raise HTTPError(f"listing ConfigMaps: {status} {body[:300]!r}")
        rv = orjson.loads(body)["metadata"]["resourceVersion"]
        loop = asyncio.get_running_loop()
        host, port = url.split("://", 1)[1].rsplit(":", 1)
        target = f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
        request = (
            f"GET {target}&timeoutSeconds={int(seconds) + 30} HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()

        async def open_watch(index: int) -> asyncio.Transport:
            # Every 10th watcher records each event's arrival; the others only read what arrives.
            reader = WatchReader(loop.create_future(), arrivals if index % 10 == 0 else None)
            transport, _ = await loop.create_connection(
                lambda: reader,
                host,
                int(port),
                ssl=ssl_context or None,
                server_hostname=host if ssl_context else None,
            )
            transport.write(request)
            await reader.head_read
            return transport

        watch_connections = await asyncio.gather(*(open_watch(i) for i in range(watchers)))
        deadline = time.perf_counter() + seconds
        done = 0
        errors = 0

        async def writer(index: int) -> None:
            nonlocal done, errors
            i = 0
            while time.perf_counter() < deadline:
                if rate:  # paced: the clients' writes spread evenly over each second
                    due = started + (i * clients + index) / rate
                    if (wait := due - time.perf_counter()) > 0:
                        await asyncio.sleep(wait)
                name = f"b4-{index}-{i}"
                body = orjson.dumps(
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
                )
                create = post(url, "/api/v1/namespaces/default/configmaps", token, body)
                sent[name] = time.perf_counter()
                status, _ = await connections[index].send(create)
                if status == 201:
                    acked[name] = time.perf_counter()
                    done += 1
                else:
                    errors += 1
                i += 1

        started, (serving_cpu, server_cpu) = time.perf_counter(), server_cpu_seconds(server_pid)
        own_cpu = time.process_time()
        await asyncio.gather(*(writer(i) for i in range(clients)))
        serving_after, server_after = server_cpu_seconds(server_pid)
        elapsed = time.perf_counter() - started
        own_cpu = time.process_time() - own_cpu
        serving_cpu, server_cpu = serving_after - serving_cpu, server_after - server_cpu
        await asyncio.sleep(1.0)
        for transport in watch_connections:
            transport.close()
    finally:
        for connection in connections:
            connection.close()
    delays = sorted(max(0.0, arrived - acked[name]) for name, arrived in arrivals if name in acked)
    from_request = sorted(arrived - sent[name] for name, arrived in arrivals if name in acked)
    answered = sorted(acked[name] - sent[name] for name in acked)

    def pct(p: float, values: list[float] = delays) -> float | None:
        return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 2) if values else None

    return {
        "writes": done,
        "errors": errors,
        "writes_per_s": round(done / elapsed, 1),
        # The server's CPU (all its threads, and its storage writer's process) per acknowledged
        # write, fan-out to the watchers included: what the server costs, whatever the load
        # generator takes; and the serving process's part alone (what one core of it gives).
        "server_cpu_us_per_write": round(server_cpu / max(done, 1) * 1e6, 1),
        "serving_process_cpu_us_per_write": round(serving_cpu / max(done, 1) * 1e6, 1),
        # The share of a core the load generator (writers and watchers, one process) took: near
        # 1.0 it, not the server, bounds the figures.
        "load_generator_cpu_share": round(own_cpu / elapsed, 2),
        "server_cpu_share": round(server_cpu / elapsed, 2),
        # From sending a POST to reading its answer.
        "write_p50_ms": pct(0.50, answered),
        "write_p99_ms": pct(0.99, answered),
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
    parser.add_argument("--rate", type=float, default=0.0, help="writes/s in all (0: as fast as answered)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each on a new server; medians printed")
    parser.add_argument(
        "--workers", type=int, default=1, help="processes serving the port (kubeloop apiserver --workers)"
    )
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        workers = ("--workers", str(args.workers))
        with server_process(fsync=not args.no_fsync, tls=not args.insecure_http, extra_args=workers) as server:
            runs.append(
                uvloop.run(
                    run(
                        server.url,
                        server.token,
                        server.ca_file,
                        clients=args.clients,
                        watchers=args.watchers,
                        seconds=args.seconds,
                        server_pid=server.pid,
                        rate=args.rate,
                    )
                )
            )
    medians = {
        key: statistics.median(values)
        for key in runs[0]
        if (values := [value for run in runs if isinstance(value := run[key], (int, float))])
    }
    print(
        json.dumps(
            {
                "bench": "B4",
                "durable": not args.no_fsync,
                "tls": not args.insecure_http,
                "clients": args.clients,
                "workers": args.workers,
                "watchers": args.watchers,
                "rate": args.rate or None,
                "runs": args.runs,
                **medians,
                "writes_per_s_runs": [run["writes_per_s"] for run in runs],
            }
        )
    )


if __name__ == "__main__":
    main()
