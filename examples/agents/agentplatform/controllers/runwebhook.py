"""A trigger from outside the cluster: a chat bot or a CI job posts ``{agent, task}`` and gets an
AgentRun, the way controller-runtime's docs wire external events (a channel source feeding a
reconciler).

The endpoint is a manager runnable serving ``POST /runs`` over HTTPS (a serving certificate
from ``WebhookOptions.cert_dir``, reloaded when it changes; plain HTTP without one, meant for a
loopback address):

    curl --cacert ca.crt -X POST https://operator:8082/runs \\
      -H "Authorization: Bearer $TOKEN" -H "X-Delivery-ID: 7f3a9c" \\
      -d '{"agent": "triage", "task": "Why is checkout slow?", "namespace": "demo"}'

It answers 401 without the bearer token, 403 for a namespace the endpoint does not serve
(``WebhookOptions.namespaces``: only the default one unless more are named), 400 naming what is
wrong with the body (or a missing ``X-Delivery-ID``), 202 with the run's name when it accepts a
delivery, and 200 with ``"duplicate": true`` when the run of that delivery exists already, or
was pruned less than the ledger's window ago (``deliveries``). An accepted delivery goes into a
Channel source as a generic event; the ``webhook`` controller's reconciler creates the AgentRun
``webhook-<digest of the delivery id>``. Retried deliveries (same id) name the same run, so a
delivery starts exactly one run however often it is posted, across restarts too.

Chat channels post to ``POST /channels/<namespace>/<agent>/<type>`` with ``{"text", "user",
"thread"}`` and ``X-Delivery-ID``, each with a credential of its own, bound to its namespace,
agent and type: a token of the channel's ServiceAccount (``<agent>-channel-<type>``, which the
agent controls) for the audience ``agents.kubeloop.dev/inbound``, which the channel's pod has
projected and the kubelet refreshes. The endpoint checks it with a TokenReview (remembered a
minute, a refused one ten seconds; at most ``MAX_REVIEWS`` asked at once, a post past that is
answered 429); the shared token of ``/runs`` is no channel's. The message is judged by the channel's rule
(``channels.admit``) against the agent as the cache has it. A refused message is answered 200
with ``"accepted": false`` and why, and starts nothing; an accepted one is answered 202 and
becomes the AgentRun ``channel-<digest>`` (of the agent, channel and delivery id), whose
``spec.trigger`` names the channel, the user and the thread, made by the same reconciler after
judging the message again. ``agentplatform_channel_messages_total{agent,type,outcome}`` counts
them (accepted, refused, duplicate).

The options come from ``WebhookOptions`` (or the environment: ``AGENTS_WEBHOOK_BIND_ADDRESS``,
``AGENTS_WEBHOOK_TOKEN``, ``AGENTS_WEBHOOK_NAMESPACES``, ``AGENTS_WEBHOOK_CERT_DIR``); with
neither an address nor a token there is no endpoint, and without a token no ``/runs``.
It runs on every replica, as does the controller it feeds (``need_leader_election=False``): the
Service in front of the operator's replicas reaches any of them (a replica is Ready — readyz
check ``inbound`` — once it listens), and each turns the deliveries it took into runs. That is
safe twice over, since a run's name is its delivery's (a second create finds it made).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import logging
import os
import pathlib
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import Counter

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import GROUP, VERSION, Agent, AgentRun
from .channels import CHANNEL_LABEL, CHANNEL_TYPES, INBOUND_AUDIENCE, InboundTrust, admit, channel_name
from .deliveries import DELIVERY_ANNOTATION, DeliveryLedger

log = logging.getLogger("agentplatform.inbound")

DELIVERY_HEADER = "X-Delivery-ID"
TRIGGER_LABEL = f"{GROUP}/trigger"
#: Bodies are small JSON documents; anything bigger is refused (413).
MAX_BODY_BYTES = 64 * 1024
#: How long a channel's post waits for the API server to review its token (controller-runtime's
#: TokenAccessReviewTimeout); past it, or when the server fails, the post is answered 503.
REVIEW_SECONDS = 10.0
#: How long a token's review is remembered (a minute, as controller-runtime's authenticator
#: caches; a refused token ten seconds), for this many tokens at most.
REVIEW_CACHE_SECONDS, REFUSED_CACHE_SECONDS, REVIEW_CACHE_SIZE = 60.0, 10.0, 4096
#: Token reviews asked of the API server at once at most; a post past it is answered 429, so a
#: flood of made-up tokens costs the API server this many reviews at a time, no more.
MAX_REVIEWS = 16
#: Accepted deliveries waiting for their runs at most; past it a post is answered 429 (bounded
#: memory whatever a sender posts).
MAX_PENDING = 1000


@dataclass(frozen=True)
class WebhookOptions:
    #: The bearer token of ``POST /runs`` (None: no ``/runs``; channels have their own).
    token: str | None = None
    #: host:port; port 0 takes a free one (``RunWebhook.port`` says which).
    bind_address: str = "127.0.0.1:8082"
    #: Where runs go when a post names no namespace.
    namespace: str = "default"
    #: The namespaces a post to ``/runs`` may name besides ``namespace`` ("*": any).
    namespaces: tuple[str, ...] = ()
    #: A directory holding ``tls.crt`` and ``tls.key``: the endpoint serves HTTPS with them,
    #: reloading them when they change (None: plain HTTP, unless ``cert_secret`` is given).
    cert_dir: str | None = None
    #: A Secret of the operator's namespace in which the endpoint keeps a certificate for
    #: ``service`` (a CertRotator's: made by the first replica, shared, renewed) and serves it,
    #: written into ``cert_dir`` (default: a folder under /tmp); its CA goes to the channels.
    cert_secret: str | None = None
    #: The Service the channels reach the endpoint through (in the operator's namespace).
    service: str | None = None

    @classmethod
    def from_env(cls) -> WebhookOptions | None:
        """``AGENTS_WEBHOOK_TOKEN``, ``AGENTS_WEBHOOK_BIND_ADDRESS``, ``AGENTS_WEBHOOK_NAMESPACE``,
        ``AGENTS_WEBHOOK_NAMESPACES`` (comma-separated), ``AGENTS_WEBHOOK_CERT_DIR``,
        ``AGENTS_WEBHOOK_CERT_SECRET`` and ``AGENTS_WEBHOOK_SERVICE``; None (no endpoint)
        without a token or an address."""
        token = os.environ.get("AGENTS_WEBHOOK_TOKEN") or None
        address = os.environ.get("AGENTS_WEBHOOK_BIND_ADDRESS")
        if token is None and not address:
            return None
        listed = os.environ.get("AGENTS_WEBHOOK_NAMESPACES", "")
        return cls(
            token,
            address or cls.bind_address,
            os.environ.get("AGENTS_WEBHOOK_NAMESPACE") or cls.namespace,
            tuple(name.strip() for name in listed.split(",") if name.strip()),
            os.environ.get("AGENTS_WEBHOOK_CERT_DIR") or None,
            os.environ.get("AGENTS_WEBHOOK_CERT_SECRET") or None,
            os.environ.get("AGENTS_WEBHOOK_SERVICE") or None,
        )

    def serves(self, namespace: str) -> bool:
        """Whether a post to ``/runs`` may make a run in ``namespace``."""
        return namespace == self.namespace or "*" in self.namespaces or namespace in self.namespaces


@dataclass(frozen=True)
class Message:
    """A chat message a channel posted."""

    channel: str
    text: str
    user: str
    thread: str | None


@dataclass(frozen=True)
class Delivery:
    agent: str
    task: str
    delivery_id: str
    timeout_seconds: int | None
    #: Set for a channel's message (its task is judged again when the run is made).
    message: Message | None = None


class TooManyReviews(Exception):
    """``MAX_REVIEWS`` token reviews are under way: the post is answered 429."""


class BadDelivery(ValueError):
    """A post the endpoint refuses (400), saying which field is wrong."""


def run_name(delivery_id: str) -> str:
    """The run of a delivery: the same id always names the same run."""
    return "webhook-" + hashlib.sha256(delivery_id.encode()).hexdigest()[:16]


def channel_run_name(namespace: str, agent: str, channel: str, delivery_id: str) -> str:
    """The run of a channel's delivery: the same message posted again names the same run."""
    digest = hashlib.sha256(f"{namespace}/{agent}/{channel}/{delivery_id}".encode()).hexdigest()[:16]
    return "channel-" + digest


def _document(body: bytes, delivery_id: str, *, required: tuple[str, ...]) -> dict[str, Any]:
    """A post's JSON object, with its delivery id and a non-empty string in each ``required``."""
    if not delivery_id.strip():
        raise BadDelivery(f"the {DELIVERY_HEADER} header is required")
    try:
        document: Any = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadDelivery(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadDelivery("the body must be a JSON object")
    for field in required:
        if not isinstance(document.get(field), str) or not document[field].strip():
            raise BadDelivery(f"{field}: Required value: a non-empty string")
    return document


def parse_message(body: bytes, channel: str, delivery_id: str) -> Message:
    """A channel's post; BadDelivery names what is wrong."""
    if channel not in CHANNEL_TYPES:
        raise BadDelivery(
            f"type: Unsupported value: {channel!r}: supported values: {', '.join(CHANNEL_TYPES)}"
        )
    document = _document(body, delivery_id, required=("text", "user"))
    thread = document.get("thread")
    if thread is not None and not isinstance(thread, str):
        raise BadDelivery("thread: Invalid value: must be a string")
    return Message(channel, document["text"], document["user"], thread or None)


def parse_delivery(body: bytes, delivery_id: str) -> tuple[str | None, Delivery]:
    """The namespace a post names (if any) and its delivery; BadDelivery names what is wrong."""
    document = _document(body, delivery_id, required=("agent", "task"))
    namespace = document.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        raise BadDelivery("namespace: Invalid value: must be a non-empty string")
    timeout = document.get("timeoutSeconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
        raise BadDelivery("timeoutSeconds: Invalid value: must be a whole number of seconds, at least 1")
    return namespace, Delivery(document["agent"], document["task"], delivery_id, timeout)


class RunWebhook:
    """The endpoint (a manager runnable) and the reconciler of its deliveries."""

    def __init__(
        self, manager: kubeloop.Manager, options: WebhookOptions, ledger: DeliveryLedger, trust: InboundTrust
    ) -> None:
        if bool(options.cert_secret) != bool(options.service):
            raise ValueError("the inbound endpoint's cert_secret and service go together")
        self.manager = manager
        self.client = manager.client
        self.options = options
        self.ledger = ledger
        self.trust = trust
        #: Token digest → (when the answer goes stale, the account or None), least recent first.
        self._reviews: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self._reviewing = 0
        #: Keeps the endpoint's certificate in ``cert_secret`` (None: the files are the user's).
        self.rotator: kubeloop.webhook.CertRotator | None = None
        if options.cert_secret and options.service:
            self.rotator = kubeloop.webhook.CertRotator(
                manager.api_reader,
                namespace=manager.api_reader.config.namespace,
                secret=options.cert_secret,
                service=options.service,
                cert_dir=options.cert_dir or tempfile.mkdtemp(prefix="agents-inbound-"),
                purpose="inbound endpoint",
            )
            trust.expect()
        #: The generic events of accepted deliveries, read by the controller's Channel source.
        self.events: asyncio.Queue[kubeloop.Obj] = asyncio.Queue()
        #: Accepted deliveries whose run is not created yet, by (namespace, run name).
        self.pending: dict[tuple[str, str], Delivery] = {}
        #: The port the endpoint listens on, once it does.
        self.port: int | None = None
        self.serving = asyncio.Event()
        self.channel_messages = Counter(
            "agentplatform_channel_messages_total",
            "Messages the agents' channels posted, by what became of them.",
            ["agent", "type", "outcome"],
            registry=manager.metrics.registry,
        )

    def setup(self) -> None:
        source = kubeloop.source.Channel(self.events, kubeloop.handler.EnqueueRequestForObject())
        (
            kubeloop.Builder(self.manager)
            .named("webhook")
            .watches_raw_source(source)
            .with_options(need_leader_election=False)
            .complete(self.reconcile)
        )
        self.manager.add(self.serve, name="agent run webhook", need_leader_election=False)
        # Not Ready until it listens: a Service sends posts only to Ready pods.
        self.manager.add_readyz_check("inbound", self._listening)
        self.manager.permissions.allow(AgentRun, "get", "create")
        self.manager.permissions.allow(Agent, "get", "list", "watch")
        # The channels' credentials: their tokens are reviewed, their accounts read.
        self.manager.permissions.allow_resource("authentication.k8s.io", "tokenreviews", "create")
        self.manager.permissions.allow(kinds.ServiceAccount, "get", "list", "watch")
        # (The certificate's Secret, with cert_secret, is granted by a Role of the operator's
        # namespace: the chart's and config/'s, as for the policy webhooks' certificate.)

    def _listening(self) -> None:
        if not self.serving.is_set():
            raise RuntimeError("the inbound endpoint is not listening yet")

    async def serve(self, stop: asyncio.Event) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        if self.options.token is not None:
            app.router.add_post("/runs", self._post)
        app.router.add_post("/channels/{namespace}/{agent}/{type}", self._post_message)
        host, _, port = self.options.bind_address.rpartition(":")
        watcher = None
        folder = self.rotator.cert_dir if self.rotator is not None else self.options.cert_dir
        if self.rotator is not None:
            self.trust.provisioned((await self.rotator.provision()).ca_cert_pem.decode())
        if folder is not None:
            folder = pathlib.Path(folder)
            watcher = kubeloop.webhook.CertWatcher(folder / "tls.crt", folder / "tls.key")
        elif not _loopback(host):
            log.warning(
                "the inbound endpoint serves plain HTTP on %s: its tokens cross the network in the "
                "clear (give it a certificate: AGENTS_WEBHOOK_CERT_DIR)",
                self.options.bind_address,
            )
        runner = kubeloop.guarded_runner(app)  # no sender holds a connection by going slow
        await runner.setup()
        ssl_context = watcher.context if watcher is not None else None
        site = kubeloop.GuardedSite(runner, host or None, int(port), ssl_context=ssl_context)
        # Owned here: cancelled and awaited when the endpoint stops.
        keeping = [asyncio.create_task(watcher.run(stop))] if watcher is not None else []
        if self.rotator is not None:
            keeping.append(asyncio.create_task(self._renew(self.rotator, stop)))
        try:
            await site.start()
            self.port = int(runner.addresses[0][1])
            self.serving.set()
            await stop.wait()
        finally:
            self.serving.clear()
            for task in keeping:
                task.cancel()
            for task in keeping:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await runner.cleanup()

    async def _renew(self, rotator: kubeloop.webhook.CertRotator, stop: asyncio.Event) -> None:
        """Look at the Secret's certificate every ``check_interval``: reissued before it expires
        (by whichever replica comes first), written for the watcher to load; the channels follow
        its CA."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rotator.check_interval)
            if stop.is_set():
                return
            try:
                self.trust.provisioned((await rotator.provision()).ca_cert_pem.decode())
            except kubeloop.errors.APIError as error:
                log.warning("inbound certificate: %s (retrying in %ss)", error, rotator.check_interval)

    def _authorized(self, request: web.Request) -> bool:
        """Whether the post carries the shared token of ``/runs``."""
        expected = self.options.token
        token = _bearer(request)
        return expected is not None and hmac.compare_digest(token.encode(), expected.encode())

    async def _channel_account(self, request: web.Request) -> str | None:
        """The ServiceAccount (``system:serviceaccount:<ns>:<name>``) a channel's post comes
        from: its bearer token, reviewed for the inbound audience; None if it is no such token."""
        token = _bearer(request)
        if not token:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._reviews.get(key)
        if cached is not None and cached[0] > time.monotonic():
            self._reviews.move_to_end(key)
            return cached[1]
        if self._reviewing >= MAX_REVIEWS:
            raise TooManyReviews
        self._reviewing += 1
        try:
            review = await self.client.create(
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token, "audiences": [INBOUND_AUDIENCE]},
                }
            )
        finally:
            self._reviewing -= 1
        status = review.get("status") or {}
        username = (status.get("user") or {}).get("username")
        account = (
            username
            if status.get("authenticated")
            and INBOUND_AUDIENCE in (status.get("audiences") or ())
            and isinstance(username, str)
            else None
        )
        ttl = REVIEW_CACHE_SECONDS if account is not None else REFUSED_CACHE_SECONDS
        self._reviews[key] = (time.monotonic() + ttl, account)
        self._reviews.move_to_end(key)
        while len(self._reviews) > REVIEW_CACHE_SIZE:
            self._reviews.popitem(last=False)
        return account

    async def _post(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _answer(401, {"error": "a valid bearer token is required"}, {"WWW-Authenticate": "Bearer"})
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _answer(413, {"error": f"the body is larger than {MAX_BODY_BYTES} bytes"})
        try:
            namespace, delivery = parse_delivery(body, request.headers.get(DELIVERY_HEADER, ""))
        except BadDelivery as exc:
            return _answer(400, {"error": str(exc)})
        namespace = namespace or self.options.namespace
        if not self.options.serves(namespace):
            return _answer(
                403, {"error": f"namespace: Forbidden: this endpoint makes no runs in {namespace!r}"}
            )
        name = run_name(delivery.delivery_id)
        answer = {"run": name, "namespace": namespace}
        if await self._delivered(namespace, delivery.agent, name):
            return _answer(200, {**answer, "duplicate": True})
        if (namespace, name) not in self.pending and len(self.pending) >= MAX_PENDING:
            return _busy()
        self.pending.setdefault((namespace, name), delivery)
        self.events.put_nowait(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AgentRun",
                "metadata": {"name": name, "namespace": namespace},
            }
        )
        return _answer(202, answer)

    async def _delivered(self, namespace: str, agent_name: str, run: str, agent: Agent | None = None) -> bool:
        """Whether the run of a delivery exists, or was pruned within the ledger's window."""
        try:
            await self.client.get(AgentRun, run, namespace=namespace)
            return True
        except kubeloop.errors.NotFound:
            pass
        if agent is None:
            try:
                agent = await self.client.get(Agent, agent_name, namespace=namespace)
            except kubeloop.errors.NotFound:
                return False
        return await self.ledger.remembers(agent, run)

    async def _post_message(self, request: web.Request) -> web.Response:
        namespace, agent_name = request.match_info["namespace"], request.match_info["agent"]
        try:
            async with asyncio.timeout(REVIEW_SECONDS):
                account = await self._channel_account(request)
        except TooManyReviews:
            return _answer(
                429, {"error": f"{MAX_REVIEWS} tokens are being reviewed; try again"}, {"Retry-After": "1"}
            )
        except (kubeloop.errors.APIError, OSError, TimeoutError) as failed:
            log.warning("inbound endpoint: the token review failed: %s", failed or type(failed).__name__)
            return _answer(
                503, {"error": "the API server did not review the token; try again"}, {"Retry-After": "5"}
            )
        if account is None:
            return _answer(
                401,
                {
                    "error": f"a bearer token of the channel's ServiceAccount for the audience {INBOUND_AUDIENCE} is required"
                },
                {"WWW-Authenticate": "Bearer"},
            )
        expected = f"system:serviceaccount:{namespace}:{channel_name(agent_name, request.match_info['type'])}"
        if not hmac.compare_digest(account.encode(), expected.encode()):
            return _answer(403, {"error": f"{account} may not post as the channel {expected}"})
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _answer(413, {"error": f"the body is larger than {MAX_BODY_BYTES} bytes"})
        try:
            delivery_id = request.headers.get(DELIVERY_HEADER, "")
            message = parse_message(body, request.match_info["type"], delivery_id)
        except BadDelivery as exc:
            return _answer(400, {"error": str(exc)})
        try:
            agent = await self.client.get(Agent, agent_name, namespace=namespace)
        except kubeloop.errors.NotFound:
            return _answer(404, {"error": f"Agent {namespace}/{agent_name} does not exist"})
        channel = next((c for c in agent.spec.channels or () if c.type == message.channel), None)
        if channel is None:
            return _answer(404, {"error": f"Agent {namespace}/{agent_name} has no {message.channel} channel"})
        if not await self._agents_account(agent, message.channel):
            return _answer(
                403, {"error": f"{account} is not the account Agent {namespace}/{agent_name} made"}
            )
        admission = admit(channel, message.text, message.user)
        if not admission.accepted:
            self.channel_messages.labels(agent_name, message.channel, "refused").inc()
            return _answer(200, {"accepted": False, "reason": admission.reason})
        name = channel_run_name(namespace, agent_name, message.channel, delivery_id)
        answer = {"accepted": True, "run": name, "namespace": namespace}
        # Posted again while its run is being made, after, or after its run was pruned.
        duplicate = (namespace, name) in self.pending or await self._delivered(
            namespace, agent_name, name, agent
        )
        if duplicate:
            self.channel_messages.labels(agent_name, message.channel, "duplicate").inc()
            return _answer(200, {**answer, "duplicate": True})
        if len(self.pending) >= MAX_PENDING:
            return _busy()
        self.pending[(namespace, name)] = Delivery(agent_name, admission.task, delivery_id, None, message)
        self.events.put_nowait(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AgentRun",
                "metadata": {"name": name, "namespace": namespace},
            }
        )
        self.channel_messages.labels(agent_name, message.channel, "accepted").inc()
        return _answer(202, answer)

    async def _agents_account(self, agent: Agent, channel: str) -> bool:
        """Whether the channel's ServiceAccount is the agent's own (one of that name someone
        else made first is not: the agent reports the conflict)."""
        try:
            account = await self.client.get(
                kinds.ServiceAccount,
                channel_name(agent.metadata.name or "", channel),
                namespace=agent.metadata.namespace,
            )
        except kubeloop.errors.NotFound:
            return False
        return kubeloop.is_controlled_by(account, agent)

    async def _judged_again(self, namespace: str, delivery: Delivery) -> dict[str, Any] | None:
        """The run's trigger, if the agent as it is now still takes the channel's message."""
        message = delivery.message
        assert message is not None
        try:
            agent = await self.client.get(Agent, delivery.agent, namespace=namespace)
        except kubeloop.errors.NotFound:
            return None
        channel = next((c for c in agent.spec.channels or () if c.type == message.channel), None)
        if channel is None or not admit(channel, message.text, message.user).accepted:
            return None
        trigger = {"channel": message.channel, "user": message.user}
        if message.thread:
            trigger["thread"] = message.thread
        return trigger

    async def reconcile(self, request: kubeloop.Request) -> None:
        """Create the run of an accepted delivery (once: a retried one finds it made)."""
        key = (request.namespace, request.name)
        delivery = self.pending.get(key)
        if delivery is None:
            return
        spec: dict[str, Any] = {"agentRef": delivery.agent, "task": delivery.task}
        if delivery.timeout_seconds is not None:
            spec["timeoutSeconds"] = delivery.timeout_seconds
        run_labels = {TRIGGER_LABEL: "webhook"}
        if delivery.message is not None:
            trigger = await self._judged_again(request.namespace, delivery)
            if trigger is None:  # the agent or its channel changed since: no run
                del self.pending[key]
                return
            spec["trigger"] = trigger
            run_labels = {TRIGGER_LABEL: "channel", CHANNEL_LABEL: delivery.message.channel}
        run = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AgentRun",
            "metadata": {
                "name": request.name,
                "namespace": request.namespace,
                "labels": run_labels,
                "annotations": {DELIVERY_ANNOTATION: delivery.delivery_id},
            },
            "spec": spec,
        }
        try:
            await self.client.create(run)
        except kubeloop.errors.AlreadyExists:
            pass  # the same delivery, posted again before the cache showed its run
        except (kubeloop.errors.NotFound, kubeloop.errors.Invalid, kubeloop.errors.Forbidden) as exc:
            del self.pending[key]  # no namespace of that name, or no run can be made there
            raise kubeloop.TerminalError(f"delivery {delivery.delivery_id}: {exc}") from exc
        del self.pending[key]


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _busy() -> web.Response:
    """429: the deliveries waiting for their runs are at ``MAX_PENDING``; the sender retries."""
    return _answer(
        429,
        {"error": f"{MAX_PENDING} deliveries are waiting for their runs; try again"},
        {"Retry-After": "1"},
    )


def _answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def setup(
    manager: kubeloop.Manager, options: WebhookOptions | None, ledger: DeliveryLedger, trust: InboundTrust
) -> RunWebhook | None:
    options = options or WebhookOptions.from_env()
    if options is None:
        return None
    webhook = RunWebhook(manager, options, ledger, trust)
    webhook.setup()
    return webhook
