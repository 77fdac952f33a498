"""DELETE of an object and of a collection (upstream's ``delete.go``): DeleteOptions from the query
and the body; the deleted object, or the Success Status some kinds answer with.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aiohttp import web

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.http.authentication import USER
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    object_response,
)
from kubeloop.apiserver.http.requestbodies import (
    decode_protobuf,
    read_body,
)
from kubeloop.apiserver.http.requestoptions import (
    delete_options_from,
    list_options,
)
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.protobuf import codec
from kubeloop.apiserver.registry.verboptions import DeleteOptions


async def delete(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    assert target.name is not None
    options = await delete_options(request)
    result = await scope.registry.delete(target.resource, target.namespace, target.name, options)
    if result.gone and not target.resource.returns_deleted_object:
        meta = result.obj.get("metadata") or {}
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
            warnings=result.warnings,
        )
    return await object_response(request, result.obj, warnings=result.warnings)


async def delete_collection(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    options = await delete_options(request)
    listed = list_options(request)
    deleted = await scope.registry.delete_collection(target.resource, target.namespace, listed, options)
    return await object_response(
        request,
        {
            "kind": target.resource.list_kind,
            "apiVersion": target.resource.api_version,
            "metadata": {"resourceVersion": str(scope.registry.store.revision)},
            "items": deleted,
        },
    )


async def delete_options(request: HTTPRequest) -> DeleteOptions:
    """The request's DeleteOptions (body and query), and who asks."""
    return replace(await _delete_options_of(request), user=request.get(USER))


async def _delete_options_of(request: HTTPRequest) -> DeleteOptions:
    query = request.query
    body: Obj = {}
    if request.can_read_body:
        raw = await read_body(request)
        loaded: Any = {}
        if request.content_type == codec.MEDIA_TYPE and raw:
            loaded = await decode_protobuf(raw)
        elif raw.strip():
            loaded = decoding.decode_json(raw, "the body of the request (DeleteOptions)")
        if not isinstance(loaded, dict):
            raise errors.BadRequest("the body of the request must be a DeleteOptions object")
        body = loaded
    return delete_options_from(body, query)
