"""The subresources served beside an object's own verbs: ``scale`` of workloads, ``binding`` and
``eviction`` of pods, ``token`` of ServiceAccounts; and reviews (SubjectAccessReview, TokenReview,
...), answered from the request and never stored.
"""

from __future__ import annotations

from aiohttp import web

from kubeloop import errors
from kubeloop.apiserver.auth import reviews, tokens
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.http.authentication import USER
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    object_response,
)
from kubeloop.apiserver.http.requestbodies import (
    decode_request_object,
    decode_write,
    read_body,
)
from kubeloop.apiserver.http.requestoptions import (
    delete_options_from,
    patch_type,
    write_options,
)
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.registry import pods
from kubeloop.apiserver.registry.verboptions import WriteOptions


async def scale(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    """autoscaling/v1 Scale of a workload: spec.replicas, status.replicas and the selector."""
    assert target.name is not None
    if request.method == "GET":
        name = target.name
        scale = await scope.registry.read(
            lambda: scope.registry.get_scale(target.resource, target.namespace, name)
        )
        return await object_response(request, scale)
    if request.method == "PUT":
        raw = await read_body(request)
        body, options = await decode_write(request.content_type, raw, _admitted(request), "Scale")
        result = await scope.registry.update_scale(
            target.resource, target.namespace, target.name, body, options
        )
    else:
        raw = await read_body(request)
        options = _admitted(request)
        content_type = patch_type(request)
        result = await scope.registry.patch_scale(
            target.resource, target.namespace, target.name, content_type, raw, options
        )
    return await object_response(request, result.obj, warnings=result.warnings)


def _admitted(request: HTTPRequest) -> WriteOptions:
    """The write options of a request admission sees (it names who asks)."""
    return write_options(request, request.get(USER))


async def review(
    scope: Scope, request: HTTPRequest, target: Target, raw: bytes, options: WriteOptions
) -> web.StreamResponse:
    """A review: answered from the request, never stored."""
    body, _checked = await decode_request_object(request, raw, options, target.resource.kind)
    user = request.get(USER)
    if user is None:
        raise errors.Unauthorized("Unauthorized")
    authorizer = scope.authorizer or RBACAuthorizer(scope.registry.store, scope.catalog)
    answered = reviews.answer(
        target.resource, body, user, authorizer, target.namespace, token_reviewer=scope.token_reviewer
    )
    return await object_response(request, answered, 201)


async def binding(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    """``pods/<name>/binding`` and ``bindings``: the pod is assigned to a node."""
    assert target.namespace is not None
    raw = await read_body(request)
    body, options = await decode_request_object(request, raw, write_options(request), "Binding")
    resource = scope.catalog.lookup("", "v1", "pods")
    assert resource is not None
    # Admitted as upstream names it: pods/<name>/binding, or a create of the bindings resource.
    admitted_as, subresource = (
        (target.resource, "") if target.resource.plural == "bindings" else (resource, "binding")
    )
    name = target.name or str((body.get("metadata") or {}).get("name") or "")
    body, warnings = await scope.registry.admit_subresource(
        admitted_as, target.namespace, name, subresource, body, ("", "v1", "Binding"), _admitted(request)
    )
    answered = await pods.bind(scope.registry, resource, target.namespace, body, target.name, options)
    return await object_response(request, answered, 201, warnings=warnings)


async def eviction(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    """``pods/<name>/eviction``: the pod is deleted unless its disruption budget forbids it."""
    assert target.namespace is not None and target.name is not None
    raw = await read_body(request)
    body, _options = await decode_request_object(request, raw, write_options(request), "Eviction")
    body, warnings = await scope.registry.admit_subresource(
        target.resource,
        target.namespace,
        target.name,
        "eviction",
        body,
        ("policy", "v1", "Eviction"),
        _admitted(request),
    )
    delete_body = body.get("deleteOptions") or {}
    if not isinstance(delete_body, dict):
        raise errors.BadRequest("deleteOptions: must be an object")
    budgets = scope.catalog.lookup("policy", "v1", "poddisruptionbudgets")
    assert budgets is not None
    answered = await pods.evict(
        scope.registry,
        target.resource,
        budgets,
        target.namespace,
        target.name,
        body,
        delete_options_from(delete_body, request.query),
    )
    return await object_response(request, answered, 201, warnings=warnings)


async def token_request(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    """TokenRequest: a token bound to the ServiceAccount (`kubectl create token`)."""
    assert target.name is not None and target.namespace is not None
    if scope.tokens is None:
        raise errors.NotFound("the server could not find the requested resource")
    raw = await read_body(request)
    body, _options = await decode_request_object(request, raw, write_options(request), "TokenRequest")
    account = scope.registry.get(target.resource, target.namespace, target.name)
    answered = tokens.token_request(scope.tokens, body, account)
    return await object_response(request, answered, 201)
