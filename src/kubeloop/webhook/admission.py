"""Admission webhooks: the request kube-apiserver sends, the answer a handler gives, and the HTTP
endpoint between them (controller-runtime's ``webhook/admission``).

A handler is a function (async, or plain and run in a thread) from an :class:`AdmissionRequest`
to an :class:`AdmissionResponse`; :func:`allowed`, :func:`denied`, :func:`errored`,
:func:`patched` and :func:`from_error` build the answers. :class:`AdmissionWebhook` serves one
handler: it reads an ``AdmissionReview`` (``admission.k8s.io/v1`` or ``v1beta1``) and answers in
the same version. A body that is no AdmissionReview gets HTTP 400 with the reason; a handler that
raises gets a 500-coded denial naming the webhook, and the server goes on serving.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.webhook.jsonpatchdiff import Operation, create_patch
from kubeloop.webhook.processcounts import process_counts
from kubeloop.webhook.webhookmetrics import WebhookMetrics, measured_response

if TYPE_CHECKING:
    from aiohttp import web


log = logging.getLogger("kubeloop.webhook")

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
CONNECT = "CONNECT"

#: The AdmissionRequest being answered in this context (None outside a webhook's handler).
_current_request: contextvars.ContextVar[AdmissionRequest | None] = contextvars.ContextVar(
    "kubeloop_admission_request", default=None
)


def current_request() -> AdmissionRequest:
    """The AdmissionRequest a defaulter, validator or handler is answering (controller-runtime's
    ``admission.RequestFromContext``): who asks (``user_info``), the operation, dry run. Raises
    LookupError outside one."""
    request = _current_request.get()
    if request is None:
        raise LookupError("current_request() is only known while a webhook answers a request")
    return request


#: The AdmissionReview versions served (kube-apiserver sends the first it lists that we accept).
REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


@dataclass(frozen=True)
class AdmissionRequest:
    """What kube-apiserver asks about one request (``admission.k8s.io/v1`` AdmissionRequest)."""

    uid: str
    #: The kind of ``object`` as the webhook asked for it (its rules' version).
    kind: GroupVersionKind
    #: {group, version, resource} being written.
    resource: dict[str, str]
    operation: str
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    #: The kind and resource the client wrote (another version under matchPolicy Equivalent).
    request_kind: GroupVersionKind | None = None
    request_resource: dict[str, str] | None = None
    request_sub_resource: str = ""
    #: {username, uid, groups, extra} of the client.
    user_info: dict[str, Any] = field(default_factory=dict)
    #: The object being written (None for DELETE).
    object: dict[str, Any] | None = None
    #: The object before the write (UPDATE, DELETE).
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    #: The CreateOptions, UpdateOptions, PatchOptions or DeleteOptions of the request.
    options: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdmissionRequest:
        """The request of an AdmissionReview's ``request``; ValueError naming what is missing."""
        uid = data.get("uid")
        if not isinstance(uid, str) or not uid:
            raise ValueError("request.uid is missing")
        operation = data.get("operation")
        if operation not in (CREATE, UPDATE, DELETE, CONNECT):
            raise ValueError(f"request.operation {operation!r} is not CREATE, UPDATE, DELETE or CONNECT")
        return cls(
            uid=uid,
            kind=_gvk(data.get("kind"), "request.kind"),
            resource=_mapping(data.get("resource"), "request.resource"),
            operation=operation,
            name=str(data.get("name") or ""),
            namespace=str(data.get("namespace") or ""),
            sub_resource=str(data.get("subResource") or ""),
            request_kind=_gvk(data["requestKind"], "request.requestKind")
            if data.get("requestKind")
            else None,
            request_resource=(
                _mapping(data["requestResource"], "request.requestResource")
                if data.get("requestResource")
                else None
            ),
            request_sub_resource=str(data.get("requestSubResource") or ""),
            user_info=_mapping(data.get("userInfo") or {}, "request.userInfo"),
            object=_object(data.get("object"), "request.object"),
            old_object=_object(data.get("oldObject"), "request.oldObject"),
            dry_run=bool(data.get("dryRun")),
            options=_object(data.get("options"), "request.options"),
        )


@dataclass
class AdmissionResponse:
    """A handler's answer: allowed or not, why (a Status ``result``), a JSON ``patch``, warnings."""

    allowed: bool
    #: A Status object (code, reason, message, details) — the reason for a denial.
    result: dict[str, Any] | None = None
    patch: list[Operation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)

    def with_warnings(self, *warnings: str) -> AdmissionResponse:
        self.warnings.extend(warnings)
        return self

    def to_dict(self, uid: str) -> dict[str, Any]:
        """The AdmissionReview's ``response``."""
        response: dict[str, Any] = {"uid": uid, "allowed": self.allowed}
        if self.result is not None:
            response["status"] = self.result
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(self.patch)).decode()
        if self.warnings:
            response["warnings"] = list(self.warnings)
        if self.audit_annotations:
            response["auditAnnotations"] = dict(self.audit_annotations)
        return response


def allowed(message: str = "") -> AdmissionResponse:
    """Let the request through (``message`` is kept in the result, as upstream's ``Allowed``)."""
    return AdmissionResponse(True, {"code": 200, "message": message} if message else {"code": 200})


def denied(message: str, *, code: int = 403, reason: str = "Forbidden") -> AdmissionResponse:
    """Refuse the request; kube-apiserver answers the client with ``code`` and ``message``."""
    return AdmissionResponse(False, {"code": code, "reason": reason, "message": message})


def errored(code: int, message: str) -> AdmissionResponse:
    """Refuse the request because the webhook failed (upstream's ``Errored``)."""
    return AdmissionResponse(False, {"code": code, "message": message})


def from_error(error: errors.APIError) -> AdmissionResponse:
    """Refuse with an API error's Status as it is: its code, reason, message and field causes."""
    status = error.to_status()
    status.pop("kind", None)
    status.pop("apiVersion", None)
    status.pop("metadata", None)
    return AdmissionResponse(False, status)


def patched(
    original: dict[str, Any], current: dict[str, Any], *, keep_removals: bool = True
) -> AdmissionResponse:
    """Allow, with the JSON patch from ``original`` to ``current`` (``PatchResponseFromRaw``).
    Without ``keep_removals`` the patch only adds and replaces. ``original`` must be the object
    as it was sent: change a copy of ``request.object``, not the object itself."""
    operations = create_patch(original, current)
    if not keep_removals:
        operations = [operation for operation in operations if operation["op"] != "remove"]
    return AdmissionResponse(True, {"code": 200}, patch=operations)


Handler = Callable[[AdmissionRequest], "Awaitable[AdmissionResponse] | AdmissionResponse"]


class AdmissionWebhook:
    """One admission endpoint: ``handler`` behind AdmissionReview's decoding and encoding.

    ``mutating`` says whether it may patch (a MutatingWebhookConfiguration calls it); the builder
    also sets ``kind`` and ``operations`` (what ``kubeloop webhook`` generates the rules from) and
    ``name`` (the webhook's name in the configuration).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        mutating: bool,
        name: str = "",
        kind: GroupVersionKind | None = None,
        operations: tuple[str, ...] = (CREATE, UPDATE),
        failure_policy: str = "Fail",
        side_effects: str = "None",
        timeout_seconds: int = 10,
    ) -> None:
        self.handler = handler
        self.mutating = mutating
        self.name = name
        self.kind = kind
        self.operations = operations
        self.failure_policy = failure_policy
        self.side_effects = side_effects
        self.timeout_seconds = timeout_seconds
        #: Where the server registered it (set by ``WebhookServer.register``).
        self.path = ""
        self.metrics: WebhookMetrics | None = None
        self._sync = not inspect.iscoroutinefunction(handler)

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        """The handler's answer; a handler that raises is answered with a 500-coded denial."""
        token = _current_request.set(request)
        try:
            if self._sync:
                answer = await asyncio.to_thread(self.handler, request)
            else:
                answer = self.handler(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except errors.APIError as error:
            return from_error(error)
        except Exception as error:
            process_counts.admission_panics += 1
            log.exception(
                "admission webhook %s failed on %s %s", self.path, request.operation, request.kind.kind
            )
            return errored(500, f"admission webhook {self.path} failed: {type(error).__name__}: {error}")
        finally:
            _current_request.reset(token)
        if not isinstance(answer, AdmissionResponse):
            return errored(
                500,
                f"admission webhook {self.path} returned {type(answer).__name__}, not an AdmissionResponse",
            )
        return answer

    async def serve(self, request: web.Request) -> web.Response:
        """The HTTP endpoint: an AdmissionReview in, an AdmissionReview out."""
        return await measured_response(self.metrics, self.path, self._answer(request))

    async def _answer(self, request: web.Request) -> tuple[int, bytes]:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type != "application/json":
            return _bad_request(
                "", REVIEW_VERSIONS[0], f"contentType={content_type}, expected application/json"
            )
        body = await request.read()
        if not body:
            return _bad_request("", REVIEW_VERSIONS[0], "request body is empty")
        try:
            review = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            return _bad_request("", REVIEW_VERSIONS[0], f"the body is not JSON: {error}")
        if not isinstance(review, dict):
            return _bad_request("", REVIEW_VERSIONS[0], "the body is not an AdmissionReview object")
        version = review.get("apiVersion")
        if review.get("kind") != "AdmissionReview" or version not in REVIEW_VERSIONS:
            return _bad_request(
                "",
                REVIEW_VERSIONS[0],
                f"expected an AdmissionReview of {' or '.join(REVIEW_VERSIONS)}, "
                f"got kind {review.get('kind')!r} of {version!r}",
            )
        raw = review.get("request")
        uid = raw.get("uid", "") if isinstance(raw, dict) else ""
        if not isinstance(raw, dict):
            return _bad_request("", version, "the AdmissionReview has no request")
        try:
            admission = AdmissionRequest.from_dict(raw)
        except ValueError as error:
            return _bad_request(str(uid), version, str(error))
        answer = await self.handle(admission)
        return 200, _review(version, answer.to_dict(admission.uid))


def _review(version: str, response: dict[str, Any]) -> bytes:
    return orjson.dumps({"apiVersion": version, "kind": "AdmissionReview", "response": response})


def _bad_request(uid: str, version: str, message: str) -> tuple[int, bytes]:
    return 400, _review(version, errored(400, message).to_dict(uid))


def _gvk(value: Any, where: str) -> GroupVersionKind:
    data = _mapping(value, where)
    if not data.get("version") or not data.get("kind"):
        raise ValueError(f"{where} needs a version and a kind")
    return GroupVersionKind(str(data.get("group") or ""), str(data["version"]), str(data["kind"]))


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object")
    return value


def _object(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    return _mapping(value, where)
