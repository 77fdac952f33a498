"""Content negotiation of answers (upstream's ``endpoints/handlers/negotiation``): what an ``Accept``
header asks for (JSON, YAML, Kubernetes protobuf, a Table, PartialObjectMetadata), objects and
lists encoded accordingly (large lists in slices, off the serving loop), Status errors, and
``Warning`` headers. A client that asks for YAML first gets every JSON answer (a Status included)
as YAML, keys sorted as sigs.k8s.io/yaml writes them; watches are not served as YAML.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from aiohttp import web

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.http.http1 import HTTPRequest, query_value
from kubeloop.apiserver.http.yamlanswers import to_yaml_bytes
from kubeloop.apiserver.protobuf import codec, descriptors
from kubeloop.gcpause import gc_paused

log = logging.getLogger("kubeloop.apiserver")
JSON = "application/json"
YAML = "application/yaml"
#: What a 406 names (upstream's words, for the media types served here): answers, and watches.
SERVED_MEDIA_TYPES = f"{JSON}, {YAML}, {codec.MEDIA_TYPE}"
STREAMED_MEDIA_TYPES = f"{JSON}, {codec.MEDIA_TYPE}"
#: YAML answers at least this large are written in a thread (a 12 MB list takes ~0.5 s), the
#: serving loop going on meanwhile.
_YAML_THREAD_BYTES = 256 * 1024
#: Lists with at least this many items are encoded off the serving loop, in slices.
LARGE_LIST_ITEMS = 1000
_LIST_SLICE = 250


def json_response(
    body: Any, status: int = 200, *, warnings: list[str] | None = None, encoded: bytes | None = None
) -> web.Response:
    """``body`` as JSON ending in a newline, as Go's ``json.Encoder`` writes every answer;
    ``encoded``: ``body`` as JSON already (as the store encoded it), not encoded again."""
    data = encoded + b"\n" if encoded is not None else orjson.dumps(body, option=orjson.OPT_APPEND_NEWLINE)
    return with_warnings(web.Response(body=data, status=status, content_type=JSON), warnings)


def with_warnings(response: web.Response, warnings: list[str] | None) -> web.Response:
    for warning in warnings or ():
        response.headers.add("Warning", f'299 - "{quote_warning(warning)}"')
    return response


async def object_response(
    request: HTTPRequest,
    body: Obj,
    status: int = 200,
    *,
    warnings: list[str] | None = None,
    encoded: bytes | None = None,
) -> web.Response:
    """An object or list as JSON, or as Kubernetes protobuf when the client asks for that first
    (``encoded``: ``body`` as JSON already, for a JSON answer).

    Objects the protobuf tables cannot express (no kubectl to read them from, a kind they lack)
    go out as JSON: clients decode by the response's Content-Type.
    """
    if accept_of(request).protobuf:
        try:
            message_tables = await asyncio.to_thread(descriptors.load_tables)
            encoded = codec.encode_object(body, message_tables)
        except (descriptors.DescriptorError, codec.ProtobufError) as exc:
            log.debug("answering %s in JSON: %s", request.path, exc)
        else:
            return with_warnings(
                web.Response(body=encoded, status=status, content_type=codec.MEDIA_TYPE), warnings
            )
    return json_response(body, status, warnings=warnings, encoded=encoded)


def encode_list_in_slices(body: Obj) -> bytes:
    """``json_response``'s body for a list, its items encoded ``_LIST_SLICE`` at a time: one
    encode of a list of many megabytes holds the interpreter lock for tens of milliseconds, a slice
    for well under one."""
    items: list[Obj] = body["items"]
    head = orjson.dumps({**body, "items": []})
    assert head.endswith(b"[]}")
    parts = [head[:-2]]
    for start in range(0, len(items), _LIST_SLICE):
        if start:
            parts.append(b",")
        parts.append(orjson.dumps(items[start : start + _LIST_SLICE])[1:-1])
    parts.append(b"]}\n")
    return b"".join(parts)


def quote_warning(text: str) -> str:
    # Go's header writer turns CR and LF into spaces: a field name in a warning cannot split the head.
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")


def status_response(error: errors.APIError) -> web.Response:
    response = json_response(error.to_status(), error.code)
    if error.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(error.retry_after_seconds)
    return response


@dataclass(frozen=True)
class Accept:
    table: bool = False
    partial_metadata: bool = False
    include_object: str = "Metadata"
    protobuf: bool = False  # the client lists Kubernetes protobuf before JSON
    yaml: bool = False  # the client lists YAML before JSON: JSON answers are converted


def accept_of(request: HTTPRequest) -> Accept:
    return parse_accept(request.headers.get("Accept", ""), query_value(request, "includeObject", "Metadata"))


@functools.lru_cache(maxsize=256)
def parse_accept(header: str, include: str) -> Accept:
    """What an ``Accept`` header (and ``includeObject``) ask for; clients send the same few."""
    if include not in ("None", "Metadata", "Object"):
        raise errors.BadRequest(
            f'includeObject: Unsupported value: "{include}": supported values: "None", "Metadata", "Object"'
        )
    if not header:
        return Accept()
    json_ok = False
    for clause in header.split(","):
        fields = [f.strip() for f in clause.split(";")]
        media = fields[0].lower()
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        as_kind = params.get("as")
        if media == codec.MEDIA_TYPE and as_kind is None and not json_ok:
            return Accept(protobuf=True)
        if media == YAML and as_kind is None and not json_ok:
            return Accept(yaml=True)
        if media not in (JSON, "application/*", "*/*"):
            continue
        if as_kind == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return Accept(table=True, include_object=include)
        if (
            as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList")
            and params.get("g") == "meta.k8s.io"
        ):
            return Accept(partial_metadata=True)
        if as_kind is None:
            json_ok = True
    if not json_ok:
        raise not_acceptable(SERVED_MEDIA_TYPES)
    return Accept()


def not_acceptable(media_types: str) -> errors.NotAcceptable:
    """The 406 of a request whose Accept names none of ``media_types``, in upstream's words."""
    return errors.NotAcceptable(f"only the following media types are accepted: {media_types}")


R = TypeVar("R", bound=HTTPRequest)


@web.middleware
async def answer_media_middleware(request: R, handler: Callable[[R], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Every JSON answer (a Status included) as YAML when the client asked for YAML first; the
    outermost step of both request paths (an aiohttp middleware, also called directly for small
    requests)."""
    response = await handler(request)
    if type(response) is not web.Response:
        return response
    try:  # asked first: a response's content_type parses its header every time it is read
        if not accept_of(request).yaml:
            return response
    except errors.APIError:  # a bad includeObject: its 400 is already the answer
        return response
    if response.content_type != JSON or response.body is None:
        return response
    body = response.body
    assert isinstance(body, bytes)
    if len(body) >= _YAML_THREAD_BYTES:
        text = await asyncio.to_thread(_as_yaml, body)
    else:
        text = _as_yaml(body)
    answer = web.Response(body=text, status=response.status, content_type=YAML)
    for name, value in response.headers.items():
        if name.lower() not in ("content-type", "content-length"):
            answer.headers.add(name, value)
    return answer


def _as_yaml(body: bytes) -> bytes:
    """A JSON answer as YAML (``yamlanswers``), its values decoded with the GC paused."""
    with gc_paused():
        return to_yaml_bytes(orjson.loads(body))
