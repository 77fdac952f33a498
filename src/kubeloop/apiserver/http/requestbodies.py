"""Request bodies: read within the server's limit (3 MiB), and decoded as the object of a kind —
JSON (with its repeated keys for fieldValidation), YAML, or Kubernetes protobuf.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from aiohttp import web

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.audit import requestaudit
from kubeloop.apiserver.http.http1 import BufferedRequest, HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    JSON,
)
from kubeloop.apiserver.protobuf import codec, descriptors
from kubeloop.apiserver.registry.verboptions import WriteOptions

MAX_BODY_BYTES = 3 * 1024 * 1024


async def read_body(request: HTTPRequest) -> bytes:
    """The request's body, whole (kept for its audit event)."""
    body = await _read(request)
    requestaudit.record_body(body, request.content_type)
    return body


async def _read(request: HTTPRequest) -> bytes:
    if isinstance(request, BufferedRequest):
        return request.body  # read whole by the connection, below SMALL_BODY_BYTES
    assert isinstance(request, web.Request)
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise errors.RequestEntityTooLarge("Request entity too large: limit is 3145728")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(65536):
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise errors.RequestEntityTooLarge("Request entity too large: limit is 3145728")
        chunks.append(chunk)
    return b"".join(chunks)


async def decode_write(
    content_type: str, raw: bytes, options: WriteOptions, kind: str, *, json_only: bool = False
) -> tuple[Any, WriteOptions]:
    """A create or update body as an object of ``kind`` (JSON, YAML or protobuf; custom
    resources, which have no protobuf form, ``json_only``), with the duplicate fields a JSON body
    repeated (for fieldValidation Strict and Warn). A JSON body that is not JSON, or not an
    object, is refused as upstream words it. Its nesting depth is checked by the registry before
    anything walks it (YAML's builder checks as it goes)."""
    content_type = content_type or JSON
    if json_only and content_type == codec.MEDIA_TYPE:
        raise errors.UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            f"{JSON}, application/yaml"
        )
    if content_type in (JSON, "*/*", "application/octet-stream"):
        body = decoding.decode_json(raw, depth_checked_later=True, kind=kind)
        if not isinstance(body, dict):
            raise decoding.not_an_object(kind, body, raw)
        if options.field_validation != "Ignore" and b'"' in raw:
            duplicates = tuple(decoding.find_duplicate_fields(raw, body))
            if duplicates:
                options = replace(options, duplicate_fields=duplicates)
        return body, options
    if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
        return decoding.decode_yaml(raw), options
    if content_type == codec.MEDIA_TYPE:
        return await decode_protobuf(raw), options
    raise errors.UnsupportedMediaType(
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{JSON}, application/yaml, {codec.MEDIA_TYPE}"
    )


async def decode_request_object(
    request: HTTPRequest, raw: bytes, options: WriteOptions, kind: str
) -> tuple[Obj, WriteOptions]:
    """The body of a request the server answers without storing it (a review, a binding, an
    eviction, a token request): an object of ``kind``, its depth checked (the registry checks
    the bodies it stores), else 400."""
    body, options = await decode_write(request.content_type, raw, options, kind)
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the body of the request was in an unknown format: expected a {kind} object")
    decoding.check_depth(body, "the object")
    return body, options


async def decode_protobuf(raw: bytes) -> Any:
    """A protobuf body as its JSON form; the message tables are read on first use, off the loop."""
    try:
        tables = await asyncio.to_thread(descriptors.load_tables)
    except descriptors.DescriptorError as exc:
        raise errors.UnsupportedMediaType(f"{codec.MEDIA_TYPE} bodies cannot be read here: {exc}") from None
    try:
        return codec.decode_object(raw, tables)
    except codec.ProtobufError as exc:
        raise errors.BadRequest(f"the body of the request could not be decoded as protobuf: {exc}") from None
