"""A test double of a chat service's API where a channel sends its replies (Slack's Web API,
WhatsApp's Cloud API, Discord's interaction webhooks: the services a test cannot reach): a local
server that records each request to its routes (path, body, Authorization) and answers what
the route says, as the service does; a request without the bearer token it expects (when it
expects one) gets the service's refusal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from localserver import serve_locally


@dataclass
class Recorded:
    method: str
    path: str
    body: dict[str, Any]
    authorization: str


@dataclass
class RecordingAPI:
    #: (method, path pattern as aiohttp routes it) → the JSON answered, given the request's body.
    routes: dict[tuple[str, str], Callable[[dict[str, Any]], dict[str, Any]]]
    #: The bearer token requests must carry (None: any); and what a request without it gets.
    token: str | None = None
    refusal: tuple[int, dict[str, Any]] = (401, {"error": "unauthorized"})
    url: str = ""
    recorded: list[Recorded] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _runner: web.AppRunner | None = None

    async def start(self) -> RecordingAPI:
        app = web.Application()
        for (method, path), answer in self.routes.items():
            app.router.add_route(method, path, self._handler(answer))
        self._runner, port = await serve_locally(app)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_recorded(self, count: int) -> list[Recorded]:
        """Once ``count`` requests were recorded: them."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.recorded) >= count)
        return self.recorded

    def _handler(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
        async def handle(request: web.Request) -> web.Response:
            authorization = request.headers.get("Authorization", "")
            if self.token is not None and authorization != f"Bearer {self.token}":
                status, body = self.refusal
                return web.json_response(body, status=status)
            body = await request.json()
            async with self._changed:
                self.recorded.append(Recorded(request.method, request.path, body, authorization))
                self._changed.notify_all()
            return web.json_response(answer(body))

        return handle
