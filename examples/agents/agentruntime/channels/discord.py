"""The ``discord`` channel: a Discord application's slash command, through the Interactions
endpoint (HTTP: no gateway connection to keep). ``python -m agentruntime.channels.discord``
serves ``POST /discord/interactions`` on ``POD_IP:PORT`` (8080; the application's Interactions
Endpoint URL, through whatever exposes the channel's Service):

- every request must carry Discord's Ed25519 signature of its timestamp and body, checked with
  the application's public key, the channel Secret's ``DISCORD_PUBLIC_KEY`` (hex); 401 otherwise
  (Discord itself sends bad signatures to see that they are refused);
- a PING is answered with a PONG;
- a command (``/ask question: ...``: the text is its options' values) is answered at once with a
  deferred response ("thinking..."), and posted as the channel: its user the invoker's username,
  its thread the Discord channel's id, its delivery id ``discord-<interaction id>``. The reply
  (or, the command being asked for, why the channel's rule refused it) replaces the deferred
  response, through the interaction's webhook (its token is the credential: no bot token), at
  ``DISCORD_API_URL`` (https://discord.com/api/v10 unless given). Discord shows 2,000
  characters of a message: a longer reply is cut.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agentruntime.channels.bridge import Bridge, InboundRefused, Message, serve

DEFAULT_PORT = 8080
DEFAULT_API_URL = "https://discord.com/api/v10"
MAX_BODY_BYTES = 256 * 1024
#: The most of a message Discord shows.
MAX_CONTENT = 2000
PING, APPLICATION_COMMAND = 1, 2
PONG, DEFERRED_CHANNEL_MESSAGE = 1, 5


class DiscordChannel:
    def __init__(self, bridge: Bridge, public_key: Ed25519PublicKey, api_url: str) -> None:
        self.bridge = bridge
        self.public_key = public_key
        self.api_url = api_url.rstrip("/")

    def signed(self, request: web.Request, body: bytes) -> bool:
        try:
            signature = bytes.fromhex(request.headers.get("X-Signature-Ed25519", ""))
            timestamp = request.headers.get("X-Signature-Timestamp", "").encode()
            self.public_key.verify(signature, timestamp + body)
        except (ValueError, InvalidSignature):
            return False
        return True

    async def interactions(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not self.signed(request, body):
            return web.json_response({"error": "invalid request signature"}, status=401)
        try:
            interaction = json.loads(body)
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        if interaction.get("type") == PING:
            return web.json_response({"type": PONG})
        if interaction.get("type") != APPLICATION_COMMAND:
            return web.json_response({"error": f"interactions of type {interaction.get('type')} are not taken"}, status=400)
        self.bridge.spawn(self.take(interaction), f"interaction {interaction.get('id')}")
        return web.json_response({"type": DEFERRED_CHANNEL_MESSAGE})

    async def take(self, interaction: dict[str, Any]) -> None:
        options = (interaction.get("data") or {}).get("options") or ()
        text = " ".join(str(option.get("value")) for option in options if option.get("value") is not None)
        user = (interaction.get("member") or {}).get("user") or interaction.get("user") or {}
        message = Message(
            text=text,
            user=str(user.get("username") or user.get("id") or ""),
            thread=str(interaction.get("channel_id") or ""),
            delivery=f"discord-{interaction.get('id')}",
        )
        try:
            posted = await self.bridge.post(message)
        except InboundRefused as refused:
            self.bridge.log("not posted", delivery=message.delivery, error=str(refused))
            await self.answer(interaction, "The agent cannot be asked now: its channel was refused.")
            return
        if not posted.accepted:
            await self.answer(interaction, f"Not asked: {posted.reason}.")
            return
        reply = await self.bridge.reply(posted.run)
        await self.answer(interaction, reply if reply is not None else "The agent has not answered in time.")

    async def answer(self, interaction: dict[str, Any], content: str) -> None:
        """Replace the deferred response with ``content``."""
        url = f"{self.api_url}/webhooks/{interaction.get('application_id')}/{interaction.get('token')}/messages/@original"
        try:
            async with self.bridge.session.patch(url, json={"content": content[:MAX_CONTENT]}) as sent:
                if sent.status != 200:
                    self.bridge.log("answer not sent", interaction=interaction.get("id"), status=sent.status)
                    return
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.bridge.log("answer not sent", interaction=interaction.get("id"), error=str(exc) or type(exc).__name__)
            return
        self.bridge.log("answered", interaction=interaction.get("id"))


def application(bridge: Bridge) -> web.Application:
    """The channel's application (its credentials read from the bridge's Secret)."""
    key = bridge.required("DISCORD_PUBLIC_KEY")
    try:
        public_key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(key))
    except ValueError:
        raise SystemExit("the channel's DISCORD_PUBLIC_KEY is not an Ed25519 public key in hex") from None
    channel = DiscordChannel(bridge, public_key, bridge.credential("DISCORD_API_URL") or DEFAULT_API_URL)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/discord/interactions", channel.interactions)
    return app


def main() -> int:
    """Serve until SIGTERM (the pod's end); the interactions still handled end with the bridge."""
    return serve(application, DEFAULT_PORT)


if __name__ == "__main__":
    raise SystemExit(main())
