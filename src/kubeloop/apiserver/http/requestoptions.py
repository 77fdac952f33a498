"""The options a request carries in its query (upstream's ``metav1.*Options`` decoding): list,
write and delete options, ``dryRun``, ``fieldValidation``, ``fieldManager``, and the patch type.
"""

from __future__ import annotations

from typing import Any

from multidict import MultiMapping

from kubeloop import errors
from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog import mediatypes
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.registry import patching
from kubeloop.apiserver.registry.verboptions import DeleteOptions, ListOptions, WriteOptions
from kubeloop.apiserver.userinfo import UserInfo


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


def parse_int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise errors.BadRequest(f'{name}: Invalid value: "{value}": must be an integer') from None


def dry_run(values: Any) -> bool:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        raise errors.BadRequest("dryRun: must be a list of strings")
    for value in values:
        if value != "All":
            raise errors.BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def list_options(request: HTTPRequest) -> ListOptions:
    query = request.query
    label_text = query.get("labelSelector", "")
    field_text = query.get("fieldSelector", "")
    limit = query.get("limit")
    return ListOptions(
        label_selector=LabelSelector.parse(label_text) if label_text else None,
        field_selector=FieldSelector.parse(field_text) if field_text else None,
        limit=parse_int(limit, "limit") if limit else 0,
        continue_token=query.get("continue", ""),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
    )


#: Write options already read, by what decides them: the query string, the User-Agent and who
#: asks. A client repeats its writes' parameters; reading them again took ~2 µs of each write.
#: Bounded in entries and in the size of a key's texts.
_WRITE_OPTIONS: dict[tuple[str, str, UserInfo | None], WriteOptions] = {}
_WRITE_OPTIONS_MAX = 256
_WRITE_OPTIONS_MAX_TEXT = 1024


def write_options(request: HTTPRequest, user: UserInfo | None = None) -> WriteOptions:
    """The write options the request's query gives, for ``user`` (who asks)."""
    agent = request.headers.get("User-Agent", "")
    key = (request.query_string, agent, user)
    known = _WRITE_OPTIONS.get(key)
    if known is not None:
        return known
    options = _read_write_options(request, agent, user)
    if len(key[0]) + len(agent) <= _WRITE_OPTIONS_MAX_TEXT:
        if len(_WRITE_OPTIONS) >= _WRITE_OPTIONS_MAX:
            _WRITE_OPTIONS.clear()
        _WRITE_OPTIONS[key] = options
    return options


def _read_write_options(request: HTTPRequest, agent: str, user: UserInfo | None) -> WriteOptions:
    query = request.query
    mode = query.get("fieldValidation", "Warn")
    normalized = {"strict": "Strict", "warn": "Warn", "ignore": "Ignore"}.get(mode.lower())
    if normalized is None:
        raise errors.BadRequest(
            f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", "Warn", "Strict"'
        )
    field_manager = query.get("fieldManager", "")
    if len(field_manager) > 128:
        raise errors.invalid(
            "meta.k8s.io",
            "PatchOptions"
            if request.method == "PATCH"
            else "CreateOptions"
            if request.method == "POST"
            else "UpdateOptions",
            "",
            [
                errors.StatusCause(
                    "FieldValueTooLong", "Too long: may not be more than 128 bytes", "fieldManager"
                )
            ],
        )
    force = query.get("force")
    return WriteOptions(
        dry_run=dry_run(query.getall("dryRun", [])),
        field_manager=field_manager,
        default_manager=agent.split("/", 1)[0][:128] or "unknown",
        force=None if force is None else truthy(force),
        field_validation=normalized,
        user=user,
    )


def delete_options_from(body: Obj, query: MultiMapping[str]) -> DeleteOptions:
    """DeleteOptions from a request's body and query (an eviction's ``deleteOptions`` too)."""
    preconditions = body.get("preconditions") or {}
    if not isinstance(preconditions, dict):
        raise errors.BadRequest("preconditions: must be an object")
    dry = dry_run(query.getall("dryRun", [])) or dry_run(body.get("dryRun") or [])
    policy = query.get("propagationPolicy") or body.get("propagationPolicy")
    orphan = body.get("orphanDependents")
    if "orphanDependents" in query:
        orphan = truthy(query.get("orphanDependents"))
    grace = query.get("gracePeriodSeconds")
    return DeleteOptions(
        dry_run=dry,
        propagation_policy=policy,
        orphan_dependents=orphan,
        precondition_uid=preconditions.get("uid"),
        precondition_resource_version=preconditions.get("resourceVersion"),
        grace_period_seconds=parse_int(grace, "gracePeriodSeconds")
        if grace
        else body.get("gracePeriodSeconds"),
    )


def patch_type(request: HTTPRequest) -> str:
    """The patch media type of a PATCH request; 415 for anything else."""
    content_type = request.content_type
    if content_type not in mediatypes.BUILTIN_PATCH_TYPES:
        raise patching.unsupported_patch_type()
    return content_type
