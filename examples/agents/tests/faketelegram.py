"""A test double of Telegram's Bot API (the chat service a test cannot reach): a local server
answering ``/bot<token>/getUpdates`` (long polling: it waits for an update the test sends, up to
the poll's ``timeout`` or a second; updates below the ``offset`` asked are confirmed and dropped, as Telegram
drops them) and ``/bot<token>/sendMessage`` (recorded). Another token is answered 401."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from localserver import serve_locally


@dataclass
class FakeTelegram:
    token: str
    url: str = ""
    updates: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    #: The offsets the bot asked getUpdates with, in order.
    offsets: list[int] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _runner: web.AppRunner | None = None

    async def start(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._call)
        self._runner, port = await serve_locally(app)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def send_update(self, update: dict[str, Any]) -> None:
        async with self._changed:
            self.updates.append(update)
            self._changed.notify_all()

    async def wait_sent(self, count: int) -> list[dict[str, Any]]:
        """Once ``count`` messages were sent by the bot: them."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.sent) >= count)
        return self.sent

    async def _call(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        body = await request.json()
        if request.match_info["method"] == "sendMessage":
            async with self._changed:
                self.sent.append(body)
                self._changed.notify_all()
            return web.json_response({"ok": True, "result": {"message_id": 1000 + len(self.sent)}})
        if request.match_info["method"] != "getUpdates":
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        offset = int(body.get("offset") or 0)
        async with self._changed:
            self.offsets.append(offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]  # confirmed: dropped
            try:
                # At most a second: an answer with no update before the poll's timeout is Telegram's
                # right, and a poll held open would hold up the server's shutdown.
                wait = min(float(body.get("timeout") or 0), 1.0)
                await asyncio.wait_for(self._changed.wait_for(lambda: bool(self.updates)), wait)
            except TimeoutError:
                pass
            return web.json_response({"ok": True, "result": list(self.updates)})
