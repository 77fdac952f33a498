"""ServiceAccount tokens: issued by TokenRequest (`kubectl create token`), verified on every request.

A token is a JWT (ES256) signed with the cluster CA's key — upstream signs with a key of its own
for service accounts — whose claims are upstream's: ``iss``, ``sub``
(``system:serviceaccount:<namespace>:<name>``), ``aud``, ``iat``/``nbf``/``exp`` and
``kubernetes.io`` (namespace and the account's name and uid). It is bound to the account: once
the account is deleted, or replaced by another of the same name, the token no longer
authenticates. Its user is in the groups ``system:serviceaccounts`` and
``system:serviceaccounts:<namespace>``.

Verifying a token's signature costs ~65 µs, more than the rest of a request: a token that
authenticated is taken again without it for :data:`SUCCESS_CACHE_SECONDS` (kube-apiserver
caches token successes 10 s, failures not at all), never past its expiry, and forgotten as
soon as a ServiceAccount or an object tokens are bound to is deleted
(:meth:`ServiceAccountTokens.forget_authenticated`), where kube-apiserver's cache lets the
token work until its entry expires.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.auth.rbacauthorizer import service_account_user
from kubeloop.apiserver.userinfo import UserInfo

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = ISSUER
#: kube-apiserver's default and its bounds for expirationSeconds.
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600
#: The longest a token is issued for (kube-apiserver's ``--service-account-max-token-expiration``,
#: which clusters set to a day or two): a longer request gets this many seconds.
DEFAULT_MAX_EXPIRATION_SECONDS = 48 * 3600
#: Looks up a ServiceAccount's uid by namespace and name (None: there is none).
AccountUid = Callable[[str, str], str | None]
#: Looks up an object's uid by resource ("pods", "secrets", "nodes"), namespace and name.
ObjectUid = Callable[[str, str, str], str | None]
#: The kinds a token may be bound to, as kube-apiserver binds them: kind → (resource, claim).
BOUND_KINDS = {"Pod": ("pods", "pod"), "Secret": ("secrets", "secret"), "Node": ("nodes", "node")}
#: How long a token that authenticated is taken again without verifying it (kube-apiserver's
#: ``TokenSuccessCacheTTL``), and how many such tokens are kept (the oldest goes first).
SUCCESS_CACHE_SECONDS = 10.0
SUCCESS_CACHE_SIZE = 4096


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ServiceAccountTokens:
    """Issues and verifies ServiceAccount tokens with ``key_pem`` (an EC P-256 private key)."""

    def __init__(
        self,
        key_pem: bytes,
        account_uid: AccountUid,
        object_uid: ObjectUid | None = None,
        *,
        max_expiration_seconds: int = DEFAULT_MAX_EXPIRATION_SECONDS,
    ) -> None:
        """``object_uid`` finds the object a bound token is bound to (none: tokens cannot be
        bound); ``max_expiration_seconds`` caps what a TokenRequest may ask for."""
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("service account tokens need an EC key")
        self._key = key
        self._public = key.public_key()
        self._account_uid = account_uid
        self.object_uid = object_uid
        self.max_expiration_seconds = max_expiration_seconds
        #: SHA-256 of a token that authenticated → its user and until when (monotonic) that holds.
        self._authenticated: dict[bytes, tuple[UserInfo, float]] = {}

    def issue(
        self,
        namespace: str,
        name: str,
        uid: str,
        audiences: list[str],
        expiration_seconds: int,
        bound: tuple[str, str, str] | None = None,
    ) -> tuple[str, int]:
        """A token for the account and when it expires (Unix seconds); ``bound`` (kind, name,
        uid) binds it to an object whose deletion ends it."""
        now = int(time.time())
        expires = now + expiration_seconds
        binding: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}}
        if bound is not None:
            kind, bound_name, bound_uid = bound
            binding[BOUND_KINDS[kind][1]] = {"name": bound_name, "uid": bound_uid}
        claims: dict[str, Any] = {
            "aud": audiences or [AUDIENCE],
            "exp": expires,
            "iat": now,
            "iss": ISSUER,
            "nbf": now,
            "sub": service_account_user(namespace, name),
            "kubernetes.io": binding,
        }
        header = _b64(orjson.dumps({"alg": "ES256", "typ": "JWT"}))
        payload = _b64(orjson.dumps(claims))
        r, s = decode_dss_signature(self._key.sign(f"{header}.{payload}".encode(), ec.ECDSA(hashes.SHA256())))
        signature = _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
        return f"{header}.{payload}.{signature}", expires

    def authenticate(self, token: str) -> UserInfo | None:
        """The account a valid, unexpired token for the API server (its audience) of a still
        existing account stands for; a success is reused for a while (see the module docs)."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = time.monotonic()
        known = self._authenticated.get(digest)
        if known is not None:
            if now < known[1]:
                return known[0]
            del self._authenticated[digest]
        verified = self._verified(token)
        if verified is None or AUDIENCE not in verified[1]:
            return None
        user, _, expires = verified
        authenticated = self._authenticated
        if len(authenticated) >= SUCCESS_CACHE_SIZE:
            del authenticated[next(iter(authenticated))]
        authenticated[digest] = (user, now + min(SUCCESS_CACHE_SECONDS, expires - time.time()))
        return user

    def forget_authenticated(self, new: Obj | None, old: Obj | None) -> None:
        """A commit listener for ServiceAccounts and the kinds tokens are bound to: a deletion
        ends the reuse of every token's success, so that no token of a deleted account or
        object authenticates again."""
        if new is None:
            self._authenticated.clear()

    def verify(self, token: str) -> tuple[UserInfo, list[str]] | None:
        """The account a valid, unexpired token of a still existing account stands for, and the
        audiences the token is for."""
        verified = self._verified(token)
        return None if verified is None else verified[:2]

    def _verified(self, token: str) -> tuple[UserInfo, list[str], int] | None:
        """``verify``'s answer and when the token expires (Unix seconds)."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            signature = _unb64(parts[2])
            if len(signature) != 64:
                return None
            der = encode_dss_signature(
                int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            )
            self._public.verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
            claims = orjson.loads(_unb64(parts[1]))
        except (ValueError, InvalidSignature, orjson.JSONDecodeError):
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        now = time.time()
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= now or claims.get("nbf", 0) > now + 60:
            return None
        binding: Obj = claims.get("kubernetes.io") or {}
        namespace = str(binding.get("namespace") or "")
        account = binding.get("serviceaccount") or {}
        name, uid = str(account.get("name") or ""), str(account.get("uid") or "")
        if not namespace or not name or self._account_uid(namespace, name) != uid:
            return None  # the account is gone, or is another one now
        for kind, (resource, claim) in BOUND_KINDS.items():
            bound = binding.get(claim)
            if not isinstance(bound, dict):
                continue
            where = "" if kind == "Node" else namespace
            found = (
                self.object_uid(resource, where, str(bound.get("name") or "")) if self.object_uid else None
            )
            if found is None or found != bound.get("uid"):
                return None  # the object the token was bound to is gone (or another one now)
        audiences = claims.get("aud")
        if isinstance(audiences, str):
            audiences = [audiences]
        user = UserInfo(
            service_account_user(namespace, name),
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        )
        return user, [str(a) for a in audiences or ()], claims["exp"]


def review_token(
    tokens: ServiceAccountTokens, static: Callable[[str], UserInfo | None], token: str, audiences: list[str]
) -> tuple[UserInfo, list[str]] | None:
    """A TokenReview's verdict: the user ``token`` stands for and the ``audiences`` (the API
    server's when none are asked for) it is valid for, or None. Tokens that carry no audience
    (``static`` ones: the kubeconfig's) are valid for the API server's audience only, as upstream
    treats audience-unaware authenticators."""
    wanted = audiences or [AUDIENCE]
    verified = tokens.verify(token)
    if verified is not None:
        user, valid_for = verified
    else:
        found = static(token)
        if found is None:
            return None
        user, valid_for = found, [AUDIENCE]
    both = [audience for audience in wanted if audience in valid_for]
    return (user, both) if both else None


def token_request(tokens: ServiceAccountTokens, body: Obj, account: Obj) -> Obj:
    """The answered TokenRequest ``body`` for ``account`` (a stored ServiceAccount)."""
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    seconds = spec.get("expirationSeconds")
    if seconds is None:
        seconds = DEFAULT_EXPIRATION_SECONDS
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < MIN_EXPIRATION_SECONDS:
        raise errors.invalid(
            "authentication.k8s.io",
            "TokenRequest",
            "",
            [
                errors.StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {orjson.dumps(seconds).decode()}: may not specify a duration less than 10 minutes",
                    "spec.expirationSeconds",
                )
            ],
        )
    seconds = min(seconds, tokens.max_expiration_seconds)  # as --service-account-max-token-expiration
    audiences = [str(a) for a in spec.get("audiences") or () if a] or [AUDIENCE]
    meta = account.get("metadata") or {}
    namespace, name, uid = str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid"))
    bound_ref, bound = _bound_object(tokens, spec.get("boundObjectRef"), namespace)
    token, expires = tokens.issue(namespace, name, uid, audiences, seconds, bound)
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": bound_ref,
        },
        "status": {
            "token": token,
            "expirationTimestamp": timestamps.format_time(datetime.fromtimestamp(expires, UTC)),
        },
    }


def _bound_object(
    tokens: ServiceAccountTokens, ref: Any, namespace: str
) -> tuple[Obj | None, tuple[str, str, str] | None]:
    """The TokenRequest's ``boundObjectRef`` with the object's uid, and the binding; as
    kube-apiserver: a Pod, Secret or Node that exists (of the uid given, if one is)."""
    if not ref:
        return None, None
    if not isinstance(ref, dict):
        raise errors.BadRequest("spec.boundObjectRef must be an object")
    kind, api_version, name = (
        str(ref.get("kind") or ""),
        str(ref.get("apiVersion") or ""),
        str(ref.get("name") or ""),
    )
    if kind not in BOUND_KINDS or api_version != "v1" or tokens.object_uid is None:
        raise errors.BadRequest(f"cannot bind token to object of type {api_version}, Kind={kind}")
    resource = BOUND_KINDS[kind][0]
    found = tokens.object_uid(resource, "" if kind == "Node" else namespace, name)
    if found is None:
        raise errors.NotFound(f'{resource} "{name}" not found')
    wanted = str(ref.get("uid") or "")
    if wanted and wanted != found:
        raise errors.Conflict(
            f'Operation cannot be fulfilled on {kind} "{name}": the UID in the bound object reference '
            f"({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
        )
    return {**ref, "uid": found}, (kind, name, found)
