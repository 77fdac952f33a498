"""Conversion webhooks through a hub version (controller-runtime's ``conversion.Hub`` and
``conversion.Convertible``, served at ``/convert``).

One model of a kind is its hub — it derives from :class:`Hub` — and every other version's
model is :class:`Convertible`: ``convert_to(hub)`` fills in a hub from the object, and
``convert_from(hub)`` fills in the object from a hub. A ConversionReview asks for objects in a
version: hub to spoke is ``convert_from``, spoke to hub ``convert_to``, spoke to spoke both,
through a hub. The object handed over is empty but for apiVersion, kind and the source's
metadata (only its labels and annotations may change); the result is validated as its model.

:class:`ConversionWebhook` is the endpoint, for every convertible kind of the manager: a body
that is no ConversionReview gets 400 with the reason; a conversion that raises answers
``result.status: Failure`` with the message, which kube-apiserver passes on to its client.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson
import pydantic

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeObject, scheme
from kubeloop.api.models.meta_v1 import ObjectMeta
from kubeloop.webhook.processcounts import process_counts
from kubeloop.webhook.webhookmetrics import WebhookMetrics, measured_response

if TYPE_CHECKING:
    from aiohttp import web


log = logging.getLogger("kubeloop.webhook")

#: The path controller-runtime serves conversion at (kubebuilder's CRD patches name it).
CONVERT_PATH = "/convert"
_REVIEW_VERSIONS = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")


class Hub:
    """The version of a kind that every other converts to and from (``conversion.Hub``)::

    class Website(kubeloop.CustomResource, kubeloop.webhook.Hub, group=..., version="v1"): ...
    """


@runtime_checkable
class Convertible(Protocol):
    """A version of a kind that converts through the hub (``conversion.Convertible``)."""

    def convert_to(self, hub: Any, /) -> None:
        """Fill in ``hub`` (empty but for apiVersion, kind and metadata) from this object."""
        ...

    def convert_from(self, hub: Any, /) -> None:
        """Fill in this object (empty but for apiVersion, kind and metadata) from ``hub``."""
        ...


class NotConvertible(TypeError):
    """A kind's versions do not make a hub and spokes."""


def versions_of(model: type[KubeObject]) -> dict[str, type[KubeObject]]:
    """Every registered model of ``model``'s group and kind, by apiVersion."""
    return scheme.versions_of(model.__gvk__.group, model.__gvk__.kind)


def convertible(model: type[KubeObject]) -> bool:
    """Whether ``model``'s kind converts through a hub (controller-runtime's ``IsConvertible``):
    several versions, exactly one of them a hub, the others convertible. NotConvertible says
    what is wrong when the versions try to and fail."""
    versions = versions_of(model)
    if len(versions) < 2:
        return False
    hubs = [m for m in versions.values() if issubclass(m, Hub)]
    spokes = [m for m in versions.values() if not issubclass(m, Hub)]
    if not hubs and not any(_is_convertible(m) for m in spokes):
        return False
    kind = model.__gvk__.kind
    if len(hubs) != 1:
        names = ", ".join(m.__name__ for m in hubs) or "none"
        raise NotConvertible(f"{kind} needs exactly one hub version (a model deriving from Hub), has {names}")
    missing = [m.__name__ for m in spokes if not _is_convertible(m)]
    if missing:
        raise NotConvertible(
            f"{kind}: {', '.join(missing)} must define convert_to(hub) and convert_from(hub)"
        )
    return True


def _is_convertible(model: type[KubeObject]) -> bool:
    return callable(getattr(model, "convert_to", None)) and callable(getattr(model, "convert_from", None))


class ConversionWebhook:
    """The ``/convert`` endpoint: converts objects of every registered convertible kind."""

    def __init__(self) -> None:
        #: (group, kind) → apiVersion → model.
        self.kinds: dict[tuple[str, str], dict[str, type[KubeObject]]] = {}
        self.path = ""
        self.metrics: WebhookMetrics | None = None

    def add(self, model: type[KubeObject]) -> None:
        """Convert ``model``'s kind (its versions as registered now)."""
        gvk = model.__gvk__
        self.kinds[gvk.group, gvk.kind] = versions_of(model)

    def convert(self, obj: dict[str, Any], desired: str) -> dict[str, Any]:
        """``obj`` in ``desired``; ValueError saying why it cannot be."""
        gvk = GroupVersionKind.of_object(obj)
        versions = self.kinds.get((gvk.group, gvk.kind))
        if versions is None:
            raise ValueError(f"no conversion is registered for {gvk.kind}.{gvk.group}")
        source_model, target_model = versions.get(gvk.group_version), versions.get(desired)
        if source_model is None or target_model is None:
            missing = gvk.group_version if source_model is None else desired
            raise ValueError(f"{gvk.kind} has no model of {missing}")
        if source_model is target_model:
            raise ValueError(f"conversion is not allowed between the same type {source_model.__name__}")
        source = source_model.from_dict(obj)
        metadata = obj.get("metadata") or {}
        if issubclass(target_model, Hub):
            target = _blank(target_model, desired, gvk.kind, metadata)
            source.convert_to(target)  # type: ignore[attr-defined]
        else:
            hub_model = next(m for m in versions.values() if issubclass(m, Hub))
            hub = source if issubclass(source_model, Hub) else _blank(hub_model, "", gvk.kind, metadata)
            if hub is not source:
                source.convert_to(hub)  # type: ignore[attr-defined]
            target = _blank(target_model, desired, gvk.kind, metadata)
            target.convert_from(hub)  # type: ignore[attr-defined]
        out = target.to_dict()
        out["apiVersion"], out["kind"] = desired, gvk.kind
        try:
            return target_model.from_dict(out).to_dict()
        except pydantic.ValidationError as error:
            raise ValueError(
                f"the converted {gvk.kind} is not a valid {target_model.__name__}: {error}"
            ) from None

    async def serve(self, request: web.Request) -> web.Response:
        return await measured_response(self.metrics, self.path, self._answer(request))

    async def _answer(self, request: web.Request) -> tuple[int, bytes]:
        default = _REVIEW_VERSIONS[0]
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type != "application/json":
            return _failure(400, default, "", f"contentType={content_type}, expected application/json")
        body = await request.read()
        if not body:
            return _failure(400, default, "", "request body is empty")
        try:
            review = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            return _failure(400, default, "", f"the body is not JSON: {error}")
        if not isinstance(review, dict):
            return _failure(400, default, "", "the body is not a ConversionReview object")
        version = review.get("apiVersion")
        if review.get("kind") != "ConversionReview" or version not in _REVIEW_VERSIONS:
            return _failure(
                400,
                default,
                "",
                f"expected a ConversionReview of {' or '.join(_REVIEW_VERSIONS)}, "
                f"got kind {review.get('kind')!r} of {version!r}",
            )
        raw = review.get("request")
        if not isinstance(raw, dict):
            return _failure(400, version, "", "the ConversionReview has no request")
        uid, desired, objects = raw.get("uid"), raw.get("desiredAPIVersion"), raw.get("objects")
        if not isinstance(uid, str) or not uid:
            return _failure(400, version, "", "request.uid is missing")
        if not isinstance(desired, str) or not desired:
            return _failure(400, version, uid, "request.desiredAPIVersion is missing")
        if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
            return _failure(400, version, uid, "request.objects must be a list of objects")
        try:
            converted = await asyncio.to_thread(lambda: [self.convert(o, desired) for o in objects])
        except ValueError as error:  # what convert() found wrong (a ValidationError is one)
            return _failure(200, version, uid, str(error))
        except Exception as error:  # the user's conversion code failed: that is the answer
            process_counts.conversion_panics += 1
            log.exception("conversion to %s failed", desired)
            return _failure(200, version, uid, f"{type(error).__name__}: {error}")
        response = {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
        return 200, orjson.dumps({"apiVersion": version, "kind": "ConversionReview", "response": response})


def _blank(model: type[KubeObject], api_version: str, kind: str, metadata: dict[str, Any]) -> KubeObject:
    """An empty ``model`` (its required fields unset) but for apiVersion, kind and a copy of
    ``metadata``: what a conversion fills in."""
    blank = model.model_construct()
    blank.api_version = api_version or model.__gvk__.group_version  # type: ignore[attr-defined]
    blank.kind = kind  # type: ignore[attr-defined]
    blank.metadata = ObjectMeta.from_dict(metadata)  # type: ignore[attr-defined]
    return blank


def _failure(status: int, version: str, uid: str, message: str) -> tuple[int, bytes]:
    response = {"uid": uid, "result": {"status": "Failure", "message": message}}
    return status, orjson.dumps({"apiVersion": version, "kind": "ConversionReview", "response": response})
