"""Errors of the Kubernetes API, shared by the embedded server and the clients.

Kubernetes answers every failure with a ``Status`` object whose ``reason`` names what went
wrong (apimachinery's ``StatusReason``). Here each reason is one exception class, and the same
classes serve both sides: the server raises ``NotFound`` and renders it with
:meth:`APIError.to_status`; a client receives that Status and :func:`error_from_status` raises
``NotFound`` again, so an operator writes ``except errors.NotFound`` where a Go operator checks
``apierrors.IsNotFound``. ``Invalid`` carries one :class:`StatusCause` per offending field;
``ResourceExpired`` (410) is the signal to relist.

The constructors :func:`not_found`, :func:`already_exists`, :func:`conflict`, :func:`invalid` and
:func:`expired` build the errors with kube-apiserver's own messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import orjson

T = TypeVar("T")


@dataclass(frozen=True)
class StatusCause:
    """One ``details.causes`` entry: what is wrong (``type``, upstream's ``reason``) and where."""

    type: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"reason": self.type, "message": self.message} if self.type else {"message": self.message}
        if self.field:
            out["field"] = self.field
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StatusCause:
        return cls(str(data.get("reason", "")), str(data.get("message", "")), str(data.get("field", "")))


class APIError(Exception):
    """A failure answered as a Status object; a subclass per reason.

    ``code`` is the HTTP status, ``reason`` the StatusReason ("" when the server gave none),
    ``causes`` the field-level details. ``status`` is the whole Status as it travels.
    """

    #: The HTTP code and StatusReason a class stands for; an instance may carry another code.
    default_code: ClassVar[int] = 500
    default_reason: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str | None = None,
        name: str = "",
        group: str = "",
        kind: str = "",
        causes: Iterable[StatusCause] = (),
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code: int = self.default_code if code is None else code
        self.reason: str = self.default_reason if reason is None else reason
        self.name = name
        self.group = group
        self.kind = kind
        self.causes: list[StatusCause] = list(causes)
        self.retry_after_seconds = retry_after_seconds

    @property
    def details(self) -> dict[str, Any]:
        """The Status's ``details``: the object named, its causes, when to retry."""
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [cause.to_dict() for cause in self.causes]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        return details

    @property
    def status(self) -> dict[str, Any]:
        """This error as a ``Status`` object (metav1.Status)."""
        return self.to_status()

    def to_status(self) -> dict[str, Any]:
        """The Status with its keys in Go's field order (metav1.Status: kind, apiVersion,
        metadata, status, message, reason, details, code), as kube-apiserver writes them."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        details = self.details
        if details:
            status["details"] = details
        status["code"] = self.code
        return status

    def to_json(self) -> bytes:
        """The Status as a kube-apiserver answer's body: JSON ending in a newline (Go's
        ``json.Encoder``), which clients that show the body verbatim print as it is."""
        return orjson.dumps(self.to_status(), option=orjson.OPT_APPEND_NEWLINE)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.reason!r}, {self.message!r})"


class BadRequest(APIError):
    default_code = 400
    default_reason = "BadRequest"


class Unauthorized(APIError):
    default_code = 401
    default_reason = "Unauthorized"


class Forbidden(APIError):
    default_code = 403
    default_reason = "Forbidden"


class NotFound(APIError):
    default_code = 404
    default_reason = "NotFound"


class MethodNotAllowed(APIError):
    default_code = 405
    default_reason = "MethodNotAllowed"


class NotAcceptable(APIError):
    default_code = 406
    default_reason = "NotAcceptable"


class AlreadyExists(APIError):
    default_code = 409
    default_reason = "AlreadyExists"


class Conflict(APIError):
    """A stale resourceVersion (or another write-write conflict): re-read and try again."""

    default_code = 409
    default_reason = "Conflict"


class ResourceExpired(APIError):
    """410: the resourceVersion is older than the server keeps (reasons Expired and Gone); relist."""

    default_code = 410
    default_reason = "Expired"


class RequestEntityTooLarge(APIError):
    default_code = 413
    default_reason = "RequestEntityTooLarge"


class UnsupportedMediaType(APIError):
    default_code = 415
    default_reason = "UnsupportedMediaType"


class Invalid(APIError):
    """422: the object failed validation; ``causes`` name the fields."""

    default_code = 422
    default_reason = "Invalid"


class TooManyRequests(APIError):
    default_code = 429
    default_reason = "TooManyRequests"


class InternalError(APIError):
    default_code = 500
    default_reason = "InternalError"


class ServiceUnavailable(APIError):
    """503: the server cannot serve the request now (its storage is locked, say); retry later."""

    default_code = 503
    default_reason = "ServiceUnavailable"


class Timeout(APIError):
    """504: the request could not finish in time (a resourceVersion from the future, say)."""

    default_code = 504
    default_reason = "Timeout"


class ServerTimeout(APIError):
    default_code = 500
    default_reason = "ServerTimeout"


class InvalidSelector(ValueError):
    """A label or field selector that does not parse or validate; ``message`` is upstream's text.

    The API server answers it with a 400 BadRequest Status carrying the message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_REASON_CLASSES: tuple[type[APIError], ...] = (
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
_BY_REASON: dict[str, type[APIError]] = {cls.default_reason: cls for cls in _REASON_CLASSES}
_BY_REASON["Gone"] = ResourceExpired
#: When the Status has no known reason, the code decides (as apimachinery's ``ReasonForError``).
_BY_CODE: dict[int, type[APIError]] = {
    cls.default_code: cls for cls in _REASON_CLASSES if cls not in (AlreadyExists, ServerTimeout)
}


def error_from_status(code: int, body: Any) -> APIError:
    """The exception for an HTTP ``code`` and its decoded body (a Status, or anything else)."""
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        status: Mapping[str, Any] = body
    else:
        text = body if isinstance(body, str) else ""
        status = {"message": text.strip()}
    reason = str(status.get("reason") or "")
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or APIError
    details = status.get("details")
    details = details if isinstance(details, Mapping) else {}
    retry = details.get("retryAfterSeconds")
    return cls(
        str(status.get("message") or f"the server answered {code}"),
        code=int(status.get("code") or code),
        reason=reason or None,
        name=str(details.get("name") or ""),
        group=str(details.get("group") or ""),
        kind=str(details.get("kind") or ""),
        causes=[StatusCause.from_dict(c) for c in details.get("causes") or () if isinstance(c, Mapping)],
        retry_after_seconds=retry if isinstance(retry, int) else None,
    )


# ---------------------------------------------------------------- upstream's messages


def resource_label(group: str, plural: str) -> str:
    """``deployments.apps`` / ``pods``: how upstream names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> NotFound:
    return NotFound(
        f'{resource_label(group, plural)} "{name}" not found', name=name, group=group, kind=plural
    )


def already_exists(group: str, plural: str, name: str) -> AlreadyExists:
    return AlreadyExists(
        f'{resource_label(group, plural)} "{name}" already exists', name=name, group=group, kind=plural
    )


def conflict(group: str, plural: str, name: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {resource_label(group, plural)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        name=name,
        group=group,
        kind=plural,
    )


def invalid(group: str, kind: str, name: str, causes: list[StatusCause]) -> Invalid:
    """422 with upstream's message shape: Kind "name" is invalid: [field: Reason: detail, ...]."""
    parts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    label = f"{kind}.{group}" if group else kind
    return Invalid(f'{label} "{name}" is invalid: {joined}', name=name, group=group, kind=kind, causes=causes)


def internal_error(detail: str) -> InternalError:
    """500 for what went wrong inside the server (or a webhook it called), worded as upstream's
    ``NewInternalError``: the detail in the message and as the one cause."""
    return InternalError(f"Internal error occurred: {detail}", causes=[StatusCause("", detail, "")])


def expired(requested: int, oldest: int) -> ResourceExpired:
    return ResourceExpired(f"too old resource version: {requested} ({oldest})")


# ---------------------------------------------------------------- for callers


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
