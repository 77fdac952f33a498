"""The webhook server: HTTPS endpoints kube-apiserver calls (controller-runtime's ``webhook.Server``).

Webhooks are registered by path (``register``); the manager starts the server before its caches
(a conversion webhook must answer before a cache of its kind can sync) and stops it last. The
serving certificate comes from ``cert_dir`` (``tls.crt``/``tls.key``, reloaded when they change:
``certwatcher``) or, without one, is made at start for development: a private CA whose
certificate ``ca_bundle`` gives, to put in the webhook configurations' ``caBundle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from kubeloop import certs
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.webhook.certwatcher import CertWatcher
from kubeloop.webhook.webhookmetrics import WebhookMetrics

if TYPE_CHECKING:
    from aiohttp import web

    from kubeloop.httpguard import ConnectionLimits

log = logging.getLogger("kubeloop.webhook")

#: controller-runtime's defaults.
DEFAULT_PORT = 9443
DEFAULT_CERT_NAME = "tls.crt"
DEFAULT_KEY_NAME = "tls.key"
#: Where a certificate kept elsewhere (a Secret, by ``CertRotator``) is written for the server.
DEFAULT_CERT_DIR = pathlib.Path(tempfile.gettempdir()) / "k8s-webhook-server" / "serving-certs"


class Endpoint(Protocol):
    """What a path serves: an admission or conversion webhook."""

    path: str
    metrics: WebhookMetrics | None

    def serve(self, request: web.Request) -> Awaitable[web.Response]: ...


class WebhookServer:
    """Serves registered webhooks over HTTPS on ``host:port`` (port 0: a free one).

    ``cert_dir`` holds ``cert_name`` and ``key_name`` (controller-runtime's defaults ``tls.crt``
    and ``tls.key``), watched for changes every ``cert_poll_interval`` seconds. Without it the
    server makes a development CA and certificate for ``hosts`` (``ca_bundle`` is that CA).
    Connections are held to ``limits`` (default: the API server's, ``kubeloop.ConnectionLimits``):
    a slow client cannot hold the server, whose refusal would block writes of its kinds.
    """

    def __init__(
        self,
        *,
        host: str = "",
        port: int = DEFAULT_PORT,
        cert_dir: str | pathlib.Path | None = None,
        cert_name: str = DEFAULT_CERT_NAME,
        key_name: str = DEFAULT_KEY_NAME,
        hosts: Sequence[str] = certs.DEFAULT_HOSTS,
        cert_poll_interval: float = 1.0,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.host = host
        #: How slow a client may be, and how many connect at once (``kubeloop.httpguard``).
        self.limits = limits
        self.port = port
        self.cert_dir = pathlib.Path(cert_dir) if cert_dir is not None else None
        self.cert_name = cert_name
        self.key_name = key_name
        self.hosts = tuple(hosts)
        self.cert_poll_interval = cert_poll_interval
        self.webhooks: dict[str, Endpoint] = {}
        #: controller_runtime_webhook_* (the manager registers it with its metrics).
        self.metrics = WebhookMetrics()
        #: The CA that signed the serving certificate, when the server made it (PEM).
        self.ca_bundle: bytes | None = None
        self.cert_watcher: CertWatcher | None = None
        self._runner: web.AppRunner | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: Where it listens once started ("host:port").
        self.address = ""

    def register(self, path: str, webhook: Endpoint) -> None:
        """Serve ``webhook`` at ``path`` (registered before the server starts)."""
        if not path.startswith("/"):
            raise ValueError(f"a webhook path must start with '/': {path!r}")
        if path in self.webhooks:
            raise ValueError(f"a webhook is already registered at {path}")
        if self._runner is not None:
            raise RuntimeError("webhooks are registered before the webhook server starts")
        webhook.path = path
        webhook.metrics = self.metrics
        self.webhooks[path] = webhook

    @property
    def started(self) -> bool:
        return self._runner is not None

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        """Where ``path`` is served, as a webhook configuration's ``clientConfig.url``."""
        return f"https://{host}:{self.address.rpartition(':')[2]}{path}"

    async def start(self) -> None:
        """Listen; returns once connections are accepted."""
        from aiohttp import web

        from kubeloop.httpguard import GuardedSite, guarded_runner

        if self._runner is not None:
            raise RuntimeError("the webhook server is already serving")
        context = self._ssl_context()
        app = web.Application(client_max_size=8 * 1024 * 1024)
        for path, webhook in self.webhooks.items():
            app.router.add_post(path, webhook.serve)
        runner = guarded_runner(app, self.limits)
        await runner.setup()
        site = GuardedSite(runner, self.host or "0.0.0.0", self.port, ssl_context=context, limits=self.limits)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = runner.addresses[0]
        self.address = f"{bound[0]}:{bound[1]}"
        self._stop.clear()
        if self.cert_watcher is not None:
            self._tasks.append(
                asyncio.create_task(self.cert_watcher.run(self._stop), name="webhook cert watcher")
            )
        log.info("webhook server serving %d webhook(s) on %s", len(self.webhooks), self.address)

    def _ssl_context(self) -> ssl.SSLContext:
        if self.cert_dir is not None:
            self.cert_watcher = CertWatcher(
                self.cert_dir / self.cert_name,
                self.cert_dir / self.key_name,
                interval=self.cert_poll_interval,
            )
            return self.cert_watcher.context
        credentials = certs.load_or_create_credentials(None, self.hosts)
        self.ca_bundle = credentials.ca_cert_pem
        context = certs.serving_context()
        certs.load_pair(context, credentials.server_cert_pem, credentials.server_key_pem)
        return context

    async def stop(self) -> None:
        self._stop.set()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def started_check(self) -> Callable[[], Awaitable[None]]:
        """A readiness check that passes once the server accepts TLS connections (upstream's
        ``StartedChecker``: it dials the server)."""

        async def check() -> None:
            if self._runner is None:
                raise RuntimeError("webhook server has not started")
            host, _, port = self.address.rpartition(":")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            _, writer = await asyncio.open_connection(
                "127.0.0.1" if host in ("0.0.0.0", "::", "") else host, int(port), ssl=context
            )
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

        return check
