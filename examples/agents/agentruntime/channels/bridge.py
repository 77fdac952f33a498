"""What every channel program does with a message from its chat: post it to the operator's
inbound endpoint as its channel, and read the reply of the run it became.

A post is tried again on what passes (a connection refused, 429, 5xx: the endpoint's
Retry-After honoured) for ``POST_SECONDS``; what the endpoint refuses for good (400, 401, 403,
404, 413) is an :class:`InboundRefused` in its words. A reply is read by getting the run (its
``status.reply``), more slowly as it takes longer, for at most the time asked. Each message and
what became of it is a JSON line on stdout: the channel's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import ssl
import sys
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

import kubeloop

AGENT_RUN = kubeloop.GroupVersionKind("agents.kubeloop.dev", "v1alpha1", "AgentRun")
#: How long a post is tried again while the endpoint cannot take it.
POST_SECONDS = 60.0
#: How long a reply is waited for, unless the program asks otherwise (a run's own default timeout).
REPLY_SECONDS = 600.0
#: What may pass: the endpoint busy, restarting, or its token review failing for a while.
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})


class InboundRefused(Exception):
    """The inbound endpoint refused the post for good (the message says its status and why)."""


@dataclass(frozen=True)
class Message:
    """A chat message: its text, who wrote it, its thread, and the chat's id for it (the
    delivery id: the same message sent twice names the same run)."""

    text: str
    user: str
    thread: str
    delivery: str


@dataclass(frozen=True)
class Posted:
    """What the endpoint made of a message: a run, or why not."""

    accepted: bool
    run: str = ""
    reason: str = ""
    #: The message was posted before: its run exists (or did), its reply perhaps given already.
    duplicate: bool = False


class Bridge:
    """A channel's link to its agent, from the environment the channel's Deployment gives."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.url = environ["INBOUND_URL"]
        self.token_file = environ["INBOUND_TOKEN_FILE"]
        self.ca_file = environ.get("INBOUND_CA_FILE") or None
        self.namespace = environ.get("AGENT_NAMESPACE", "")
        self.agent = environ.get("AGENT_NAME", "")
        self.channel = environ.get("CHANNEL_TYPE", "")
        self.credentials = environ.get("CHANNEL_CREDENTIALS_DIR", "")
        self._session: aiohttp.ClientSession | None = None
        self._api: kubeloop.APIClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Bridge:
        context = ssl.create_default_context(cafile=kubeloop.container_path(self.ca_file)) if self.ca_file else None
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context) if context else None)
        self._api = kubeloop.APIClient(kubeloop.load_config())
        await self._api.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for task in self._tasks:
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._api is not None:
            await self._api.__aexit__(kind, exc, tb)
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """An HTTP session for the program's own calls (its chat's API) and the endpoint's."""
        assert self._session is not None, "the bridge is used within `async with`"
        return self._session

    def credential(self, key: str) -> str | None:
        """The channel Secret's ``key`` (its file's text, stripped), None when it has none."""
        try:
            return pathlib.Path(kubeloop.container_path(f"{self.credentials}/{key}")).read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def required(self, key: str) -> str:
        """The channel Secret's ``key``; the program cannot run without it (SystemExit, saying so)."""
        value = self.credential(key)
        if not value:
            raise SystemExit(f"the channel's Secret has no {key} (looked in {self.credentials})")
        return value

    def _token(self) -> str:
        """The channel's inbound token (a small local file: read at once)."""
        return pathlib.Path(kubeloop.container_path(self.token_file)).read_text().strip()

    def log(self, event: str, **fields: Any) -> None:
        sys.stdout.write(json.dumps({"event": event, "channel": self.channel, **fields}, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    async def post(self, message: Message) -> Posted:
        """The endpoint's answer to ``message`` (InboundRefused when it refuses it for good)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + POST_SECONDS
        delay = 0.5
        body = {"text": message.text, "user": message.user, "thread": message.thread}
        while True:
            token = self._token()  # re-read: the kubelet refreshes it
            headers = {"Authorization": f"Bearer {token}", "X-Delivery-ID": message.delivery}
            why: str
            try:
                async with self.session.post(self.url, json=body, headers=headers) as answer:
                    said = await answer.json(content_type=None)
                    if answer.status in (200, 202):
                        posted = Posted(
                            accepted=bool(said.get("accepted")),
                            run=str(said.get("run") or ""),
                            reason=str(said.get("reason") or ""),
                            duplicate=bool(said.get("duplicate")),
                        )
                        self.log("posted", delivery=message.delivery, user=message.user, run=posted.run,
                                 accepted=posted.accepted, reason=posted.reason, duplicate=posted.duplicate)  # fmt: skip
                        return posted
                    why = f"{answer.status}: {said.get('error') if isinstance(said, dict) else said}"
                    if answer.status not in RETRIED_STATUSES:
                        raise InboundRefused(f"the inbound endpoint refused the message ({why})")
                    delay = max(delay, _retry_after(answer.headers.get("Retry-After")))
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # not reached, or not JSON
                why = str(exc) or type(exc).__name__
            if loop.time() + delay > deadline:
                raise InboundRefused(f"the inbound endpoint did not take the message in {POST_SECONDS:g} s ({why})")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def reply(self, run: str, timeout: float = REPLY_SECONDS) -> str | None:
        """The reply of ``run`` once it has one; None if it has none within ``timeout``, or the
        run is gone (pruned, deleted). A run just accepted may not be made yet, nor its name in
        the channel's Role: not found and forbidden mean "not yet" until it has been seen."""
        assert self._api is not None, "the bridge is used within `async with`"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.2
        seen = False
        while True:
            try:
                found = await self._api.get(AGENT_RUN, run, namespace=self.namespace)
                seen = True
                reply = (found.get("status") or {}).get("reply")
                if reply:
                    return str(reply)
            except (kubeloop.errors.NotFound, kubeloop.errors.Forbidden):
                if seen:
                    return None
            if loop.time() + delay > deadline:
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 3.0)

    async def ask(self, message: Message) -> tuple[str, str] | None:
        """Post ``message`` and wait for its run's reply: (run, reply). None, logged, when it was
        not posted, the channel's rule refused it, it was posted before (its reply went out then),
        or its run has no reply in time."""
        try:
            posted = await self.post(message)
        except InboundRefused as refused:
            self.log("not posted", delivery=message.delivery, error=str(refused))
            return None
        if not posted.accepted or posted.duplicate:
            return None
        reply = await self.reply(posted.run)
        if reply is None:
            self.log("no reply", run=posted.run)
            return None
        return posted.run, reply

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Do ``work`` (a message's handling) in the background, owned by the bridge: its failure
        is logged, and it is cancelled and awaited when the bridge closes."""
        task = asyncio.create_task(work)
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                error = finished.exception()
                self.log("failed", what=what, error=f"{type(error).__name__}: {error}")

        task.add_done_callback(done)


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 0), 0.0), 30.0)
    except ValueError:
        return 0.0


def serve(build: Callable[[Bridge], web.Application], default_port: int = 8080) -> int:
    """Serve the application ``build`` makes for a bridge (reading the credentials it needs:
    SystemExit when one is missing), and ``GET /healthz``, on ``POD_IP:PORT`` until SIGTERM, the
    pod's end; the bridge is open while it serves, and closes (its handlings cancelled) with it."""

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def application() -> web.Application:
        bridge = Bridge()
        app = build(bridge)
        app.router.add_get("/healthz", healthz)
        await bridge.__aenter__()

        async def close(_: web.Application) -> None:
            await bridge.__aexit__(None, None, None)

        app.on_cleanup.append(close)
        return app

    port = int(os.environ.get("PORT", default_port))
    host = os.environ.get("BIND_ADDRESS") or os.environ.get("POD_IP") or "0.0.0.0"
    web.run_app(application(), host=host, port=port, print=None)
    return 0
