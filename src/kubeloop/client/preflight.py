"""Before an operator starts: can the server be reached, does it accept the credentials, and
may the operator do what its controllers need? Each answer that is no is one sentence naming
the server's URL and the cause, instead of informers retrying for ever in the background.

:func:`check_connection` asks ``/version`` once (no retries) and then who the credentials are
(a SelfSubjectReview, or ``/api`` where that is not served); :func:`check_permissions` asks a
SelfSubjectAccessReview for each verb the operator needs and returns what is refused;
:func:`unserved_kinds` names the kinds the server does not serve.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import ClientConfig
from kubeloop.client.credentials import CredentialError, TokenFileCredentials
from kubeloop.client.execplugin import ExecCredentials
from kubeloop.client.rest import APIClient
from kubeloop.client.restclient import RetryPolicy
from kubeloop.client.restmapper import NoKindMatch


class CannotUseCluster(Exception):
    """The server cannot be used as configured; the message says which and why."""


@dataclass(frozen=True)
class Needed:
    """One verb on one resource an operator needs."""

    verb: str
    group: str
    resource: str
    subresource: str = ""

    @property
    def resource_name(self) -> str:
        """``deployments.apps``, ``configmaps/status``: as kubectl names it."""
        name = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{name}/{self.subresource}" if self.subresource else name

    def __str__(self) -> str:
        return f"{self.verb} {self.resource_name}"


def connection_failure(server: str, error: BaseException) -> str:
    """``cannot reach <server>: <cause>`` in words a person reads."""
    cause: str
    if isinstance(error, ConnectionRefusedError):
        cause = "connection refused"
    elif isinstance(error, ssl.SSLCertVerificationError):
        cause = f"its certificate is not trusted ({error.verify_message})"
    elif isinstance(error, ssl.SSLError):
        cause = f"TLS failed ({error.reason or error})"
    elif isinstance(error, socket.gaierror):
        cause = "its host name does not resolve"
    elif isinstance(error, TimeoutError):
        cause = "no answer in time"
    elif isinstance(error, OSError) and error.strerror:
        cause = error.strerror[:1].lower() + error.strerror[1:]
    else:
        cause = str(error) or type(error).__name__
    return f"cannot reach {server}: {cause}"


async def _credentials(config: ClientConfig, source: str) -> str:
    """What the credentials are, for a sentence: ``the token in ~/.kube/config``."""
    if config.credentials is None:
        return f"anonymous requests (no credentials in {source})"
    if isinstance(config.credentials, ExecCredentials):
        return f"the credentials of the exec plugin in {source}"
    if isinstance(config.credentials, TokenFileCredentials):
        return f"the token file in {source}"
    try:
        presented = await config.credentials.get()
    except CredentialError:
        return f"the credentials in {source}"
    return f"the token in {source}" if presented.token else f"the client certificate in {source}"


async def check_connection(client: APIClient, *, source: str) -> str:
    """The user name the server knows the client as; CannotUseCluster when the server cannot
    be reached or refuses the credentials. ``source`` says where the configuration came from."""
    server = client.config.server
    patient, client.retry = client.retry, RetryPolicy(max_retries=0)
    try:
        try:
            await client.request("GET", "/version")
        except (OSError, TimeoutError) as error:
            raise CannotUseCluster(connection_failure(server, error)) from None
        except CredentialError as error:
            raise CannotUseCluster(f"no credentials for {server}: {error}") from None
        except errors.Unauthorized:
            pass  # /version needs authentication here: the review below says whose
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            _, body = await client.request(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                body=orjson.dumps(review),
                content_type="application/json",
            )
        except errors.Unauthorized:
            raise CannotUseCluster(
                f"{server} refused {await _credentials(client.config, source)} (401 Unauthorized)"
            ) from None
        except errors.NotFound:
            await client.request("GET", "/api")  # an older server: authentication alone
            return ""
        except (OSError, TimeoutError) as error:
            raise CannotUseCluster(connection_failure(server, error)) from None
        user = (orjson.loads(body).get("status") or {}).get("userInfo") or {}
        return str(user.get("username") or "")
    finally:
        client.retry = patient


async def unserved_kinds(client: APIClient, kinds: Iterable[GroupVersionKind]) -> list[str]:
    """One sentence for each of ``kinds`` the server does not serve (a CRD not installed, a
    misspelt kind: then with the served kind it was probably meant to be)."""
    missing: list[str] = []
    for gvk in dict.fromkeys(kinds):
        try:
            await client.mapping(gvk)
        except NoKindMatch as error:
            missing.append(str(error))
    return missing


async def check_permissions(
    client: APIClient, needed: Iterable[Needed], namespace: str | None
) -> list[Needed]:
    """What of ``needed`` the server refuses the client (in ``namespace``, or cluster-wide); the
    reviews are asked together."""

    async def allowed(need: Needed) -> bool:
        attributes = {"verb": need.verb, "group": need.group, "resource": need.resource}
        if need.subresource:
            attributes["subresource"] = need.subresource
        if namespace:
            attributes["namespace"] = namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        _, body = await client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=orjson.dumps(review),
            content_type="application/json",
        )
        return bool((orjson.loads(body).get("status") or {}).get("allowed"))

    asked = list(needed)
    answers = await asyncio.gather(*(allowed(need) for need in asked))
    return [need for need, ok in zip(asked, answers, strict=True) if not ok]
