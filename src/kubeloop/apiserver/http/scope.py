"""What the request handlers serve from (upstream's ``handlers.RequestScope``): the registry, the
catalog, the watch settings, the worker loop for large writes, the authorizer, the token issuer
and reviewer, the health of the cluster's components, the auditor; and the :class:`Target` a path names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.apiserver.auth import reviews
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.auth.tokens import ServiceAccountTokens
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.http.auditing import Auditor
from kubeloop.apiserver.http.nodestreams import NodeStreamRelay
from kubeloop.apiserver.http.watchstream import WatchSettings
from kubeloop.apiserver.http.workerloop import WorkerLoop
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.node.sessions import ProcessNode


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


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
        node_relay: NodeStreamRelay | None = None,
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
        #: A front-end's way to the node, which runs in the server that owns the store: pods'
        #: logs, exec, attach and port-forwards go there (None: served here, on ``node``).
        self.node_relay = node_relay
