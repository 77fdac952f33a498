"""A test double of Slack's Web API (the chat service a test cannot reach): a local server
answering ``POST /api/chat.postMessage`` as Slack does (``{"ok": true, "ts"}``), recording each
message with the bot token it came with; a wrong token is ``{"ok": false, "error":
"invalid_auth"}``. The Events API's side is the test's own: it signs and posts events to the
channel's pod as Slack would (:func:`signed`)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from localserver import serve_locally
from slack_sdk.signature import SignatureVerifier


def signed(secret: str, payload: dict[str, Any], *, at: float | None = None) -> tuple[bytes, dict[str, str]]:
    """``payload`` as Slack posts it: the body, and the headers that sign it with ``secret``."""
    body = json.dumps(payload).encode()
    timestamp = str(int(at if at is not None else time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature,
               "Content-Type": "application/json"}  # fmt: skip
    return body, headers


@dataclass
class FakeSlack:
    token: str
    url: str = ""
    posted: list[dict[str, Any]] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _runner: web.AppRunner | None = None

    async def start(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post("/api/chat.postMessage", self._post_message)
        self._runner, port = await serve_locally(app)
        self.url = f"http://127.0.0.1:{port}/api/"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_posted(self, count: int) -> list[dict[str, Any]]:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.posted) >= count)
        return self.posted

    async def _post_message(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        body = await request.json()
        async with self._changed:
            self.posted.append(body)
            self._changed.notify_all()
        return web.json_response({"ok": True, "channel": body.get("channel"), "ts": f"{time.time():.6f}"})
