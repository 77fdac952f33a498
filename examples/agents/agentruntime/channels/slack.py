"""The ``slack`` channel: a Slack app, through the Events API, with the official ``slack_sdk``.
``python -m agentruntime.channels.slack`` serves ``POST /slack/events`` on ``POD_IP:PORT``
(8080; the app's Request URL, through whatever exposes the channel's Service):

- every request must carry Slack's signature of it (``X-Slack-Signature``, made with the channel
  Secret's ``SLACK_SIGNING_SECRET``, of a request at most five minutes old); 401 otherwise;
- ``url_verification`` is answered with its challenge;
- an ``app_mention`` or ``message`` event from a person (not a bot, not an edit) is answered 200
  at once (Slack waits three seconds, then retries) and posted as the channel: its user is the
  Slack user id, its thread the thread it was written in (else its own ``ts``), its delivery id
  ``slack-<event_id>`` (Slack's retries start no second run). The run's reply goes to that
  thread by ``chat.postMessage`` with ``SLACK_BOT_TOKEN`` (at ``SLACK_API_URL``, Slack's own
  unless given).

A message the channel's rule refuses is left unanswered.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from agentruntime.channels.bridge import Bridge, Message, serve

DEFAULT_PORT = 8080
DEFAULT_API_URL = "https://slack.com/api/"
MAX_BODY_BYTES = 256 * 1024


class SlackChannel:
    def __init__(self, bridge: Bridge, verifier: SignatureVerifier, web_client: AsyncWebClient) -> None:
        self.bridge = bridge
        self.verifier = verifier
        self.web = web_client

    async def events(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not self.verifier.is_valid(
            body, request.headers.get("X-Slack-Request-Timestamp"), request.headers.get("X-Slack-Signature")
        ):
            return web.json_response({"error": "the request is not signed with the app's signing secret"}, status=401)
        try:
            payload = json.loads(body)
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        if payload.get("type") == "url_verification":
            return web.json_response({"challenge": payload.get("challenge")})
        event = payload.get("event") or {}
        if (
            payload.get("type") == "event_callback"
            and event.get("type") in ("app_mention", "message")
            and event.get("text")
            and not event.get("bot_id")
            and not event.get("subtype")  # edits, joins, a bot's own messages
        ):
            event_id = str(payload.get("event_id") or "")
            self.bridge.spawn(self.take(event_id, event), f"event {event_id}")
        return web.Response(status=200)

    async def take(self, event_id: str, event: dict[str, Any]) -> None:
        thread = str(event.get("thread_ts") or event.get("ts") or "")
        message = Message(str(event["text"]), str(event.get("user") or ""), thread, f"slack-{event_id}")
        answered = await self.bridge.ask(message)
        if answered is None:
            return
        run, reply = answered
        try:
            await self.web.chat_postMessage(channel=str(event.get("channel")), thread_ts=thread, text=reply)
        except SlackApiError as failed:
            self.bridge.log("reply not sent", run=run, error=str(failed.response.get("error")))
            return
        self.bridge.log("replied", run=run, thread=thread)


def application(bridge: Bridge) -> web.Application:
    """The channel's application (its credentials read from the bridge's Secret)."""
    secret, token = bridge.required("SLACK_SIGNING_SECRET"), bridge.required("SLACK_BOT_TOKEN")
    api_url = bridge.credential("SLACK_API_URL") or DEFAULT_API_URL
    channel = SlackChannel(bridge, SignatureVerifier(secret), AsyncWebClient(token=token, base_url=api_url))
    app = web.Application(client_max_size=MAX_BODY_BYTES)

    app.router.add_post("/slack/events", channel.events)
    return app


def main() -> int:
    """Serve until SIGTERM (the pod's end); the events still handled end with the bridge."""
    return serve(application, DEFAULT_PORT)


if __name__ == "__main__":
    raise SystemExit(main())
