"""Patches applied to a served object: JSON patch, merge patch and strategic merge patch by media type.

Server-side apply is not here: it merges by field ownership (see ``patch.fieldmanager``) and the
registry runs it itself.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubeloop import errors
from kubeloop.api import fielderrors
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


def undecodable(patch_type: str, patch: bytes, patched: Any, detail: str) -> errors.Invalid:
    """422 for a patch whose result the kind's type cannot hold, as upstream's patch handler
    words it: an Invalid error on the field ``patch``, whose value is the patch itself as Go
    prints a map (a strategic merge patch's) or the patched object as JSON (a JSON or merge
    patch's), and whose detail is the decoder's own error."""
    if patch_type == STRATEGIC_MERGE_PATCH:
        value = go_sprint(decoding.decode_json(patch, "the patch"))
    else:
        value = fielderrors.go_json(patched)
    return errors.invalid("", "", "", [fielderrors.invalid("patch", value, detail)])


def go_sprint(value: Any) -> str:
    """A decoded JSON value as Go's ``fmt.Sprintf("%+v", ...)`` prints it: ``map[a:1 b:[x y]]``
    (keys sorted), ``<nil>``, floats as ``%g`` does."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{key}:{go_sprint(value[key])}" for key in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(item) for item in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def _go_float(value: float) -> str:
    """``%v`` of a float64: the shortest digits that read back, in exponent form when the
    exponent is below -4 or at least 6 (strconv's ``'g'`` with the shortest precision)."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    if value == 0:
        return "-0" if repr(value).startswith("-") else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # where the decimal point falls after the digits' first
    magnitude = point - 1
    prefix = "-" if sign else ""
    if magnitude < -4 or magnitude >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if magnitude < 0 else '+'}{abs(magnitude):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{prefix}{text}{'0' * (point - len(text))}"
    return f"{prefix}{text[:point]}.{text[point:]}"
