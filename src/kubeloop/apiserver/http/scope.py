"""What the request handlers serve from (upstream's ``handlers.RequestScope``): the registry, the
catalog, the watch settings, the worker loop for large writes, the authorizer, the token issuer
and reviewer, the health of the cluster's components, the auditor; and the :class:`Target` a path names.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubeloop.api.object import Obj
from kubeloop.apiserver.auth import reviews
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.auth.tokens import ServiceAccountTokens
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.http.auditing import Auditor
from kubeloop.apiserver.http.watchstream import WatchSettings
from kubeloop.apiserver.http.workerloop import WorkerLoop
from kubeloop.apiserver.registry.generic import Registry


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


class CommandRefused(Exception):
    """A command the node will not run in a container (not running, not allowed): its message
    says why."""


class CommandFailed(Exception):
    """A command that could not start in its container: its message says why."""


class ExecSession(Protocol):
    """A command to run in a container: once started, its process, and with a terminal, the
    terminal's controlling side (the process's streams are then the terminal)."""

    terminal: int | None

    @property
    def process(self) -> asyncio.subprocess.Process: ...

    async def start(self, width: int = 0, height: int = 0) -> None:
        """Start the command (with a terminal, of that size; CommandFailed: why it could not)."""
        ...

    def resize(self, width: int, height: int) -> None: ...

    async def write(self, data: bytes) -> None:
        """Input for the command (waits while it takes none)."""
        ...

    async def end_input(self) -> None:
        """The client's input has ended."""
        ...

    def kill(self) -> None: ...

    def close(self) -> None: ...


#: The stream name of the item that tells an attached client it fell too far behind.
TOO_SLOW = "too-slow"


class AttachSession(Protocol):
    """A running container's process to attach to: its output from now on, as (stream, chunk)
    with ("", b"") at the end; its stdin; its terminal's size (``tty``)."""

    tty: bool

    def listen(self) -> asyncio.Queue[tuple[str, bytes]]: ...

    def leave(self, queue: asyncio.Queue[tuple[str, bytes]], *, had_stdin: bool) -> None: ...

    async def write(self, data: bytes) -> None: ...

    def input_ended(self) -> None:
        """The attached client's input has ended (with ``stdinOnce``, so has the container's)."""
        ...

    def resize(self, width: int, height: int) -> None: ...


class ProcessNode(Protocol):
    """What the node that runs pods' processes (the process node's runtime) offers requests:
    its containers' logs, and commands run in them."""

    def log_file(
        self, namespace: str, name: str, uid: str, container: str, *, previous: bool = False
    ) -> pathlib.Path | None: ...

    def running(self, namespace: str, name: str, uid: str, container: str) -> bool: ...

    async def exec_in(
        self, pod: Obj, container_name: str, command: list[str], *, stdin: bool, tty: bool
    ) -> ExecSession:
        """``command``, ready to start in the container (CommandRefused: why the node will
        not run it)."""
        ...

    def address_of(self, pod: Obj) -> str:
        """Where the pod's processes listen (CommandRefused: it runs none here)."""
        ...

    def attach_to(self, pod: Obj, container_name: str) -> AttachSession:
        """The running container's process, to attach to (CommandRefused: not running here)."""
        ...


class Scope:
    """The server's parts a request is served with (``APIHandlers`` is one)."""

    def __init__(
        self,
        reg: Registry,
        catalog: ResourceCatalog,
        *,
        watch_settings: WatchSettings,
        server_address: str,
        readiness: Callable[[], str | None] = lambda: None,
        worker: WorkerLoop | None = None,
        extra_definitions: Callable[[], Mapping[str, Any]] = dict,
        authorizer: RBACAuthorizer | None = None,
        tokens: ServiceAccountTokens | None = None,
        token_reviewer: reviews.TokenReviewer | None = None,
        components: Callable[[], list[tuple[str, str | None]]] = list,
        auditor: Auditor | None = None,
        node: Callable[[], ProcessNode | None] = lambda: None,
    ) -> None:
        self.registry = reg
        self.catalog = catalog
        self.watch_settings = watch_settings
        self.server_address = server_address
        #: Why the server cannot serve writes now (its storage fails), or None.
        self.readiness = readiness
        #: Where large write requests do their CPU work (None: on the serving loop).
        self.worker = worker
        #: The OpenAPI definitions of the custom resources served now.
        self.extra_definitions = extra_definitions
        #: Who may do what on resource paths (None: every authenticated user may do everything).
        self.authorizer = authorizer
        #: Issues ServiceAccount tokens (serviceaccounts/token); None: the subresource answers 404.
        self.tokens = tokens
        #: Judges the tokens of TokenReviews (None: every token is unauthenticated).
        self.token_reviewer = token_reviewer
        #: The cluster's components and what ails each (None: healthy), for ComponentStatus.
        self.components = components
        #: Records requests in the audit log (None: no audit log).
        self.auditor = auditor
        #: Where the node keeps its containers' logs (None: no container writes one).
        self.node = node
