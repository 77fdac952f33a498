"""A test double of a model provider: a local server speaking the OpenAI-compatible Chat
Completions API (``POST /v1/chat/completions``), scripted per test. It stands in for the one
third party the platform cannot reach in tests; everything between it and the AgentRun (the
operator, the Job, the runner's process, the ``openai`` SDK) is real.

A script is a list of steps, one per request in order; each step answers one request:
:func:`answer`, :func:`tool_calls`, :func:`refuse` (a status and an error body, with headers
such as Retry-After), or :func:`stall` (answers after the test lets it). Requests past the
script get a 500 saying so. Every request is recorded with the moment it arrived.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from localserver import serve_locally

Step = Callable[[dict[str, Any]], Awaitable[web.Response]]


def _completion(message: dict[str, Any], prompt: int, completion: int, finish: str) -> web.Response:
    return web.json_response({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })  # fmt: skip


def answer(text: str, prompt: int = 20, completion: int = 5) -> Step:
    async def step(request: dict[str, Any]) -> web.Response:
        return _completion({"role": "assistant", "content": text}, prompt, completion, "stop")

    return step


def tool_calls(*calls: tuple[str, str], prompt: int = 30, completion: int = 10) -> Step:
    """The model calls tools: (name, arguments as the model wrote them: JSON text, or not)."""

    async def step(request: dict[str, Any]) -> web.Response:
        made = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ]
        return _completion({"role": "assistant", "content": None, "tool_calls": made}, prompt, completion, "tool_calls")

    return step


def refuse(status: int, message: str, headers: dict[str, str] | None = None) -> Step:
    async def step(request: dict[str, Any]) -> web.Response:
        body = {"error": {"message": message, "type": "fake_error", "code": str(status)}}
        return web.json_response(body, status=status, headers=headers)

    return step


def stall(released: asyncio.Event, then: Step) -> Step:
    """Answer only once ``released`` is set (a model slower than the run's time)."""

    async def step(request: dict[str, Any]) -> web.Response:
        await released.wait()
        return await then(request)

    return step


@dataclass
class Request:
    body: dict[str, Any]
    authorization: str
    arrived: float


@dataclass
class FakeModel:
    """The server; :attr:`url` is its base URL (``.../v1``)."""

    script: list[Step] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> FakeModel:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner, port = await serve_locally(app)
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.requests.append(Request(body, request.headers.get("Authorization", ""), time.monotonic()))
        position = len(self.requests) - 1
        if position >= len(self.script):
            return web.json_response({"error": {"message": f"the script has {len(self.script)} steps"}}, status=500)
        return await self.script[position](body)
