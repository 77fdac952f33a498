"""Errors from the API server, one class per apimachinery ``StatusReason``, built from the Status.

Every non-2xx answer becomes an ``ApiError`` subclass chosen by the Status ``reason`` (or, when
the body is not a Status, by the HTTP code), so callers write ``except NotFound`` or
``except Conflict`` as a Go operator checks ``apierrors.IsNotFound``. ``Invalid`` carries the
field causes; ``ResourceExpired`` (410) is the signal to relist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class StatusCause:
    """One ``details.causes`` entry: what was wrong, with which field."""

    type: str
    message: str
    field: str


class ApiError(Exception):
    """A Status answer from the server (or a transport failure shaped like one)."""

    #: The StatusReason this class stands for ("" for the base class).
    reason_name = ""

    def __init__(self, status: Mapping[str, Any], code: int | None = None) -> None:
        self.status: dict[str, Any] = dict(status)
        self.code: int = int(code if code is not None else status.get("code") or 0)
        self.reason: str = str(status.get("reason") or "")
        self.message: str = str(status.get("message") or f"the server answered {self.code}")
        details = status.get("details")
        self.details: dict[str, Any] = dict(details) if isinstance(details, Mapping) else {}
        super().__init__(self.message)

    @property
    def causes(self) -> list[StatusCause]:
        return [
            StatusCause(str(c.get("reason", "")), str(c.get("message", "")), str(c.get("field", "")))
            for c in self.details.get("causes") or ()
            if isinstance(c, Mapping)
        ]

    @property
    def retry_after_seconds(self) -> int | None:
        value = self.details.get("retryAfterSeconds")
        return int(value) if isinstance(value, int) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.reason!r}, {self.message!r})"


class BadRequest(ApiError):
    reason_name = "BadRequest"


class Unauthorized(ApiError):
    reason_name = "Unauthorized"


class Forbidden(ApiError):
    reason_name = "Forbidden"


class NotFound(ApiError):
    reason_name = "NotFound"


class MethodNotAllowed(ApiError):
    reason_name = "MethodNotAllowed"


class NotAcceptable(ApiError):
    reason_name = "NotAcceptable"


class AlreadyExists(ApiError):
    reason_name = "AlreadyExists"


class Conflict(ApiError):
    """A stale resourceVersion (or another write-write conflict): re-read and try again."""

    reason_name = "Conflict"


class ResourceExpired(ApiError):
    """410: the resourceVersion is older than the server keeps (reasons Expired and Gone); relist."""

    reason_name = "Expired"


class RequestEntityTooLarge(ApiError):
    reason_name = "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    reason_name = "UnsupportedMediaType"


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` name the fields."""

    reason_name = "Invalid"


class TooManyRequests(ApiError):
    reason_name = "TooManyRequests"


class InternalError(ApiError):
    reason_name = "InternalError"


class ServiceUnavailable(ApiError):
    reason_name = "ServiceUnavailable"


class Timeout(ApiError):
    """504 ``Timeout``: the request could not finish in time (e.g. a resourceVersion from the future)."""

    reason_name = "Timeout"


class ServerTimeout(ApiError):
    reason_name = "ServerTimeout"


_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason_name: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        AlreadyExists,
        Conflict,
        ResourceExpired,
        RequestEntityTooLarge,
        UnsupportedMediaType,
        Invalid,
        TooManyRequests,
        InternalError,
        ServiceUnavailable,
        Timeout,
        ServerTimeout,
    )
}
_BY_REASON["Gone"] = ResourceExpired

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    406: NotAcceptable,
    409: Conflict,
    410: ResourceExpired,
    413: RequestEntityTooLarge,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: Timeout,
}


def error_from_status(code: int, body: Any) -> ApiError:
    """The exception for an HTTP ``code`` and its decoded body (a Status, or anything else)."""
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        status: Mapping[str, Any] = body
    else:
        text = body if isinstance(body, str) else ""
        status = {"code": code, "message": text.strip() or f"the server answered {code}"}
    reason = str(status.get("reason") or "")
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or ApiError
    return cls(status, code)


def is_not_found(error: BaseException) -> bool:
    return isinstance(error, NotFound)


def is_conflict(error: BaseException) -> bool:
    return isinstance(error, Conflict)


def is_already_exists(error: BaseException) -> bool:
    return isinstance(error, AlreadyExists)


async def ignore_not_found(call: Awaitable[T]) -> T | None:
    """``await ignore_not_found(client.delete(...))``: None when the object is already gone."""
    try:
        return await call
    except NotFound:
        return None


async def ignore_already_exists(call: Awaitable[T]) -> T | None:
    try:
        return await call
    except AlreadyExists:
        return None
