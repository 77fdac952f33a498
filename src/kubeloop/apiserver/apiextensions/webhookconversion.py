"""CRD conversion webhooks: a CRD whose ``spec.conversion.strategy`` is Webhook has its objects
converted between versions by a ``ConversionReview`` its webhook answers (apiextensions-apiserver's
``webhookConverter``).

Objects needing conversion are sent together (a list in one review) in the first of the CRD's
``conversionReviewVersions`` this server speaks (v1, v1beta1), with a 30 s timeout. The answer is
checked as upstream checks it: the review's kind, version and uid, ``result.status`` Success, as
many objects as were sent, each in the desired version, of the same kind, name, namespace and
uid, with string labels and annotations that validate. Only labels and annotations may change:
the rest of the metadata is the original's. The answer is pruned by the target version's schema.
A failure is a 500 worded as upstream's (``conversion webhook for <group>/<version>, Kind=<kind>
failed: ...``) and converts nothing.

What was converted is remembered by content — the object without its metadata, plus its
namespace, name, labels and annotations — both ways (a conversion must
round-trip), so that writing an object through one version and reading it back through the
other costs one call, and reads of unchanged objects cost none, as upstream's watch cache of each
version holds converted objects. A new CRD revision brings a new converter and an empty memory. An object already being converted
is not sent again: a second request for it waits for the first call (per event loop).
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import orjson

from kubeloop import errors
from kubeloop.api.fielderrors import go_type
from kubeloop.api.object import Obj
from kubeloop.apiserver.apiextensions import structural
from kubeloop.apiserver.registry.validation.objectmeta import validate_annotations, validate_labels
from kubeloop.apiserver.webhookclient.caller import Caller, CallError
from kubeloop.apiserver.webhookclient.clientconfig import client_config_of
from kubeloop.uuids import random_uuid

#: Upstream's webhook client timeout for conversion calls.
TIMEOUT_SECONDS = 30
#: Review versions this server sends, in its order of preference among the CRD's.
_REVIEW_VERSIONS = ("v1", "v1beta1")
#: Conversions remembered per CRD (a list bigger than this widens it, so that it fits).
_CAPACITY = 10_000


class ConversionFailed(errors.InternalError):
    """A conversion webhook failed or misbehaved: 500, with no reason, as upstream answers."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="")


class WebhookConverter:
    """The conversion webhook of one CRD revision, and what it has converted."""

    def __init__(self, crd: Obj, caller: Caller) -> None:
        spec = crd.get("spec") or {}
        conversion = spec.get("conversion") or {}
        webhook = conversion.get("webhook") or {}
        self.crd_name = str((crd.get("metadata") or {}).get("name") or "")
        self.kind = str((spec.get("names") or {}).get("kind") or "")
        self.client = client_config_of(webhook.get("clientConfig"))
        offered = [str(v) for v in webhook.get("conversionReviewVersions") or ()]
        self.review_version = next((v for v in offered if v in _REVIEW_VERSIONS), "v1")
        self.caller = caller
        group = str(spec.get("group") or "")
        self._schemas: dict[str, structural.Node] = {}
        for version in spec.get("versions") or ():
            if isinstance(version, dict) and version.get("name"):
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                self._schemas[f"{group}/{version['name']}"] = structural.compile_schema(
                    schema, "openAPIV3Schema", check_rule_types=False
                )
        self._capacity = _CAPACITY
        #: content key → the converted object's JSON (without metadata, plus labels/annotations).
        self._memory: collections.OrderedDict[bytes, bytes] = collections.OrderedDict()
        #: Calls made (for tests and the benchmark).
        self.calls = 0
        #: (event loop, content key) → the call converting it now: a second request for the same
        #: object waits for that call rather than making another.
        self._in_flight: dict[tuple[int, bytes], asyncio.Future[None]] = {}
        #: Requests waiting for another's call now (for tests).
        self.waiting = 0

    # ------------------------------------------------------------ VersionConverter

    def cached(self, obj: Obj, api_version: str) -> Obj | None:
        key = _key(obj, api_version)
        remembered = self._memory.get(key)
        if remembered is None:
            return None
        self._memory.move_to_end(key)
        return _restored(obj, orjson.loads(remembered))

    async def convert(self, objects: list[Obj], api_version: str) -> None:
        loop = id(asyncio.get_running_loop())
        pending: list[Obj] = []
        keys: list[tuple[int, bytes]] = []
        awaited: list[asyncio.Future[None]] = []
        if len(objects) > self._capacity // 2:
            self._capacity = 2 * len(objects)  # all of a list's conversions fit at once
        for obj in objects:
            key = _key(obj, api_version)
            if obj.get("apiVersion") == api_version:
                continue
            if key in self._memory:
                self._memory.move_to_end(key)  # needed now: not the first to go
                continue
            running = self._in_flight.get((loop, key))
            if running is not None:
                if running not in awaited:
                    awaited.append(running)
                continue
            if (loop, key) not in keys:
                keys.append((loop, key))
                pending.append(obj)
        if pending:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for flight in keys:
                self._in_flight[flight] = done
            try:
                await self._convert(pending, api_version)
            finally:
                for flight in keys:
                    self._in_flight.pop(flight, None)
                if not done.done():
                    done.set_result(None)  # waiters look in the memory again (a failure converted nothing)
        for running in awaited:
            self.waiting += 1
            try:
                # Shielded: a waiter cancelled (its client gone) must not cancel the call it waits for.
                await asyncio.shield(running)
            finally:
                self.waiting -= 1

    async def _convert(self, pending: list[Obj], api_version: str) -> None:
        source = f"{pending[0].get('apiVersion')}, Kind={self.kind}"
        converted = await self._call(pending, api_version, source)
        single = len(pending) == 1
        for index, (original, answer) in enumerate(zip(pending, converted, strict=True)):
            result = self._checked(original, answer, api_version, source, index, single)
            self._remember(original, api_version, result)
            self._remember(_restored(original, result), str(original.get("apiVersion")), _parts(original))

    # ------------------------------------------------------------ the call

    async def _call(self, objects: list[Obj], api_version: str, source: str) -> list[Any]:
        uid = random_uuid()
        review = {
            "apiVersion": f"apiextensions.k8s.io/{self.review_version}",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": objects},
        }
        self.calls += 1
        try:
            answer = await self.caller.post(self.client, orjson.dumps(review), TIMEOUT_SECONDS)
        except CallError as error:
            raise ConversionFailed(f"conversion webhook for {source} failed: {error.reason}") from None
        try:
            converted = self._converted_objects(answer, uid)
        except ValueError as error:
            raise ConversionFailed(f"conversion webhook for {source} failed: {error}") from None
        if len(converted) != len(objects):
            raise ConversionFailed(
                f"conversion webhook for {source} returned {len(converted)} objects, expected {len(objects)}"
            )
        return converted

    def _converted_objects(self, answer: Obj, uid: str) -> list[Any]:
        """The answer's convertedObjects; ValueError with upstream's words when it is amiss."""
        if self.review_version == "v1":
            expected = "apiextensions.k8s.io/v1, Kind=ConversionReview"
            got = f"{answer.get('apiVersion') or ''}, Kind={answer.get('kind') or ''}"
            if got != expected:
                raise ValueError(f"expected webhook response of {expected}, got {got}")
        response = answer.get("response")
        if not isinstance(response, dict):
            raise ValueError("no response provided")
        if self.review_version == "v1" and response.get("uid") != uid:
            raise ValueError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
        raw_result = response.get("result")
        result: dict[str, Any] = raw_result if isinstance(raw_result, dict) else {}
        if result.get("status") != "Success":
            if result.get("message"):
                raise ValueError(str(result["message"]))
            raise ValueError(f"response.result.status was '{result.get('status') or ''}', not 'Success'")
        converted = response.get("convertedObjects")
        return converted if isinstance(converted, list) else []

    def _checked(
        self, original: Obj, answer: Any, api_version: str, source: str, index: int, single: bool
    ) -> dict[str, Any]:
        """The converted object's parts (body, labels, annotations) after upstream's checks."""
        where = "at index 0" if single else f"at index {index}"
        if not isinstance(answer, dict):
            raise ConversionFailed(
                f"conversion webhook for {source} returned invalid converted object {where}: "
                "the object is not a JSON object"
            )
        # Upstream counts the object as read before these checks: its index is one on.
        invalid = (
            f"conversion webhook for {source} returned invalid object at index 0"
            if single
            else f"conversion webhook for {source} returned invalid converted object at index {index + 1}"
        )
        if answer.get("apiVersion") != api_version:
            raise ConversionFailed(
                f"{invalid}: invalid groupVersion (expected {api_version}, received {answer.get('apiVersion') or ''})"
            )
        if answer.get("kind") != original.get("kind"):
            raise ConversionFailed(
                f"{invalid}: invalid kind (expected {original.get('kind')}, received {answer.get('kind') or ''})"
            )
        problem = _changed_identity(original, answer)
        if problem:
            prefix = (
                f"conversion webhook for {source} returned invalid object"
                if single
                else f"conversion webhook for {source} returned invalid converted object at index {index + 1}"
            )
            raise ConversionFailed(f"{prefix}: {problem}")
        problem = _metadata_problem(original, answer)
        if problem:
            prefix = (
                f"conversion webhook for {source} returned invalid metadata"
                if single
                else f"conversion webhook for {source} returned invalid metadata in object at index {index + 1}"
            )
            raise ConversionFailed(f"{prefix}: {problem}")
        body = {k: v for k, v in answer.items() if k != "metadata"}
        schema = self._schemas.get(api_version)
        if schema is not None:
            structural.prune(body, schema)
        metadata = answer["metadata"]
        return {"body": body, "labels": metadata.get("labels"), "annotations": metadata.get("annotations")}

    def _remember(self, obj: Obj, api_version: str, parts: dict[str, Any]) -> None:
        self._memory[_key(obj, api_version)] = orjson.dumps(parts)
        while len(self._memory) > self._capacity:
            self._memory.popitem(last=False)


def _key(obj: Obj, api_version: str) -> bytes:
    """What a conversion of ``obj`` to ``api_version`` depends on: the object but its metadata,
    and of that its namespace and name (a converter may read them) and labels and annotations
    (which it may change). Not its uid, which an object being created does not have yet."""
    metadata = obj.get("metadata") or {}
    body = {k: v for k, v in obj.items() if k != "metadata"}
    return orjson.dumps(
        [
            api_version,
            metadata.get("namespace"),
            metadata.get("name"),
            body,
            metadata.get("labels"),
            metadata.get("annotations"),
        ],
        option=orjson.OPT_SORT_KEYS,
    )


def _parts(obj: Obj) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {
        "body": {k: v for k, v in obj.items() if k != "metadata"},
        "labels": metadata.get("labels"),
        "annotations": metadata.get("annotations"),
    }


def _restored(original: Obj, parts: dict[str, Any]) -> Obj:
    """The converted body with the original's metadata, but the converted labels and
    annotations (upstream's ``restoreObjectMeta``); a fresh dict."""
    metadata = orjson.loads(orjson.dumps(original.get("metadata") or {}))
    for field in ("labels", "annotations"):
        if parts.get(field) is None:
            metadata.pop(field, None)
        else:
            metadata[field] = parts[field]
    out = orjson.loads(orjson.dumps(parts["body"]))
    out["metadata"] = metadata
    return out  # type: ignore[no-any-return]


def _changed_identity(original: Obj, converted: Obj) -> str:
    """Upstream's ``validateConvertedObject``: the same kind, name, namespace and uid."""
    before = original.get("metadata") or {}
    raw_after = converted.get("metadata")
    after: dict[str, Any] = raw_after if isinstance(raw_after, dict) else {}
    for field, shown in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
        if (before.get(field) or "") != (after.get(field) or ""):
            return f"must have the same {shown}: {before.get(field) or ''} != {after.get(field) or ''}"
    return ""


def _metadata_problem(original: Obj, converted: Obj) -> str:
    """Upstream's ``restoreObjectMeta`` checks: metadata present; labels and annotations maps of
    strings, valid where they changed."""
    metadata = converted.get("metadata")
    if "metadata" not in converted:
        return "missing metadata in converted object"
    if not isinstance(metadata, dict):
        return f"invalid metadata of type {go_type(metadata)} in converted object"
    before = original.get("metadata") or {}
    for field in ("labels", "annotations"):
        value = metadata.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"invalid metadata.{field} of type {go_type(value)} in converted object"
        for key, item in value.items():
            if not isinstance(item, str):
                return (
                    f"metadata.{field}[{key}] must be a string, but is {go_type(item)} in converted object"
                )
        if value == (before.get(field) or {}):
            continue
        causes = (
            validate_labels(value, "metadata.labels")
            if field == "labels"
            else validate_annotations(value, "metadata.annotation")
        )
        if causes:
            parts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
            return parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ""

