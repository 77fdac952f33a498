"""Defaulting webhooks on typed objects (controller-runtime's ``admission.CustomDefaulter``).

A defaulter is an object with a ``default(obj)`` method, or that function itself (async, or plain
and run in a thread). It changes the object it is handed — the kind's model, or a dict when the
kind has none — and returns nothing; the JSON patch from what was sent to what it made is the
answer. DELETE is let through without a call. As in controller-runtime, fields the patch would
remove are left alone unless ``keep_removals`` is set: a model's dump may omit what the sender
wrote (an explicit null), and a webhook must not erase it.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from kubeloop.api.model import KubeObject
from kubeloop.webhook.admission import DELETE, AdmissionRequest, AdmissionResponse, allowed, errored, patched
from kubeloop.webhook.typedobjects import typed, untyped


@runtime_checkable
class CustomDefaulter(Protocol):
    """Sets the defaults of an object in place (``default(obj)``; async or plain)."""

    def default(self, obj: Any, /) -> Awaitable[None] | None: ...


DefaulterLike = CustomDefaulter | Callable[[Any], "Awaitable[None] | None"]


def defaulting_handler(
    model: type[KubeObject] | None, defaulter: DefaulterLike, *, keep_removals: bool = False
) -> Callable[[AdmissionRequest], Awaitable[AdmissionResponse]]:
    """The admission handler that runs ``defaulter`` on the object of each request."""
    function = defaulter.default if isinstance(defaulter, CustomDefaulter) else defaulter

    async def handle(request: AdmissionRequest) -> AdmissionResponse:
        if request.operation == DELETE:
            return allowed()
        if request.object is None:
            return errored(400, "there is no object to default")
        obj = typed(model, copy.deepcopy(request.object))
        await call(function, obj)
        return patched(request.object, untyped(obj), keep_removals=keep_removals or model is None)

    return handle


async def call(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``: awaited when async, else in a thread (the loop keeps serving)."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        result = await result
    return result
