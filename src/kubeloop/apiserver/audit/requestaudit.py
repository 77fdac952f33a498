"""One request's audit event as it is served, and the context it is reached through.

The HTTP layer opens a :class:`RequestAudit` for every request the policy records and makes it
current (a context variable, so admission's plugins deep below reach it as upstream's do through
the request's context): they add annotations with :func:`add_annotation`, which does nothing when
the request is not recorded.
"""

from __future__ import annotations

import contextvars
import datetime
from dataclasses import dataclass, field
from typing import Any

from kubeloop.apiserver.audit.policy import LEVELS

_current: contextvars.ContextVar[RequestAudit | None] = contextvars.ContextVar(
    "kubeloop_request_audit", default=None
)


def microtime(moment: datetime.datetime) -> str:
    """A ``MicroTime``: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class RequestAudit:
    """What the event of one request says so far (upstream's ``AuditContext``)."""

    level: str
    omit_stages: frozenset[str]
    omit_managed_fields: bool
    #: The event's fields known when the request was received (auditID, requestURI, verb,
    #: user, impersonatedUser, sourceIPs, userAgent, objectRef, requestReceivedTimestamp).
    fields: dict[str, Any]
    annotations: dict[str, str] = field(default_factory=dict)
    #: The request's body, as read (the requestObject of Request level and above).
    request_body: bytes = b""
    request_content_type: str = ""

    def at_least(self, level: str) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)

    def annotate(self, key: str, value: str, level: str = "Metadata") -> None:
        """Add an annotation when the event is recorded at ``level`` or above; a key keeps its
        first value (upstream's ``AddAuditAnnotation``)."""
        if self.at_least(level):
            self.annotations.setdefault(key, value)

    def event(
        self,
        stage: str,
        *,
        response_status: dict[str, Any] | None = None,
        request_object: Any = None,
        response_object: Any = None,
    ) -> dict[str, Any]:
        """The audit.k8s.io/v1 Event of ``stage``, with the objects the level records."""
        event: dict[str, Any] = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": self.level}
        event.update(self.fields)
        event["stage"] = stage
        if response_status is not None:
            event["responseStatus"] = response_status
        if request_object is not None and self.at_least("Request"):
            event["requestObject"] = self._without_managed_fields(request_object)
        if response_object is not None and self.at_least("RequestResponse"):
            event["responseObject"] = self._without_managed_fields(response_object)
        event["requestReceivedTimestamp"] = self.fields["requestReceivedTimestamp"]
        event["stageTimestamp"] = microtime(datetime.datetime.now(datetime.UTC))
        if self.annotations:
            event["annotations"] = dict(self.annotations)
        return event

    def _without_managed_fields(self, obj: Any) -> Any:
        if not self.omit_managed_fields or not isinstance(obj, dict):
            return obj
        metadata = obj.get("metadata")
        if isinstance(metadata, dict) and "managedFields" in metadata:
            obj = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
        items = obj.get("items")
        if isinstance(items, list):
            obj = {**obj, "items": [self._without_managed_fields(item) for item in items]}
        return obj


def current() -> RequestAudit | None:
    """The event of the request being served (None when it is not recorded)."""
    return _current.get()


def set_current(audit: RequestAudit | None) -> contextvars.Token[RequestAudit | None]:
    return _current.set(audit)


def reset_current(token: contextvars.Token[RequestAudit | None]) -> None:
    _current.reset(token)


def record_body(body: bytes, content_type: str) -> None:
    """Keep the current request's body for its event."""
    audit = _current.get()
    if audit is not None:
        audit.request_body = body
        audit.request_content_type = content_type


def add_annotation(key: str, value: str, level: str = "Metadata") -> None:
    """Annotate the current request's audit event (nothing when it is not recorded)."""
    audit = _current.get()
    if audit is not None:
        audit.annotate(key, value, level)
