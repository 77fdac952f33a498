"""CREATE, UPDATE and PATCH (upstream's ``create.go``, ``update.go``, ``patch.go``): the body is
decoded and written through the registry — on the worker loop when it is large — with RBAC's
escalation check as the admission of role and binding writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from aiohttp import web

from kubeloop.apiserver.auth.escalation import EscalationGuard
from kubeloop.apiserver.auth.rbacauthorizer import RBAC_GROUP, SUPERUSER_GROUP
from kubeloop.apiserver.http.authentication import USER
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    object_response,
)
from kubeloop.apiserver.http.requestbodies import (
    decode_write,
    read_body,
)
from kubeloop.apiserver.http.requestoptions import (
    patch_type,
    write_options,
)
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.http.subresources import binding, review
from kubeloop.apiserver.registry.verboptions import WriteOptions, WriteResult

#: Write bodies at least this large are decoded and processed on the worker loop.
OFFLOAD_BYTES = 64 * 1024
T = TypeVar("T")


def offloaded(scope: Scope, raw: bytes, work: Callable[[], Awaitable[T]]) -> Awaitable[T]:
    """A write's decoding and registry work, to await: on the worker loop when its body is
    large, else ``work()`` itself (no coroutine of this function's around it)."""
    if len(raw) >= OFFLOAD_BYTES and scope.worker is not None:
        return scope.worker.run(work)
    return work()


def write_options_for(scope: Scope, request: HTTPRequest, target: Target) -> WriteOptions:
    """The request's write options and who asks, with RBAC's escalation check as the admission
    of writes of roles and bindings by anyone outside ``system:masters``."""
    user = request.get(USER)
    options = write_options(request, user)
    if scope.authorizer is None or target.resource.group != RBAC_GROUP:
        return options
    if user is None or SUPERUSER_GROUP in user.groups:
        return options
    guard = EscalationGuard(scope.authorizer, user, target.resource.plural, target.namespace or "")
    return replace(options, admit=guard.check)


async def create(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    raw = await read_body(request)
    content_type = request.content_type
    options = write_options_for(scope, request, target)
    if target.resource.review:
        return await review(scope, request, target, raw, options)
    if target.resource.plural == "bindings" and not target.resource.group:
        return await binding(scope, request, target)

    json_only = bool(target.resource.definition)

    async def work() -> WriteResult:
        body, checked = await decode_write(
            content_type, raw, options, target.resource.kind, json_only=json_only
        )
        return await scope.registry.create(target.resource, target.namespace, body, checked, owned=True)

    result = await offloaded(scope, raw, work)
    return await object_response(request, result.obj, 201, warnings=result.warnings, encoded=result.encoded)


async def update(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    name = target.name
    assert name is not None
    raw = await read_body(request)
    content_type = request.content_type
    options = write_options_for(scope, request, target)

    json_only = bool(target.resource.definition)

    async def work() -> WriteResult:
        body, checked = await decode_write(
            content_type, raw, options, target.resource.kind, json_only=json_only
        )
        return await scope.registry.update(
            target.resource, target.namespace, name, body, checked, subresource=target.subresource
        )

    result = await offloaded(scope, raw, work)
    return await object_response(request, result.obj, 200, warnings=result.warnings, encoded=result.encoded)


async def patch(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    name = target.name
    assert name is not None
    content_type = patch_type(request)
    raw = await read_body(request)
    options = write_options_for(scope, request, target)

    async def work() -> WriteResult:
        return await scope.registry.patch(
            target.resource,
            target.namespace,
            name,
            content_type,
            raw,
            options,
            subresource=target.subresource,
        )

    result = await offloaded(scope, raw, work)
    return await object_response(
        request, result.obj, 201 if result.created else 200, warnings=result.warnings, encoded=result.encoded
    )
