"""Authentication the way kube-apiserver does it: bearer tokens and verified client certificates.

Where it sits in the flow: ``kubectl`` → TLS (certs.py) → **authentication (this module)** →
API handlers. Every request but the health probes must carry ``Authorization: Bearer <token>``
with a known token, or a client certificate the TLS layer verified against the server's CA
(subject CN = user name, each O = a group, as kube-apiserver's x509 authenticator reads it).
Anything else gets the Kubernetes ``Status`` 401 that kubectl reports as
"You must be logged in to the server (Unauthorized)".
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar

from aiohttp import web

from kubeloop import errors
from kubeloop.apiserver.auth.impersonation import GROUP_HEADER, USER_HEADER, impersonated
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.userinfo import UserInfo

AUTHENTICATED_GROUP = "system:authenticated"
R = TypeVar("R", bound=HTTPRequest)


#: Where auth_middleware keeps the authenticated user on the request.
USER = web.RequestKey("user", UserInfo)
#: Who authenticated, when the request runs as someone they impersonate.
IMPERSONATOR = web.RequestKey("impersonator", UserInfo)


def _with_authenticated_group(user: UserInfo) -> UserInfo:
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, (*user.groups, AUTHENTICATED_GROUP))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class Authenticator:
    """Maps a request to a user: a known bearer token first, else a verified client certificate.

    Tokens are looked up by their SHA-256 digest and then compared in constant time, so
    neither the lookup nor the comparison reveals how much of a guess was right.
    """

    def __init__(
        self, tokens: Mapping[str, UserInfo], *, verify: Callable[[str], UserInfo | None] | None = None
    ) -> None:
        #: Judges a bearer token that is none of ``tokens`` (ServiceAccount tokens).
        self._verify = verify
        self._tokens: dict[bytes, tuple[bytes, UserInfo]] = {}
        for token, user in tokens.items():
            if not token:
                raise ValueError("an empty token would authenticate anyone")
            digest = _digest(token)
            self._tokens[digest] = (digest, _with_authenticated_group(user))

    def authenticate(self, request: HTTPRequest) -> UserInfo | None:
        user = self.authenticate_token(request.headers.get("Authorization", ""))
        if user is not None:
            return user
        transport = request.transport
        if transport is None:
            return None
        return user_from_peercert(transport.get_extra_info("peercert"))

    def authenticate_token(self, authorization: str) -> UserInfo | None:
        """``Authorization`` header value → user, as client-go's bearer token authenticator parses it."""
        parts = authorization.strip().split(" ", 2)
        if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
            return None
        digest = _digest(parts[1])
        found = self._tokens.get(digest)
        if found is None:
            return self._verify(parts[1]) if self._verify is not None else None
        expected, user = found
        return user if hmac.compare_digest(expected, digest) else None


def user_from_peercert(peercert: Any) -> UserInfo | None:
    """The user named by a verified client certificate (``SSLObject.getpeercert()`` form).

    With ``CERT_OPTIONAL`` the TLS layer only hands over certificates that verified against
    the CA (an unverifiable one fails the handshake); no certificate gives None or ``{}``.
    """
    if not isinstance(peercert, dict) or not peercert:
        return None
    common_name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for attribute in rdn:
            if len(attribute) != 2:
                continue
            key, value = attribute
            if key == "commonName" and not common_name:
                common_name = str(value)
            elif key == "organizationName":
                groups.append(str(value))
    if not common_name:
        return None
    return _with_authenticated_group(UserInfo(common_name, tuple(groups)))


def current_user(request: HTTPRequest) -> UserInfo | None:
    """The user auth_middleware authenticated for ``request`` (None on an anonymous public path)."""
    user = request.get(USER)
    return user if isinstance(user, UserInfo) else None


def unauthorized_response() -> web.Response:
    return web.Response(
        status=401,
        body=errors.Unauthorized("Unauthorized").to_json(),
        content_type="application/json",
    )


class AuthMiddleware(Protocol):
    """:func:`auth_middleware`'s middleware, for aiohttp's requests and small ones alike."""

    async def __call__(
        self, request: R, handler: Callable[[R], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse: ...


def auth_middleware(
    authenticator: Authenticator,
    *,
    public_paths: Collection[str] = ("/healthz", "/livez", "/readyz"),
    authorizer: RBACAuthorizer | None = None,
    on_unauthenticated: Callable[[HTTPRequest], None] | None = None,
) -> AuthMiddleware:
    """An aiohttp middleware (also called directly for small requests): sets ``request[USER]`` for authenticated requests and answers
    401 (Kubernetes Status) to unauthenticated ones outside ``public_paths``.

    A request to a public path (or below it: ``/livez/ping``) is served whether or not it
    authenticates; ``request[USER]`` is set only when it does. With ``authorizer``, a request
    that impersonates (``Impersonate-User``/``-Group``) runs as whom it asks, if allowed to.
    ``on_unauthenticated`` hears of each request answered 401 (the audit log).
    """
    public = frozenset(public_paths)
    public_prefixes = tuple(path.rstrip("/") + "/" for path in public)

    @web.middleware
    async def middleware(
        request: R, handler: Callable[[R], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        user = authenticator.authenticate(request)
        if user is None:
            path = request.path
            if path in public or path.startswith(public_prefixes):
                return await handler(request)
            if on_unauthenticated is not None:
                on_unauthenticated(request)
            return unauthorized_response()
        if authorizer is not None and (USER_HEADER in request.headers or GROUP_HEADER in request.headers):
            requester = user
            user = impersonated(
                user, request.headers.get(USER_HEADER), request.headers.getall(GROUP_HEADER, []), authorizer
            )
            if user is not requester:
                request[IMPERSONATOR] = requester
        request[USER] = user
        return await handler(request)

    return middleware
