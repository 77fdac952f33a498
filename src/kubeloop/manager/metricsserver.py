"""The manager's metrics server, plain or secure (controller-runtime's ``pkg/metrics/server``
and ``pkg/metrics/filters``).

:class:`MetricsServerOptions` says where ``/metrics`` is served and how. With
``secure_serving`` it is HTTPS only: the certificate of ``cert_dir`` (``cert_name``,
``key_name``), reloaded when the files change, or one made in memory for the process. A
``filter_provider`` judges each request before it is answered; the one an operator deployed
on a cluster wants is :data:`with_authentication_and_authorization`, kubebuilder v4's
default: the caller's bearer token is checked by a TokenReview and its user authorized by a
SubjectAccessReview for the non-resource URL (``get /metrics``), both asked of the API server
the manager talks to, both answers cached a while (a minute for a token; five minutes for an
allow, thirty seconds for a denial), as controller-runtime's filter does. Without a token, or
with one the server does not take: 401; a user the server does not allow: 403; the API server
failing to answer: 500. The operator needs ``create`` on tokenreviews and subjectaccessreviews
(``kubeloop rbac`` lists them); a scraper needs a ClusterRole with the rule
``nonResourceURLs: [/metrics], verbs: [get]``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kubeloop import errors

if TYPE_CHECKING:
    from aiohttp import web

    from kubeloop.client.rest import APIClient

#: How long a review may take before the request is answered 500 (controller-runtime's
#: TokenAccessReviewTimeout).
REVIEW_SECONDS = 10.0
#: Judges a request to the metrics server: None lets it through; a response answers it instead.
MetricsFilter = Callable[["web.Request"], Awaitable["web.Response | None"]]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class MetricsServerOptions:
    """Where and how the manager serves ``/metrics`` (controller-runtime's ``server.Options``)."""

    #: "host:port" (":8080" every interface; port 0 a free one); "0" or "": no metrics server.
    bind_address: str = "0"
    #: HTTPS only, with the certificate of ``cert_dir`` or one made for the process.
    secure_serving: bool = False
    #: A directory holding ``cert_name`` and ``key_name`` (reloaded when they change).
    cert_dir: str | None = None
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    #: Makes the filter every request passes first, given the manager's API client (None:
    #: every caller is answered).
    filter_provider: FilterProvider | None = None
    #: More GET endpoints by path, served beside ``/metrics`` behind the same filter
    #: (controller-runtime's ``ExtraHandlers``): ``debug_handlers()``, say.
    extra_handlers: Mapping[str, Callable[[web.Request], Awaitable[web.Response]]] = field(default_factory=dict)

    @property
    def serves(self) -> bool:
        """Whether metrics are served at all (``bind_address`` "0" or "" turns them off)."""
        return self.bind_address not in ("", "0")


#: Makes the filter for a manager's API client. A provider with a ``permissions`` attribute
#: ((group, resource, verb), ...) names what the operator must be allowed for it; the manager
#: adds them to what ``kubeloop rbac`` prints.
FilterProvider = Callable[["APIClient"], MetricsFilter]


class AuthenticationAndAuthorization:
    """TokenReview, then SubjectAccessReview, cached (controller-runtime's
    ``filters.WithAuthenticationAndAuthorization``)."""

    permissions = (
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    )

    def __init__(
        self,
        *,
        authentication_ttl: float = 60.0,
        allow_ttl: float = 300.0,
        deny_ttl: float = 30.0,
        capacity: int = 4096,
    ) -> None:
        self.authentication_ttl = authentication_ttl
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.capacity = capacity

    def __call__(self, client: APIClient) -> MetricsFilter:
        return _DelegatedAuth(client, self)


#: The filter provider of kubebuilder v4's secure metrics.
with_authentication_and_authorization = AuthenticationAndAuthorization()


class _ExpiringCache(Generic[K, V]):
    """At most ``capacity`` answers, each kept for the time it was put with (least recently
    used first out): a flood of distinct tokens holds bounded memory."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> tuple[bool, V | None]:
        found = self._entries.get(key)
        if found is None or found[0] <= time.monotonic():
            self._entries.pop(key, None)
            return False, None
        self._entries.move_to_end(key)
        return True, found[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries[key] = (time.monotonic() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


class _DelegatedAuth:
    """The filter: who the bearer token is, and whether they may ``<verb> <path>``."""

    def __init__(self, client: APIClient, settings: AuthenticationAndAuthorization) -> None:
        self.client = client
        self.settings = settings
        self._users: _ExpiringCache[str, dict[str, Any] | None] = _ExpiringCache(settings.capacity)
        self._decisions: _ExpiringCache[tuple[str, str, str], bool] = _ExpiringCache(settings.capacity)

    async def __call__(self, request: web.Request) -> web.Response | None:
        from aiohttp import web

        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        try:
            async with asyncio.timeout(REVIEW_SECONDS):
                user = await self._authenticate(token) if token else None
        except (errors.APIError, OSError, TimeoutError):
            return web.Response(status=500, text="Authentication failed\n")
        if user is None:
            return web.Response(status=401, text="Unauthorized\n", headers={"WWW-Authenticate": "Bearer"})
        name = str(user.get("username") or "")
        try:
            async with asyncio.timeout(REVIEW_SECONDS):
                allowed = await self._authorize(user, request.method.lower(), request.path)
        except (errors.APIError, OSError, TimeoutError):
            return web.Response(status=500, text=f"Authorization for user {name} failed\n")
        if not allowed:
            return web.Response(status=403, text=f"Authorization denied for user {name}\n")
        return None

    async def _authenticate(self, token: str) -> dict[str, Any] | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached, user = self._users.get(key)
        if cached:
            return user
        review = await self.client.create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        )
        status = review.get("status") or {}
        found = status.get("user") if status.get("authenticated") else None
        user = found if isinstance(found, dict) and found.get("username") else None
        self._users.put(key, user, self.settings.authentication_ttl)
        return user

    async def _authorize(self, user: dict[str, Any], verb: str, path: str) -> bool:
        key = (hashlib.sha256(repr(sorted(user.items())).encode()).hexdigest(), verb, path)
        cached, decision = self._decisions.get(key)
        if cached:
            return bool(decision)
        spec: dict[str, Any] = {
            "user": user.get("username"),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = await self.client.create(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed, self.settings.allow_ttl if allowed else self.settings.deny_ttl)
        return allowed
