"""Patches applied to a served object: JSON patch, merge patch and strategic merge patch by media type.

Server-side apply is not here: it merges by field ownership (see ``patch.fieldmanager``) and the
registry runs it itself.
"""

from __future__ import annotations

from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.mediatypes import (
    APPLY_PATCH,
    BUILTIN_PATCH_TYPES,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
)
from kubeloop.apiserver.patch.jsonpatch import apply_json_patch
from kubeloop.apiserver.patch.mergepatch import apply_merge_patch
from kubeloop.apiserver.patch.strategicpatch import apply_strategic_merge_patch


def unsupported_patch_type(accepted: tuple[str, ...] = BUILTIN_PATCH_TYPES) -> errors.UnsupportedMediaType:
    """415 for a PATCH whose media type the kind does not take, listing those it does (upstream
    lists all but apply)."""
    listed = ", ".join(t for t in accepted if t != APPLY_PATCH)
    return errors.UnsupportedMediaType(
        f"the body of the request was in an unknown format - accepted media types include: {listed}"
    )


def apply_patch(document: Obj, patch_type: str, patch: bytes, schema: schemas.Schema | None) -> Any:
    """Apply a JSON, merge or strategic merge patch (by media type) to a served object."""
    patch_doc = decoding.decode_json(patch, "the patch")
    if patch_type == JSON_PATCH:
        # As the upstream server (evanphx/json-patch v4): replace of a missing member adds it.
        return apply_json_patch(document, patch_doc, allow_replace_missing=True)
    if patch_type not in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        raise unsupported_patch_type()
    if not isinstance(patch_doc, dict):
        raise errors.BadRequest("error decoding patch: a merge patch must be a JSON object")
    if patch_type == MERGE_PATCH:
        return apply_merge_patch(document, patch_doc)
    return apply_strategic_merge_patch(document, patch_doc, schema)
