"""The REST surface's routes: discovery, OpenAPI and health, and every resource path — parsed
into the :class:`~kubeloop.apiserver.http.scope.Target` it names, authorized (RBAC), and handed
to the verb's module: :mod:`.reads`, :mod:`.watches`, :mod:`.writes`, :mod:`.deletes`,
:mod:`.subresources`. How answers are encoded is :mod:`.negotiation`'s; how requests are read,
:mod:`.requestoptions` and :mod:`.requestbodies`; errors become Status answers in
:mod:`.errormiddleware`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.audit import requestaudit
from kubeloop.apiserver.auth.rbacauthorizer import SUPERUSER_GROUP, Attributes, verb_of
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.http import (
    aggregateddiscovery,
    deletes,
    podattach,
    podexec,
    podlogs,
    podportforward,
    reads,
    subresources,
    watches,
    writes,
)
from kubeloop.apiserver.http.authentication import USER
from kubeloop.apiserver.http.http1 import BufferedRequest, HTTPRequest, query_value
from kubeloop.apiserver.http.negotiation import JSON, json_response, not_acceptable, status_response
from kubeloop.apiserver.http.nodestreams import NODE_STREAMS
from kubeloop.apiserver.http.requestoptions import truthy
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.openapi import discoverydocs, v2, v3
from kubeloop.apiserver.registry.admissionhooks import CONNECT, AdmissionAttributes
from kubeloop.errors import InvalidSelector

log = logging.getLogger("kubeloop.apiserver")
#: Subresources that open a stream into a pod: each is authorized as ``create``, whatever the
#: method (a WebSocket upgrade is a GET).
CONNECT_SUBRESOURCES = frozenset(("exec", "attach", "portforward"))
#: The options object admission sees for each.
CONNECT_KINDS = {"exec": "PodExecOptions", "attach": "PodAttachOptions", "portforward": "PodPortForwardOptions"}
#: The audit annotation of the authorizer's decision (upstream's key).
DECISION_ANNOTATION = "authorization.k8s.io/decision"


#: What a request naming an object (or its subresource) is served by, by method.
_NAMED_OBJECT_VERBS: dict[str, Callable[[Scope, HTTPRequest, Target], Awaitable[web.StreamResponse]]] = {
    "GET": reads.get,
    "PUT": writes.update,
    "PATCH": writes.patch,
    "DELETE": deletes.delete,
}


class APIHandlers(Scope):
    """aiohttp handlers for discovery, OpenAPI and every resource path of a catalog: a path is
    parsed into its :class:`Target`, authorized (RBAC), and served by the verb's module."""

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

    async def version(self, request: HTTPRequest) -> web.Response:
        return json_response(discoverydocs.version_info(schemas.schema_release()))

    async def livez(self, request: HTTPRequest) -> web.Response:
        return _health_response(request, "livez", [("ping", None)])

    async def readyz(self, request: HTTPRequest) -> web.Response:
        """Ready when the storage takes writes; otherwise 500 naming why (kube-apiserver's format)."""
        name = request.path.strip("/")
        return _health_response(request, name, [("ping", None), ("storage", self.readiness())])

    async def core_versions(self, request: HTTPRequest) -> web.Response:
        aggregated = self._aggregated_discovery.answer(request, core=True)
        return aggregated or json_response(discoverydocs.core_api_versions(self.server_address))

    async def group_list(self, request: HTTPRequest) -> web.Response:
        aggregated = self._aggregated_discovery.answer(request, core=False)
        return aggregated or json_response(discoverydocs.api_group_list(self.catalog))

    @functools.cached_property
    def _aggregated_discovery(self) -> aggregateddiscovery.AggregatedDiscovery:
        return aggregateddiscovery.AggregatedDiscovery(self.catalog)

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
            return status_response(not_acceptable(f"application/json, {v2.MEDIA_TYPE}"))
        return web.Response(
            body=v2.openapi_v2_json(self.catalog, self.extra_definitions()), content_type=JSON
        )

    async def core_api(self, request: HTTPRequest) -> web.StreamResponse:
        return await self._core_api(request)

    async def group_api(self, request: HTTPRequest) -> web.StreamResponse:
        return await self._group_api(request)

    def _core_api(self, request: HTTPRequest) -> Awaitable[web.StreamResponse]:
        parts = [p for p in request.match_info["path"].split("/") if p]
        if not parts:
            return self.core_versions(request)
        return self._dispatch(request, "", parts[0], parts[1:])

    def _group_api(self, request: HTTPRequest) -> Awaitable[web.StreamResponse]:
        parts = [p for p in request.match_info["path"].split("/") if p]
        if not parts:
            return self.group_list(request)
        if len(parts) == 1:
            return self._api_group(parts[0])
        return self._dispatch(request, parts[0], parts[1], parts[2:])

    async def _api_group(self, name: str) -> web.StreamResponse:
        group = discoverydocs.api_group(self.catalog, name)
        if group is None:
            return status_response(errors.NotFound("the server could not find the requested resource"))
        return json_response(group)

    def route_small(self, request: BufferedRequest) -> Awaitable[web.StreamResponse]:
        """What serves a small request (``/api``, ``/apis`` and below: the paths http1 reads), as
        aiohttp's routes to ``core_api`` and ``group_api`` would: an awaitable, no coroutine of
        its own around it."""
        path = request.path
        core = not path.startswith("/apis")
        if path in ("/api", "/apis") and request.method != "GET":
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        request.match_info["path"] = path[5:] if core else path[6:]
        return self._core_api(request) if core else self._group_api(request)

    async def _dispatch(
        self, request: HTTPRequest, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        try:
            if not rest:
                if request.method != "GET":
                    raise errors.MethodNotAllowed(
                        "the server does not allow this method on the requested resource"
                    )
                resources = discoverydocs.api_resource_list(self.catalog, group, version)
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
            requestaudit.add_annotation(DECISION_ANNOTATION, "allow")
            return  # the common case (the kubeconfig's admin) costs one look
        resource = target.resource
        verb = verb_of(request.method, named=target.name is not None, watch=truthy(query_value(request, "watch")))
        if target.subresource in CONNECT_SUBRESOURCES:
            verb = "create"  # a WebSocket's GET too, as upstream has asked since 1.31
        attributes = Attributes(
            verb=verb,
            group=resource.group,
            resource=resource.plural,
            subresource=target.subresource,
            namespace=target.namespace or "",
            name=target.name or "",
        )
        allowed = self.authorizer.allowed(user, attributes)
        requestaudit.add_annotation(DECISION_ANNOTATION, "allow" if allowed else "forbid")
        if not allowed:
            raise self.authorizer.forbidden(user, attributes)

    async def _admit_connect(self, request: HTTPRequest, target: Target) -> None:
        """Admission of a CONNECT (exec, attach, port-forward), as kube-apiserver runs it before
        the stream opens: the options object (PodExecOptions...) is what webhooks and policies
        see; a refusal is the request's answer."""
        admission = self.registry.admission
        user = request.get(USER)
        if admission is None or user is None or not admission.covers(target.resource):
            return
        kind = CONNECT_KINDS[target.subresource]
        options: Obj = {"kind": kind, "apiVersion": "v1"}
        for name in ("stdin", "stdout", "stderr", "tty"):
            if name in request.query:
                options[name] = truthy(request.query.get(name))
        if "container" in request.query:
            options["container"] = request.query["container"]
        if request.query.getall("command", []):
            options["command"] = list(request.query.getall("command"))
        if request.query.getall("ports", []):
            options["ports"] = [int(p) for v in request.query.getall("ports") for p in v.split(",") if p.isdigit()]
        attributes = AdmissionAttributes(
            resource=target.resource,
            subresource=target.subresource,
            operation=CONNECT,
            name=target.name or "",
            namespace=target.namespace or "",
            user=user,
            dry_run=False,
            options={},
            object_kind=("", "v1", kind),
        )
        mutated, _ = await admission.mutate(attributes, options, None)
        await admission.validate(attributes, mutated if isinstance(mutated, dict) else options, None)

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
        watch = truthy(query_value(request, "watch"))
        if not target.subresource:
            verb = verb_of(method, named=target.name is not None, watch=watch)
            if verb not in target.resource.verbs:  # e.g. a list of reviews, which are never stored
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource"
                )
        if target.name is None:
            if method == "GET":
                if watch:
                    return await watches.watch(self, request, target)
                return await reads.list_objects(self, request, target)
            if method == "POST":
                return await writes.create(self, request, target)
            if method == "DELETE":
                return await deletes.delete_collection(self, request, target)
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if method == "GET" and not target.subresource and watch:
            return await watches.watch(self, request, target)  # authorized as a watch: served as one
        if target.subresource in ("token", "binding", "eviction"):
            if method != "POST":
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource"
                )
            if target.subresource == "token":
                return await subresources.token_request(self, request, target)
            if target.subresource == "binding":
                return await subresources.binding(self, request, target)
            return await subresources.eviction(self, request, target)
        if target.subresource in NODE_STREAMS:
            return await self._pod_stream(request, target)
        serve = _NAMED_OBJECT_VERBS.get(method)
        if serve is None or (target.subresource and method == "DELETE"):
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if target.subresource == "scale":
            return await subresources.scale(self, request, target)
        return await serve(self, request, target)

    async def _pod_stream(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        """A pod's log, exec, attach or port-forward: admitted here, served by the node (on a
        front-end, relayed to the server that runs it)."""
        if request.method not in (("GET",) if target.subresource == "log" else ("GET", "POST")):
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        if target.subresource in CONNECT_SUBRESOURCES:
            await self._admit_connect(request, target)
        if self.node_relay is not None:
            return await self.node_relay.relay(request)
        return await self._on_node(request, target)

    async def _on_node(self, request: HTTPRequest, target: Target) -> web.StreamResponse:
        node = self.node()
        if target.subresource == "portforward":
            return await podportforward.pod_port_forward(self, request, target, node)
        if target.subresource == "attach":
            return await podattach.pod_attach(self, request, target, node)
        if target.subresource == "exec":
            return await podexec.pod_exec(self, request, target, node)
        return await podlogs.pod_log(self, request, target, node)

    async def relayed_pod_stream(self, request: web.Request) -> web.StreamResponse:
        """A pod stream a front-end relayed (the node's endpoint,
        :class:`~kubeloop.apiserver.http.nodestreams.NodeStreamEndpoint`): the front-end
        authenticated, authorized and admitted it; this server runs the stream."""
        info = request.match_info
        target = self._parse_target("", "v1", ["namespaces", info["namespace"], "pods", info["name"], info["subresource"]])
        if target.subresource not in NODE_STREAMS:
            raise errors.NotFound("the server could not find the requested resource")
        return await self._on_node(request, target)


def _health_response(request: HTTPRequest, name: str, checks: list[tuple[str, str | None]]) -> web.Response:
    failed = any(reason is not None for _, reason in checks)
    if not failed and "verbose" not in request.query:
        return web.Response(text="ok")
    lines = [
        f"[+]{check} ok" if reason is None else f"[-]{check} failed: {reason}" for check, reason in checks
    ]
    lines.append(f"{name} check failed" if failed else f"{name} check passed")
    return web.Response(text="\n".join(lines) + "\n", status=500 if failed else 200)
