"""The server's own HTTP/1.1 for small API requests: read whole, answered in one write.

aiohttp's server spends most of its CPU on a small request in its own layers (the request and
response machinery, the payload streams, a task per request and a keep-alive timer per answer;
docs/design/performance.md); a controller's traffic is almost all such requests (a GET, a
create, a status patch of a few hundred bytes). A connection reads them here: the head is
parsed, the body (a ``Content-Length`` below :data:`SMALL_BODY_BYTES`) is buffered whole, the
handlers get a :class:`BufferedRequest`, and the answer goes out as one write.

Only what is plainly such a request is read here (:func:`read_head`): ``GET``/``POST``/``PUT``/
``PATCH``/``DELETE`` in HTTP/1.1 under ``/api`` or ``/apis``, a path with no escapes or dot
segments, no watch or followed log, no ``Transfer-Encoding``, ``Expect`` or ``Upgrade``, a head of well-formed
fields. At anything else the connection is handed to aiohttp for good (watches, large or
chunked bodies, kubectl's ``/openapi`` documents, malformed requests, which aiohttp refuses with
its 400s). A head longer than kube-apiserver reads (:data:`MAX_HEAD_BYTES`) is refused here,
whatever its request, with Go's 431. Handlers see either kind of request through
:class:`HTTPRequest`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qsl

from aiohttp import web
from aiohttp.helpers import parse_content_type
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiMapping

T = TypeVar("T")

#: Bodies at least this large go through aiohttp, which streams them (and the handlers move
#: their decoding to the worker loop).
SMALL_BODY_BYTES = 64 * 1024
#: The most a request's head may hold, its request line and blank line included: kube-apiserver's
#: Go server reads 1 MiB of header fields (``MaxHeaderBytes``) and 4 KiB more of slack. A longer
#: head is refused whole (:class:`HeadTooLarge`), as Go's server answers it.
MAX_HEAD_BYTES = (1 << 20) + 4096
#: The control characters a head may hold only as its CRLFs (a tab is fine in a field value).
_CONTROLS = bytes(c for c in range(0x20) if c != 0x09) + b"\x7f"
#: A header field's name.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: Field names already found to be tokens (clients send the same few): one set lookup each
#: instead of a match. Bounded, so that a client's made-up names cannot grow it.
_NAMES_SEEN: set[str] = set()
_NAMES_SEEN_MAX = 256
#: A request line read here. Its path has no percent escapes and no dot or empty segments
#: (nothing yarl would rewrite), its query only URL characters.
_REQUEST_LINE = re.compile(
    r"(GET|POST|PUT|PATCH|DELETE) "
    r"(/apis?(?:/[A-Za-z0-9\-_~!$&'()*+,;=:@][A-Za-z0-9\-._~!$&'()*+,;=:@]*)*/?)"
    r"(?:\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*))? HTTP/1\.1"
)


class NotForUs(Exception):
    """The request is not one this module reads: the connection goes to aiohttp."""


class HeadTooLarge(Exception):
    """The request's head runs past :data:`MAX_HEAD_BYTES`: it is answered with
    :data:`HEAD_TOO_LARGE_ANSWER` and the connection closes."""


#: Go's server's answer to a head past its bound, word for word (its handlers never see the
#: request, so it is not a Status).
HEAD_TOO_LARGE_ANSWER = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\n\r\n431 Request Header Fields Too Large"
)


class HTTPRequest(Protocol):
    """What the API handlers read of a request: aiohttp's ``web.Request`` or a :class:`BufferedRequest`."""

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def path_qs(self) -> str: ...

    @property
    def query(self) -> MultiMapping[str]: ...

    @property
    def query_string(self) -> str: ...

    @property
    def headers(self) -> MultiMapping[str]: ...

    @property
    def content_type(self) -> str: ...

    @property
    def match_info(self) -> Mapping[str, str]: ...

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def can_read_body(self) -> bool: ...

    def get(self, key: web.RequestKey[Any], /) -> Any: ...

    def __setitem__(self, key: web.RequestKey[T], value: T) -> None: ...


@dataclass(slots=True)
class RequestHead:
    """A parsed request head and the length of its body."""

    method: str
    path: str
    query_string: str
    headers: CIMultiDictProxy[str]
    content_length: int
    keep_alive: bool
    #: Bytes of the head, the blank line included: the body starts there.
    size: int


def read_head(buffer: bytes | bytearray) -> RequestHead | None:
    """The head at the start of ``buffer``; None while it is incomplete. Raises :class:`NotForUs`
    for a request this module does not read (see the module docs), :class:`HeadTooLarge` for a
    head no server part reads."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) >= MAX_HEAD_BYTES:
            raise HeadTooLarge()
        return None
    if end + 4 > MAX_HEAD_BYTES:
        raise HeadTooLarge()
    line_end = buffer.find(b"\r\n")
    block = bytes(buffer[line_end + 2 : end + 2])  # the header fields, each with its CRLF
    fields = _HEADS_READ.get(block)
    if fields is None:
        fields = _read_fields(block)
        if len(block) <= _HEAD_READ_MAX_BYTES:
            if len(_HEADS_READ) >= _HEADS_READ_MAX:
                _HEADS_READ.clear()
            _HEADS_READ[block] = fields
    headers, length, keep_alive = fields
    # The pattern admits no control character (nor any byte outside ASCII's printable ones).
    request_line = _REQUEST_LINE.fullmatch(bytes(buffer[:line_end]).decode("utf-8", "surrogateescape"))
    if request_line is None:
        raise NotForUs("not a request line of a method, path and query read here, in HTTP/1.1")
    method, path, query_string = request_line.groups("")
    if "/watch/" in path:
        raise NotForUs("a watch")
    if "watch" in query_string or "follow" in query_string or "%" in query_string:
        for key, given in parse_qsl(query_string, keep_blank_values=True):
            if key in ("watch", "follow") and given.lower() in ("1", "true", "yes"):
                raise NotForUs("a stream")  # a watch, or a log followed
    return RequestHead(method, path, query_string, headers, length, keep_alive, end + 4)


#: Header blocks read before, by their bytes: their fields, body length and keep-alive. A
#: client sends the same fields with every request but for its body's length (its host, agent,
#: token, types), and reading them took most of a head's ~6 µs; a block seen before is one
#: lookup. Bounded in entries and in each block's size, so that made-up heads cannot grow it; a
#: block is kept only once read whole and found fit (one refused is read again, and refused).
_HEADS_READ: dict[bytes, tuple[CIMultiDictProxy[str], int, bool]] = {}
_HEADS_READ_MAX = 256
_HEAD_READ_MAX_BYTES = 2048


def _read_fields(block: bytes) -> tuple[CIMultiDictProxy[str], int, bool]:
    """A head's header fields (``block``: each line with its CRLF), read whole: the fields, the
    body's length and whether the connection is kept alive. Raises :class:`NotForUs`."""
    if len(block) - len(block.translate(None, _CONTROLS)) != 2 * block.count(b"\r\n"):
        raise NotForUs("a control character in the head")
    # Every control character is a CRLF's: no line below holds a CR or LF of its own.
    fields: list[tuple[str, str]] = []
    for line in block.decode("utf-8", "surrogateescape").split("\r\n")[:-1]:  # the last: after the final CRLF
        name, colon, value = line.partition(":")
        if not colon:
            raise NotForUs("a malformed header field")
        if name not in _NAMES_SEEN:
            if _TOKEN.fullmatch(name) is None:
                raise NotForUs("a malformed header field")
            if len(_NAMES_SEEN) < _NAMES_SEEN_MAX:
                _NAMES_SEEN.add(name)
        fields.append((name, value.strip(" \t")))
    headers: CIMultiDict[str] = CIMultiDict(fields)
    if "Transfer-Encoding" in headers or "Expect" in headers or "Upgrade" in headers:
        raise NotForUs("a framing this module does not read")
    lengths = headers.getall("Content-Length", ())
    if len(lengths) > 1 or (lengths and not (lengths[0].isascii() and lengths[0].isdigit())):
        raise NotForUs("an unclear Content-Length")
    length = int(lengths[0]) if lengths else 0
    if length >= SMALL_BODY_BYTES:
        raise NotForUs("a large body")
    keep_alive = True
    for connection in headers.getall("Connection", ()):
        tokens = {token.strip().lower() for token in connection.split(",")}
        if "upgrade" in tokens:
            raise NotForUs("an upgrade")
        if "close" in tokens:
            keep_alive = False
    return CIMultiDictProxy(headers), length, keep_alive


def query_value(request: HTTPRequest, name: str, default: str = "") -> str:
    """The query parameter ``name`` (its first value), without parsing a query that cannot
    hold it: one whose text lacks the name, and any escape through which it could be spelled."""
    raw = request.query_string
    if name not in raw and "%" not in raw:
        return default
    return request.query.get(name, default)


class BufferedRequest:
    """A small request read whole by the connection (see the module docs)."""

    __slots__ = ("_content_type", "_query", "_values", "body", "head", "match_info", "transport")

    def __init__(self, head: RequestHead, body: bytes, transport: asyncio.Transport | None) -> None:
        self.head = head
        self.body = body
        self.transport = transport
        #: Set by the router, as aiohttp's route match would.
        self.match_info: dict[str, str] = {}
        self._content_type: str | None = None
        self._query: MultiDict[str] | None = None
        self._values: dict[Any, Any] = {}

    @property
    def query(self) -> MultiDict[str]:
        """The query's parameters, parsed when first asked for (a write's options are usually
        known by its query string alone: ``requestoptions.write_options``)."""
        if self._query is None:
            self._query = MultiDict(parse_qsl(self.head.query_string, keep_blank_values=True))
        return self._query

    @property
    def query_string(self) -> str:
        return self.head.query_string

    @property
    def method(self) -> str:
        return self.head.method

    @property
    def path(self) -> str:
        return self.head.path

    @property
    def path_qs(self) -> str:
        """The path and its query string, as the client sent them."""
        query = self.head.query_string
        return f"{self.head.path}?{query}" if query else self.head.path

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self.head.headers

    @property
    def content_type(self) -> str:
        """The media type of ``Content-Type`` (``application/octet-stream`` without one, as aiohttp says)."""
        if self._content_type is None:
            raw = self.head.headers.get("Content-Type")
            self._content_type = "application/octet-stream" if raw is None else parse_content_type(raw)[0]
        return self._content_type

    @property
    def can_read_body(self) -> bool:
        return bool(self.body)

    def get(self, key: web.RequestKey[Any], /) -> Any:
        return self._values.get(key)

    def __setitem__(self, key: web.RequestKey[T], value: T) -> None:
        self._values[key] = value


_date_second = 0
_date_text = b""


def _date() -> bytes:
    """The ``Date`` header's value, formatted once a second."""
    global _date_second, _date_text
    now = int(time.time())
    if now != _date_second:
        _date_second, _date_text = now, formatdate(now, usegmt=True).encode("ascii")
    return _date_text


_SKIPPED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "date"})


def encode_response(response: web.Response, *, keep_alive: bool) -> bytes:
    """``response`` (a handler's whole answer) as HTTP/1.1 bytes, head and body."""
    head, body = response_parts(response, keep_alive=keep_alive)
    return head + body


def response_parts(response: web.Response, *, keep_alive: bool) -> tuple[bytes, bytes]:
    """``response`` as HTTP/1.1: its head (ending in the blank line) and its body."""
    body = response.body
    if not isinstance(body, (bytes, bytearray)):
        raise TypeError(f"a buffered answer needs a bytes body, not {type(body).__name__}")
    fields = tuple(response.headers.items())
    key = (response.status, response.reason, fields)
    start = _HEAD_STARTS.get(key)
    if start is None:
        lines = [f"HTTP/1.1 {response.status} {response.reason}".encode("latin-1")]
        for name, value in fields:
            if name.lower() not in _SKIPPED_HEADERS:
                lines.append(f"{name}: {value}".encode())
        lines.append(b"")
        start = b"\r\n".join(lines)
        if len(start) <= _HEAD_START_MAX_BYTES:
            if len(_HEAD_STARTS) >= _HEAD_STARTS_MAX:
                _HEAD_STARTS.clear()
            _HEAD_STARTS[key] = start
    end = b"\r\n\r\n" if keep_alive else b"\r\nConnection: close\r\n\r\n"
    return b"%bContent-Length: %d\r\nDate: %b%b" % (start, len(body), _date(), end), bytes(body)


#: The start of answers' heads (the status line and the handler's fields) by what makes them:
#: most answers are a 200 or 201 with a JSON Content-Type. Bounded, as a Warning's words vary.
_HEAD_STARTS: dict[tuple[int, str, tuple[tuple[str, str], ...]], bytes] = {}
_HEAD_STARTS_MAX = 256
_HEAD_START_MAX_BYTES = 1024
