"""API errors as Kubernetes ``Status`` objects (metav1.Status), one class per reason.

Every client mistake is raised as an ``APIError`` subclass and rendered by the HTTP layer
as ``{"kind": "Status", "status": "Failure", "reason": ..., "code": ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One entry of ``details.causes``: what is wrong and with which field."""

    type: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"reason": self.type, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


class APIError(Exception):
    """An error answered to the client as a Status object."""

    code = 500
    reason = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        name: str = "",
        group: str = "",
        kind: str = "",
        causes: list[Cause] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.group = group
        self.kind = kind
        self.causes = causes or []
        self.retry_after_seconds = retry_after_seconds

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
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
        if details:
            status["details"] = details
        return status


class BadRequest(APIError):
    code = 400
    reason = "BadRequest"


class Unauthorized(APIError):
    code = 401
    reason = "Unauthorized"


class Forbidden(APIError):
    code = 403
    reason = "Forbidden"


class NotFound(APIError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(APIError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(APIError):
    code = 406
    reason = "NotAcceptable"


class AlreadyExists(APIError):
    code = 409
    reason = "AlreadyExists"


class Conflict(APIError):
    code = 409
    reason = "Conflict"


class Gone(APIError):
    """410 Expired: the resourceVersion asked for is older than the compacted history."""

    code = 410
    reason = "Expired"


class RequestEntityTooLarge(APIError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(APIError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(APIError):
    code = 422
    reason = "Invalid"


class InternalError(APIError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(APIError):
    """503: the server cannot serve the request now (its storage is locked); retry later."""

    code = 503
    reason = "ServiceUnavailable"


class Timeout(APIError):
    code = 504
    reason = "Timeout"


def resource_label(group: str, plural: str) -> str:
    """``deployments.apps`` / ``pods``: how upstream names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str, kind: str = "") -> NotFound:
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


def invalid(group: str, kind: str, name: str, causes: list[Cause]) -> Invalid:
    """422 with upstream's message shape: Kind "name" is invalid: [field: Reason: detail, ...]."""
    parts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    label = f"{kind}.{group}" if group else kind
    return Invalid(f'{label} "{name}" is invalid: {joined}', name=name, group=group, kind=kind, causes=causes)


def expired(requested: int, oldest: int) -> Gone:
    return Gone(f"too old resource version: {requested} ({oldest})")
