"""Validating webhooks on typed objects (controller-runtime's ``admission.CustomValidator``).

A validator has any of ``validate_create(obj)``, ``validate_update(old, new)`` and
``validate_delete(obj)`` (async, or plain and run in a thread); a missing one allows. Each
returns nothing or a list of warnings (kubectl prints them), or raises to deny: an API error
(``kubeloop.webhook.invalid(obj, field.invalid(...))``, ``errors.Forbidden(...)``) is answered
with its Status — code, reason, message and field causes — as it is. Any other exception is the
webhook's own failure: a 500-coded denial that names it (``AdmissionWebhook``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeObject
from kubeloop.errors import StatusCause
from kubeloop.webhook.admission import (
    CREATE,
    DELETE,
    UPDATE,
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    errored,
)
from kubeloop.webhook.defaulting import call
from kubeloop.webhook.typedobjects import TypedObject, typed

#: The validator methods, by the operation each answers.
METHODS = {CREATE: "validate_create", UPDATE: "validate_update", DELETE: "validate_delete"}


def validating_handler(
    model: type[KubeObject] | None, validator: object
) -> Callable[[AdmissionRequest], Awaitable[AdmissionResponse]]:
    """The admission handler that asks ``validator`` about each request."""

    async def handle(request: AdmissionRequest) -> AdmissionResponse:
        method = getattr(validator, METHODS.get(request.operation, ""), None)
        if method is None:
            return allowed()
        if request.operation == CREATE:
            if request.object is None:
                return errored(400, "a CREATE needs an object")
            warnings = await call(method, typed(model, request.object))
        elif request.operation == UPDATE:
            if request.object is None or request.old_object is None:
                return errored(400, "an UPDATE needs an object and an oldObject")
            warnings = await call(method, typed(model, request.old_object), typed(model, request.object))
        else:
            if request.old_object is None:
                return errored(400, "a DELETE needs an oldObject")
            warnings = await call(method, typed(model, request.old_object))
        return allowed().with_warnings(*_warnings(warnings))

    return handle


def operations_of(validator: object) -> tuple[str, ...]:
    """The operations ``validator`` has a method for (what its webhook's rules list)."""
    return tuple(
        operation for operation, method in METHODS.items() if callable(getattr(validator, method, None))
    )


def _warnings(returned: Any) -> Sequence[str]:
    if returned is None:
        return ()
    if isinstance(returned, str):
        return (returned,)
    return [str(warning) for warning in returned]


def invalid(obj: TypedObject, *causes: StatusCause) -> errors.Invalid:
    """The 422 a validator raises for ``obj``: ``Kind.group "name" is invalid: field: ...``, with
    each cause (``kubeloop.field.invalid(path, value, detail)``, ``required``, ...) kept for the
    client."""
    data = obj.to_dict() if isinstance(obj, KubeObject) else obj
    gvk = GroupVersionKind.of_object(data)
    name = str((data.get("metadata") or {}).get("name") or "")
    return errors.invalid(gvk.group, gvk.kind, name, list(causes))
