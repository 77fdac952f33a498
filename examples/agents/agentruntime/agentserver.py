"""The agent's server: what an Agent's Deployment runs. It serves the agent as an
OpenAI-compatible Chat Completions endpoint, so that channels, programs and any OpenAI client
talk to the agent itself: its instructions, skills, memory and tools applied to each
conversation, the model called as a run calls it (``runner.Runner``).

On ``PORT`` (8080) of ``POD_IP`` (else every address):

- ``POST /v1/chat/completions`` ``{"messages": [...], "model"?}`` → a ``chat.completion`` with
  the agent's answer and the usage of every model turn it took (streaming is not served: 400);
- ``GET /v1/models`` → the agent, as the one model served;
- ``GET /healthz`` → 200 (the Deployment's probes).

With ``AGENT_API_KEY_FILE`` (a Secret's key mounted as a file), a request must carry that key
as its bearer token (401 otherwise). ``AGENT_RATE_LIMIT`` requests a minute are served (60 by
default, bursts of as many), past which a 429 says when to come back. Errors are OpenAI's error
objects: a bad body is a 400 naming the field; a conversation the agent could not answer (the
model refused, a tool failed, a limit) is a 502 whose ``type`` is the run's reason.
"""

from __future__ import annotations

import hmac
import json
import os
import pathlib
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import web

import kubeloop
from agentruntime.runinput import InputError, RunInput
from agentruntime.transcript import Transcript

DEFAULT_PORT = 8080
DEFAULT_RATE_PER_MINUTE = 60
ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


class RateLimit:
    """A token bucket: ``per_minute`` requests a minute, bursts of as many."""

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.tokens = float(per_minute)
        self.rate = per_minute / 60.0
        self.checked = time.monotonic()

    def take(self) -> float:
        """0 when a request may go now, else the seconds until one may."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.checked) * self.rate)
        self.checked = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


def _error(status: int, message: str, kind: str, headers: Mapping[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return web.json_response(body, status=status, headers=headers)


def _conversation(body: Any) -> list[dict[str, Any]] | str:
    """The request's messages, or what is wrong with them."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    if body.get("stream"):
        return "stream: streaming is not served; ask without it"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty list is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"messages[{index}].role: one of {', '.join(sorted(ROLES))}"
        if not isinstance(message.get("content"), str | list | None):
            return f"messages[{index}].content: text or parts"
    return messages


def application(
    environ: Mapping[str, str], api_key: str | None, limit: RateLimit, transcript: Transcript
) -> web.Application:
    app = web.Application()

    async def complete(request: web.Request) -> web.Response:
        if api_key is not None:
            sent = request.headers.get("Authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {api_key}".encode()):
                return _error(401, "a valid bearer token is required", "invalid_api_key")
        wait = limit.take()
        if wait:
            return _error(429, "too many requests", "rate_limit_exceeded", {"Retry-After": str(max(1, round(wait)))})
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "the body is not JSON", "invalid_request_error")
        conversation = _conversation(body)
        if isinstance(conversation, str):
            return _error(400, conversation, "invalid_request_error")
        try:
            given = RunInput.load(environ, task=False)  # again each time: the memory file moves
        except InputError as bad:
            return _error(503, str(bad), bad.reason)
        # Imported at the first conversation: the model's SDK is most of a start's 0.9 s, and an
        # agent's pods start (and are Ready) before anyone talks to them.
        from agentruntime.runner import RunFailed, Runner

        runner = Runner(given, transcript)
        try:
            outcome = await runner.converse(conversation)
        except RunFailed as failed:
            transcript.line("end", reason=failed.reason, message=failed.message, usage=runner.usage.document())
            return _error(502, failed.message, failed.reason)
        finally:
            await runner.close()
        transcript.line("end", result=outcome.result, usage=runner.usage.document())
        usage = runner.usage
        return web.json_response({
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": given.agent or given.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": outcome.result}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                      "total_tokens": usage.total_tokens},
        })  # fmt: skip

    async def models(request: web.Request) -> web.Response:
        name = environ.get("AGENT_NAME") or "agent"
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "agent"}]})

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/healthz", healthz)
    return app


def main(environ: Mapping[str, str] = os.environ) -> int:
    """Serve until SIGTERM (the pod's end)."""
    key_file = environ.get("AGENT_API_KEY_FILE")
    api_key = pathlib.Path(kubeloop.container_path(key_file)).read_text().strip() or None if key_file else None
    per_minute = int(environ.get("AGENT_RATE_LIMIT") or DEFAULT_RATE_PER_MINUTE)
    port = int(environ.get("PORT") or DEFAULT_PORT)
    host = environ.get("BIND_ADDRESS") or environ.get("POD_IP") or "0.0.0.0"
    app = application(environ, api_key, RateLimit(per_minute), Transcript(sys.stdout))
    web.run_app(app, host=host, port=port, print=None)
    return 0
