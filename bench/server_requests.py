"""The server's CPU per request without TLS or sockets: B2's three writes (a widget create, a
ConfigMap create with an owner reference, the widget's ``/status`` merge patch) sent as HTTP/1.1
bytes to the connection protocol ``kubeloop apiserver`` serves (a ``ServerConnection`` over a
transport that only records what is written), on an in-memory server in this process: the
handlers, the registry, the store and the answer, as a client's request meets them.

Prints one JSON line: µs of process CPU per request of each kind, the median of ``--rounds``
rounds, and each round's. These machines' speed swings by a third within minutes, more than
most changes to the write path move it; ``--instructions`` counts instead, under valgrind's
callgrind (the Debian package ``valgrind``), the instructions the process executes for
``--count`` requests of each kind and for ``--count`` × 5, and prints the difference per request:
the same code gives the same count within ~1 % (``PYTHONHASHSEED=0``), so a change of a few
per cent shows. It takes about a minute and a half.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import orjson
import uvloop
from b2_custom_resources import Widget

from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.gcpause import tune_for_serving

KINDS = ("widget_create", "configmap_create", "status_patch")


class RecordingTransport(asyncio.Transport):
    """Takes what the connection writes and resolves ``answered`` once a whole answer (its
    Content-Length) has come."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.answered: asyncio.Future[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data
        end = self.written.find(b"\r\n\r\n")
        if end < 0:
            return
        found = re.search(rb"\r\nContent-Length: (\d+)", self.written[:end])
        assert found is not None, bytes(self.written[:end])
        size = end + 4 + int(found.group(1))
        if len(self.written) >= size and self.answered is not None and not self.answered.done():
            self.answered.set_result(bytes(self.written[:size]))
            del self.written[:size]

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 6443)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def request(method: str, path: str, token: str, body: bytes, content_type: str = "application/json") -> bytes:
    """A request as kubeloop's client sends it."""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:6443\r\nUser-Agent: kubeloop/bench\r\n"
        f"Accept: application/json\r\nAuthorization: Bearer {token}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def measure(count: int, rounds: int) -> dict[str, list[float]]:
    """µs of CPU per request of each kind, per round (``count`` of each a round)."""
    options = ServerOptions(memory=True, port=0, controllers=False)
    async with APIServer(options) as server:
        tune_for_serving()  # as `kubeloop apiserver` does once it has started
        assert server.credentials is not None
        token = server.credentials.admin_token
        # The protocol each accepted connection gets (no public handle: a bench reaches in).
        assert server._serve_connection is not None
        connection = server._serve_connection()
        transport = RecordingTransport()
        connection.connection_made(transport)
        loop = asyncio.get_running_loop()

        async def send(raw: bytes) -> bytes:
            transport.answered = loop.create_future()
            connection.data_received(raw)
            answer = await transport.answered
            if not answer.startswith((b"HTTP/1.1 200", b"HTTP/1.1 201")):
                raise RuntimeError(answer[:500].decode(errors="replace"))
            return answer

        await send(request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", token, orjson.dumps(Widget.crd())))
        while True:  # the CRD's resource is served once the CRD controller has seen it
            try:
                await send(request("GET", "/apis/bench.kubeloop.dev/v1/namespaces/default/widgets", token, b""))
                break
            except RuntimeError:
                await asyncio.sleep(0.05)
        await send(request("POST", "/api/v1/namespaces", token, b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b2"}}'))
        widgets = "/apis/bench.kubeloop.dev/v1/namespaces/b2/widgets"
        measured: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for round_ in range(rounds):
            for kind in KINDS:
                started = time.process_time()
                for index in range(count):
                    name = f"w-{round_}-{index:05d}"
                    if kind == "widget_create":
                        body = orjson.dumps(
                            {
                                "apiVersion": "bench.kubeloop.dev/v1",
                                "kind": "Widget",
                                "metadata": {"name": name, "namespace": "b2"},
                                "spec": {"size": index, "color": "blue"},
                            }
                        )
                        await send(request("POST", widgets, token, body))
                    elif kind == "configmap_create":
                        owner = {
                            "apiVersion": "bench.kubeloop.dev/v1",
                            "kind": "Widget",
                            "name": name,
                            "uid": "0b6f5a3e-1a2b-4c3d-8e9f-001122334455",
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                        body = orjson.dumps(
                            {
                                "apiVersion": "v1",
                                "kind": "ConfigMap",
                                "metadata": {"name": name, "namespace": "b2", "ownerReferences": [owner]},
                                "data": {"size": str(index), "color": "blue"},
                            }
                        )
                        await send(request("POST", "/api/v1/namespaces/b2/configmaps", token, body))
                    else:
                        patch = b'{"status":{"observedGeneration":1}}'
                        path = f"{widgets}/{name}/status"
                        await send(request("PATCH", path, token, patch, "application/merge-patch+json"))
                measured[kind].append((time.process_time() - started) / count * 1e6)
        return measured


def instructions(count: int) -> int:
    """Instructions callgrind counts for this script measuring ``count`` of each kind once."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/callgrind.out",
                sys.executable,
                __file__,
                "--count",
                str(count),
                "--rounds",
                "1",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
        )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"callgrind said no total:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="requests of each kind a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="instructions per request under callgrind (--count of each kind, default 100, and five times as many)",
    )
    args = parser.parse_args()
    if args.instructions:
        count = args.count if args.count != parser.get_default("count") else 100
        few, many = instructions(count), instructions(5 * count)
        per_request = (many - few) / (4 * count * len(KINDS))
        print(json.dumps({"bench": "server_requests", "count": count, "instructions_per_request": round(per_request)}))
        return
    measured = uvloop.run(measure(args.count, args.rounds))
    print(
        json.dumps(
            {
                "bench": "server_requests",
                "count": args.count,
                "rounds": args.rounds,
                **{f"{kind}_us": round(statistics.median(values), 1) for kind, values in measured.items()},
                "rounds_us": {kind: [round(value, 1) for value in values] for kind, values in measured.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
