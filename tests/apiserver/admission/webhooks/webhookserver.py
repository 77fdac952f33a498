"""A webhook server for tests: HTTPS on 127.0.0.1 in a thread of its own, answering each
AdmissionReview with what the test's handler says and keeping every request it was sent."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from kubeloop import certs

#: What a handler returns: the AdmissionReview ``response`` (its uid is filled in), or raw
#: ``(status, body)`` bytes to send as they are.
Handler = Callable[[dict[str, Any]], "dict[str, Any] | tuple[int, bytes]"]


def allow(**extra: Any) -> Handler:
    return lambda request: {"allowed": True, **extra}


def deny(message: str, code: int = 403, reason: str = "Forbidden") -> Handler:
    return lambda request: {"allowed": False, "status": {"code": code, "reason": reason, "message": message}}


def json_patch(*operations: dict[str, Any]) -> dict[str, Any]:
    """An allowing response carrying a JSON patch."""
    return {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(orjson.dumps(list(operations))).decode(),
    }


class WebhookServer:
    """Serves ``/<path>`` with the handler set for it; ``requests[path]`` are the reviews sent."""

    def __init__(self, hosts: tuple[str, ...] = ("localhost",)) -> None:
        self.credentials = certs.load_or_create_credentials(None, list(hosts))
        self.handlers: dict[str, Handler] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        #: Set while a handler should wait (``hold``); cleared to let it answer.
        self.held: dict[str, threading.Event] = {}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="webhook-server")
        self.port = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.credentials.ca_cert_pem).decode()

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}/{path}"

    def client_config(self, path: str) -> dict[str, Any]:
        return {"url": self.url(path), "caBundle": self.ca_bundle}

    def start(self) -> WebhookServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        for event in self.held.values():
            event.set()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/{path}", self._serve)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_ssl_context(self.credentials))
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        review = orjson.loads(await request.read())
        self.requests.setdefault(path, []).append({"review": review, "query": dict(request.query)})
        hold = self.held.get(path)
        if hold is not None:
            await asyncio.to_thread(hold.wait, 30)
        answer = self.handlers[path](review["request"])
        if isinstance(answer, tuple):
            status, body = answer
            return web.Response(status=status, body=body, content_type="application/json")
        response = {"uid": review["request"]["uid"], **answer}
        reply = {
            "apiVersion": review["apiVersion"],
            "kind": review.get("kind", "AdmissionReview"),
            "response": response,
        }
        return web.Response(body=orjson.dumps(reply), content_type="application/json")
