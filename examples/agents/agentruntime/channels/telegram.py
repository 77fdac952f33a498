"""The ``telegram`` channel: a Telegram bot, through the Bot API's long polling, so the pod needs
no address the internet reaches. ``python -m agentruntime.channels.telegram`` asks
``getUpdates`` (25 s at a time) with the channel Secret's ``TELEGRAM_BOT_TOKEN`` (and
``TELEGRAM_API_URL``, https://api.telegram.org unless given). Each text message is posted as
the channel: its user is the sender's username (else their numeric id), its thread the chat's
id, its delivery id ``telegram-<update_id>`` (an update polled again after a restart starts no
second run). The reply of each run it starts is sent to the chat as an answer to the message
(``sendMessage``). A message the channel's rule refuses is left unanswered (a group's chatter
is no one's business); a token Telegram refuses ends the program, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

import aiohttp

from agentruntime.channels.bridge import Bridge, InboundRefused, Message

DEFAULT_API_URL = "https://api.telegram.org"
#: How long one getUpdates waits for a message (Telegram's long polling).
POLL_SECONDS = 25
#: The most of a message Telegram takes: a longer reply is cut.
MAX_TEXT = 4096


class TelegramRefused(Exception):
    """Telegram refused the bot's token (401, 404): polling again would not help."""


class TelegramBot:
    def __init__(self, bridge: Bridge, token: str, api_url: str) -> None:
        self.bridge = bridge
        self.base = f"{api_url.rstrip('/')}/bot{token}"
        self.offset = 0

    async def call(self, method: str, payload: dict[str, Any], timeout: float = 30) -> Any:
        """A Bot API method's ``result``."""
        async with self.bridge.session.post(
            f"{self.base}/{method}", json=payload, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as answer:
            said = await answer.json(content_type=None)
            if answer.status in (401, 404):
                raise TelegramRefused(f"Telegram refused the bot's token ({answer.status}: {said.get('description')})")
            if answer.status != 200 or not said.get("ok"):
                raise aiohttp.ClientResponseError(
                    answer.request_info, (), status=answer.status, message=str(said.get("description") or said)
                )
            return said["result"]

    async def poll(self) -> None:
        """Take messages until cancelled."""
        delay = 1.0
        while True:
            try:
                updates = await self.call(
                    "getUpdates",
                    {"offset": self.offset, "timeout": POLL_SECONDS, "allowed_updates": ["message"]},
                    timeout=POLL_SECONDS + 10,
                )
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # passes: Telegram or the way there
                self.bridge.log("poll failed", error=str(exc) or type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = 1.0
            for update in updates:
                await self.take(update)
                self.offset = int(update["update_id"]) + 1  # confirmed once posted

    async def take(self, update: dict[str, Any]) -> None:
        message = update.get("message") or {}
        text = message.get("text")
        if not text:
            return  # a photo, a sticker, someone joining: nothing to ask
        sender = message.get("from") or {}
        chat = (message.get("chat") or {}).get("id")
        posted_as = Message(
            text=text,
            user=str(sender.get("username") or sender.get("id") or ""),
            thread=str(chat),
            delivery=f"telegram-{update['update_id']}",
        )
        try:
            posted = await self.bridge.post(posted_as)
        except InboundRefused as refused:
            self.bridge.log("not posted", delivery=posted_as.delivery, error=str(refused))
            return
        if posted.accepted and not posted.duplicate:
            self.bridge.spawn(self.answer(posted.run, chat, message.get("message_id")), f"reply of {posted.run}")

    async def answer(self, run: str, chat: Any, message_id: Any) -> None:
        reply = await self.bridge.reply(run)
        if reply is None:
            self.bridge.log("no reply", run=run)
            return
        payload: dict[str, Any] = {"chat_id": chat, "text": reply[:MAX_TEXT]}
        if message_id is not None:
            payload["reply_parameters"] = {"message_id": message_id, "allow_sending_without_reply": True}
        try:
            await self.call("sendMessage", payload)
        except (aiohttp.ClientError, TimeoutError, ValueError, TelegramRefused) as exc:
            self.bridge.log("reply not sent", run=run, error=str(exc) or type(exc).__name__)
            return
        self.bridge.log("replied", run=run, chat=chat)


async def run() -> None:
    async with Bridge() as bridge:
        bot = TelegramBot(
            bridge, bridge.required("TELEGRAM_BOT_TOKEN"), bridge.credential("TELEGRAM_API_URL") or DEFAULT_API_URL
        )
        bridge.log("polling")
        await bot.poll()  # the replies still awaited end with the bridge


def main() -> int:
    """Poll until SIGTERM (the pod's end)."""

    async def until_terminated() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run()

    try:
        asyncio.run(until_terminated())
    except TelegramRefused as refused:
        raise SystemExit(str(refused)) from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
