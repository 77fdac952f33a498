"""The audit middleware: each authenticated request is matched against the audit policy, and
the request it records gets its events written — ``RequestReceived`` when it arrives,
``ResponseStarted`` when a watch begins streaming, ``ResponseComplete`` when the answer is
sent, ``Panic`` when serving failed unexpectedly — each with the request's ``Audit-Id``, which
the answer carries too. The path is read as upstream's ``RequestInfoFactory`` reads it (verb,
API group and version, namespace, resource, subresource, name), so a path the server does not
serve is recorded as asked. Requests that fail authentication are recorded with code 401.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware

from kubeloop import errors
from kubeloop.apiserver import decoding
from kubeloop.apiserver.audit import requestaudit
from kubeloop.apiserver.audit.logwriter import AuditLogWriter
from kubeloop.apiserver.audit.policy import AuditPolicy, RequestAttributes
from kubeloop.apiserver.http.authentication import IMPERSONATOR, current_user
from kubeloop.apiserver.http.http1 import HTTPRequest, query_value
from kubeloop.apiserver.http.requestoptions import truthy
from kubeloop.apiserver.protobuf import codec, descriptors
from kubeloop.apiserver.userinfo import UserInfo

R = TypeVar("R", bound=HTTPRequest)

#: The response header naming a request's audit ID.
AUDIT_ID_HEADER = "Audit-Id"
_AUDIT = web.RequestKey("audit", requestaudit.RequestAudit)
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def request_attributes(request: HTTPRequest, user: UserInfo | None) -> RequestAttributes:
    """What the audit policy and the event know of ``request`` from its method and path."""
    method = request.method
    path = request.path
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return RequestAttributes(user=user, verb=method.lower(), path=path, resource_request=False)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "get")
    if method in ("GET", "HEAD"):
        verb = "watch" if truthy(query_value(request, "watch")) else ("get" if name else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    return RequestAttributes(
        user=user,
        verb=verb,
        path=path,
        resource_request=True,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )


class Auditor:
    """Records requests by ``policy`` into ``writer``; see the module docs."""

    def __init__(self, policy: AuditPolicy, writer: AuditLogWriter) -> None:
        self.policy = policy
        self.writer = writer

    def _open(self, request: HTTPRequest, user: UserInfo | None) -> requestaudit.RequestAudit | None:
        attributes = request_attributes(request, user)
        decision = self.policy.decide(attributes)
        if decision.level == "None":
            return None
        fields: dict[str, Any] = {
            "auditID": request.headers.get(AUDIT_ID_HEADER) or str(uuid.uuid4()),
            "requestURI": request.path_qs,
            "verb": attributes.verb,
        }
        impersonator = request.get(IMPERSONATOR)
        if isinstance(impersonator, UserInfo) and user is not None:
            fields["user"] = impersonator.to_dict()
            fields["impersonatedUser"] = user.to_dict()
        else:
            fields["user"] = user.to_dict() if user is not None else {}
        fields["sourceIPs"] = _source_ips(request)
        agent = request.headers.get("User-Agent")
        if agent:
            fields["userAgent"] = agent
        if attributes.resource_request:
            reference = {
                "resource": attributes.resource,
                "namespace": attributes.namespace,
                "name": attributes.name,
                "apiGroup": attributes.api_group,
                "apiVersion": attributes.api_version,
                "subresource": attributes.subresource,
            }
            fields["objectRef"] = {key: value for key, value in reference.items() if value}
        fields["requestReceivedTimestamp"] = requestaudit.microtime(datetime.datetime.now(datetime.UTC))
        return requestaudit.RequestAudit(
            decision.level, decision.omit_stages, decision.omit_managed_fields, fields
        )

    def _emit(self, audit: requestaudit.RequestAudit, stage: str, **parts: Any) -> None:
        if stage not in audit.omit_stages:
            self.writer.write(audit.event(stage, **parts))

    async def middleware(
        self, request: R, handler: Callable[[R], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Serve ``request`` through ``handler``, recording it (an aiohttp middleware, also
        called directly for small requests; it sits after authentication)."""
        audit = self._open(request, current_user(request))
        if audit is None:
            return await handler(request)
        request[_AUDIT] = audit
        self._emit(audit, "RequestReceived")
        token = requestaudit.set_current(audit)
        try:
            response = await handler(request)
        except errors.APIError as error:
            self._complete(audit, "ResponseComplete", error.code, error.to_status())
            raise
        except Exception:
            self._complete(audit, "Panic", 500, None, message="Internal error occurred")
            raise
        finally:
            requestaudit.reset_current(token)
        status: dict[str, Any] | None = None
        response_object: Any = None
        if isinstance(response, web.Response) and (response.status >= 400 or audit.at_least("RequestResponse")):
            body = response.body
            decoded = _decoded(body, response.content_type) if isinstance(body, bytes) else None
            if response.status >= 400 and isinstance(decoded, dict) and decoded.get("kind") == "Status":
                status = decoded
            else:
                response_object = decoded
        if not response.prepared:
            response.headers[AUDIT_ID_HEADER] = audit.fields["auditID"]
        self._complete(audit, "ResponseComplete", response.status, status, response_object=response_object)
        return response

    def _complete(
        self,
        audit: requestaudit.RequestAudit,
        stage: str,
        code: int,
        status: dict[str, Any] | None,
        *,
        message: str = "",
        response_object: Any = None,
    ) -> None:
        """The last event: the response's status (what an error's Status says), and the request
        and response objects the level records."""
        response_status: dict[str, Any] = {"metadata": {}}
        if status is not None:
            for key in ("status", "message", "reason", "details"):
                if status.get(key):
                    response_status[key] = status[key]
        elif message:
            response_status["message"] = message
        response_status["code"] = code
        request_object = _request_object(audit)
        reference = audit.fields.get("objectRef")
        if (
            isinstance(reference, dict)
            and "name" not in reference
            and audit.fields["verb"] == "create"
            and isinstance(request_object, dict)
        ):
            name = (request_object.get("metadata") or {}).get("name")
            if isinstance(name, str) and name:
                reference["name"] = name
        self._emit(
            audit,
            stage,
            response_status=response_status,
            request_object=request_object,
            response_object=response_object,
        )

    def aiohttp_middleware(self) -> Middleware:
        """:meth:`middleware` as aiohttp's application takes it."""

        @web.middleware
        async def audited(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            return await self.middleware(request, handler)

        return audited

    def response_started(self, request: HTTPRequest, response: web.StreamResponse) -> None:
        """A streamed answer (a watch) is about to start: its header, and its event."""
        audit = request.get(_AUDIT)
        if isinstance(audit, requestaudit.RequestAudit):
            response.headers[AUDIT_ID_HEADER] = audit.fields["auditID"]
            self._emit(audit, "ResponseStarted", response_status={"metadata": {}, "code": response.status})

    def failed_authentication(self, request: HTTPRequest) -> None:
        """A request that did not authenticate: recorded as upstream does, without a user."""
        audit = self._open(request, None)
        if audit is not None:
            self._emit(audit, "ResponseStarted", response_status={"metadata": {}, "code": 401})


def response_started(request: HTTPRequest, response: web.StreamResponse, auditor: Auditor | None) -> None:
    if auditor is not None:
        auditor.response_started(request, response)


def _request_object(audit: requestaudit.RequestAudit) -> Any:
    """The request's body as an object, when the request had one."""
    if not audit.request_body:
        return None
    return _decoded(audit.request_body, audit.request_content_type)


def _decoded(body: bytes, content_type: str) -> Any:
    """A body as JSON values: JSON (and the JSON patch types), YAML (and apply patches), or
    Kubernetes protobuf (once the server has read its message tables); None otherwise."""
    try:
        if content_type == codec.MEDIA_TYPE:
            tables = descriptors.loaded_tables()
            return codec.decode_object(body, tables) if tables is not None else None
        if "yaml" in content_type:
            return decoding.decode_yaml(body)
        return orjson.loads(body)
    except (orjson.JSONDecodeError, errors.APIError, codec.ProtobufError):
        return None


def _source_ips(request: HTTPRequest) -> list[str]:
    """``X-Forwarded-For``'s addresses, then the peer's (upstream's ``SourceIPs``)."""
    addresses = [
        address.strip() for address in request.headers.get("X-Forwarded-For", "").split(",") if address.strip()
    ]
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple) and peer:
        address = str(peer[0])
    elif transport is not None and peer is not None:
        address = "127.0.0.1"  # one end of a socket pair: a client in this process (its loopback)
    else:
        return addresses
    if address not in addresses:
        addresses.append(address)
    return addresses
