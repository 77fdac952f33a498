"""The embedded API server: wires storage, registry, HTTP handlers, TLS and authentication.

``APIServer`` is an async context manager: entering it loads (or creates) the data directory,
bootstraps the default namespaces, starts HTTPS on the given host and port and writes a
kubeconfig; leaving it stops serving, closes every watch and flushes storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import pathlib
import secrets
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from kubeloop import certs, errors
from kubeloop.api.object import Obj
from kubeloop.apiserver import groups, kubeconfig, kubernetesservice
from kubeloop.apiserver.admission.admissionpolicy.expressioncheck import KINDS as EXPRESSION_KINDS
from kubeloop.apiserver.admission.admissionpolicy.expressioncheck import with_compiled_expressions
from kubeloop.apiserver.admission.admissionpolicy.typechecking import TypeCheckingController
from kubeloop.apiserver.admission.chain import builtin_chain
from kubeloop.apiserver.admission.webhooks.dispatcher import WebhookAdmission
from kubeloop.apiserver.apiextensions.crdcontroller import CRDController
from kubeloop.apiserver.apiextensions.webhookconversion import WebhookConverter
from kubeloop.apiserver.audit.logwriter import AuditLogWriter
from kubeloop.apiserver.audit.policy import METADATA_FOR_ALL, AuditPolicy
from kubeloop.apiserver.auth import bootstrap
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.auth.tokens import (
    BOUND_KINDS,
    DEFAULT_MAX_EXPIRATION_SECONDS,
    ServiceAccountTokens,
    review_token,
)
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.catalog.schemas import schema_release
from kubeloop.apiserver.datadir import DataDirectory
from kubeloop.apiserver.frontends import FrontEndProcesses
from kubeloop.apiserver.http import aiohttpserving
from kubeloop.apiserver.http.auditing import Auditor
from kubeloop.apiserver.http.authentication import Authenticator, auth_middleware
from kubeloop.apiserver.http.connections import (
    ConnectionTimeouts,
    ConnectionWatchdog,
    request_timeout_middleware,
)
from kubeloop.apiserver.http.errormiddleware import error_middleware
from kubeloop.apiserver.http.handlers import APIHandlers
from kubeloop.apiserver.http.http1 import BufferedRequest
from kubeloop.apiserver.http.negotiation import answer_media_middleware
from kubeloop.apiserver.http.nodestreams import NodeStreamEndpoint, NodeStreamRelay
from kubeloop.apiserver.http.requestbodies import MAX_BODY_BYTES
from kubeloop.apiserver.http.watchstream import WatchSettings
from kubeloop.apiserver.http.workerloop import WorkerLoop
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import WriteOptions
from kubeloop.apiserver.storage.feed import FeedPublisher
from kubeloop.apiserver.storage.log import Log, MemoryLog, SQLiteLog, StorageError
from kubeloop.apiserver.storage.objectstore import ObjectStore
from kubeloop.apiserver.storage.remotestore import RemoteStore, StoreService
from kubeloop.apiserver.storage.store import Store
from kubeloop.apiserver.storage.watchcache import DEFAULT_HISTORY_BYTES, DEFAULT_HISTORY_EVENTS
from kubeloop.apiserver.storage.writer import frame
from kubeloop.apiserver.userinfo import UserInfo
from kubeloop.controllermanager import USER as CONTROLLER_MANAGER_USER
from kubeloop.lifecycle import cancel_and_wait, start_or_stop
from kubeloop.node.sessions import ProcessNode
from kubeloop.node.simulation import SimulationOptions

if TYPE_CHECKING:
    from kubeloop.controllermanager.controllermanager import ControllerManager

log = logging.getLogger("kubeloop.apiserver")

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
ADMIN_USER = UserInfo("kubeloop-admin", ("system:masters", "system:authenticated"))


def default_data_dir() -> pathlib.Path:
    return pathlib.Path.home() / ".local" / "share" / "kubeloop"


@dataclass(frozen=True)
class ServerOptions:
    """How to run the embedded server (the ``kubeloop apiserver`` flags)."""

    #: Where the SQLite log, the PKI and the kubeconfig live. Default: ~/.local/share/kubeloop.
    data_dir: pathlib.Path | None = None
    #: Keep everything in memory (tests): nothing survives the process.
    memory: bool = False
    #: Loopback only unless told otherwise.
    host: str = "127.0.0.1"
    #: 0 picks a free port.
    port: int = 6443
    #: Processes serving the port: this one, and ``workers - 1`` front-end processes over its
    #: store (``kubeloop apiserver --workers``; the kernel spreads connections, SO_REUSEPORT).
    workers: int = 1
    #: Share the port with other processes of this server (SO_REUSEPORT; set for ``workers``).
    reuse_port: bool = False
    #: Where to write the kubeconfig. Default: <data-dir>/kubeconfig (a temporary directory with --memory).
    kubeconfig: pathlib.Path | None = None
    #: Serve plain HTTP instead of HTTPS (bearer tokens still required). For benchmarks only.
    insecure_http: bool = False
    #: Changes kept for watches and lists from an older resourceVersion; older ones answer 410.
    history_window: int = DEFAULT_HISTORY_EVENTS
    #: Bytes of JSON those changes may hold (old and new state); beyond it the oldest are dropped.
    history_bytes: int = DEFAULT_HISTORY_BYTES
    #: Events a watcher may fall behind before it is closed with 410.
    watcher_buffer: int = 10_000
    #: fsync every group commit (durable across power loss); False keeps durability across SIGKILL only.
    fsync: bool = True
    watch: WatchSettings = field(default_factory=WatchSettings)
    #: Header, idle, request and write timeouts of client connections (kube-apiserver's defaults).
    timeouts: ConnectionTimeouts = field(default_factory=ConnectionTimeouts)
    #: How often history is compacted, in seconds (kube-apiserver: 5 minutes). Each round forgets
    #: what was already history one round earlier, so a watch can resume from an RV between one and
    #: two intervals old; older ones get 410.
    compaction_interval: float = 300.0
    #: How often a server whose storage failed tries a probe write to see whether it recovered.
    storage_probe_interval: float = 1.0
    #: Run the cluster's control loops (kube-controller-manager's part: the garbage collector,
    #: the namespace controller).
    controllers: bool = True
    #: Keep the ``default`` ServiceAccount and the ``kube-root-ca.crt`` ConfigMap in every
    #: namespace, as a cluster does; needs ``controllers``.
    namespace_defaults: bool = True
    #: Simulate workloads (a node, pods that run, Jobs that finish); needs ``controllers``.
    simulate: bool = False
    simulation: SimulationOptions = field(default_factory=SimulationOptions)
    #: Where audit events are appended, one JSON line each ("-": standard output); None: no
    #: audit log (kube-apiserver's ``--audit-log-path``).
    audit_log_path: pathlib.Path | str | None = None
    #: Which requests are recorded at which level (``--audit-policy-file``, read with
    #: ``audit.policy.load_policy``). None with a log path: every request at Metadata level.
    audit_policy: AuditPolicy | None = None
    #: The longest a ServiceAccount token is issued for, in seconds (kube-apiserver's
    #: ``--service-account-max-token-expiration``): a TokenRequest for longer gets this.
    service_account_max_token_expiration: int = DEFAULT_MAX_EXPIRATION_SECONDS


def small_requests(
    handlers: APIHandlers, authenticator: Authenticator
) -> Callable[[BufferedRequest], Awaitable[web.StreamResponse]]:
    """What answers the small requests connections read themselves (http/http1.py): the same
    chain aiohttp's middlewares make (errors as Status, authentication, auditing; the connection
    watchdog bounds the time) in front of the same handlers."""
    auditor = handlers.auditor
    authenticate = auth_middleware(
        authenticator,
        authorizer=handlers.authorizer,
        on_unauthenticated=auditor.failed_authentication if auditor is not None else None,
    )

    # Each step calls the next directly (a partial, not a coroutine of its own around it).
    audited: Callable[[BufferedRequest], Awaitable[web.StreamResponse]] = (
        handlers.route_small
        if auditor is None
        else functools.partial(auditor.middleware, handler=handlers.route_small)
    )
    authenticated = functools.partial(authenticate, handler=audited)
    as_statuses = functools.partial(error_middleware, handler=authenticated)
    return functools.partial(answer_media_middleware, handler=as_statuses)


#: A new connection to the store service of the server that owns the store.
StoreConnector = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


@dataclass(frozen=True)
class FrontEndOf:
    """What a front-end shares with the server that owns the store (:meth:`APIServer.front_end_of`):
    its credentials (CA, serving certificate, admin token), the controllers' token, a way to
    reach its store service, and one to reach its node (pods' logs, exec, attach, port-forwards;
    None: they are served by the front-end's own, empty, node)."""

    credentials: certs.ServerCredentials
    controllers_token: str
    connect: StoreConnector
    dial_node: Callable[[], Awaitable[socket.socket]] | None = None


class APIServer:
    """A running embedded API server; use as ``async with APIServer(options) as server``.

    With ``front_end_of`` it is a front-end of another server (``--workers``): its store is a
    :class:`~kubeloop.apiserver.storage.remotestore.RemoteStore` over that server's, it serves
    HTTP with that server's credentials, and what a cluster does once (the log, bootstrap
    objects, the ``kubernetes`` Service, compaction, the CRD cleanup, the policies' status, the
    controllers, the node, the kubeconfig) is left to that server.
    """

    def __init__(
        self,
        options: ServerOptions | None = None,
        *,
        front_end_of: FrontEndOf | None = None,
        front_ends: FrontEndProcesses | None = None,
    ) -> None:
        self.options = options or ServerOptions()
        self._front_end_of = front_end_of
        if front_ends is not None and front_ends.count != self.options.workers - 1:
            raise ValueError(f"{front_ends.count} front-end processes for {self.options.workers} workers")
        self.catalog = ResourceCatalog(groups.builtin_resources())
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._runner: web.AppRunner | None = None
        self._log: Log | None = None
        self._background: list[asyncio.Task[None]] = []
        self._crds: CRDController | None = None
        self._policy_status: TypeCheckingController | None = None
        self._webhooks: WebhookAdmission | None = None
        self._data_dir: DataDirectory | None = None
        self._worker: WorkerLoop | None = None
        self._watchdog: ConnectionWatchdog | None = None
        self._listener: asyncio.Server | None = None
        self._controllers: ControllerManager | None = None
        self._audit_log: AuditLogWriter | None = None
        self._serve_connection: Callable[[], asyncio.Protocol] | None = None
        self._ssl_context: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Server-side TLS handshakes of dialed connections, waiting for their client.
        self._handshakes: set[asyncio.Task[object]] = set()
        self.url = ""
        self.kubeconfig_path = pathlib.Path()
        self.credentials: certs.ServerCredentials | None = None
        self.store: Store | None = None
        #: The store this server orders writes in (None for a front-end of another server's).
        self._object_store: ObjectStore | None = None
        self._store_service: StoreService | None = None
        self._feed: FeedPublisher | None = None
        self._store_connections: list[asyncio.Task[None]] = []
        self._controllers_token = ""
        self._port = 0
        #: The front-end processes of ``workers`` (launched early by ``kubeloop apiserver``,
        #: before it imports this module; else as the data directory is taken).
        self._front_ends: FrontEndProcesses | None = front_ends
        #: Where front-ends relay pods' streams to (once the server has front-ends).
        self._node_endpoint: NodeStreamEndpoint | None = None
        self._handlers: APIHandlers | None = None
        self.registry: Registry | None = None

    @property
    def controllers(self) -> ControllerManager | None:
        """The running control loops (None when off, or not started)."""
        return self._controllers

    @property
    def data_dir(self) -> pathlib.Path | None:
        if self.options.memory and self.options.data_dir is None:
            return None
        return self.options.data_dir or default_data_dir()

    async def __aenter__(self) -> APIServer:
        if self.store is None:
            await start_or_stop(self.start, self.stop)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _open_store(self) -> ObjectStore:
        """The data directory, the log, and the store loaded from it (a server that owns its store)."""
        options = self.options
        data_dir = self.data_dir
        if data_dir is not None:
            # Private (0700) and ours alone: a second server on the same directory would hand out
            # the same resourceVersions.
            self._data_dir = DataDirectory(data_dir)
            self._data_dir.open()
        if options.workers > 1 and self._front_ends is None:
            # Launched once the data directory is this server's, so that their imports overlap
            # the rest of its start-up; served at its end.
            self._front_ends = FrontEndProcesses(options.workers - 1)
            await self._front_ends.launch()
        if options.memory:
            self._log = MemoryLog()
        else:
            assert data_dir is not None
            self._log = await asyncio.to_thread(SQLiteLog, data_dir / "state.db", durable=options.fsync)
        store = ObjectStore(
            self._log,
            history_window=options.history_window,
            history_bytes=options.history_bytes,
            watcher_buffer=options.watcher_buffer,
        )
        await asyncio.to_thread(store.load)
        return store

    async def _follow_store(self, front_end_of: FrontEndOf) -> RemoteStore:
        """A front-end's store: a watch cache following the owning server's store."""
        options = self.options
        reader, writer = await front_end_of.connect()
        store = RemoteStore(
            reader,
            writer,
            history_window=options.history_window,
            history_bytes=options.history_bytes,
            watcher_buffer=options.watcher_buffer,
        )
        try:
            await store.start()
        except BaseException:
            await store.close()
            raise
        return store

    async def front_end_of(self) -> FrontEndOf:
        """What a front-end of this server needs (:class:`FrontEndOf`); each call of its
        ``connect`` is served here, on this server's loop, until the server stops."""
        store = self._object_store
        if store is None or self.credentials is None:
            raise RuntimeError("only a running server that owns its store has front-ends")
        if self._store_service is None:
            self._feed = FeedPublisher(store)
            self._store_service = StoreService(store, self._feed)
        if self._node_endpoint is None:
            assert self._handlers is not None
            endpoint = NodeStreamEndpoint(self._handlers.relayed_pod_stream)
            await endpoint.start()
            self._node_endpoint = endpoint
        service = self._store_service
        loop = asyncio.get_running_loop()

        async def serve(sock: socket.socket) -> None:
            if self._store_service is not service:
                raise RuntimeError("the server that owns the store has stopped")
            reader, writer = await asyncio.open_connection(sock=sock)
            task = asyncio.create_task(service.serve(reader, writer), name="kubeloop-store-service")
            self._serving_store(task)

        async def serve_node(sock: socket.socket) -> None:
            self.serve_node_connection(sock)

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection(sock=await _served_pair(loop, serve))

        async def dial_node() -> socket.socket:
            return await _served_pair(loop, serve_node)

        return FrontEndOf(self.credentials, self._controllers_token, connect, dial_node)

    def serve_node_connection(self, connection: socket.socket) -> None:
        """Serve a connection a front-end opened to relay a pod's stream to this server's node
        (handed over by a front-end process, or in-process :attr:`FrontEndOf.dial_node`)."""
        if self._node_endpoint is None:
            raise RuntimeError("this server has no front-ends")
        self._node_endpoint.serve(connection)

    def _serving_store(self, task: asyncio.Task[None]) -> None:
        """Own ``task``, which serves a front-end's store connection: cancelled when the server stops."""
        self._store_connections.append(task)
        task.add_done_callback(self._store_connection_ended)

    def serve_front_end(self, connection: socket.socket) -> None:
        """Serve a front-end process's store connection (``frontends``; this server's end of a
        socket pair whose other end the process inherited): what it shares with this server
        (:class:`FrontEndOf`'s credentials and token, its options), then the store, until
        either end closes or this server stops."""
        task = asyncio.create_task(self._serve_front_end(connection), name="kubeloop-front-end-store")
        self._serving_store(task)

    async def _serve_front_end(self, connection: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=connection)
        except BaseException:
            connection.close()
            raise
        of = await self.front_end_of()  # the service exists from here on
        assert self._store_service is not None
        options = replace(self.options, port=self._port, workers=1, reuse_port=True, kubeconfig=None)
        writer.write(frame(("welcome", of.credentials, of.controllers_token, options)))
        await self._store_service.serve(reader, writer)

    def _store_connection_ended(self, task: asyncio.Task[None]) -> None:
        self._store_connections.remove(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serving a front-end's store connection failed", exc_info=task.exception())

    async def start(self) -> None:
        options = self.options
        data_dir = self.data_dir
        front_end_of = self._front_end_of
        store: Store
        if front_end_of is None:
            store = self._object_store = await self._open_store()
        else:
            store = await self._follow_store(front_end_of)
        self.store = store
        self.registry = Registry(store, self.catalog, groups.builtin_strategy)
        for plural in EXPRESSION_KINDS:
            admission_kind = self.catalog.lookup("admissionregistration.k8s.io", "v1", plural)
            assert admission_kind is not None
            self.registry.set_strategy(with_compiled_expressions(self.registry.strategy(admission_kind)))
        self._webhooks = WebhookAdmission(self.registry, self.catalog)
        self.registry.admission = builtin_chain(
            self.registry,
            self.catalog,
            self._webhooks,
            service_accounts=options.controllers and options.namespace_defaults,
            pod_security_release=int(schema_release().split(".")[1]),
        )
        caller = self._webhooks.caller
        self._crds = CRDController(self.registry, webhook_converter=lambda crd: WebhookConverter(crd, caller))
        self._crds.start(clean_up=front_end_of is None)
        if front_end_of is None:
            self._policy_status = TypeCheckingController(self.registry, self.catalog)
            self._policy_status.start()
            await self._bootstrap()
            hosts = [options.host] if options.host not in ("0.0.0.0", "::", "") else [socket.gethostname()]
            pki_dir = data_dir / "pki" if data_dir is not None else None
            self.credentials = await asyncio.to_thread(certs.load_or_create_credentials, pki_dir, hosts)
            self._controllers_token = secrets.token_urlsafe(32)
        else:
            self.credentials = front_end_of.credentials
            self._controllers_token = front_end_of.controllers_token
        controllers_token = self._controllers_token
        service_accounts = self.catalog.lookup("", "v1", "serviceaccounts")
        assert service_accounts is not None

        def account_uid(namespace: str, name: str) -> str | None:
            return object_uid("serviceaccounts", namespace, name)

        def object_uid(resource_name: str, namespace: str, name: str) -> str | None:
            resource = self.catalog.lookup("", "v1", resource_name)
            stored = store.get(resource.key(namespace, name)) if resource is not None else None
            return None if stored is None else str((stored.obj.get("metadata") or {}).get("uid"))

        tokens = ServiceAccountTokens(
            self.credentials.ca_key_pem,
            account_uid,
            object_uid,
            max_expiration_seconds=options.service_account_max_token_expiration,
        )
        for plural in ("serviceaccounts", *(resource for resource, _ in BOUND_KINDS.values())):
            self.registry.add_commit_listener("", plural, tokens.forget_authenticated)
        authenticator = Authenticator(
            {
                self.credentials.admin_token: ADMIN_USER,
                controllers_token: UserInfo(CONTROLLER_MANAGER_USER, ("system:authenticated",)),
            },
            verify=tokens.authenticate,
        )

        sock = socket.socket(socket.AF_INET6 if ":" in options.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if options.reuse_port or options.workers > 1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((options.host, options.port))
        port = self._port = sock.getsockname()[1]
        scheme = "http" if options.insecure_http else "https"
        host_in_url = f"[{options.host}]" if ":" in options.host else options.host
        if options.host in ("0.0.0.0", "::"):
            host_in_url = "127.0.0.1"
        self.url = f"{scheme}://{host_in_url}:{port}"
        if front_end_of is None:
            await self._publish_kubernetes_service(kubernetesservice.advertised_address(options.host), port)

        auditor: Auditor | None = None
        if options.audit_log_path is not None:
            self._audit_log = AuditLogWriter(options.audit_log_path)
            self._audit_log.start()
            auditor = Auditor(options.audit_policy or METADATA_FOR_ALL, self._audit_log)
        self._worker = WorkerLoop()
        self._worker.start()
        handlers = APIHandlers(
            self.registry,
            self.catalog,
            watch_settings=options.watch,
            server_address=f"{host_in_url}:{port}",
            readiness=self.readiness,
            worker=self._worker,
            extra_definitions=self._crds.definitions,
            authorizer=RBACAuthorizer(self.registry.store, self.catalog, remember=True),
            tokens=tokens,
            token_reviewer=functools.partial(
                review_token, tokens, lambda token: authenticator.authenticate_token(f"Bearer {token}")
            ),
            components=self.component_health,
            auditor=auditor,
            node=self._process_node,
            node_relay=(
                NodeStreamRelay(front_end_of.dial_node)
                if front_end_of is not None and front_end_of.dial_node is not None
                else None
            ),
        )
        self._handlers = handlers
        self._watchdog = ConnectionWatchdog(options.timeouts)
        middlewares: list[Middleware] = [
            request_timeout_middleware(self._watchdog),
            answer_media_middleware,
            error_middleware,
            auth_middleware(
                authenticator,
                authorizer=handlers.authorizer,
                on_unauthenticated=auditor.failed_authentication if auditor is not None else None,
            ),
        ]
        if auditor is not None:
            middlewares.append(auditor.aiohttp_middleware())
        app = web.Application(
            middlewares=middlewares,
            client_max_size=MAX_BODY_BYTES + 1024,
        )
        app.add_routes(handlers.routes())
        ssl_context: ssl.SSLContext | None = None
        if not options.insecure_http:
            ssl_context = certs.server_ssl_context(self.credentials)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
            keepalive_timeout=options.timeouts.idle,
            **aiohttpserving.handler_options(),
        )
        await self._runner.setup()
        assert self._runner.server is not None
        self._serve_connection = self._watchdog.protocol_factory(
            self._runner.server, small_requests(handlers, authenticator)
        )
        self._ssl_context = ssl_context
        self._loop = asyncio.get_running_loop()
        self._listener = await asyncio.get_running_loop().create_server(
            self._serve_connection,
            sock=sock,
            ssl=ssl_context,
            ssl_handshake_timeout=options.timeouts.header if ssl_context is not None else None,
            backlog=512,
        )
        self._watchdog.start()
        if front_end_of is not None:
            return  # the owning server writes the kubeconfig and runs what a cluster runs once

        if options.kubeconfig is not None:
            self.kubeconfig_path = options.kubeconfig
        elif data_dir is not None:
            self.kubeconfig_path = data_dir / "kubeconfig"
        else:
            self._tempdir = tempfile.TemporaryDirectory(prefix="kubeloop-")
            self.kubeconfig_path = pathlib.Path(self._tempdir.name) / "kubeconfig"
        admin_cert = certs.issue_client_certificate(self.credentials, "kubeloop-admin", ["system:masters"])
        kubeconfig.write_kubeconfig(
            self.kubeconfig_path,
            server_url=self.url,
            ca_pem=self.credentials.ca_cert_pem,
            token=self.credentials.admin_token,
            client_cert=admin_cert,
        )
        self._background.append(asyncio.create_task(self._compact_forever(), name="kubeloop-compaction"))
        self._background.append(asyncio.create_task(self._probe_storage(), name="kubeloop-storage-probe"))
        if options.controllers:
            # Loaded here: a front-end, or a server without controllers, never needs them.
            from kubeloop.controllermanager.controllermanager import ControllerManager

            # Over the loopback dial, in plain HTTP: the server's own controllers make no TLS
            # handshake (an in-process server started ~130 connections, half its start's CPU).
            self._controllers = ControllerManager(
                urlunsplit(("http", urlsplit(self.url).netloc, "", "", "")),
                ca_pem=None,
                token=controllers_token,
                root_ca_pem=self.credentials.ca_cert_pem if options.namespace_defaults else None,
                simulation=self._simulation() if options.simulate else None,
                dial=self._dial_loopback,
            )
            await self._controllers.start()
        if self._front_ends is not None:
            await self._front_ends.start(self)

    @property
    def front_end_pids(self) -> list[int]:
        """The front-end processes serving this server's port beside it (``workers``)."""
        return self._front_ends.pids if self._front_ends is not None else []

    def _simulation(self) -> SimulationOptions:
        """The simulation's options, the local pods' folders in the data directory (if any)."""
        simulation = self.options.simulation
        data_dir = self.data_dir
        if simulation.pods_dir is None and data_dir is not None:
            simulation = replace(simulation, pods_dir=data_dir / "pods")
        return simulation

    def _process_node(self) -> ProcessNode | None:
        """The process node, when it runs."""
        kubelet = self._controllers.kubelet if self._controllers is not None else None
        return kubelet.processes if kubelet is not None else None

    async def dial(self) -> socket.socket:
        """A new connection to this server that never leaves the process: one end of a socket
        pair, whose other end the server serves as a connection it accepted (TLS as the
        listener's), on the server's own loop (a client may run on another thread's). Give it to
        a client as ``ClientConfig.dial``."""
        loop = self._loop
        if self._serve_connection is None or loop is None:
            raise RuntimeError("the API server is not running")
        return await _served_pair(loop, self._accept)

    async def _dial_loopback(self) -> socket.socket:
        """A plain-HTTP connection to this server that never leaves the process, for its own
        controllers (kube-apiserver's loopback client): its other end is served as an accepted
        connection, without TLS, on the server's loop."""
        loop, serve = self._loop, self._serve_connection
        if serve is None or loop is None:
            raise RuntimeError("the API server is not running")

        async def accept(sock: socket.socket) -> None:
            await loop.connect_accepted_socket(serve, sock)

        return await _served_pair(loop, accept)

    async def _accept(self, sock: socket.socket) -> None:
        assert self._serve_connection is not None
        loop = asyncio.get_running_loop()
        if self._ssl_context is None:
            await loop.connect_accepted_socket(self._serve_connection, sock)
            return
        # The handshake needs the client, which connects once dial() returns.
        handshake = asyncio.create_task(
            loop.connect_accepted_socket(
                self._serve_connection,
                sock,
                ssl=self._ssl_context,
                ssl_handshake_timeout=self.options.timeouts.header,
            ),
            name="kubeloop dialed handshake",
        )
        self._handshakes.add(handshake)
        handshake.add_done_callback(_handshake_done(self._handshakes, sock))

    async def _bootstrap(self) -> None:
        """What a cluster starts with, created where absent: the default namespaces, the
        bootstrap cluster roles and bindings, and the system priority classes."""
        assert self.registry is not None
        namespaces: list[Obj] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in BOOTSTRAP_NAMESPACES
        ]
        for plural, group, objects in (
            ("namespaces", "", namespaces),
            ("clusterroles", "rbac.authorization.k8s.io", bootstrap.cluster_roles()),
            ("clusterrolebindings", "rbac.authorization.k8s.io", bootstrap.cluster_role_bindings()),
            ("priorityclasses", "scheduling.k8s.io", bootstrap.priority_classes()),
        ):
            resource = self.catalog.lookup(group, "v1", plural)
            assert resource is not None
            for obj in objects:
                if self.registry.store.get(resource.key(None, str(obj["metadata"]["name"]))) is None:
                    await self.registry.create(resource, None, obj, WriteOptions())

    async def _publish_kubernetes_service(self, address: str, port: int) -> None:
        """The ``kubernetes`` Service, and its Endpoints and EndpointSlice pointing at where the
        server listens now: written again at every start (the port may differ). A failed write
        is logged and leaves the old ones; the server starts anyway (its storage may be full)."""
        assert self.registry is not None
        namespace, name = kubernetesservice.NAMESPACE, kubernetesservice.NAME
        for group, plural, obj in (
            ("", "services", kubernetesservice.service(port)),
            ("", "endpoints", kubernetesservice.endpoints(address, port)),
            ("discovery.k8s.io", "endpointslices", kubernetesservice.endpoint_slice(address, port)),
        ):
            resource = self.catalog.lookup(group, "v1", plural)
            assert resource is not None
            current = self.registry.store.get(resource.key(namespace, name))
            try:
                if current is None:
                    await self.registry.create(resource, namespace, obj, WriteOptions())
                    continue
                # The published fields over what is stored (a Service keeps its allocated IPs).
                updated = {**current.obj, **{k: v for k, v in obj.items() if k != "metadata"}}
                if plural == "services":
                    updated["spec"] = {**(current.obj.get("spec") or {}), "ports": obj["spec"]["ports"]}
                if updated != current.obj:
                    await self.registry.update(resource, namespace, name, updated, WriteOptions())
            except (errors.APIError, StorageError) as failed:
                log.warning("could not publish %s %s/%s: %s", plural, namespace, name, failed)

    async def _compact_forever(self) -> None:
        """kube-apiserver's compactor: every interval, forget history up to the revision the
        previous round saw; in between, compact the log at once when dropped history passes its
        byte bound."""
        store = self._object_store
        assert store is not None
        loop = asyncio.get_running_loop()
        interval = self.options.compaction_interval
        seen = store.revision
        next_round = loop.time() + interval
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(store.compaction_due.wait(), max(0.0, next_round - loop.time()))
            if loop.time() >= next_round:
                store.compact_history(seen)
                seen = store.revision
                next_round = loop.time() + interval
            try:
                await store.compact()
            except StorageError as error:
                log.warning("compaction failed: %s", error.message)
            except Exception:
                log.exception("compaction failed")

    async def _probe_storage(self) -> None:
        """While the last write failed, try a small write now and then: /readyz turns ok again (and
        stays failing) by what the storage does, not only when a client happens to write."""
        store = self._object_store
        assert store is not None
        while True:
            await asyncio.sleep(self.options.storage_probe_interval)
            if store.storage_error is None:
                continue
            try:
                await store.probe()
            except StorageError:
                continue
            log.info("storage accepts writes again")

    def component_health(self) -> list[tuple[str, str | None]]:
        """The cluster's components and what ails each (None: healthy), as ComponentStatus
        reports them: the control loops (controller-manager), the simulated scheduler and the
        storage (etcd-0). A front-end reports the owner's control loops, which run there when
        the options (the owner's) say so, while the owner feeds this process."""
        if self._front_end_of is None:
            loops = None if self._controllers is not None else "the control loops are off"
        elif not self.options.controllers:
            loops = "the control loops are off"
        else:
            loops = self.readiness()  # the owner, which runs them, cannot be reached
        scheduler = loops if self.options.simulate else "no scheduler runs (simulation is off)"
        return [
            ("scheduler", scheduler),
            ("controller-manager", loops),
            ("etcd-0", self.readiness()),
        ]

    def readiness(self) -> str | None:
        """Why the server is not ready (None: ready): its storage cannot write."""
        if self.store is not None and self.store.storage_error is not None:
            return f"storage: {self.store.storage_error.message}"
        return None

    async def stop(self) -> None:
        if self._front_ends is not None:
            await self._front_ends.stop()
            self._front_ends = None
        if self._node_endpoint is not None:
            await self._node_endpoint.stop()
            self._node_endpoint = None
        if self._controllers is not None:
            await self._controllers.stop()
            self._controllers = None
        if self.store is not None:
            self.store.close_all_watchers()
        if self._crds is not None:
            await self._crds.stop()
            self._crds = None
        if self._policy_status is not None:
            await self._policy_status.stop()
            self._policy_status = None
        await cancel_and_wait(self._background)
        self._background.clear()
        self._store_service = None
        await cancel_and_wait(list(self._store_connections))
        if self._feed is not None:
            await self._feed.close()
            self._feed = None
        await cancel_and_wait(list(self._handshakes))
        self._serve_connection = self._loop = None
        if self._listener is not None:
            self._listener.close()
        if self._watchdog is not None:
            await self._watchdog.stop()
            self._watchdog = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._webhooks is not None:
            self._webhooks.caller.close()
            self._webhooks = None
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None
        if self._worker is not None:
            await self._worker.stop()
            self._worker = None
        if isinstance(self.store, RemoteStore):  # once no request can ask it anything
            await self.store.close()
        if self._audit_log is not None:
            await self._audit_log.stop()
            self._audit_log = None
        if self._log is not None:
            await self._log.close()
            self._log = None
        if self._data_dir is not None:
            self._data_dir.close()
            self._data_dir = None
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None


async def _served_pair(
    loop: asyncio.AbstractEventLoop, serve: Callable[[socket.socket], Coroutine[Any, Any, None]]
) -> socket.socket:
    """One end of a new socket pair whose other end ``serve`` takes, on ``loop`` (the server's;
    the caller may run on another thread's)."""
    ours, theirs = socket.socketpair()
    try:
        if asyncio.get_running_loop() is loop:
            await serve(ours)
        else:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(serve(ours), loop))
    except BaseException:
        ours.close()
        theirs.close()
        raise
    return theirs


def _handshake_done(
    handshakes: set[asyncio.Task[object]], sock: socket.socket
) -> Callable[[asyncio.Task[object]], None]:
    """Forget a dialed connection's handshake; a failed one (the client gave up) closes it."""

    def done(task: asyncio.Task[object]) -> None:
        handshakes.discard(task)
        if task.cancelled() or task.exception() is not None:
            sock.close()

    return done
