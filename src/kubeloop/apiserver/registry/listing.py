"""Where a list starts and how it continues: resourceVersion, resourceVersionMatch and continue tokens.

Upstream splits this between ValidateListOptions and the storage layer's continue-token codec: a
list reads the latest revision, an exact one, or "not older than" one, and a paged list hands the
client an opaque token naming the revision it read and the key it stopped at. The same rules
refuse bad combinations (continue with a resourceVersion, match without one) with 400 or 422.
"""

from __future__ import annotations

import base64
import binascii

import orjson

from kubeloop import errors
from kubeloop.apiserver.registry.verboptions import ListOptions


def list_options_invalid(reason: str, message: str, field_name: str) -> errors.Invalid:
    """422 for bad list/watch options, as upstream's ValidateListOptions answers."""
    return errors.invalid("meta.k8s.io", "ListOptions", "", [errors.StatusCause(reason, message, field_name)])


def parse_resource_version(value: str) -> int:
    """A resourceVersion parameter as a revision; 400 unless it is an unsigned integer."""
    try:
        revision = int(value)
    except ValueError:
        raise errors.BadRequest(
            f'resourceVersion: Invalid value: "{value}": must be an unsigned integer'
        ) from None
    if revision < 0:
        raise errors.BadRequest(f'resourceVersion: Invalid value: "{value}": must be an unsigned integer')
    return revision


def encode_continue(revision: int, start: str) -> str:
    """The continue token of a list page read at ``revision`` whose next key ends in ``start``."""
    payload = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start})
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    """(revision, key suffix after the prefix) from a continue token; 400 when malformed."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("version")
        revision = int(data["rv"])
        start = str(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise errors.BadRequest("continue key is not valid: the continue token cannot be decoded") from None
    if revision <= 0 or ".." in start or start.startswith("/"):
        raise errors.BadRequest("continue key is not valid: the continue token is out of range")
    return revision, start


def too_large(revision: int, current: int) -> errors.Timeout:
    """504 for a resourceVersion newer than the store's, which a client retries after a second."""
    return errors.Timeout(
        f"Too large resource version: {revision}, current: {current}", retry_after_seconds=1
    )


def list_start(options: ListOptions, current: int, compacted: int) -> tuple[int | None, str]:
    """(revision to read at — None for the latest —, first key) from RV/match/continue."""
    rv = options.resource_version
    match = options.resource_version_match
    if match and match not in ("Exact", "NotOlderThan"):
        raise list_options_invalid(
            "FieldValueNotSupported",
            f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"',
            "resourceVersionMatch",
        )
    if options.continue_token:
        if rv and rv != "0":
            raise errors.BadRequest("specifying resource version is not allowed when using continue")
        if match:
            raise list_options_invalid(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                "resourceVersionMatch",
            )
        revision, start = decode_continue(options.continue_token)
        if revision < compacted:
            raise errors.ResourceExpired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return revision, start
    if match and not rv:
        raise list_options_invalid(
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            "resourceVersionMatch",
        )
    if not rv:
        return None, ""
    revision = parse_resource_version(rv)
    if match == "Exact" and revision == 0:
        raise list_options_invalid(
            "FieldValueForbidden",
            'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            "resourceVersionMatch",
        )
    if revision > current:
        raise too_large(revision, current)
    if revision == 0:
        return None, ""
    if match == "Exact" or (not match and options.limit):
        return revision, ""
    return None, ""
