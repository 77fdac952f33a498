"""GET of an object and LIST of a collection (upstream's ``handlers/get.go``), as JSON, protobuf,
a Table or PartialObjectMetadata; ComponentStatuses are answered from the server's state.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    JSON,
    LARGE_LIST_ITEMS,
    YAML,
    accept_of,
    encode_list_in_slices,
    json_response,
    object_response,
)
from kubeloop.apiserver.http.requestoptions import (
    list_options,
)
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.http.yamlanswers import to_yaml_bytes
from kubeloop.apiserver.printing import tables
from kubeloop.apiserver.registry.verboptions import ListResult


async def get(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    assert target.name is not None
    if target.resource.synthesized:
        found = [o for o in synthesized(scope, target) if o["metadata"]["name"] == target.name]
        if not found:
            raise errors.not_found(target.resource.group, target.resource.plural, target.name)
        obj = found[0]
    else:
        name = target.name
        await scope.registry.caught_up(request.query.get("resourceVersion", ""))
        obj = await scope.registry.read(
            lambda: scope.registry.get(
                target.resource, target.namespace, name, request.query.get("resourceVersion", "")
            )
        )
    accept = accept_of(request)
    if accept.table:
        return json_response(tables.to_table(
                target.resource,
                [obj],
                printer=scope.registry.strategy(target.resource).printer,
                include_object=accept.include_object,
            ))
    if accept.partial_metadata:
        return json_response(
            {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        )
    return await object_response(request, obj)


async def list_objects(scope: Scope, request: HTTPRequest, target: Target) -> web.StreamResponse:
    options = list_options(request)
    if target.resource.synthesized:
        matches = scope.registry.matcher(target.resource, options.label_selector, options.field_selector)
        items = [o for o in synthesized(scope, target) if matches is None or matches(o)]
        result = ListResult(items, scope.registry.store.revision, "", None)
    else:
        await scope.registry.caught_up(options.resource_version, continued=bool(options.continue_token))
        result = await scope.registry.read(
            lambda: scope.registry.list_objects(target.resource, target.namespace, options)
        )
    accept = accept_of(request)
    rv = str(result.resource_version)
    if accept.table:
        return json_response(
            tables.to_table(
                target.resource,
                result.items,
                printer=scope.registry.strategy(target.resource).printer,
                include_object=accept.include_object,
                resource_version=rv,
                continue_token=result.continue_token,
            )
        )
    if accept.partial_metadata:
        return json_response(
            tables.to_partial_object_metadata_list(target.resource, result.items, rv, result.continue_token)
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
        # so that no single encode holds the interpreter lock for long. In YAML, from the
        # objects themselves: not decoded again from their JSON (a 12 MB list held every other
        # request up while its JSON was decoded and, once written, freed).
        if accept.yaml:
            text = await asyncio.to_thread(to_yaml_bytes, body)
            return web.Response(body=text, content_type=YAML)
        encoded = await asyncio.to_thread(encode_list_in_slices, body)
        return web.Response(body=encoded, content_type=JSON)
    return await object_response(request, body)


def synthesized(scope: Scope, target: Target) -> list[Obj]:
    """The objects of a resource answered from the server's state (ComponentStatus)."""
    return [component_status(name, problem) for name, problem in scope.components()]


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
