"""The REST surface: parses Kubernetes API paths, query parameters and media types into
:class:`~kubeloop.apiserver.registry.Registry` calls and encodes the answers (objects, lists,
Tables, watch streams, Status errors).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import aiohttp
import orjson
from aiohttp import web
from multidict import MultiMapping

from kubeloop import errors
from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.auth import reviews
from kubeloop.apiserver.auth.escalation import EscalationGuard
from kubeloop.apiserver.auth.rbac import RBAC_GROUP, SUPERUSER_GROUP, Attributes, RBACAuthorizer, verb_of
from kubeloop.apiserver.auth.tokens import ServiceAccountTokens, token_request
from kubeloop.apiserver.catalog import mediatypes, schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.http.auth import USER
from kubeloop.apiserver.http.http1 import BufferedRequest, HTTPRequest
from kubeloop.apiserver.http.watch import WatchOptions, WatchSettings, WatchStream
from kubeloop.apiserver.http.workerloop import WorkerLoop
from kubeloop.apiserver.openapi import discovery, v2, v3
from kubeloop.apiserver.printing import tables
from kubeloop.apiserver.protobuf import codec, descriptors
from kubeloop.apiserver.registry import generic, pods, validation
from kubeloop.apiserver.registry.generic import DeleteOptions, ListOptions, Registry, WriteOptions
from kubeloop.errors import InvalidSelector

log = logging.getLogger("kubeloop.apiserver")

MAX_BODY_BYTES = 3 * 1024 * 1024
#: Write bodies at least this large are decoded and processed on the worker loop.
OFFLOAD_BYTES = 64 * 1024
#: Lists with at least this many items are encoded off the serving loop, in slices.
LARGE_LIST_ITEMS = 1000
_LIST_SLICE = 250
T = TypeVar("T")
R = TypeVar("R", bound=HTTPRequest)
JSON = "application/json"


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


def json_response(body: Any, status: int = 200, *, warnings: list[str] | None = None) -> web.Response:
    """``body`` as JSON ending in a newline, as Go's ``json.Encoder`` writes every answer."""
    return _with_warnings(
        web.Response(body=orjson.dumps(body, option=orjson.OPT_APPEND_NEWLINE), status=status, content_type=JSON),
        warnings,
    )


def _with_warnings(response: web.Response, warnings: list[str] | None) -> web.Response:
    for warning in warnings or ():
        response.headers.add("Warning", f'299 - "{_quote_warning(warning)}"')
    return response


async def object_response(
    request: HTTPRequest, body: Obj, status: int = 200, *, warnings: list[str] | None = None
) -> web.Response:
    """An object or list as JSON, or as Kubernetes protobuf when the client asks for that first.

    Objects the protobuf tables cannot express (no kubectl to read them from, a kind they lack)
    go out as JSON: clients decode by the response's Content-Type.
    """
    if _accept(request).protobuf:
        try:
            message_tables = await asyncio.to_thread(descriptors.load_tables)
            encoded = codec.encode_object(body, message_tables)
        except (descriptors.DescriptorError, codec.ProtobufError) as exc:
            log.debug("answering %s in JSON: %s", request.path, exc)
        else:
            return _with_warnings(
                web.Response(body=encoded, status=status, content_type=codec.MEDIA_TYPE), warnings
            )
    return json_response(body, status, warnings=warnings)


def encode_list_in_slices(body: Obj) -> bytes:
    """``json_response``'s body for a list, its items encoded ``_LIST_SLICE`` at a time: one
    encode of a 12 MB list holds the interpreter lock for ~40 ms, a slice for well under one."""
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


def _quote_warning(text: str) -> str:
    # Go's header writer turns CR and LF into spaces: a field name in a warning cannot split the head.
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")


def status_response(error: errors.APIError) -> web.Response:
    response = json_response(error.to_status(), error.code)
    if error.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(error.retry_after_seconds)
    return response


class APIHandlers:
    """aiohttp handlers for discovery, OpenAPI and every resource path of a catalog."""

    def __init__(
        self,
        reg: Registry,
        catalog: ResourceCatalog,
        *,
        watch_settings: WatchSettings,
        server_address: str,
        readiness: Callable[[], str | None] = lambda: None,
        worker: WorkerLoop | None = None,
        extra_definitions: Callable[[], Mapping[str, Any]] = dict,
        authorizer: RBACAuthorizer | None = None,
        tokens: ServiceAccountTokens | None = None,
        token_reviewer: reviews.TokenReviewer | None = None,
        components: Callable[[], list[tuple[str, str | None]]] = list,
    ) -> None:
        self.registry = reg
        self.catalog = catalog
        self.watch_settings = watch_settings
        self.server_address = server_address
        #: Why the server cannot serve writes now (its storage fails), or None.
        self.readiness = readiness
        #: Where large write requests do their CPU work (None: on the serving loop).
        self.worker = worker
        #: The OpenAPI definitions of the custom resources served now.
        self.extra_definitions = extra_definitions
        #: Who may do what on resource paths (None: every authenticated user may do everything).
        self.authorizer = authorizer
        #: Issues ServiceAccount tokens (serviceaccounts/token); None: the subresource answers 404.
        self.tokens = tokens
        #: Judges the tokens of TokenReviews (None: every token is unauthenticated).
        self.token_reviewer = token_reviewer
        #: The cluster's components and what ails each (None: healthy), for ComponentStatus.
        self.components = components

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/version", self.version),
            web.get("/version/", self.version),
            web.get("/healthz", self.readyz),
            web.get("/livez", self.livez),
            web.get("/readyz", self.readyz),
            web.get("/api", self.core_versions),
            web.get("/apis", self.group_list),
            web.get("/openapi/v3", self.openapi_index),
            web.get("/openapi/v3/{path:.*}", self.openapi_document),
            web.get("/openapi/v2", self.openapi_v2),
            web.route("*", "/api/{path:.*}", self.core_api),
            web.route("*", "/apis/{path:.*}", self.group_api),
        ]

    # ---------------------------------------------------------------- discovery

    async def version(self, request: HTTPRequest) -> web.Response:
        return json_response(discovery.version_info(schemas.schema_release()))

    async def livez(self, request: HTTPRequest) -> web.Response:
        return _health_response(request, "livez", [("ping", None)])

    async def readyz(self, request: HTTPRequest) -> web.Response:
        """Ready when the storage takes writes; otherwise 500 naming why (kube-apiserver's format)."""
        name = request.path.strip("/")
        return _health_response(request, name, [("ping", None), ("storage", self.readiness())])

    async def core_versions(self, request: HTTPRequest) -> web.Response:
        return json_response(discovery.core_api_versions(self.server_address))

    async def group_list(self, request: HTTPRequest) -> web.Response:
        return json_response(discovery.api_group_list(self.catalog))

    async def openapi_index(self, request: HTTPRequest) -> web.Response:
        return json_response(v3.openapi_v3_index(self.catalog, self.extra_definitions()))

    async def openapi_document(self, request: HTTPRequest) -> web.Response:
        document = v3.openapi_v3_document(self.catalog, request.match_info["path"], self.extra_definitions())
        if document is None:
            return status_response(errors.NotFound("the server could not find the requested resource"))
        return web.Response(body=document, content_type=JSON)

    async def openapi_v2(self, request: HTTPRequest) -> web.Response:
        """Protobuf when asked for (kubectl 1.27/1.28), else JSON."""
        accept = request.headers.get("Accept", "")
        if "protobuf" in accept:
            # Upstream answers with octet-stream: Go clients cannot parse the "@" in the media type.
            body = v2.openapi_v2_protobuf(self.catalog, self.extra_definitions())
            return web.Response(body=body, content_type="application/octet-stream")
        if accept and not any(media in accept for media in ("application/json", "*/*", "application/*")):
            return status_response(
                errors.NotAcceptable(
                    f"only the following media types are accepted: application/json, {v2.MEDIA_TYPE}"
                )
            )
        return web.Response(
            body=v2.openapi_v2_json(self.catalog, self.extra_definitions()), content_type=JSON
        )

    # ---------------------------------------------------------------- resources

    async def core_api(self, request: HTTPRequest) -> web.StreamResponse:
        parts = [p for p in request.match_info["path"].split("/") if p]
        if not parts:
            return await self.core_versions(request)
        return await self._dispatch(request, "", parts[0], parts[1:])

    async def group_api(self, request: HTTPRequest) -> web.StreamResponse:
        parts = [p for p in request.match_info["path"].split("/") if p]
        if not parts:
            return await self.group_list(request)
        if len(parts) == 1:
            group = discovery.api_group(self.catalog, parts[0])
            if group is None:
                return status_response(errors.NotFound("the server could not find the requested resource"))
            return json_response(group)
        return await self._dispatch(request, parts[0], parts[1], parts[2:])

    async def route_small(self, request: BufferedRequest) -> web.StreamResponse:
        """The handler aiohttp's routes pick for a small request (``/api``, ``/apis`` and below:
        the paths http1 reads)."""
        path = request.path
        core = not path.startswith("/apis")
        if path in ("/api", "/apis") and request.method != "GET":
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        request.match_info["path"] = path[5:] if core else path[6:]
        return await (self.core_api(request) if core else self.group_api(request))

    async def _dispatch(
        self, request: HTTPRequest, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        try:
            if not rest:
                if request.method != "GET":
                    raise errors.MethodNotAllowed(
                        "the server does not allow this method on the requested resource"
                    )
                resources = discovery.api_resource_list(self.catalog, group, version)
                if resources is None:
                    raise errors.NotFound("the server could not find the requested resource")
                return json_response(resources)
            target = self._parse_target(group, version, rest)
            if self.authorizer is not None:
                self._authorize(request, target)
            return await self._serve(request, target)
        except errors.APIError as error:
            return status_response(error)
        except InvalidSelector as invalid:
            return status_response(errors.BadRequest(invalid.message))

    def _authorize(self, request: HTTPRequest, target: Target) -> None:
        """403 unless the request's user may do what it asks (RBAC)."""
        assert self.authorizer is not None
        user = request.get(USER)
        if user is None:
            raise errors.Unauthorized("Unauthorized")
        if SUPERUSER_GROUP in user.groups:
            return  # the common case (the kubeconfig's admin) costs one look
        resource = target.resource
        attributes = Attributes(
            verb=verb_of(
                request.method, named=target.name is not None, watch=_truthy(request.query.get("watch"))
            ),
            group=resource.group,
            resource=resource.plural,
            subresource=target.subresource,
            namespace=target.namespace or "",
            name=target.name or "",
        )
        if not self.authorizer.allowed(user, attributes):
            raise self.authorizer.forbidden(user, attributes)

    def _parse_target(self, group: str, version: str, rest: list[str]) -> Target:
        def lookup(plural: str) -> ResourceType:
            resource = self.catalog.lookup(group, version, plural)
            if resource is None:
                raise errors.NotFound("the server could not find the requested resource")
            return resource

        n = len(rest)
        if rest[0] == "namespaces" and n >= 3 and not (n == 3 and rest[2] in ("status", "finalize")):
            namespace = rest[1]
            resource = lookup(rest[2])
            if not resource.namespaced:
                raise errors.NotFound("the server could not find the requested resource")
            if n > 5:
                raise errors.NotFound("the server could not find the requested resource")
            name = rest[3] if n >= 4 else None
            sub = rest[4] if n == 5 else ""
            return self._checked(Target(resource, namespace, name, sub))
        resource = lookup(rest[0])
        if n > 3:
            raise errors.NotFound("the server could not find the requested resource")
        name = rest[1] if n >= 2 else None
        sub = rest[2] if n == 3 else ""
        if name is not None and resource.namespaced:
            raise errors.NotFound("the server could not find the requested resource")
        return self._checked(Target(resource, None, name, sub))

    @staticmethod
    def _checked(target: Target) -> Target:
        if target.subresource and target.subresource not in target.resource.subresources:
            raise errors.NotFound("the server could not find the requested resource")
        return target

    async def _serve(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        method = request.method
        query = request.query
        if not target.subresource:
            verb = verb_of(method, named=target.name is not None, watch=_truthy(query.get("watch")))
            if verb not in target.resource.verbs:  # e.g. a list of reviews, which are never stored
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource"
                )
        if target.name is None:
            if method == "GET":
                if _truthy(query.get("watch")):
                    return await self._watch(request, target)
                return await self._list(request, target)
            if method == "POST":
                return await self._create(request, target)
            if method == "DELETE":
                return await self._delete_collection(request, target)
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        handler: dict[str, Callable[[HTTPRequest, Target], Awaitable[web.StreamResponse]]] = {
            "GET": self._get,
            "PUT": self._update,
            "PATCH": self._patch,
            "DELETE": self._delete,
        }
        if target.subresource in ("token", "binding", "eviction"):
            if method != "POST":
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource"
                )
            if target.subresource == "token":
                return await self._token_request(request, target)
            if target.subresource == "binding":
                return await self._binding(request, target)
            return await self._eviction(request, target)
        if method not in handler or (target.subresource and method == "DELETE"):
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if target.subresource == "scale":
            return await self._scale(request, target)
        return await handler[method](request, target)

    async def _scale(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        """autoscaling/v1 Scale of a workload: spec.replicas, status.replicas and the selector."""
        assert target.name is not None
        if request.method == "GET":
            return await object_response(
                request, self.registry.get_scale(target.resource, target.namespace, target.name)
            )
        if request.method == "PUT":
            raw = await _read_body(request)
            body, options = await _decode_write(request.content_type, raw, _write_options(request), "Scale")
            scale = await self.registry.update_scale(
                target.resource, target.namespace, target.name, body, options
            )
        else:
            raw = await _read_body(request)
            options = _write_options(request)
            content_type = _patch_type(request)
            scale = await self.registry.patch_scale(
                target.resource, target.namespace, target.name, content_type, raw, options
            )
        return await object_response(request, scale)

    # ---------------------------------------------------------------- reads

    async def _get(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        assert target.name is not None
        if target.resource.synthesized:
            found = [o for o in self._synthesized(target) if o["metadata"]["name"] == target.name]
            if not found:
                raise errors.not_found(target.resource.group, target.resource.plural, target.name)
            obj = found[0]
        else:
            obj = self.registry.get(
                target.resource, target.namespace, target.name, request.query.get("resourceVersion", "")
            )
        accept = _accept(request)
        if accept.table:
            return json_response(
                tables.to_table(target.resource, [obj], include_object=accept.include_object)
            )
        if accept.partial_metadata:
            return json_response(
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata", {}),
                }
            )
        return await object_response(request, obj)

    async def _list(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        options = _list_options(request)
        if target.resource.synthesized:
            matches = self.registry.matcher(target.resource, options.label_selector, options.field_selector)
            items = [o for o in self._synthesized(target) if matches is None or matches(o)]
            result = generic.ListResult(items, self.registry.store.revision, "", None)
        else:
            result = self.registry.list_objects(target.resource, target.namespace, options)
        accept = _accept(request)
        rv = str(result.resource_version)
        if accept.table:
            return json_response(
                tables.to_table(
                    target.resource,
                    result.items,
                    include_object=accept.include_object,
                    resource_version=rv,
                    continue_token=result.continue_token,
                )
            )
        if accept.partial_metadata:
            return json_response(
                tables.to_partial_object_metadata_list(
                    target.resource, result.items, rv, result.continue_token
                )
            )
        metadata: Obj = {"resourceVersion": rv}
        if result.continue_token:
            metadata["continue"] = result.continue_token
        if result.remaining_item_count is not None:
            metadata["remainingItemCount"] = result.remaining_item_count
        body = {
            "kind": target.resource.list_kind,
            "apiVersion": target.resource.api_version,
            "metadata": metadata,
            "items": result.items,
        }
        if len(result.items) >= LARGE_LIST_ITEMS and not accept.protobuf:
            # Stored objects are never mutated, so another thread may encode them; in slices,
            # so that no single encode holds the interpreter lock for long.
            encoded = await asyncio.to_thread(encode_list_in_slices, body)
            return web.Response(body=encoded, content_type=JSON)
        return await object_response(request, body)

    async def _watch(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        list_options = _list_options(request)
        query = request.query
        send_initial = query.get("sendInitialEvents")
        timeout = query.get("timeoutSeconds")
        options = WatchOptions(
            label_selector=list_options.label_selector,
            field_selector=list_options.field_selector,
            resource_version=list_options.resource_version,
            resource_version_match=list_options.resource_version_match,
            allow_bookmarks=_truthy(query.get("allowWatchBookmarks")),
            send_initial_events=None if send_initial is None else _truthy(send_initial),
            timeout_seconds=_parse_int(timeout, "timeoutSeconds") if timeout else None,
        )
        accept = _accept(request)
        encode = None
        if accept.table:
            resource = target.resource

            def encode(kind: str, obj: Obj) -> bytes:
                if kind in ("ERROR", "BOOKMARK"):
                    return orjson.dumps({"type": kind, "object": obj}) + b"\n"
                table = tables.to_table(resource, [obj], include_object=accept.include_object)
                return orjson.dumps({"type": kind, "object": table}) + b"\n"

        elif accept.partial_metadata:

            def encode(kind: str, obj: Obj) -> bytes:
                if kind != "ERROR":
                    obj = tables.partial_object_metadata(obj)
                return orjson.dumps({"type": kind, "object": obj}) + b"\n"

        # Watches are never read as small requests (http1.read_head leaves them to aiohttp).
        assert isinstance(request, web.Request)
        stream = WatchStream(
            self.registry, target.resource, target.namespace, options, self.watch_settings, encode=encode
        )
        response = web.StreamResponse(status=200)
        response.content_type = JSON
        response.enable_chunked_encoding()
        response.headers["Cache-Control"] = "no-cache, private"
        try:
            await response.prepare(request)
            async for chunk in stream.lines():
                await response.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            stream.close()
        return response

    # ---------------------------------------------------------------- writes

    async def _offloaded(self, raw: bytes, work: Callable[[], Awaitable[T]]) -> T:
        """Run a write's decoding and registry work on the worker loop when its body is large."""
        if len(raw) >= OFFLOAD_BYTES and self.worker is not None:
            return await self.worker.run(work)
        return await work()

    def _write_options(self, request: HTTPRequest, target: Target) -> WriteOptions:
        """The request's write options, with RBAC's escalation check as the admission of writes
        of roles and bindings by anyone outside ``system:masters``."""
        options = _write_options(request)
        if self.authorizer is None or target.resource.group != RBAC_GROUP:
            return options
        user = request.get(USER)
        if user is None or SUPERUSER_GROUP in user.groups:
            return options
        guard = EscalationGuard(self.authorizer, user, target.resource.plural, target.namespace or "")
        return replace(options, admit=guard.check)

    async def _create(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        raw = await _read_body(request)
        content_type = request.content_type
        options = self._write_options(request, target)
        if target.resource.review:
            return await self._review(request, target, raw, options)
        if target.resource.plural == "bindings" and not target.resource.group:
            return await self._binding(request, target)

        json_only = bool(target.resource.definition)

        async def work() -> generic.WriteResult:
            body, checked = await _decode_write(
                content_type, raw, options, target.resource.kind, json_only=json_only
            )
            return await self.registry.create(target.resource, target.namespace, body, checked)

        result = await self._offloaded(raw, work)
        return await object_response(request, result.obj, 201, warnings=result.warnings)

    async def _review(
        self, request: HTTPRequest, target: Target, raw: bytes, options: generic.WriteOptions
    ) -> web.StreamResponse:
        """A review: answered from the request, never stored."""
        body, _checked = await _decode_request_object(request, raw, options, target.resource.kind)
        user = request.get(USER)
        if user is None:
            raise errors.Unauthorized("Unauthorized")
        authorizer = self.authorizer or RBACAuthorizer(self.registry.store, self.catalog)
        answered = reviews.answer(
            target.resource, body, user, authorizer, target.namespace, token_reviewer=self.token_reviewer
        )
        return await object_response(request, answered, 201)

    def _synthesized(self, target: Target) -> list[Obj]:
        """The objects of a resource answered from the server's state (ComponentStatus)."""
        return [component_status(name, problem) for name, problem in self.components()]

    async def _binding(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        """``pods/<name>/binding`` and ``bindings``: the pod is assigned to a node."""
        assert target.namespace is not None
        raw = await _read_body(request)
        body, options = await _decode_request_object(request, raw, _write_options(request), "Binding")
        resource = self.catalog.lookup("", "v1", "pods")
        assert resource is not None
        answered = await pods.bind(self.registry, resource, target.namespace, body, target.name, options)
        return await object_response(request, answered, 201)

    async def _eviction(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        """``pods/<name>/eviction``: the pod is deleted unless its disruption budget forbids it."""
        assert target.namespace is not None and target.name is not None
        raw = await _read_body(request)
        body, _options = await _decode_request_object(request, raw, _write_options(request), "Eviction")
        delete_body = body.get("deleteOptions") or {}
        if not isinstance(delete_body, dict):
            raise errors.BadRequest("deleteOptions: must be an object")
        budgets = self.catalog.lookup("policy", "v1", "poddisruptionbudgets")
        assert budgets is not None
        answered = await pods.evict(
            self.registry,
            target.resource,
            budgets,
            target.namespace,
            target.name,
            body,
            _delete_options_from(delete_body, request.query),
        )
        return await object_response(request, answered, 201)

    async def _token_request(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        """TokenRequest: a token bound to the ServiceAccount (`kubectl create token`)."""
        assert target.name is not None and target.namespace is not None
        if self.tokens is None:
            raise errors.NotFound("the server could not find the requested resource")
        raw = await _read_body(request)
        body, _options = await _decode_request_object(request, raw, _write_options(request), "TokenRequest")
        account = self.registry.get(target.resource, target.namespace, target.name)
        answered = token_request(self.tokens, body, account)
        return await object_response(request, answered, 201)

    async def _update(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        name = target.name
        assert name is not None
        raw = await _read_body(request)
        content_type = request.content_type
        options = self._write_options(request, target)

        json_only = bool(target.resource.definition)

        async def work() -> generic.WriteResult:
            body, checked = await _decode_write(
                content_type, raw, options, target.resource.kind, json_only=json_only
            )
            return await self.registry.update(
                target.resource, target.namespace, name, body, checked, subresource=target.subresource
            )

        result = await self._offloaded(raw, work)
        return await object_response(request, result.obj, 200, warnings=result.warnings)

    async def _patch(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        name = target.name
        assert name is not None
        content_type = _patch_type(request)
        raw = await _read_body(request)
        options = self._write_options(request, target)

        async def work() -> generic.WriteResult:
            return await self.registry.patch(
                target.resource,
                target.namespace,
                name,
                content_type,
                raw,
                options,
                subresource=target.subresource,
            )

        result = await self._offloaded(raw, work)
        return await object_response(
            request, result.obj, 201 if result.created else 200, warnings=result.warnings
        )

    async def _delete(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        assert target.name is not None
        options = await self._delete_options(request)
        obj, gone = await self.registry.delete(target.resource, target.namespace, target.name, options)
        if gone and not target.resource.returns_deleted_object:
            meta = obj.get("metadata") or {}
            details: Obj = {"name": target.name, "kind": target.resource.plural, "uid": meta.get("uid", "")}
            if target.resource.group:
                details["group"] = target.resource.group
            return await object_response(
                request,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details,
                },
            )
        return await object_response(request, obj)

    async def _delete_collection(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        options = await self._delete_options(request)
        list_options = _list_options(request)
        deleted = await self.registry.delete_collection(
            target.resource, target.namespace, list_options, options
        )
        return await object_response(
            request,
            {
                "kind": target.resource.list_kind,
                "apiVersion": target.resource.api_version,
                "metadata": {"resourceVersion": str(self.registry.store.revision)},
                "items": deleted,
            },
        )

    async def _delete_options(self, request: HTTPRequest) -> DeleteOptions:
        query = request.query
        body: Obj = {}
        if request.can_read_body:
            raw = await _read_body(request)
            loaded: Any = {}
            if request.content_type == codec.MEDIA_TYPE and raw:
                loaded = await _decode_protobuf(raw)
            elif raw.strip():
                loaded = decoding.decode_json(raw, "the body of the request (DeleteOptions)")
            if not isinstance(loaded, dict):
                raise errors.BadRequest("the body of the request must be a DeleteOptions object")
            body = loaded
        return _delete_options_from(body, query)


def _delete_options_from(body: Obj, query: MultiMapping[str]) -> DeleteOptions:
    """DeleteOptions from a request's body and query (an eviction's ``deleteOptions`` too)."""
    preconditions = body.get("preconditions") or {}
    if not isinstance(preconditions, dict):
        raise errors.BadRequest("preconditions: must be an object")
    dry_run = _dry_run(query.getall("dryRun", [])) or _dry_run(body.get("dryRun") or [])
    policy = query.get("propagationPolicy") or body.get("propagationPolicy")
    orphan = body.get("orphanDependents")
    if "orphanDependents" in query:
        orphan = _truthy(query.get("orphanDependents"))
    grace = query.get("gracePeriodSeconds")
    return DeleteOptions(
        dry_run=dry_run,
        propagation_policy=policy,
        orphan_dependents=orphan,
        precondition_uid=preconditions.get("uid"),
        precondition_resource_version=preconditions.get("resourceVersion"),
        grace_period_seconds=_parse_int(grace, "gracePeriodSeconds")
        if grace
        else body.get("gracePeriodSeconds"),
    )


def component_status(name: str, problem: str | None) -> Obj:
    """A ComponentStatus as kube-apiserver reports it (``kubectl get componentstatuses``)."""
    condition: Obj = {"type": "Healthy", "status": "True" if problem is None else "False"}
    if problem is None:
        condition["message"] = "ok"
    else:
        condition["error"] = problem
    return {
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    }


def _health_response(request: HTTPRequest, name: str, checks: list[tuple[str, str | None]]) -> web.Response:
    failed = any(reason is not None for _, reason in checks)
    if not failed and "verbose" not in request.query:
        return web.Response(text="ok")
    lines = [
        f"[+]{check} ok" if reason is None else f"[-]{check} failed: {reason}" for check, reason in checks
    ]
    lines.append(f"{name} check failed" if failed else f"{name} check passed")
    return web.Response(text="\n".join(lines) + "\n", status=500 if failed else 200)


@dataclass(frozen=True)
class _Accept:
    table: bool = False
    partial_metadata: bool = False
    include_object: str = "Metadata"
    protobuf: bool = False  # the client lists Kubernetes protobuf before JSON


def _accept(request: HTTPRequest) -> _Accept:
    return _parse_accept(request.headers.get("Accept", ""), request.query.get("includeObject", "Metadata"))


@functools.lru_cache(maxsize=256)
def _parse_accept(header: str, include: str) -> _Accept:
    """What an ``Accept`` header (and ``includeObject``) ask for; clients send the same few."""
    if include not in ("None", "Metadata", "Object"):
        raise errors.BadRequest(
            f'includeObject: Unsupported value: "{include}": supported values: "None", "Metadata", "Object"'
        )
    if not header:
        return _Accept()
    json_ok = False
    for clause in header.split(","):
        fields = [f.strip() for f in clause.split(";")]
        media = fields[0].lower()
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        as_kind = params.get("as")
        if media == codec.MEDIA_TYPE and as_kind is None and not json_ok:
            return _Accept(protobuf=True)
        if media not in (JSON, "application/*", "*/*"):
            continue
        if as_kind == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return _Accept(table=True, include_object=include)
        if (
            as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList")
            and params.get("g") == "meta.k8s.io"
        ):
            return _Accept(partial_metadata=True)
        if as_kind is None:
            json_ok = True
    if not json_ok:
        raise errors.NotAcceptable(
            "only the following media types are accepted: application/json, application/yaml"
        )
    return _Accept()


def _patch_type(request: HTTPRequest) -> str:
    """The patch media type of a PATCH request; 415 for anything else."""
    content_type = request.content_type
    if content_type not in mediatypes.BUILTIN_PATCH_TYPES:
        raise generic.unsupported_patch_type()
    return content_type


async def _decode_write(
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
            duplicates = tuple(validation.find_duplicate_fields(raw, body))
            if duplicates:
                options = replace(options, duplicate_fields=duplicates)
        return body, options
    if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
        return decoding.decode_yaml(raw), options
    if content_type == codec.MEDIA_TYPE:
        return await _decode_protobuf(raw), options
    raise errors.UnsupportedMediaType(
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{JSON}, application/yaml, {codec.MEDIA_TYPE}"
    )


async def _decode_request_object(
    request: HTTPRequest, raw: bytes, options: WriteOptions, kind: str
) -> tuple[Obj, WriteOptions]:
    """The body of a request the server answers without storing it (a review, a binding, an
    eviction, a token request): an object of ``kind``, its depth checked (the registry checks
    the bodies it stores), else 400."""
    body, options = await _decode_write(request.content_type, raw, options, kind)
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the body of the request was in an unknown format: expected a {kind} object")
    decoding.check_depth(body, "the object")
    return body, options


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


def _parse_int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise errors.BadRequest(f'{name}: Invalid value: "{value}": must be an integer') from None


def _dry_run(values: Any) -> bool:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        raise errors.BadRequest("dryRun: must be a list of strings")
    for value in values:
        if value != "All":
            raise errors.BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def _list_options(request: HTTPRequest) -> ListOptions:
    query = request.query
    label_text = query.get("labelSelector", "")
    field_text = query.get("fieldSelector", "")
    limit = query.get("limit")
    return ListOptions(
        label_selector=LabelSelector.parse(label_text) if label_text else None,
        field_selector=FieldSelector.parse(field_text) if field_text else None,
        limit=_parse_int(limit, "limit") if limit else 0,
        continue_token=query.get("continue", ""),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
    )


def _write_options(request: HTTPRequest) -> WriteOptions:
    query = request.query
    mode = query.get("fieldValidation", "Warn")
    normalized = {"strict": "Strict", "warn": "Warn", "ignore": "Ignore"}.get(mode.lower())
    if normalized is None:
        raise errors.BadRequest(
            f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", "Warn", "Strict"'
        )
    field_manager = query.get("fieldManager", "")
    if len(field_manager) > 128:
        raise errors.invalid(
            "meta.k8s.io",
            "PatchOptions"
            if request.method == "PATCH"
            else "CreateOptions"
            if request.method == "POST"
            else "UpdateOptions",
            "",
            [
                errors.StatusCause(
                    "FieldValueTooLong", "Too long: may not be more than 128 bytes", "fieldManager"
                )
            ],
        )
    force = query.get("force")
    return WriteOptions(
        dry_run=_dry_run(query.getall("dryRun", [])),
        field_manager=field_manager,
        default_manager=request.headers.get("User-Agent", "").split("/", 1)[0][:128] or "unknown",
        force=None if force is None else _truthy(force),
        field_validation=normalized,
    )


async def _decode_protobuf(raw: bytes) -> Any:
    """A protobuf body as its JSON form; the message tables are read on first use, off the loop."""
    try:
        tables = await asyncio.to_thread(descriptors.load_tables)
    except descriptors.DescriptorError as exc:
        raise errors.UnsupportedMediaType(f"{codec.MEDIA_TYPE} bodies cannot be read here: {exc}") from None
    try:
        return codec.decode_object(raw, tables)
    except codec.ProtobufError as exc:
        raise errors.BadRequest(f"the body of the request could not be decoded as protobuf: {exc}") from None


async def _read_body(request: HTTPRequest) -> bytes:
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


@web.middleware
async def error_middleware(
    request: R, handler: Callable[[R], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Render APIErrors as Status objects; an unexpected exception is a 500 Status, logged (an
    aiohttp middleware, also called directly for small requests)."""
    try:
        return await handler(request)
    except errors.APIError as error:
        return status_response(error)
    except InvalidSelector as invalid:
        return status_response(errors.BadRequest(invalid.message))
    except (ConnectionError, aiohttp.ClientPayloadError) as exc:
        # The client went away (mid-body, mid-response): its problem, not the server's.
        log.debug("client of %s %s disconnected: %s", request.method, request.path, exc)
        return status_response(errors.BadRequest(f"the client disconnected: {exc}"))
    except web.HTTPException as exc:
        if exc.status == 413:
            return status_response(errors.RequestEntityTooLarge("Request entity too large: limit is 3145728"))
        if exc.status == 404:
            return status_response(errors.NotFound("the server could not find the requested resource"))
        if exc.status == 405:
            return status_response(
                errors.MethodNotAllowed("the server does not allow this method on the requested resource")
            )
        raise
    except Exception as exc:
        log.exception("internal error serving %s %s", request.method, request.path)
        return status_response(errors.InternalError(f"Internal error occurred: {exc}"))
