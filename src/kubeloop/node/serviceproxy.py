"""The process node's way to Services: an HTTP proxy its pods are given in their environment.

A local pod's processes share the machine's network and its resolver, so ``http://web:8080``
would not resolve as it does in a cluster. The node runs a proxy on 127.0.0.1 and gives every
local pod ``HTTP_PROXY`` and ``HTTPS_PROXY`` (and their lower-case forms) naming it, with the
pod's namespace as the proxy's user name (``http://<namespace>:pod@127.0.0.1:<port>``), and
``NO_PROXY`` for the API server and localhost. What honours those variables (curl, Python's
urllib, requests, httpx and the SDKs built on them, Go's net/http) then reaches:

- a Service by ``<service>``, ``<service>.<namespace>``, ``<service>.<namespace>.svc`` and
  ``<service>.<namespace>.svc.cluster.local``, or by its ClusterIP: one of its ready endpoints
  (the Service's port mapped to the endpoint's by name, as kube-proxy maps it), chosen in turn;
- a pod by its address;
- anything else as from the machine itself.

Plain ``http://`` requests are forwarded one per connection (``Connection: close``); ``https://``
and anything else go through ``CONNECT`` as a tunnel. Not covered: programs that ignore the
proxy variables or resolve names themselves (a raw socket to ``web:8080``), UDP, and a
Service without a selector whose endpoints are written by hand is reached like any other.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from kubeloop.api.object import Obj

log = logging.getLogger("kubeloop.node.serviceproxy")

#: The longest request head taken.
MAX_HEAD_BYTES = 64 * 1024
COPY_BYTES = 64 * 1024
#: How long a client may take to send its request's head.
HEAD_SECONDS = 30.0
#: How long connecting to a destination may take.
CONNECT_SECONDS = 10.0
CLUSTER_DOMAIN = "cluster.local"

#: Looks Services and Endpoints up: (kind, namespace or None for all) → the objects.
ListObjects = Callable[[str, str | None], Awaitable[list[Obj]]]


class ServiceProxy:
    """The proxy: :meth:`start` listens on 127.0.0.1 (``port`` then says where), :meth:`close`
    stops it and every connection it carries."""

    def __init__(self, list_objects: ListObjects) -> None:
        self.list_objects = list_objects
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._turns = itertools.count()
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        """Listen, if not yet (the first pod to need it starts it)."""
        async with self._starting:
            if self._server is None:
                self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=MAX_HEAD_BYTES)
                self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def environment(self, namespace: str, no_proxy: list[str]) -> dict[str, str]:
        """The variables that send a pod of ``namespace``'s requests through the proxy."""
        url = f"http://{namespace}:pod@127.0.0.1:{self.port}"  # urllib sends a user only with a password
        skip = ",".join([*no_proxy, "localhost"])
        return {
            "HTTP_PROXY": url,
            "HTTPS_PROXY": url,
            "http_proxy": url,
            "https_proxy": url,
            "NO_PROXY": skip,
            "no_proxy": skip,
        }

    # ------------------------------------------------------------------ connections

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._serve(reader, writer), name="service proxy connection")
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, TimeoutError):
            writer.close()
            return
        try:
            request_line, *lines = head.decode("latin-1").split("\r\n")
            method, target, version = request_line.split(" ", 2)
            headers = [line for line in lines if line]
            namespace = _namespace(headers)
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                await self._tunnel(reader, writer, host.strip("[]"), int(port), namespace)
            else:
                url = urlsplit(target)
                if not url.hostname:
                    await _answer(writer, 400, "a proxy takes absolute URLs (http://host/path)")
                    return
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                kept = [h for h in headers if not h.lower().startswith(("proxy-", "connection:", "keep-alive:"))]
                forwarded = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
                await self._forward(reader, writer, url.hostname, url.port or 80, namespace, forwarded.encode("latin-1"))
        except ValueError:
            await _answer(writer, 400, "the request line is not one a proxy takes")
        finally:
            writer.close()

    async def _tunnel(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int, namespace: str
    ) -> None:
        upstream = await self._connect(writer, host, port, namespace)
        if upstream is None:
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _pipe(reader, writer, *upstream)

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        namespace: str,
        head: bytes,
    ) -> None:
        upstream = await self._connect(writer, host, port, namespace)
        if upstream is None:
            return
        upstream[1].write(head)
        await _pipe(reader, writer, *upstream)

    async def _connect(
        self, writer: asyncio.StreamWriter, host: str, port: int, namespace: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to where ``host:port`` leads from a pod of ``namespace``; a 502 or 503
        to the client (and None) when there is none."""
        try:
            destination = await self.resolve(host, port, namespace)
        except LookupError as missing:
            await _answer(writer, 503, str(missing))
            return None
        try:
            return await asyncio.wait_for(asyncio.open_connection(*destination), CONNECT_SECONDS)
        except (OSError, TimeoutError) as exc:
            await _answer(writer, 502, f"cannot reach {destination[0]}:{destination[1]} for {host}:{port}: {exc}")
            return None

    # ------------------------------------------------------------------ where a name leads

    async def resolve(self, host: str, port: int, namespace: str) -> tuple[str, int]:
        """Where ``host:port`` leads from a pod of ``namespace``: a Service's endpoint, or the
        host itself. LookupError: a Service with no ready endpoint for that port."""
        service = await self._service(host.lower().rstrip("."), namespace)
        if service is None:
            return host, port
        return await self._endpoint(service, port)

    async def _service(self, host: str, namespace: str) -> Obj | None:
        parts = host.split(".")
        wanted: tuple[str, str] | None = None
        if len(parts) == 1:
            wanted = (parts[0], namespace)
        elif len(parts) == 2 or (len(parts) == 3 and parts[2] == "svc") or (len(parts) > 3 and parts[2] == "svc" and ".".join(parts[3:]) == CLUSTER_DOMAIN):
            wanted = (parts[0], parts[1])
        if wanted is not None:
            for service in await self.list_objects("Service", wanted[1]):
                if (service.get("metadata") or {}).get("name") == wanted[0]:
                    return service
            if len(parts) == 1:
                return None  # a single name that is no Service: the machine's own (localhost...)
        if parts[-1].isdigit():  # an address: a Service's ClusterIP?
            for service in await self.list_objects("Service", None):
                spec = service.get("spec") or {}
                if host in (spec.get("clusterIP"), *(spec.get("clusterIPs") or ())):
                    return service
        return None

    async def _endpoint(self, service: Obj, port: int) -> tuple[str, int]:
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        name, namespace = str(meta.get("name")), str(meta.get("namespace"))
        service_port = next((p for p in spec.get("ports") or () if p.get("port") == port), None)
        if service_port is None:
            raise LookupError(f'service "{namespace}/{name}" has no port {port}')
        if spec.get("type") == "ExternalName" and spec.get("externalName"):
            return str(spec["externalName"]), port
        endpoints = next(
            (e for e in await self.list_objects("Endpoints", namespace) if (e.get("metadata") or {}).get("name") == name),
            None,
        )
        choices: list[tuple[str, int]] = []
        for subset in (endpoints or {}).get("subsets") or ():
            ports = subset.get("ports") or ()
            matching = next(
                (p for p in ports if p.get("name", "") == service_port.get("name", "") or len(ports) == 1), None
            )
            if matching is None:
                continue
            choices += [(str(a.get("ip")), int(matching.get("port"))) for a in subset.get("addresses") or ()]
        if not choices:
            raise LookupError(f'service "{namespace}/{name}" has no ready endpoints for port {port}')
        return choices[next(self._turns) % len(choices)]


def _namespace(headers: list[str]) -> str:
    """The pod's namespace: the proxy credentials' user name (``default`` without them)."""
    for header in headers:
        name, _, value = header.partition(":")
        if name.strip().lower() == "proxy-authorization":
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "basic":
                with contextlib.suppress(ValueError):
                    return base64.b64decode(token).decode().partition(":")[0] or "default"
    return "default"


async def _answer(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    reasons = {400: "Bad Request", 502: "Bad Gateway", 503: "Service Unavailable"}
    body = (message + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reasons[status]}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until the destination has ended its side (what the client still sends
    then goes nowhere: the connection closes)."""

    async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await source.read(COPY_BYTES):
                sink.write(chunk)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()

    sending = asyncio.create_task(copy(reader, upstream_writer))
    try:
        await copy(upstream_reader, writer)
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        upstream_writer.close()
