"""WATCH of a collection (``?watch=true``): the stream of events from a resourceVersion, as JSON
lines, Tables or PartialObjectMetadata, until the client or the server's timeout ends it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import cast

import orjson
from aiohttp import web

from kubeloop.api.fields import FieldSelector, escape_value
from kubeloop.api.object import Obj
from kubeloop.apiserver.http import auditing
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    JSON,
    STREAMED_MEDIA_TYPES,
    accept_of,
    not_acceptable,
)
from kubeloop.apiserver.http.requestoptions import (
    list_options,
    parse_int,
    truthy,
)
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.http.watchstream import WatchOptions, WatchStream
from kubeloop.apiserver.printing import tables

#: Past this many bytes unsent to a watcher, its events wait for it in the store's queue instead
#: of the connection's send buffer (aiohttp drains its writes at the same mark).
_SEND_BUFFER_MARK = 64 * 1024


class _ChunkedTransport:
    """A watch response's connection after its head was sent: each part one HTTP/1.1 chunk,
    written straight to the transport (aiohttp's writer would cost a task step per watcher and
    event, ~half the cost of a watch's fan-out)."""

    __slots__ = ("_transport",)

    framing = "chunked"

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.WriteTransport, transport)

    def write_now(self, chunk: bytes) -> bool:
        return self.write_framed(self.frame(chunk))

    def frame(self, chunk: bytes) -> bytes:
        return b"%x\r\n%b\r\n" % (len(chunk), chunk)

    def write_framed(self, framed: bytes) -> bool:
        transport = self._transport
        if transport.is_closing():
            return False
        transport.write(framed)
        return True

    def has_room(self) -> bool:
        return self._transport.get_write_buffer_size() < _SEND_BUFFER_MARK


async def watch(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    """A watch of the target's collection; of one object when the target names it (``GET
    .../configmaps/c1?watch=1``: kube-apiserver's watch with ``metadata.name=c1`` and any field
    selector given)."""
    listing = list_options(request)
    query = request.query
    if target.name is not None:
        given = query.get("fieldSelector", "")
        named = f"metadata.name={escape_value(target.name)}" + (f",{given}" if given else "")
        listing = replace(listing, field_selector=FieldSelector.parse(named))
    send_initial = query.get("sendInitialEvents")
    timeout = query.get("timeoutSeconds")
    options = WatchOptions(
        label_selector=listing.label_selector,
        field_selector=listing.field_selector,
        resource_version=listing.resource_version,
        resource_version_match=listing.resource_version_match,
        allow_bookmarks=truthy(query.get("allowWatchBookmarks")),
        send_initial_events=None if send_initial is None else truthy(send_initial),
        timeout_seconds=parse_int(timeout, "timeoutSeconds") if timeout else None,
    )
    accept = accept_of(request)
    if accept.yaml:  # no YAML stream, as upstream
        raise not_acceptable(STREAMED_MEDIA_TYPES)
    encode = None
    if accept.table:
        resource = target.resource
        printer = scope.registry.strategy(resource).printer

        def encode(kind: str, obj: Obj) -> bytes:
            if kind in ("ERROR", "BOOKMARK"):
                return orjson.dumps({"type": kind, "object": obj}) + b"\n"
            table = tables.to_table(resource, [obj], printer=printer, include_object=accept.include_object)
            return orjson.dumps({"type": kind, "object": table}) + b"\n"

    elif accept.partial_metadata:

        def encode(kind: str, obj: Obj) -> bytes:
            if kind != "ERROR":
                obj = tables.partial_object_metadata(obj)
            return orjson.dumps({"type": kind, "object": obj}) + b"\n"

    # A watch from a revision newer than the cache waits for it; one from "" or "0" starts where
    # the cache is (a 503 either way when the cache is not fed).
    await scope.registry.caught_up(options.resource_version if options.resource_version != "" else "0")
    # Watches are never read as small requests (http1.read_head leaves them to aiohttp).
    assert isinstance(request, web.Request)
    transport = request.transport
    stream = WatchStream(
        scope.registry,
        target.resource,
        target.namespace,
        options,
        scope.watch_settings,
        encode=encode,
        writer=None if transport is None else _ChunkedTransport(transport),
    )
    response = web.StreamResponse(status=200)
    response.content_type = JSON
    response.enable_chunked_encoding()
    response.headers["Cache-Control"] = "no-cache, private"
    try:
        auditing.response_started(request, response, scope.auditor)
        await response.prepare(request)
        async for chunk in stream.lines():
            await response.write(chunk)
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        stream.close()
    return response
