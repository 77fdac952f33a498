"""The ``webhook`` channel: any system that can post (a CI job, an alert manager, a chat bot of
its own) talks to the agent over HTTP. ``python -m agentruntime.channels.webhook`` serves on
``POD_IP:PORT`` (8080):

- ``POST /messages``, a JSON body ``{"text", "user", "thread"}`` (thread optional), signed as
  GitHub signs its webhooks: ``X-Signature-256: sha256=<hex HMAC-SHA256 of the body>`` with the
  channel Secret's ``WEBHOOK_SIGNING_KEY``. ``X-Delivery-ID`` names the message (the same id
  posted again starts no second run; without one, each post is a message of its own). The
  answer waits for the agent's reply, ``?wait=`` seconds (60 by default, at most 600; 0: not at
  all): 200 ``{"run", "reply"}``, or 202 ``{"run", "reply": null}`` when it has none yet; a
  message the channel's rule refuses is 200 ``{"accepted": false, "reason"}``. A body that is
  not such an object is a 400 naming what is wrong; a missing or wrong signature a 401; the
  inbound endpoint refusing the channel a 502 in its words.
- ``GET /healthz``: 200 once it serves.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

from aiohttp import web

from agentruntime.channels.bridge import Bridge, InboundRefused, Message, serve

DEFAULT_PORT = 8080
MAX_BODY_BYTES = 64 * 1024
DEFAULT_WAIT_SECONDS = 60.0
MAX_WAIT_SECONDS = 600.0
SIGNATURE_HEADER = "X-Signature-256"


def signature(key: str, body: bytes) -> str:
    """The ``X-Signature-256`` of ``body`` signed with ``key``."""
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def _answer(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status)


def application(bridge: Bridge, key: str) -> web.Application:
    async def message(request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _answer(413, {"error": f"the body is larger than {MAX_BODY_BYTES} bytes"})
        given = request.headers.get(SIGNATURE_HEADER, "")
        if not hmac.compare_digest(given.encode(), signature(key, body).encode()):
            why = "is missing" if not given else "does not match the body"
            return _answer(401, {"error": f"the {SIGNATURE_HEADER} header {why}"})
        try:
            parsed = _parse(body)
            wait = _wait(request.query.get("wait"))
        except ValueError as exc:
            return _answer(400, {"error": str(exc)})
        delivery = request.headers.get("X-Delivery-ID") or f"webhook-{uuid.uuid4().hex}"
        try:
            posted = await bridge.post(Message(parsed["text"], parsed["user"], parsed["thread"], delivery))
        except InboundRefused as refused:
            return _answer(502, {"error": str(refused)})
        if not posted.accepted:
            return _answer(200, {"accepted": False, "reason": posted.reason})
        reply = await bridge.reply(posted.run, wait) if wait > 0 else None
        bridge.log("replied" if reply is not None else "no reply yet", run=posted.run, delivery=delivery)
        return _answer(200 if reply is not None else 202, {"accepted": True, "run": posted.run, "reply": reply})

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/messages", message)
    return app


def _parse(body: bytes) -> dict[str, str]:
    try:
        parsed = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"the body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError("the body is not a JSON object")
    found = {}
    for field, required in (("text", True), ("user", True), ("thread", False)):
        value = parsed.get(field, "")
        if not isinstance(value, str) or (required and not value.strip()):
            raise ValueError(f"{field}: {'a non-empty string is required' if required else 'must be a string'}")
        found[field] = value
    return found


def _wait(value: str | None) -> float:
    if value is None:
        return DEFAULT_WAIT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"wait: {value!r} is not a number of seconds") from None
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        raise ValueError(f"wait: {value} is not between 0 and {MAX_WAIT_SECONDS:g} seconds")
    return seconds


def main() -> int:
    """Serve until SIGTERM (the pod's end)."""
    return serve(lambda bridge: application(bridge, bridge.required("WEBHOOK_SIGNING_KEY")), DEFAULT_PORT)


if __name__ == "__main__":
    raise SystemExit(main())
