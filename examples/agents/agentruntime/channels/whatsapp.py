"""The ``whatsapp`` channel: a WhatsApp Business number, through Meta's Cloud API.
``python -m agentruntime.channels.whatsapp`` serves the app's webhook at ``/whatsapp/webhook`` on
``POD_IP:PORT`` (8080; the callback URL, through whatever exposes the channel's Service):

- ``GET``: Meta's verification, answered with ``hub.challenge`` when ``hub.verify_token`` is the
  channel Secret's ``WHATSAPP_VERIFY_TOKEN`` (403 otherwise);
- ``POST``: notifications, each signed ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>``
  with the app's secret, ``WHATSAPP_APP_SECRET`` (401 otherwise), answered 200 at once. Each text
  message is posted as the channel: its user and thread the sender's number, its delivery id
  ``whatsapp-<message id>`` (Meta's retries start no second run). The reply goes back to the
  sender as an answer to the message: ``POST <api>/<version>/<phone number id>/messages`` with
  ``WHATSAPP_TOKEN`` (at ``WHATSAPP_API_URL``, https://graph.facebook.com unless given).

A message the channel's rule refuses is left unanswered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import aiohttp
from aiohttp import web

from agentruntime.channels.bridge import Bridge, Message, serve

DEFAULT_PORT = 8080
DEFAULT_API_URL = "https://graph.facebook.com"
API_VERSION = "v21.0"
MAX_BODY_BYTES = 256 * 1024
PATH = "/whatsapp/webhook"
#: The most of a text message WhatsApp takes: a longer reply is cut.
MAX_TEXT = 4096


def signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` Meta sends with ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WhatsAppChannel:
    def __init__(self, bridge: Bridge, verify_token: str, app_secret: str, token: str, api_url: str) -> None:
        self.bridge = bridge
        self.verify_token = verify_token
        self.app_secret = app_secret
        self.token = token
        self.api_url = api_url.rstrip("/")

    async def verify(self, request: web.Request) -> web.Response:
        query = request.query
        given = query.get("hub.verify_token", "")
        if query.get("hub.mode") != "subscribe" or not hmac.compare_digest(given.encode(), self.verify_token.encode()):
            return web.Response(status=403, text="the verify token is not the channel's")
        return web.Response(text=query.get("hub.challenge", ""))

    async def notified(self, request: web.Request) -> web.Response:
        body = await request.read()
        given = request.headers.get("X-Hub-Signature-256", "")
        if not hmac.compare_digest(given.encode(), signature(self.app_secret, body).encode()):
            return web.json_response({"error": "the body is not signed with the app's secret"}, status=401)
        try:
            payload = json.loads(body)
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        for entry in payload.get("entry") or ():
            for change in entry.get("changes") or ():
                value = change.get("value") or {}
                number_id = str((value.get("metadata") or {}).get("phone_number_id") or "")
                for message in value.get("messages") or ():
                    if message.get("type") == "text" and (message.get("text") or {}).get("body"):
                        self.bridge.spawn(self.take(number_id, message), f"message {message.get('id')}")
        return web.Response(status=200)

    async def take(self, number_id: str, message: dict[str, Any]) -> None:
        sender = str(message.get("from") or "")
        answered = await self.bridge.ask(
            Message(str(message["text"]["body"]), sender, sender, f"whatsapp-{message.get('id')}")
        )
        if answered is None:
            return
        run, reply = answered
        answer = {
            "messaging_product": "whatsapp",
            "to": sender,
            "type": "text",
            "text": {"body": reply[:MAX_TEXT]},
            "context": {"message_id": message.get("id")},
        }
        url = f"{self.api_url}/{API_VERSION}/{number_id}/messages"
        try:
            async with self.bridge.session.post(
                url, json=answer, headers={"Authorization": f"Bearer {self.token}"}
            ) as sent:
                if sent.status != 200:
                    self.bridge.log("reply not sent", run=run, status=sent.status, error=await sent.text())
                    return
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.bridge.log("reply not sent", run=run, error=str(exc) or type(exc).__name__)
            return
        self.bridge.log("replied", run=run, to=sender)


def application(bridge: Bridge) -> web.Application:
    """The channel's application (its credentials read from the bridge's Secret)."""
    channel = WhatsAppChannel(
        bridge,
        verify_token=bridge.required("WHATSAPP_VERIFY_TOKEN"),
        app_secret=bridge.required("WHATSAPP_APP_SECRET"),
        token=bridge.required("WHATSAPP_TOKEN"),
        api_url=bridge.credential("WHATSAPP_API_URL") or DEFAULT_API_URL,
    )
    app = web.Application(client_max_size=MAX_BODY_BYTES)

    app.router.add_get(PATH, channel.verify)
    app.router.add_post(PATH, channel.notified)
    return app


def main() -> int:
    """Serve until SIGTERM (the pod's end); the messages still handled end with the bridge."""
    return serve(application, DEFAULT_PORT)


if __name__ == "__main__":
    raise SystemExit(main())
