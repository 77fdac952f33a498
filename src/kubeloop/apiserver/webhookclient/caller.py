"""Calling a webhook: where it is, over what TLS, and what a failed call is called.

A webhook is reached at its ``clientConfig.url``, or through a Service of the cluster: a Service
of type ExternalName at its ``externalName``, any other at the first ready address of its
Endpoints (the embedded cluster runs no proxy; a webhook server on this machine is a Service
with Endpoints, or an ExternalName of ``localhost``). The TLS server name is the URL's host, or
``<service>.<namespace>.svc`` as kube-apiserver asks for; the certificate is verified against
``caBundle`` (the system's CAs without one). Each event loop keeps its own keep-alive
connections per endpoint.

A call that fails raises :class:`CallError` with the reason kube-apiserver gives (Go's
``Post "<url>": dial tcp ...: connect: connection refused``, ``context deadline exceeded``...),
which the dispatcher words as ``failed calling webhook "<name>": failed to call webhook: ...``.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import ssl
from dataclasses import dataclass

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.webhookclient.clientconfig import ClientConfig, url_parts
from kubeloop.client.connectionpool import ConnectionPool

#: Bytes of a webhook's answer kept in an error message.
_SHOWN_BYTES = 512


class CallError(Exception):
    """The webhook could not be called, or its answer could not be read: ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Endpoint:
    """Where one call goes: the address to connect to and the names TLS and HTTP use."""

    host: str
    port: int
    server_name: str
    host_header: str
    path: str
    #: The URL as upstream's errors show it.
    shown_url: str


class Caller:
    """Posts JSON to webhooks and returns their JSON answers (a dict)."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.catalog = catalog
        self._pools: dict[tuple[int, str, int, str, bytes], ConnectionPool] = {}
        self._contexts: dict[bytes, ssl.SSLContext] = {}

    async def post(self, client: ClientConfig, body: bytes, timeout_seconds: int) -> Obj:
        """POST ``body`` to the webhook and return its answer as JSON; :class:`CallError` if the
        call or its answer fails."""
        endpoint = self.endpoint(client)
        target = f"{endpoint.path}?timeout={timeout_seconds}s"
        shown = f'Post "{endpoint.shown_url}?timeout={timeout_seconds}s"'
        pool = self._pool(endpoint, client.ca_bundle)
        headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, */*"),
            ("User-Agent", "kube-apiserver-admission"),
        ]
        try:
            answer = await pool.request("POST", target, headers, body, timeout=float(timeout_seconds))
        except TimeoutError:
            raise CallError(f"{shown}: context deadline exceeded") from None
        except ConnectionRefusedError:
            raise CallError(
                f"{shown}: dial tcp {endpoint.host}:{endpoint.port}: connect: connection refused"
            ) from None
        except socket.gaierror:
            raise CallError(f"{shown}: dial tcp: lookup {endpoint.host}: no such host") from None
        except ssl.SSLCertVerificationError as error:
            detail = error.verify_message or str(error)
            raise CallError(f"{shown}: tls: failed to verify certificate: x509: {detail}") from None
        except ssl.SSLError as error:
            raise CallError(f"{shown}: remote error: tls: {error.reason or error}") from None
        except OSError as error:
            raise CallError(f"{shown}: {error.strerror or error}") from None
        if not 200 <= answer.status < 300:
            raise CallError(_error_answer(answer.status, answer.body))
        try:
            parsed = orjson.loads(answer.body)
        except orjson.JSONDecodeError as error:
            raise CallError(
                f"couldn't get version/kind; json parse error: {error.msg}: {answer.body[:_SHOWN_BYTES]!r}"
            ) from None
        if not isinstance(parsed, dict):
            raise CallError("couldn't get version/kind; json parse error: the answer is not a JSON object")
        return parsed

    def endpoint(self, client: ClientConfig) -> Endpoint:
        """Where a call to ``client`` goes; :class:`CallError` when its Service cannot be reached."""
        if client.url is not None:
            host, port, path = url_parts(client.url)
            return Endpoint(host, port, host, _host_header(host, port), path, client.url.rstrip("?"))
        service = client.service
        if service is None:
            raise CallError("neither clientConfig.url nor clientConfig.service is set")
        server_name = f"{service.name}.{service.namespace}.svc"
        path = service.path or "/"
        shown = f"https://{server_name}:{service.port}{path}"
        host, port = self._service_address(service.namespace, service.name, service.port)
        return Endpoint(host, port, server_name, _host_header(server_name, service.port), path, shown)

    def _service_address(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        services = self.catalog.lookup("", "v1", "services")
        endpoints = self.catalog.lookup("", "v1", "endpoints")
        assert services is not None and endpoints is not None
        try:
            service = self.registry.get(services, namespace, name)
        except errors.NotFound:
            raise CallError(f'service "{name}" not found') from None
        spec = service.get("spec") or {}
        service_port = next(
            (p for p in spec.get("ports") or () if isinstance(p, dict) and p.get("port") == port), None
        )
        if spec.get("type") == "ExternalName":
            return str(spec.get("externalName") or ""), port
        if service_port is None:
            raise CallError(f'service "{name}" has no port {port}')
        target = service_port.get("targetPort", port)
        try:
            found = self.registry.get(endpoints, namespace, name)
        except errors.NotFound:
            found = {}
        for subset in found.get("subsets") or ():
            addresses = [a for a in subset.get("addresses") or () if isinstance(a, dict) and a.get("ip")]
            ports = subset.get("ports") or ()
            if not addresses:
                continue
            for candidate in ports:
                named = isinstance(target, str) and candidate.get("name") == service_port.get("name")
                if named or candidate.get("port") == target or (isinstance(target, str) and len(ports) == 1):
                    return str(addresses[0]["ip"]), int(candidate.get("port") or 0)
        raise CallError(f'no endpoints available for service "{name}"')

    def _pool(self, endpoint: Endpoint, ca_bundle: bytes | None) -> ConnectionPool:
        bundle = ca_bundle or b""
        key = (id(asyncio.get_running_loop()), endpoint.host, endpoint.port, endpoint.server_name, bundle)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = ConnectionPool(
                endpoint.host,
                endpoint.port,
                context=self._context(bundle),
                server_hostname=endpoint.server_name,
                host_header=endpoint.host_header,
            )
        return pool

    def _context(self, ca_bundle: bytes) -> ssl.SSLContext:
        digest = hashlib.sha256(ca_bundle).digest()
        context = self._contexts.get(digest)
        if context is None:
            context = ssl.create_default_context()
            if ca_bundle:
                context.load_verify_locations(cadata=ca_bundle.decode("ascii", "replace"))
            self._contexts[digest] = context
        return context

    def close(self) -> None:
        """Close the idle connections of the calling event loop (others' close with their loops)."""
        loop = id(asyncio.get_running_loop())
        for key in [key for key in self._pools if key[0] == loop]:
            self._pools.pop(key).close()


def _host_header(host: str, port: int) -> str:
    return host if port == 443 else f"{host}:{port}"


def _error_answer(status: int, body: bytes) -> str:
    """client-go's words for a non-2xx answer: the Status's message, else the body shown."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("kind") == "Status" and parsed.get("message"):
        return str(parsed["message"])
    shown = body[:_SHOWN_BYTES].decode("utf-8", "replace").strip()
    if shown:
        return f'an error on the server ("{shown}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"
