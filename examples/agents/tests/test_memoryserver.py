"""The agent memory server over real HTTP: entries stored, found by words (ranked, prefixes,
any word), listed newest first a page at a time, deleted; bad input a 400 naming the field and
never a 500 (any query text: FTS5's syntax is not the client's to speak); and, run as the
program it is (``python -m agentruntime.memoryserver``), an acknowledged write outlives a
SIGKILL."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from agentruntime.memoryserver import MemoryStore, application
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture
async def memory(tmp_path: pathlib.Path) -> AsyncIterator[str]:
    runner = web.AppRunner(application(MemoryStore(tmp_path / "memory.db")))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_entries_are_stored_found_listed_and_deleted(memory: str) -> None:
    async with aiohttp.ClientSession() as http:
        texts = [
            "the cluster has three nodes",
            "deployments roll out one pod at a time",
            "node pools: three nodes in europe, two nodes in asia",
            "the on-call engineer is Ada",
        ]
        ids = []
        for text in texts:
            async with http.post(f"{memory}/v1/memories", json={"text": text, "source": "run r1"}) as made:
                assert made.status == 201
                entry = await made.json()
                assert entry["text"] == text and entry["source"] == "run r1" and entry["createdAt"]
                ids.append(entry["id"])
        async with http.get(f"{memory}/v1/memories/search", params={"q": "nodes"}) as found:
            items = (await found.json())["items"]
        # Both entries about nodes, the one that says it more often first.
        assert [item["id"] for item in items] == [ids[2], ids[0]]
        assert items[0]["rank"] >= items[1]["rank"]
        async with http.get(f"{memory}/v1/memories/search", params={"q": "deploy engineer"}) as found:
            assert {item["id"] for item in (await found.json())["items"]} == {ids[1], ids[3]}  # prefixes, any word
        async with http.get(f"{memory}/v1/memories", params={"limit": "2"}) as page:
            first = (await page.json())["items"]
        assert [item["id"] for item in first] == [ids[3], ids[2]]
        async with http.get(f"{memory}/v1/memories", params={"limit": "2", "before": str(ids[2])}) as page:
            assert [item["id"] for item in (await page.json())["items"]] == [ids[1], ids[0]]
        async with http.delete(f"{memory}/v1/memories/{ids[0]}") as removed:
            assert removed.status == 200 and (await removed.json())["id"] == ids[0]
        async with http.delete(f"{memory}/v1/memories/{ids[0]}") as again:
            assert again.status == 404
        async with http.get(f"{memory}/v1/memories/search", params={"q": "nodes"}) as found:
            assert [item["id"] for item in (await found.json())["items"]] == [ids[2]]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/memories", {"text": ""}, "text"),
        ("POST", "/v1/memories", {"text": 3}, "text"),
        ("POST", "/v1/memories", {"text": "x" * 70_000}, "text"),
        ("POST", "/v1/memories", {"text": "x", "source": ["a"]}, "source"),
        ("POST", "/v1/memories", ["text"], "JSON object"),
        ("GET", "/v1/memories/search?q=%20%22*", None, "q"),
        ("GET", "/v1/memories/search?q=a&limit=0", None, "limit"),
        ("GET", "/v1/memories?limit=x", None, "limit"),
        ("GET", "/v1/memories?before=-1", None, "before"),
        ("DELETE", "/v1/memories/abc", None, "id"),
    ],
)
async def test_bad_input_is_a_400_naming_what_is_wrong(
    memory: str, method: str, path: str, body: object, field: str
) -> None:
    async with aiohttp.ClientSession() as http, http.request(method, memory + path, json=body) as answer:
        assert answer.status == 400
        assert field in (await answer.json())["error"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60))
async def test_any_query_text_is_answered_never_a_500(memory: str, query: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{memory}/v1/memories/search", params={"q": query}) as answer,
    ):
        assert answer.status in (200, 400), await answer.text()


def test_an_acknowledged_write_outlives_a_sigkill(tmp_path: pathlib.Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DATA_DIR": str(tmp_path), "PORT": str(port), "BIND_ADDRESS": "127.0.0.1"}
    url = f"http://127.0.0.1:{port}"

    def serve() -> subprocess.Popen[bytes]:
        server = subprocess.Popen([sys.executable, "-m", "agentruntime.memoryserver"], env=env)
        while True:
            try:
                urllib.request.urlopen(url + "/healthz").close()
                return server
            except urllib.error.URLError:
                assert server.poll() is None, "the memory server ended"
                time.sleep(0.05)  # not listening yet (the test's timeout bounds it)

    def request(method: str, path: str, body: dict[str, str] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        with urllib.request.urlopen(urllib.request.Request(url + path, data, headers, method=method)) as answer:
            found: dict[str, Any] = json.loads(answer.read())
            return found

    server = serve()
    try:
        written = request("POST", "/v1/memories", {"text": "kept across a crash"})
        server.send_signal(signal.SIGKILL)  # right after the answer: nothing had time to flush
        server.wait(10)
        server = serve()
        assert request("GET", "/v1/memories")["items"] == [written]
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(10) == 0
