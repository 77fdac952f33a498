"""AdmissionReview: the request a webhook is sent and what its answer must say.

The request carries what upstream's ``CreateV1AdmissionReview`` puts in it: a fresh uid, the
kind and resource (as matched, and as requested), the subresource, name, namespace, operation,
the user, the object and the old one, dryRun and the operation's options. A webhook that asks
only for ``v1beta1`` gets the same request as admission.k8s.io/v1beta1. The answer is checked
as ``VerifyAdmissionResponse`` checks it (an answer, the same uid, the right kind; a patch and its
type together, and only from a mutating webhook).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import orjson

from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.admissionhooks import AdmissionAttributes
from kubeloop.uuids import random_uuid

#: The AdmissionReview versions the server speaks, in the order it prefers them.
SUPPORTED_VERSIONS = ("v1", "v1beta1")


class InvalidResponse(Exception):
    """The webhook's answer is not one the server takes: ``reason`` says why, in upstream's words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _invalid(detail: str) -> InvalidResponse:
    return InvalidResponse(f"received invalid webhook response: {detail}")


@dataclass(frozen=True)
class Answer:
    """What a webhook decided."""

    allowed: bool
    #: The JSON patch to apply (mutating webhooks), None for none.
    patch: list[object] | None
    #: The Status of a refusal (may be empty).
    result: Obj
    warnings: list[str]


def review_version(accepted: tuple[str, ...]) -> str | None:
    """The first of the webhook's ``admissionReviewVersions`` the server speaks."""
    return next((version for version in accepted if version in SUPPORTED_VERSIONS), None)


def review_request(
    version: str,
    attributes: AdmissionAttributes,
    resource: ResourceType,
    obj: Obj | None,
    old: Obj | None,
) -> tuple[str, Obj]:
    """(uid, the AdmissionReview to send); ``resource`` is the one the webhook's rule matched
    (the request's own, or an equivalent one under ``matchPolicy: Equivalent``)."""
    uid = random_uuid()
    requested = attributes.resource
    kind = attributes.object_kind or (resource.group, resource.version, resource.kind)
    requested_kind = attributes.object_kind or (requested.group, requested.version, requested.kind)
    request: Obj = {
        "uid": uid,
        "kind": {"group": kind[0], "version": kind[1], "kind": kind[2]},
        "resource": {"group": resource.group, "version": resource.version, "resource": resource.plural},
    }
    if attributes.subresource:
        request["subResource"] = attributes.subresource
    request["requestKind"] = {
        "group": requested_kind[0],
        "version": requested_kind[1],
        "kind": requested_kind[2],
    }
    request["requestResource"] = {
        "group": requested.group,
        "version": requested.version,
        "resource": requested.plural,
    }
    if attributes.subresource:
        request["requestSubResource"] = attributes.subresource
    if attributes.name:
        request["name"] = attributes.name
    if attributes.namespace:
        request["namespace"] = attributes.namespace
    request["operation"] = attributes.operation
    request["userInfo"] = attributes.user.to_dict() if attributes.user is not None else {"username": ""}
    request["object"] = obj
    request["oldObject"] = old
    request["dryRun"] = attributes.dry_run
    request["options"] = attributes.options
    review = {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": request}
    return uid, review


def read_answer(version: str, uid: str, review: Obj, *, mutating: bool) -> Answer:
    """The decision in a webhook's AdmissionReview answer; :class:`InvalidResponse` when the
    answer is not one upstream would take."""
    response = review.get("response")
    if not isinstance(response, dict):
        raise _invalid("webhook response was absent")
    if version == "v1":
        if response.get("uid") != uid:
            raise _invalid(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
        got = f"{review.get('apiVersion') or ''}, Kind={review.get('kind') or ''}"
        if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
            raise _invalid(
                f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}"
            )
    raw_patch = response.get("patch")
    patch_type = response.get("patchType")
    patch: list[object] | None = None
    if mutating:
        if version == "v1":
            if raw_patch and patch_type is None:
                raise _invalid("webhook returned response.patch but not response.patchType")
            if not raw_patch and patch_type is not None:
                raise _invalid("webhook returned response.patchType but not response.patch")
            if patch_type is not None and not patch_type:
                raise _invalid(f'webhook returned invalid response.patchType of "{patch_type}"')
        if raw_patch:
            patch = _decoded_patch(raw_patch)
            if version == "v1" and patch_type != "JSONPatch":
                raise InvalidResponse(f'unsupported patch type "{patch_type}"')
    else:
        if raw_patch:
            raise _invalid("validating webhook may not return response.patch")
        if patch_type is not None:
            raise _invalid("validating webhook may not return response.patchType")
    result = response.get("status")
    warnings = response.get("warnings")
    return Answer(
        allowed=response.get("allowed") is True,
        patch=patch,
        result=result if isinstance(result, dict) else {},
        warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [],
    )


def _decoded_patch(raw: object) -> list[object]:
    """A response's ``patch``: base64 of a JSON patch (a list of operations)."""
    try:
        data = base64.b64decode(str(raw), validate=True)
        patch = orjson.loads(data)
    except (binascii.Error, ValueError, orjson.JSONDecodeError) as error:
        raise InvalidResponse(f"received undecodable patch in webhook response: {error}") from None
    if not isinstance(patch, list):
        raise InvalidResponse("received undecodable patch in webhook response: a JSON patch is a list")
    return patch
