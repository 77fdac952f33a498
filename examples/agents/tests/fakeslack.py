"""A test double of Slack (the chat service a test cannot reach): its Web API's
``chat.postMessage``, answered as Slack does (``{"ok": true, "ts"}``; a wrong bot token
``{"ok": false, "error": "invalid_auth"}``), and the Events API's side, which the test plays:
it signs and posts events to the channel's pod as Slack would (:func:`signed`)."""

from __future__ import annotations

import json
import time
from typing import Any

from recordingapi import RecordingAPI
from slack_sdk.signature import SignatureVerifier


def signed(secret: str, payload: dict[str, Any], *, at: float | None = None) -> tuple[bytes, dict[str, str]]:
    """``payload`` as Slack posts it: the body, and the headers that sign it with ``secret``."""
    body = json.dumps(payload).encode()
    timestamp = str(int(at if at is not None else time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature,
               "Content-Type": "application/json"}  # fmt: skip
    return body, headers


def fake_slack(token: str) -> RecordingAPI:
    """Slack's Web API for the bot ``token``; the SDK's base URL is its ``url`` + ``/api/``."""

    def posted(body: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "channel": body.get("channel"), "ts": f"{time.time():.6f}"}

    return RecordingAPI(
        {("POST", "/api/chat.postMessage"): posted}, token=token, refusal=(200, {"ok": False, "error": "invalid_auth"})
    )
