"""Typed decoding and validation of built-in kinds, the way kube-apiserver does it.

Three stages, each modelled on upstream:

* :func:`find_duplicate_fields` and :func:`decode_against_schema` — what Go's typed JSON
  decoding (``sigs.k8s.io/json`` behind apimachinery's JSON serializer) does to a request body:
  unknown fields are pruned (``fieldValidation=Strict`` → 400, ``Warn`` → warnings), wrong JSON
  types are a 400 naming the Go struct field, and the special types (``IntOrString``,
  ``Quantity``, ``Time``, ``MicroTime``, ``[]byte``) accept what their ``UnmarshalJSON`` accepts.
* :func:`validate_object_meta` — ``apimachinery/pkg/api/validation/objectmeta.go``.
* :func:`validate_required` and the ``*_rules`` of each kind — fields the OpenAPI schema lists as required,
  plus a few hand-written rules of ``pkg/apis/{apps,core,coordination}/validation`` that kubectl
  users run into. Both yield 422 causes in upstream's ``field: Reason: detail`` form.

Decoding is driven by plans compiled once per schema definition, so a typical Deployment is
decoded in well under a millisecond.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import copy
import datetime as _dt
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from kubeloop import errors
from kubeloop.api import cronschedule, naming, quantity, timestamps
from kubeloop.api.naming import go_quote
from kubeloop.apiserver.catalog import schemas
from kubeloop.errors import StatusCause

__all__ = [
    "StrictDecodingError",
    "decode_against_schema",
    "deduplicated",
    "find_duplicate_fields",
    "go_quote",
    "validate_object_meta",
    "validate_required",
]

# Cause types (metav1.CauseType values of field.ErrorType).
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
DUPLICATE = "FieldValueDuplicate"
NOT_SUPPORTED = "FieldValueNotSupported"
NOT_FOUND = "FieldValueNotFound"

#: core MaxSecretSize (ConfigMap and Secret data).
MAX_SECRET_SIZE = 1024 * 1024
#: sigs.k8s.io/json stops collecting strict errors after this many.
_MAX_STRICT_ERRORS = 100
_NEGATIVE = "must be greater than or equal to 0"


class StrictDecodingError(errors.BadRequest):
    """400 for ``fieldValidation=Strict``; ``errors`` keeps the individual strict errors.

    PATCH answers strict errors differently upstream (422 on field ``patch``), so the handler can
    rebuild its own answer from :attr:`errors`.
    """

    def __init__(self, message: str, strict_errors: list[str]) -> None:
        super().__init__(message)
        self.errors = strict_errors


# --------------------------------------------------------------------------- Go formatting


class _GoStruct(dict[str, Any]):
    """A Go struct's value in an error message: its fields in declaration order (a map's keys are
    sorted). Internal types have no JSON tags, so their fields print with Go's names."""


def _go_json(value: Any) -> str:
    """``json.Marshal`` as Go prints it in ``Invalid value: ...`` (maps sorted, HTML escaped)."""
    try:
        text = json.dumps(
            value,
            sort_keys=isinstance(value, dict) and not isinstance(value, _GoStruct),
            separators=(",", ":"),
            ensure_ascii=False,
            default=str,
        )
    except (TypeError, ValueError):
        text = str(value)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _render(value: Any) -> str:
    """How ``field.Error.ErrorBody`` prints a bad value."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_number(value)
    return _go_json(value)


def _go_number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


# --------------------------------------------------------------------------- cause builders


def _required(path: str, detail: str = "") -> StatusCause:
    return StatusCause(REQUIRED, f"Required value: {detail}" if detail else "Required value", path)


def _invalid(path: str, value: Any, detail: str) -> StatusCause:
    body = f"Invalid value: {_render(value)}"
    return StatusCause(INVALID, f"{body}: {detail}" if detail else body, path)


def _forbidden(path: str, detail: str) -> StatusCause:
    return StatusCause(FORBIDDEN, f"Forbidden: {detail}" if detail else "Forbidden", path)


def _too_long(path: str, max_bytes: int) -> StatusCause:
    unit = "byte" if max_bytes == 1 else "bytes"
    return StatusCause(TOO_LONG, f"Too long: may not be more than {max_bytes} {unit}", path)


def _duplicate(path: str, value: Any) -> StatusCause:
    return StatusCause(DUPLICATE, f"Duplicate value: {_render(value)}", path)


def _not_supported(path: str, value: Any, supported: Iterable[str]) -> StatusCause:
    allowed = ", ".join(go_quote(s) for s in supported)
    return StatusCause(
        NOT_SUPPORTED, f"Unsupported value: {_render(value)}: supported values: {allowed}", path
    )


# --------------------------------------------------------------------------- duplicate fields


class _DupObject(dict[str, Any]):
    """A decoded JSON object that had repeated keys (listed in ``dups``)."""

    __slots__ = ("dups",)

    def __init__(self, pairs: list[tuple[str, Any]], dups: list[str]) -> None:
        super().__init__(pairs)
        self.dups = dups


def find_duplicate_fields(raw: bytes, decoded: Any = None) -> list[str]:
    """Dotted paths of repeated object keys in a JSON body (``metadata.name``, ``a.b[0].c``).

    orjson keeps the last of repeated keys silently; Go's strict decoding reports them. Paths use
    sigs.k8s.io/json's notation. Bodies that are not JSON give ``[]`` (their parser reports them).
    ``decoded``, orjson's reading of ``raw`` when the caller has it, answers the common case
    (no repeated key) without parsing again.
    """
    if decoded is not None and _no_repeated_keys(raw, decoded):
        return []
    found = False

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        found = True
        seen: set[str] = set()
        dups: list[str] = []
        for key, _ in pairs:
            if key in seen and key not in dups:
                dups.append(key)
            seen.add(key)
        return _DupObject(pairs, dups)

    try:
        document = json.loads(raw, object_pairs_hook=hook)
    except (ValueError, RecursionError):
        return []
    if not found:
        return []
    out: list[str] = []
    with contextlib.suppress(RecursionError):
        _collect_duplicates(document, "", out)
    return out


#: A key with white space before its colon (compact JSON, as clients send it, has none).
_SPACED_COLON = re.compile(rb'"[ \t\r\n]+:')


def _no_repeated_keys(raw: bytes, decoded: Any) -> bool:
    """True when ``raw`` surely repeats no key: with no space before a colon, every key of
    ``raw`` is a ``":`` (and a string may hold more), so as many ``":`` as ``decoded`` has keys
    means none was dropped. False means only that the full check must look."""
    if _SPACED_COLON.search(raw) is not None:
        return False
    keys = 0
    pending = [decoded]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            keys += len(node)
            pending.extend(value for value in node.values() if isinstance(value, dict | list))
        elif isinstance(node, list):
            pending.extend(value for value in node if isinstance(value, dict | list))
    return raw.count(b'":') == keys


def _collect_duplicates(node: Any, prefix: str, out: list[str]) -> None:
    if isinstance(node, dict):
        dups = node.dups if isinstance(node, _DupObject) else ()
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            _collect_duplicates(value, path, out)
            if key in dups:
                out.append(path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _collect_duplicates(value, f"{prefix}[{index}]", out)


# --------------------------------------------------------------------------- decode plans

# Plan kinds.
_STRUCT, _MAP, _ARRAY, _STRING, _BYTES, _INT, _FLOAT, _BOOL = range(8)
_INTSTR, _QUANTITY, _TIME, _MICROTIME, _ANY = range(8, 13)

_QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INTSTR_DEF = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIME_DEF = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_MICROTIME_DEF = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
#: Types with their own UnmarshalJSON that keep any JSON value (the rest of the fieldless
#: objects in the schemas are empty Go structs, whose every field is unknown).
_FREE_FORM_DEFS = {
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch": "v1.Patch",
}


@dataclass(eq=False, slots=True)
class _Plan:
    kind: int
    go_type: str
    struct_name: str = ""
    props: dict[str, _Plan] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    elem: _Plan | None = None
    bits: int = 64
    #: For validate_required: the fields worth descending into (computed on first use).
    walk: dict[str, _Plan] | None = None
    #: The schema definition a struct comes from (``io.k8s.api.rbac.v1.Subject``).
    definition: str = ""


_DEF_PLANS: dict[str, _Plan] = {}
_ROOT_PLANS: dict[tuple[int, str, str], tuple[Mapping[str, Any], _Plan]] = {}


def _def_plan(name: str) -> _Plan:
    plan = _DEF_PLANS.get(name)
    if plan is not None:
        return plan
    parts = name.rsplit(".", 2)
    short = parts[-1]
    go_type = f"{parts[-2]}.{short}" if len(parts) > 1 else short
    if name == _QUANTITY_DEF:
        plan = _Plan(_QUANTITY, "resource.Quantity")
    elif name == _INTSTR_DEF:
        plan = _Plan(_INTSTR, "intstr.IntOrString")
    elif name == _TIME_DEF:
        plan = _Plan(_TIME, "v1.Time")
    elif name == _MICROTIME_DEF:
        plan = _Plan(_MICROTIME, "v1.MicroTime")
    elif name in _FREE_FORM_DEFS:
        plan = _Plan(_ANY, _FREE_FORM_DEFS[name])
    else:
        node = schemas.definitions()[name]
        plan = _Plan(_STRUCT, go_type, short, definition=name)
        _DEF_PLANS[name] = plan  # registered before filling: schemas are recursive
        _fill(plan, node, named=True)
        return plan
    _DEF_PLANS[name] = plan
    return plan


def _node_plan(node: Mapping[str, Any]) -> _Plan:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _def_plan(ref.rsplit("/", 1)[-1])
    plan = _Plan(_ANY, "interface {}")
    _fill(plan, node, named=False)
    return plan


def _fill(plan: _Plan, node: Mapping[str, Any], *, named: bool) -> None:
    """Set a plan's kind and children from a schema node."""
    types = schemas.node_types(node)
    if node.get("oneOf"):
        kinds = {t for option in node["oneOf"] for t in schemas.node_types(option)}
        if kinds == {"string", "integer"}:
            plan.kind, plan.go_type = _INTSTR, "intstr.IntOrString"
        elif kinds == {"string", "number"}:
            plan.kind, plan.go_type = _QUANTITY, "resource.Quantity"
        else:
            plan.kind = _ANY
        return
    props = node.get("properties")
    if props:
        plan.kind = _STRUCT
        if not named:
            plan.go_type, plan.struct_name = "struct", ""
        plan.props = {key: _node_plan(sub) for key, sub in props.items()}
        plan.required = tuple(r for r in node.get("required", ()) if r in plan.props)
        return
    if "object" in types:
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            elem = _node_plan(extra)
            plan.kind, plan.elem, plan.go_type = _MAP, elem, f"map[string]{elem.go_type}"
        elif named:
            plan.kind = _STRUCT  # a Go struct without fields
        else:
            plan.kind, plan.go_type = _ANY, "map[string]interface {}"
        return
    if "array" in types:
        items = node.get("items")
        elem = _node_plan(items) if isinstance(items, Mapping) else _Plan(_ANY, "interface {}")
        plan.kind, plan.elem, plan.go_type = _ARRAY, elem, f"[]{elem.go_type}"
        return
    if "string" in types:
        if node.get("format") == "byte":
            plan.kind, plan.go_type = _BYTES, "[]uint8"
        else:
            plan.kind, plan.go_type = _STRING, "string"
        return
    if "integer" in types:
        bits = 32 if node.get("format") == "int32" else 64
        plan.kind, plan.bits, plan.go_type = _INT, bits, f"int{bits}"
        return
    if "number" in types:
        plan.kind, plan.go_type = _FLOAT, "float64"
        return
    if "boolean" in types:
        plan.kind, plan.go_type = _BOOL, "bool"
        return
    plan.kind = _ANY


def _root_plan(schema: Mapping[str, Any], kind: str, version: str) -> _Plan:
    key = (id(schema), kind, version)
    cached = _ROOT_PLANS.get(key)
    if cached is not None and cached[0] is schema:
        return cached[1]
    plan = _Plan(_STRUCT, f"{version}.{kind}", kind)
    _fill(plan, schemas.resolve(schema), named=True)
    if len(_ROOT_PLANS) > 512:
        _ROOT_PLANS.clear()
    _ROOT_PLANS[key] = (schema, plan)  # keeps the schema alive, so its id is not reused
    return plan


def _schema_kind(schema: Mapping[str, Any]) -> tuple[str, str]:
    for gvk in schema.get("x-kubernetes-group-version-kind", ()):
        if isinstance(gvk, Mapping):
            return str(gvk.get("kind", "Object")), str(gvk.get("version", "v1"))
    return "Object", "v1"


# --------------------------------------------------------------------------- decoding

# Path segments: a linked list (parent, segment kind, text) built only as far as needed.
_FIELD, _INDEX, _KEY = 0, 1, 2
_Path = tuple[Any, int, Any] | None

_INT_LIMITS = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}


def _strict_path(path: _Path) -> str:
    """sigs.k8s.io/json's path: ``spec.template.spec.containers[0].name``, map keys dotted."""
    parts: list[str] = []
    while path is not None:
        parent, seg_kind, seg = path
        if seg_kind == _INDEX:
            parts.append(f"[{seg}]")
        else:
            parts.append(str(seg))
            if parent is not None:
                parts.append(".")
        path = parent
    return "".join(reversed(parts))


def _go_field_path(path: _Path) -> str:
    """Go's UnmarshalTypeError.Field: struct field names only (no indices, no map keys)."""
    names: list[str] = []
    while path is not None:
        parent, seg_kind, seg = path
        if seg_kind == _FIELD:
            names.append(seg)
        path = parent
    return ".".join(reversed(names))


def _json_kind(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | tuple):
        return "array"
    if value is None:
        return "null"
    return "object"


class _Fatal(Exception):
    """An error returned (not saved) by Go's decoder: it ends decoding at once."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Decoder:
    __slots__ = ("collect", "dups", "saved", "strict")

    def __init__(self, collect: bool, dups: set[str]) -> None:
        self.collect = collect
        self.dups = dups
        self.saved: str | None = None
        self.strict: list[str] = []

    # -- errors

    def _type_error(self, value_desc: str, go_type: str, path: _Path, struct: str) -> str:
        fields = _go_field_path(path)
        if struct or fields:
            return f"json: cannot unmarshal {value_desc} into Go struct field {struct}.{fields} of type {go_type}"
        return f"json: cannot unmarshal {value_desc} into Go value of type {go_type}"

    def _save(self, message: str) -> None:
        if self.saved is None:
            self.saved = message

    def _strict_error(self, kind: str, path: str) -> None:
        message = f"{kind} {go_quote(path)}"
        if len(self.strict) < _MAX_STRICT_ERRORS and message not in self.strict:
            self.strict.append(message)

    # -- values

    def struct(self, value: dict[Any, Any], plan: _Plan, path: _Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        props = plan.props
        struct = plan.struct_name
        dups = self.dups
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                if self.collect:
                    self._strict_error("unknown field", _strict_path((path, _FIELD, key)))
                continue
            if item is not None:
                kind = sub.kind
                item_type = type(item)
                # Fast paths for the common scalars; everything else goes through value().
                if (
                    (kind == _STRING and item_type is str)
                    or (kind == _BOOL and item_type is bool)
                    or (kind == _INT and item_type is int and -(2**31) <= item < 2**31)
                ):
                    out[key] = item
                elif kind == _STRUCT and item_type is dict:
                    out[key] = self.struct(item, sub, (path, _FIELD, key))
                else:
                    decoded = self.value(item, sub, (path, _FIELD, key), struct)
                    if decoded is not _DROP:
                        out[key] = decoded
            if dups:
                full = _strict_path((path, _FIELD, key))
                if full in dups:
                    self._strict_error("duplicate field", full)
        return out

    def value(self, item: Any, plan: _Plan, path: _Path, struct: str) -> Any:
        kind = plan.kind
        if item is None:
            return _zero(plan)
        if kind == _STRUCT:
            if isinstance(item, dict):
                return self.struct(item, plan, path)
        elif kind == _STRING:
            if isinstance(item, str):
                return item
        elif kind == _INT:
            return self._int(item, plan, path, struct)
        elif kind == _ARRAY:
            if isinstance(item, list):
                elem = plan.elem
                assert elem is not None
                out: list[Any] = []
                elem_kind = elem.kind
                for index, sub in enumerate(item):
                    if elem_kind == _STRUCT and type(sub) is dict:
                        out.append(self.struct(sub, elem, (path, _INDEX, index)))
                    elif elem_kind == _STRING and type(sub) is str:
                        out.append(sub)
                    else:
                        decoded = self.value(sub, elem, (path, _INDEX, index), struct)
                        out.append(None if decoded is _DROP else decoded)
                return out
        elif kind == _MAP:
            if isinstance(item, dict):
                return self._map(item, plan, path, struct)
        elif kind == _BOOL:
            if isinstance(item, bool):
                return item
        elif kind == _INTSTR:
            return self._int_or_string(item, path, struct)
        elif kind == _QUANTITY:
            return _quantity(item)
        elif kind in (_TIME, _MICROTIME):
            return self._time(item, kind == _MICROTIME, path, struct)
        elif kind == _FLOAT:
            if isinstance(item, int | float) and not isinstance(item, bool):
                return item
        elif kind == _BYTES:
            return self._bytes(item, plan, path, struct)
        else:  # _ANY
            return _copy_json(item)
        self._save(self._type_error(_json_kind(item), plan.go_type, path, struct))
        return _DROP

    def _map(self, item: dict[Any, Any], plan: _Plan, path: _Path, struct: str) -> dict[str, Any]:
        elem = plan.elem
        assert elem is not None
        out: dict[str, Any] = {}
        simple = elem.kind == _STRING
        for key, sub in item.items():
            if simple and type(sub) is str:
                out[key] = sub
            else:
                decoded = self.value(sub, elem, (path, _KEY, key), struct)
                out[key] = None if decoded is _DROP else decoded
            if self.dups:
                full = _strict_path((path, _KEY, key))
                if full in self.dups:
                    self._strict_error("duplicate field", full)
        return out

    def _int(self, item: Any, plan: _Plan, path: _Path, struct: str) -> Any:
        if isinstance(item, bool) or not isinstance(item, int | float):
            self._save(self._type_error(_json_kind(item), plan.go_type, path, struct))
            return _DROP
        number = _as_int(item)
        low, high = _INT_LIMITS[plan.bits]
        if number is None or not low <= number <= high:
            self._save(self._type_error(f"number {_go_number(item)}", plan.go_type, path, struct))
            return _DROP
        return number

    def _int_or_string(self, item: Any, path: _Path, struct: str) -> Any:
        # IntOrString.UnmarshalJSON: a JSON string, or json.Unmarshal into an int32; its error is
        # returned (decoding stops) and gets the outer field as context.
        if isinstance(item, str):
            return item
        if isinstance(item, int | float) and not isinstance(item, bool):
            number = _as_int(item)
            if number is not None and -(2**31) <= number < 2**31:
                return number
            raise _Fatal(self._type_error(f"number {_go_number(item)}", "int32", path, struct))
        raise _Fatal(self._type_error(_json_kind(item), "int32", path, struct))

    def _time(self, item: Any, micro: bool, path: _Path, struct: str) -> Any:
        if not isinstance(item, str):
            raise _Fatal(self._type_error(_json_kind(item), "string", path, struct))
        problem, canonical = _parse_go_time(item, micro)
        if problem is not None:
            raise _Fatal(problem)
        return canonical

    def _bytes(self, item: Any, plan: _Plan, path: _Path, struct: str) -> Any:
        if isinstance(item, str):
            decoded = _go_base64(item)
            if isinstance(decoded, int):
                self._save(f"illegal base64 data at input byte {decoded}")
                return _DROP
            return base64.b64encode(decoded).decode("ascii")
        if isinstance(item, list):  # Go decodes a JSON array of numbers into []byte as well
            out = bytearray()
            for index, sub in enumerate(item):
                if isinstance(sub, bool) or not isinstance(sub, int | float):
                    desc = _json_kind(sub)
                else:
                    number = _as_int(sub)
                    if number is not None and 0 <= number <= 255:
                        out.append(number)
                        continue
                    desc = f"number {_go_number(sub)}"
                self._save(self._type_error(desc, "uint8", (path, _INDEX, index), struct))
                return _DROP
            return base64.b64encode(bytes(out)).decode("ascii")
        self._save(self._type_error(_json_kind(item), plan.go_type, path, struct))
        return _DROP


class _DropType:
    __slots__ = ()


_DROP: Any = _DropType()


def _zero(plan: _Plan) -> Any:
    """The JSON form of a Go zero value: ``null`` inside a list or map decodes to it."""
    kind = plan.kind
    if kind == _STRUCT:
        return {}
    if kind == _STRING:
        return ""
    if kind in (_INT, _FLOAT, _INTSTR):
        return 0
    if kind == _BOOL:
        return False
    if kind == _QUANTITY:
        return "0"
    return None


def _as_int(value: float) -> int | None:
    if isinstance(value, int):
        return value
    if value.is_integer():
        return int(value)
    return None


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_json(item) for item in value]
    return value


def decode_against_schema(
    obj: Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    kind: str,
    version: str,
    mode: str,
    duplicates: Iterable[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Decode a request body as Go decodes it into the kind's type: (pruned copy, warnings).

    ``mode`` is the ``fieldValidation`` directive. Unknown (and, given ``duplicates`` from
    :func:`find_duplicate_fields`, repeated) fields raise :class:`StrictDecodingError` under
    ``Strict``, come back as warnings under ``Warn`` and are dropped silently under ``Ignore``.
    Wrong JSON types raise :class:`errors.BadRequest` whatever the mode. ``null`` for a field
    drops it; ``null`` in a list or map becomes the element type's zero value.
    """
    directive = _MODES.get(mode.lower()) if isinstance(mode, str) else None
    if directive is None:
        raise errors.BadRequest(
            f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", "Warn", "Strict"'
        )
    prefix = f'{kind} in version "{version}" cannot be handled as a {kind}: '
    plan = _root_plan(schema, kind, version)
    collect = directive != "Ignore"
    decoder = _Decoder(collect, set(duplicates or ()) if collect else set())
    try:
        if obj is None:
            pruned: Any = {}
        else:
            pruned = decoder.value(obj, plan, None, "")
    except _Fatal as fatal:
        raise errors.BadRequest(prefix + fatal.message) from None
    except RecursionError:
        raise errors.BadRequest(prefix + "json: exceeded max depth") from None
    if decoder.saved is not None:
        raise errors.BadRequest(prefix + decoder.saved)
    if not isinstance(pruned, dict):  # a bare value of the root plan: nothing to keep
        pruned = {}
    if decoder.strict:
        if directive == "Strict":
            message = "strict decoding error: " + ", ".join(decoder.strict)
            raise StrictDecodingError(prefix + message, list(decoder.strict))
        if directive == "Warn":
            return pruned, list(decoder.strict)
    return pruned, []


_MODES = {"strict": "Strict", "warn": "Warn", "ignore": "Ignore"}


# --------------------------------------------------------------------------- special types

_BASE64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _go_base64(text: str) -> bytes | int:
    """``base64.StdEncoding.DecodeString``: the bytes, or the offset Go reports as corrupt."""
    data = text.encode("utf-8", "surrogatepass")
    length = len(data)
    clean = bytearray()
    si = 0
    while True:
        quantum = 0
        while quantum < 4:
            if si == length:
                if quantum == 0:
                    return base64.b64decode(bytes(clean))
                return si - quantum
            char = data[si]
            si += 1
            if char in _BASE64_ALPHABET:
                clean.append(char)
                quantum += 1
                continue
            if char in _NEWLINES:
                continue
            if char != _PAD or quantum < 2:
                return si - 1
            if quantum == 2:  # "==" expected; the first "=" is consumed
                while si < length and data[si] in _NEWLINES:
                    si += 1
                if si == length:
                    return length
                if data[si] != _PAD:
                    return si - 1
                si += 1
            while si < length and data[si] in _NEWLINES:
                si += 1
            if si < length:
                return si  # trailing garbage
            clean.extend(b"=" * (4 - quantum))
            return base64.b64decode(bytes(clean))


_NEWLINES = (0x0A, 0x0D)
_PAD = 0x3D


def _quantity(item: Any) -> str:
    """Quantity.UnmarshalJSON: a string or a number, parsed by ParseQuantity."""
    if isinstance(item, str):
        text = item.strip()
    elif isinstance(item, int | float) and not isinstance(item, bool):
        text = _go_number(item)
    else:
        raise _Fatal(quantity.FORMAT_ERROR)
    problem = quantity.syntax_error(text)
    if problem is not None:
        raise _Fatal(problem)
    return text


_RFC3339 = "2006-01-02T15:04:05Z07:00"
_RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
_TIME_STEPS = (("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"))


def _time_quote(text: str) -> str:
    """time's own ``quote``: bytes outside printable ASCII as ``\\xNN``."""
    out = ['"']
    for ch in text:  # ``text`` holds one byte per character (latin-1)
        code = ord(ch)
        if code >= 0x80 or code < 0x20:
            out.append(f"\\x{code:02x}")
        else:
            if ch in '"\\':
                out.append("\\")
            out.append(ch)
    out.append('"')
    return "".join(out)


def _digits(text: str) -> bool:
    return bool(text) and all("0" <= ch <= "9" for ch in text)


def _getnum(text: str, fixed: bool) -> tuple[int, str] | None:
    if not text or not "0" <= text[0] <= "9":
        return None
    if len(text) < 2 or not "0" <= text[1] <= "9":
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def _parse_go_time(value: str, micro: bool) -> tuple[str | None, str]:
    """``time.Parse(RFC3339[Micro], value)`` as metav1.(Micro)Time.UnmarshalJSON does it.

    Returns (Go's error message or None, the value as Go writes it back: UTC, seconds or
    microseconds).
    """
    layout = _RFC3339_MICRO if micro else _RFC3339
    raw = value.encode("utf-8", "surrogatepass").decode("latin-1")
    rest = raw

    def cannot(layout_elem: str, value_elem: str) -> str:
        return (
            f"parsing time {_time_quote(raw)} as {_time_quote(layout)}: "
            f"cannot parse {_time_quote(value_elem)} as {_time_quote(layout_elem)}"
        )

    def out_of_range(what: str) -> str:
        return f"parsing time {_time_quote(raw)}: {what}"

    fields = {"2006": 0, "01": 0, "02": 0, "15": 0, "04": 0, "05": 0}
    nsec = 0
    for prefix, std in _TIME_STEPS:
        for char in prefix:
            if not rest or rest[0] != char:
                return cannot(prefix, rest), value
            rest = rest[1:]
        hold = rest
        if std == "2006":
            head = rest[:4]
            sign_free = head[1:] if head[:1] in ("+", "-") else head
            if len(rest) < 4 or not _digits(sign_free):
                return cannot(std, hold), value
            fields[std] = int(head)
            rest = rest[4:]
            continue
        got = _getnum(rest, fixed=std != "15")
        if got is None:
            return cannot(std, hold), value
        number, rest = got
        fields[std] = number
        if std == "01" and not 1 <= number <= 12:
            return out_of_range("month out of range"), value
        if std == "15" and number >= 24:
            return out_of_range("hour out of range"), value
        if std == "04" and number >= 60:
            return out_of_range("minute out of range"), value
        if std == "05":
            if number >= 60:
                return out_of_range("second out of range"), value
            if not micro and len(rest) >= 2 and rest[0] in ".," and "0" <= rest[1] <= "9":
                end = 2
                while end < len(rest) and "0" <= rest[end] <= "9":
                    end += 1
                nsec = int(rest[1:end][:9].ljust(9, "0"))
                rest = rest[end:]
    if micro:
        hold = rest
        if len(rest) < 7 or rest[0] not in ".," or not _digits(rest[1:7]):
            return cannot(".000000", hold), value
        nsec = int(rest[1:7]) * 1000
        rest = rest[7:]
    hold = rest
    offset = 0
    if rest[:1] == "Z":
        rest = rest[1:]
    else:
        if len(rest) < 6 or rest[3] != ":":
            return cannot("Z07:00", hold), value
        sign, hours, minutes = rest[0], rest[1:3], rest[4:6]
        rest = rest[6:]
        if not (_digits(hours) and _digits(minutes)):
            return cannot("Z07:00", hold), value
        if int(hours) > 24:
            return out_of_range("time zone offset hour out of range"), value
        if int(minutes) > 60:
            return out_of_range("time zone offset minute out of range"), value
        if sign not in "+-":
            return cannot("Z07:00", hold), value
        offset = (int(hours) * 3600 + int(minutes) * 60) * (1 if sign == "+" else -1)
    if rest:
        return out_of_range(f"extra text: {_time_quote(rest)}"), value
    year, month, day = fields["2006"], fields["01"], fields["02"]
    days = calendar.monthrange(year, month)[1] if 1 <= year <= 9999 else (29 if month == 2 else 31)
    if not 1 <= day <= days:
        return out_of_range("day out of range"), value
    try:
        moment = _dt.datetime(
            year,
            month,
            day,
            fields["15"],
            fields["04"],
            fields["05"],
            nsec // 1000,
            tzinfo=_dt.timezone(_dt.timedelta(seconds=offset)),
        ).astimezone(_dt.UTC)
    except (ValueError, OverflowError):
        return None, value
    return None, timestamps.format_time(moment, micro=micro)


# --------------------------------------------------------------------------- object metadata

_NAME_RULES: dict[str, Callable[[str], list[str]]] = {
    "subdomain": naming.dns1123_subdomain_errors,
    "label": naming.dns1123_label_errors,
    "dns1035": naming.dns1035_label_errors,
    "path": naming.path_segment_errors,
}


def _mask_trailing_dash(name: str) -> str:
    """apimachinery maskTrailingDash: a generateName prefix may end in '-'."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_object_meta(
    obj: Mapping[str, Any],
    *,
    namespaced: bool,
    name_rule: str = "subdomain",
    kube_finalizers: bool = False,
) -> list[StatusCause]:
    """``ValidateObjectMeta`` on create: name, namespace, labels, annotations, owners, finalizers.

    The namespace must already be filled from the URL (upstream's BeforeCreate does it first).
    ``kube_finalizers`` adds core's rule that a finalizer without '/' be a standard one.
    """
    name_errors = _NAME_RULES.get(name_rule)
    if name_errors is None:
        raise ValueError(f"unknown name rule {name_rule!r}")
    meta = _as_dict(obj.get("metadata"))
    causes: list[StatusCause] = []

    generate_name = _text(meta.get("generateName"))
    if generate_name:
        for msg in name_errors(_mask_trailing_dash(generate_name)):
            causes.append(_invalid("metadata.generateName", generate_name, msg))
    name = _text(meta.get("name"))
    if not name:
        causes.append(_required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(_invalid("metadata.name", name, msg) for msg in name_errors(name))

    namespace = _text(meta.get("namespace"))
    if namespaced:
        if not namespace:
            causes.append(_required("metadata.namespace"))
        else:
            causes.extend(
                _invalid("metadata.namespace", namespace, msg)
                for msg in naming.dns1123_label_errors(namespace)
            )
    elif namespace:
        causes.append(_forbidden("metadata.namespace", "not allowed on this type"))

    generation = meta.get("generation")
    if _is_int(generation) and generation < 0:
        causes.append(_invalid("metadata.generation", generation, _NEGATIVE))

    causes.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    causes.extend(validate_annotations(meta.get("annotations"), "metadata.annotations"))
    causes.extend(_owner_references(meta.get("ownerReferences")))
    causes.extend(_finalizers(meta.get("finalizers"), kube_finalizers))
    return causes


def validate_labels(labels: Any, path: str) -> list[StatusCause]:
    """``ValidateLabels``: keys are qualified names, values label values; field without the key."""
    causes: list[StatusCause] = []
    for key, value in _as_dict(labels).items():
        causes.extend(_invalid(path, key, msg) for msg in naming.qualified_name_errors(key))
        text = value if isinstance(value, str) else ""
        causes.extend(_invalid(path, text, msg) for msg in naming.label_value_errors(text))
    return causes


def validate_annotations(annotations: Any, path: str) -> list[StatusCause]:
    """``ValidateAnnotations``: keys are qualified names (case-insensitively), total ≤ 256 KiB."""
    mapping = {key: value if isinstance(value, str) else "" for key, value in _as_dict(annotations).items()}
    causes: list[StatusCause] = []
    for key in mapping:
        causes.extend(_invalid(path, key, msg) for msg in naming.qualified_name_errors(key.lower()))
    if mapping and naming.annotations_size_errors(mapping):
        causes.append(_too_long(path, naming.ANNOTATIONS_SIZE_LIMIT))
    return causes


def _owner_references(refs: Any) -> list[StatusCause]:
    causes: list[StatusCause] = []
    controllers: list[str] = []
    for index, ref in enumerate(_as_list(refs)):
        path = f"metadata.ownerReferences[{index}]"
        ref = _as_dict(ref)
        api_version, kind = _text(ref.get("apiVersion")), _text(ref.get("kind"))
        group, version, parsed = _parse_group_version(api_version)
        if not api_version:
            causes.append(_required(f"{path}.apiVersion", "must not be empty"))
        elif not parsed or not version:
            causes.append(
                _invalid(f"{path}.apiVersion", api_version, "must be <group>/<version> or <version>")
            )
        if not kind:
            causes.append(_required(f"{path}.kind", "must not be empty"))
        if not _text(ref.get("name")):
            causes.append(_required(f"{path}.name", "must not be empty"))
        if not _text(ref.get("uid")):
            causes.append(_required(f"{path}.uid", "must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            causes.append(_invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            controllers.append(f"{kind}/{_text(ref.get('name'))}")
            if len(controllers) > 1:
                causes.append(
                    _invalid(
                        "metadata.ownerReferences",
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in references '
                        f"for {controllers[0]} and {controllers[-1]}",
                    )
                )
    return causes


def _parse_group_version(text: str) -> tuple[str, str, bool]:
    """schema.ParseGroupVersion: ("", "v1"), ("apps", "v1"); False for ``a/b/c``."""
    if not text or text == "/":
        return "", "", True
    parts = text.split("/")
    if len(parts) == 1:
        return "", text, True
    if len(parts) == 2:
        return parts[0], parts[1], True
    return "", "", False


_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _finalizers(finalizers: Any, kube_finalizers: bool) -> list[StatusCause]:
    causes: list[StatusCause] = []
    names = [f for f in _as_list(finalizers) if isinstance(f, str)]
    for index, name in enumerate(names):
        causes.extend(
            _invalid("metadata.finalizers", name, msg) for msg in naming.qualified_name_errors(name)
        )
        if kube_finalizers and "/" not in name and name not in _STANDARD_FINALIZERS:
            causes.append(
                _invalid(
                    f"metadata.finalizers[{index}]",
                    name,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    if "orphan" in names and "foregroundDeletion" in names:
        causes.append(
            _invalid(
                "metadata.finalizers", names, "finalizer orphan and foregroundDeletion cannot be both set"
            )
        )
    return causes


# --------------------------------------------------------------------------- required fields


def validate_required(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[StatusCause]:
    """Fields the schema lists as ``required`` that are missing, ``null``, ``""`` or ``[]``.

    Required struct-valued fields are Go values, never "missing": their own required fields are
    checked inside an empty object instead. ``status`` is not checked (the server resets it), nor
    are required booleans (false is a value).
    """
    kind, version = _schema_kind(schema)
    plan = _root_plan(schema, kind, version)
    causes: list[StatusCause] = []
    if plan.kind == _STRUCT and isinstance(obj, dict):
        with contextlib.suppress(RecursionError):
            _required_struct(obj, plan, "", causes, top=True)
    return causes


_NEEDS_REQUIRED: dict[int, tuple[_Plan, bool]] = {}


def _needs_required(plan: _Plan) -> bool:
    """Whether any plan reachable from this one lists required fields (cached per plan)."""
    cached = _NEEDS_REQUIRED.get(id(plan))
    if cached is not None and cached[0] is plan:
        return cached[1]
    seen = {id(plan)}
    stack = [plan]
    found = False
    while stack and not found:
        current = stack.pop()
        if current.kind == _STRUCT and current.required:
            found = True
            break
        children = list(current.props.values())
        if current.elem is not None:
            children.append(current.elem)
        for child in children:
            if id(child) not in seen and child.kind in (_STRUCT, _ARRAY, _MAP):
                seen.add(id(child))
                stack.append(child)
    _NEEDS_REQUIRED[id(plan)] = (plan, found)
    return found


#: Fields the schema lists as required (Go's field has no ``omitempty``) that no upstream rule
#: asks a value of (a kubelet registers its CSINode with no drivers, a LimitRange may list no
#: limits), or whose absence the kind's own rules report in upstream's words (a rule with no
#: verbs; a roleRef or subject with no kind is an unsupported value, not a missing one).
_NOT_REQUIRED_UPSTREAM = frozenset(
    {
        ("io.k8s.api.storage.v1.CSINodeSpec", "drivers"),
        ("io.k8s.api.core.v1.LimitRangeSpec", "limits"),
        ("io.k8s.api.rbac.v1.PolicyRule", "verbs"),
        ("io.k8s.api.rbac.v1.RoleRef", "apiGroup"),
        ("io.k8s.api.rbac.v1.RoleRef", "kind"),
        ("io.k8s.api.rbac.v1.Subject", "kind"),
    }
)


def _required_struct(
    value: dict[str, Any], plan: _Plan, path: str, causes: list[StatusCause], *, top: bool
) -> None:
    props = plan.props
    for name in plan.required:
        sub = props[name]
        item = value.get(name)
        child = f"{path}.{name}" if path else name
        if sub.kind == _STRUCT:
            if item is None:
                _required_struct({}, sub, child, causes, top=False)
        elif sub.kind == _BOOL or (plan.definition, name) in _NOT_REQUIRED_UPSTREAM:
            continue
        elif item is None or item == "" or item == []:
            causes.append(_required(child))
    walk = plan.walk
    if walk is None:
        walk = plan.walk = {
            name: sub
            for name, sub in props.items()
            if sub.kind in (_STRUCT, _ARRAY, _MAP) and _needs_required(sub)
        }
    for name, sub in walk.items():
        item = value.get(name)
        if item is None or (top and name == "status"):
            continue
        _required_value(item, sub, f"{path}.{name}" if path else name, causes)


def _required_value(item: Any, plan: _Plan, path: str, causes: list[StatusCause]) -> None:
    kind = plan.kind
    if kind == _STRUCT:
        if isinstance(item, dict):
            _required_struct(item, plan, path, causes, top=False)
        return
    elem = plan.elem
    if elem is None or elem.kind not in (_STRUCT, _ARRAY, _MAP):
        return
    if kind == _ARRAY and isinstance(item, list):
        for index, sub in enumerate(item):
            _required_value(sub, elem, f"{path}[{index}]", causes)
    elif kind == _MAP and isinstance(item, dict):
        for key, sub in item.items():
            _required_value(sub, elem, f"{path}[{key}]", causes)


# --------------------------------------------------------------------------- kind rules


def _nonnegative(spec: Mapping[str, Any], name: str, path: str) -> list[StatusCause]:
    value = spec.get(name)
    if _is_int(value) and value < 0:
        return [_invalid(f"{path}.{name}", value, _NEGATIVE)]
    return []


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_label_selector(selector: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidateLabelSelector`` (strict: label values in selectors must be valid).

    A missing ``operator`` or ``key`` is left to :func:`validate_required` (the schema requires
    both), so the two never report the same field twice.
    """
    causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for index, expr in enumerate(_as_list(selector.get("matchExpressions"))):
        expr = _as_dict(expr)
        at = f"{path}.matchExpressions[{index}]"
        operator = expr.get("operator")
        values = _as_list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(
                    _required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(
                    _forbidden(
                        f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    )
                )
        elif operator:  # a missing operator or key is validate_required's "Required value"
            causes.append(_invalid(f"{at}.operator", _text(operator), "not a valid selector operator"))
        key = _text(expr.get("key"))
        if key:
            causes.extend(_invalid(f"{at}.key", key, msg) for msg in naming.qualified_name_errors(key))
        for value_index, value in enumerate(values):
            text = _text(value)
            causes.extend(
                _invalid(f"{at}.values[{value_index}]", text, msg) for msg in naming.label_value_errors(text)
            )
    return causes


class _Selector:
    """labels.Selector from metav1.LabelSelectorAsSelector: nil matches nothing, {} everything."""

    def __init__(self, selector: Any) -> None:
        self.nothing = selector is None
        self.valid = True
        self.match_labels: dict[str, Any] = {}
        self.expressions: list[tuple[str, str, list[str]]] = []
        if self.nothing:
            return
        selector = _as_dict(selector)
        self.match_labels = _as_dict(selector.get("matchLabels"))
        for key, value in self.match_labels.items():
            if naming.qualified_name_errors(key) or naming.label_value_errors(_text(value)):
                self.valid = False
        for expr in _as_list(selector.get("matchExpressions")):
            expr = _as_dict(expr)
            operator, key = _text(expr.get("operator")), _text(expr.get("key"))
            values = [_text(v) for v in _as_list(expr.get("values"))]
            if (
                operator not in _SELECTOR_OPERATORS
                or naming.qualified_name_errors(key)
                or (operator in ("In", "NotIn")) != bool(values)
                or any(naming.label_value_errors(v) for v in values)
            ):
                self.valid = False
            self.expressions.append((operator, key, values))

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, Any]) -> bool:
        if self.nothing:
            return False
        for key, value in self.match_labels.items():
            if key not in labels or labels[key] != value:
                return False
        for operator, key, values in self.expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True)
class _Workload:
    noun: str  # in "empty selector is invalid for <noun>"
    selector_required: bool = True
    invalid_selector_detail: str = "invalid label selector"


def _workload_rules(workload: _Workload) -> Callable[[Mapping[str, Any]], list[StatusCause]]:
    def rules(obj: Mapping[str, Any]) -> list[StatusCause]:
        spec = _as_dict(obj.get("spec"))
        causes = _nonnegative(spec, "replicas", "spec") + _nonnegative(spec, "minReadySeconds", "spec")
        raw_selector = spec.get("selector")
        if raw_selector is None:
            if workload.selector_required:
                causes.append(_required("spec.selector"))
        else:
            selector_map = _as_dict(raw_selector)
            causes.extend(validate_label_selector(selector_map, "spec.selector"))
            if not selector_map.get("matchLabels") and not selector_map.get("matchExpressions"):
                causes.append(
                    _invalid("spec.selector", raw_selector, f"empty selector is invalid for {workload.noun}")
                )
        selector = _Selector(raw_selector)
        if not selector.valid:
            causes.append(_invalid("spec.selector", raw_selector, workload.invalid_selector_detail))
            return causes
        template = _as_dict(spec.get("template"))
        labels = _as_dict(template.get("metadata")).get("labels")
        if not selector.empty and not selector.matches(_as_dict(labels)):
            causes.append(
                _invalid(
                    "spec.template.metadata.labels",
                    labels if isinstance(labels, dict) else None,
                    "`selector` does not match template `labels`",
                )
            )
        causes.extend(_pod_template_rules(template, "spec.template"))
        restart = (
            template.get("spec", {}).get("restartPolicy") if isinstance(template.get("spec"), dict) else None
        )
        if isinstance(restart, str) and restart != "Always":
            causes.append(_not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
        return causes

    return rules


def _pod_template_rules(template: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidatePodTemplateSpec``: template labels and annotations, then the pod spec."""
    meta = _as_dict(template.get("metadata"))
    # Upstream names these fields <template>.labels / <template>.annotations (no "metadata").
    causes = validate_labels(meta.get("labels"), f"{path}.labels")
    causes.extend(validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    causes.extend(_pod_spec_rules(template.get("spec"), f"{path}.spec"))
    return causes


def _pod_spec_rules(spec: Any, path: str) -> list[StatusCause]:
    """``ValidatePodSpec``'s common rules, in its order: volumes; each container's name, image,
    ports, environment, volume mounts and resources (``validateContainerCommon``), unique names
    across init and app containers; then restartPolicy, dnsPolicy, serviceAccountName and
    activeDeadlineSeconds. (Probes, security contexts, affinity and the rest are not checked.)"""
    if not isinstance(spec, dict):
        return [_required(f"{path}.containers")]
    causes, volumes = _volume_rules(_as_list(spec.get("volumes")), f"{path}.volumes")
    seen: set[str] = set()
    for list_name in ("containers", "initContainers"):
        for index, container in enumerate(_as_list(spec.get(list_name))):
            container = _as_dict(container)
            at = f"{path}.{list_name}[{index}]"
            name = _text(container.get("name"))
            if name:
                causes.extend(_invalid(f"{at}.name", name, msg) for msg in naming.dns1123_label_errors(name))
            if not _text(container.get("image")):
                causes.append(_required(f"{at}.image"))
            policy = container.get("terminationMessagePolicy")
            if isinstance(policy, str) and policy and policy not in ("File", "FallbackToLogsOnError"):
                causes.append(
                    _not_supported(
                        f"{at}.terminationMessagePolicy", policy, ["File", "FallbackToLogsOnError"]
                    )
                )
            causes.extend(_container_port_rules(_as_list(container.get("ports")), f"{at}.ports"))
            causes.extend(_env_rules(_as_list(container.get("env")), f"{at}.env"))
            causes.extend(_env_from_rules(_as_list(container.get("envFrom")), f"{at}.envFrom"))
            causes.extend(_volume_mount_rules(_as_list(container.get("volumeMounts")), volumes, at))
            pull = container.get("imagePullPolicy")
            if isinstance(pull, str) and pull and pull not in _PULL_POLICIES:
                causes.append(_not_supported(f"{at}.imagePullPolicy", pull, _PULL_POLICIES))
            causes.extend(_resource_rules(_as_dict(container.get("resources")), f"{at}.resources"))
            if name:
                if name in seen:
                    causes.append(_duplicate(f"{at}.name", name))
                seen.add(name)
    restart = spec.get("restartPolicy")
    if isinstance(restart, str) and restart and restart not in ("Always", "OnFailure", "Never"):
        causes.append(_not_supported(f"{path}.restartPolicy", restart, ["Always", "OnFailure", "Never"]))
    dns = spec.get("dnsPolicy")
    if isinstance(dns, str) and dns and dns not in _DNS_POLICIES:
        causes.append(_not_supported(f"{path}.dnsPolicy", dns, _DNS_POLICIES))
    account = _text(spec.get("serviceAccountName"))
    if account:
        causes.extend(
            _invalid(f"{path}.serviceAccountName", account, msg)
            for msg in naming.dns1123_subdomain_errors(account)
        )
    deadline = spec.get("activeDeadlineSeconds")
    if _is_int(deadline) and not 1 <= deadline <= 2**31 - 1:
        causes.append(
            _invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")
        )
    return causes


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
#: The volume sources, in the order ``validateVolumeSource`` looks at them.
_VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs",
    "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte",
    "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
    "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO", "csi",
    "ephemeral", "image",
)  # fmt: skip
#: Upstream's path for a second source of this kind (misspelled there).
_SOURCE_PATHS = {"downwardAPI": "downwarAPI"}
_ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
_MODE_RANGE = "must be a number between 0 and 0777 (octal), both inclusive"


def _volume_rules(volumes: list[Any], path: str) -> tuple[list[StatusCause], set[str]]:
    """``ValidateVolumes``: the causes, and the names of the volumes without any (the ones
    mounts may refer to)."""
    causes: list[StatusCause] = []
    names: set[str] = set()
    for index, volume in enumerate(volumes):
        volume = _as_dict(volume)
        at = f"{path}[{index}]"
        found: list[StatusCause] = []
        sources = [source for source in _VOLUME_SOURCES if volume.get(source) is not None]
        if sources:
            found.extend(_volume_source_rules(sources[0], _as_dict(volume[sources[0]]), f"{at}.{sources[0]}"))
            found.extend(
                _forbidden(
                    f"{at}.{_SOURCE_PATHS.get(extra, extra)}", "may not specify more than 1 volume type"
                )
                for extra in sources[1:]
            )
        else:
            found.append(_required(at, "must specify a volume type"))
        name = _text(volume.get("name"))
        if not name:
            found.append(_required(f"{at}.name"))
        else:
            found.extend(_invalid(f"{at}.name", name, msg) for msg in naming.dns1123_label_errors(name))
        if name and name in names:
            found.append(_duplicate(f"{at}.name", name))
        if not found:
            names.add(name)
        causes.extend(found)
    return causes, names


def _volume_source_rules(source: str, spec: dict[str, Any], path: str) -> list[StatusCause]:
    """A configMap's or secret's name, default mode and items."""
    if source not in ("configMap", "secret"):
        return []
    causes: list[StatusCause] = []
    name_field = "name" if source == "configMap" else "secretName"
    if not _text(spec.get(name_field)):
        causes.append(_required(f"{path}.{name_field}"))
    mode = spec.get("defaultMode")
    if _is_int(mode) and not 0 <= mode <= 0o777:
        causes.append(_invalid(f"{path}.defaultMode", mode, _MODE_RANGE))
    for index, item in enumerate(_as_list(spec.get("items"))):
        item = _as_dict(item)
        at = f"{path}.items[{index}]"
        if not _text(item.get("key")):
            causes.append(_required(f"{at}.key"))
        item_path = _text(item.get("path"))
        if not item_path:
            causes.append(_required(f"{at}.path"))
        else:
            causes.extend(
                _invalid(f"{at}.path", item_path, msg) for msg in _local_path_errors(item_path, True)
            )
        mode = item.get("mode")
        if _is_int(mode) and not 0 <= mode <= 0o777:
            causes.append(_invalid(f"{at}.mode", mode, _MODE_RANGE))
    return causes


def _local_path_errors(value: str, dot_prefix: bool) -> list[str]:
    """``validateLocalDescendingPath``: relative, no '..' element (and, for items, no '..' start)."""
    found = []
    if value.startswith("/"):
        found.append("must be a relative path")
    if ".." in value.split("/"):
        found.append("must not contain '..'")
    elif dot_prefix and value.startswith(".."):
        found.append("must not start with '..'")
    return found


def _container_port_rules(ports: list[Any], path: str) -> list[StatusCause]:
    """``validateContainerPorts``: names (IANA service names, unique), port ranges, protocols."""
    causes: list[StatusCause] = []
    names: set[str] = set()
    for index, port in enumerate(ports):
        port = _as_dict(port)
        at = f"{path}[{index}]"
        name = _text(port.get("name"))
        if name:
            problems = naming.port_name_errors(name)
            causes.extend(_invalid(f"{at}.name", name, msg) for msg in problems)
            if not problems and name in names:
                causes.append(_duplicate(f"{at}.name", name))
            names.add(name)
        container_port = port.get("containerPort")
        if container_port == 0:
            causes.append(_required(f"{at}.containerPort"))
        elif _is_int(container_port) and not 1 <= container_port <= 65535:
            causes.append(_invalid(f"{at}.containerPort", container_port, _PORT_RANGE))
        host_port = port.get("hostPort")
        if _is_int(host_port) and host_port != 0 and not 1 <= host_port <= 65535:
            causes.append(_invalid(f"{at}.hostPort", host_port, _PORT_RANGE))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol and protocol not in _PROTOCOLS:
            causes.append(_not_supported(f"{at}.protocol", protocol, _PROTOCOLS))
    return causes


def _env_rules(env: list[Any], path: str) -> list[StatusCause]:
    """``ValidateEnv`` with relaxed names (RelaxedEnvironmentVariableValidation, on in 1.33):
    printable ASCII but '='; a valueFrom names exactly one source and no value beside it."""
    causes: list[StatusCause] = []
    for index, var in enumerate(env):
        var = _as_dict(var)
        at = f"{path}[{index}]"
        name = _text(var.get("name"))
        if name and any(not " " <= char <= "~" or char == "=" for char in name):
            causes.append(
                _invalid(
                    f"{at}.name",
                    name,
                    "a valid environment variable name must consist only of printable ASCII characters"
                    " other than '='",
                )
            )
        source = var.get("valueFrom")
        if source is None:
            continue
        source = _as_dict(source)
        set_sources = [key for key in _ENV_SOURCES if source.get(key) is not None]
        for key in ("configMapKeyRef", "secretKeyRef"):
            if key in set_sources:
                causes.extend(_key_selector_rules(_as_dict(source[key]), f"{at}.valueFrom.{key}"))
        if not set_sources:
            detail = (
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
            )
            causes.append(_invalid(f"{at}.valueFrom", "", detail))
        elif _text(var.get("value")):
            causes.append(_invalid(f"{at}.valueFrom", "", "may not be specified when `value` is not empty"))
        elif len(set_sources) > 1:
            causes.append(
                _invalid(f"{at}.valueFrom", "", "may not have more than one field specified at a time")
            )
    return causes


def _key_selector_rules(selector: dict[str, Any], path: str) -> list[StatusCause]:
    name = _text(selector.get("name"))
    causes = [_invalid(f"{path}.name", name, msg) for msg in naming.dns1123_subdomain_errors(name)]
    key = _text(selector.get("key"))
    if not key:
        causes.append(_required(f"{path}.key"))
    else:
        causes.extend(_invalid(f"{path}.key", key, msg) for msg in config_key_errors(key))
    return causes


def _env_from_rules(sources: list[Any], path: str) -> list[StatusCause]:
    """``ValidateEnvFrom``: exactly one of configMapRef and secretRef per entry (reported at the
    list's path, as upstream), each with a name."""
    causes: list[StatusCause] = []
    for index, source in enumerate(sources):
        source = _as_dict(source)
        refs = [key for key in ("configMapRef", "secretRef") if source.get(key) is not None]
        for key in refs:
            if not _text(_as_dict(source[key]).get("name")):
                causes.append(_required(f"{path}[{index}].{key}.name"))
        if not refs:
            causes.append(_invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(refs) > 1:
            causes.append(_invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def _volume_mount_rules(mounts: list[Any], volumes: set[str], container: str) -> list[StatusCause]:
    """``ValidateVolumeMounts``: each names a volume of the pod, at a path of its own; a subPath
    is relative and does not climb (reported at the list's path, without an index, as upstream)."""
    causes: list[StatusCause] = []
    paths: set[str] = set()
    path = f"{container}.volumeMounts"
    for index, mount in enumerate(mounts):
        mount = _as_dict(mount)
        at = f"{path}[{index}]"
        name = _text(mount.get("name"))
        if name not in volumes:
            causes.append(StatusCause(NOT_FOUND, f"Not found: {_render(name)}", f"{at}.name"))
        mount_path = _text(mount.get("mountPath"))
        if mount_path and mount_path in paths:
            causes.append(_invalid(f"{at}.mountPath", mount_path, "must be unique"))
        paths.add(mount_path)
        sub_path = _text(mount.get("subPath"))
        if sub_path:
            causes.extend(
                _invalid(f"{path}.subPath", sub_path, msg) for msg in _local_path_errors(sub_path, False)
            )
    return causes


def _resource_rules(resources: dict[str, Any], path: str) -> list[StatusCause]:
    """A request may not exceed its limit (``must be less than or equal to cpu limit of 1``)."""
    limits, requests = _as_dict(resources.get("limits")), _as_dict(resources.get("requests"))
    causes: list[StatusCause] = []
    for name in sorted(requests):
        if name not in limits:
            continue
        try:
            over = quantity.parse(str(requests[name])) > quantity.parse(str(limits[name]))
        except quantity.QuantityError:
            continue  # a malformed quantity is refused by its format
        if over:
            detail = f"must be less than or equal to {name} limit of {limits[name]}"
            causes.append(_invalid(f"{path}.requests", str(requests[name]), detail))
    return causes


def _pod_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _pod_spec_rules(obj.get("spec"), "spec")


def _pod_template_kind_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _pod_template_rules(_as_dict(obj.get("template")), "template")


def _job_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _pod_template_rules(_as_dict(_as_dict(obj.get("spec")).get("template")), "spec.template")


def _cronjob_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateCronJobSpec``: the schedule and time zone, the policies, and the job's template."""
    spec = _as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    schedule = spec.get("schedule")
    if isinstance(schedule, str):
        if not schedule:
            causes.append(_required("spec.schedule"))
        else:
            try:
                cronschedule.parse(schedule)
            except cronschedule.ScheduleError as exc:
                causes.append(_invalid("spec.schedule", schedule, str(exc)))
            if "TZ" in schedule:
                detail = (
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule"
                    if spec.get("timeZone") is not None
                    else "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
                )
                causes.append(_invalid("spec.schedule", schedule, detail))
    zone = spec.get("timeZone")
    if isinstance(zone, str):
        if not zone:
            causes.append(_invalid("spec.timeZone", zone, "timeZone must be nil or non-empty string"))
        elif zone.lower() == "local":
            causes.append(
                _invalid(
                    "spec.timeZone",
                    zone,
                    "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                )
            )
        else:
            try:
                cronschedule.time_zone(zone)
            except cronschedule.ScheduleError as exc:
                causes.append(_invalid("spec.timeZone", zone, str(exc)))
    policy = spec.get("concurrencyPolicy")
    if isinstance(policy, str) and policy not in _CONCURRENCY_POLICIES:
        causes.append(_not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY_POLICIES))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        value = spec.get(key)
        if _is_int(value) and value < 0:
            causes.append(_invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    job_spec = _as_dict(_as_dict(spec.get("jobTemplate")).get("spec"))
    causes.extend(_pod_template_rules(_as_dict(job_spec.get("template")), "spec.jobTemplate.spec.template"))
    return causes


_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


_PORT_RANGE = "must be between 1 and 65535, inclusive"
_PROTOCOLS = ("SCTP", "TCP", "UDP")


def _service_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateServicePort``: names (required when several), port numbers, protocols."""
    ports = _as_list(_as_dict(obj.get("spec")).get("ports"))
    require_name = len(ports) > 1
    names: set[str] = set()
    causes: list[StatusCause] = []
    for index, port in enumerate(ports):
        port = _as_dict(port)
        at = f"spec.ports[{index}]"
        name = _text(port.get("name"))
        if require_name and not name:
            causes.append(_required(f"{at}.name"))
        elif name:
            causes.extend(_invalid(f"{at}.name", name, msg) for msg in naming.dns1123_label_errors(name))
            if name in names:
                causes.append(_duplicate(f"{at}.name", name))
            names.add(name)
        number = port.get("port")
        if _is_int(number) and not 1 <= number <= 65535:
            causes.append(_invalid(f"{at}.port", number, _PORT_RANGE))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            causes.append(_not_supported(f"{at}.protocol", protocol, _PROTOCOLS))
        target = port.get("targetPort")
        if _is_int(target) and target != 0 and not 1 <= target <= 65535:
            causes.append(_invalid(f"{at}.targetPort", target, _PORT_RANGE))
        node_port = port.get("nodePort")
        if _is_int(node_port) and node_port != 0 and not 1 <= node_port <= 65535:
            causes.append(_invalid(f"{at}.nodePort", node_port, _PORT_RANGE))
    return causes


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MESSAGE = naming.regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    "[-._a-zA-Z0-9]+",
    "key.name",
    "KEY_NAME",
    "key-name",
)


def config_key_errors(key: str) -> list[str]:
    """``IsConfigMapKey``: keys of ConfigMap and Secret data."""
    messages: list[str] = []
    if naming.byte_length(key) > naming.DNS1123_SUBDOMAIN_MAX_LENGTH:
        messages.append(naming.max_len_error(naming.DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _CONFIG_KEY.fullmatch(key):
        messages.append(_CONFIG_KEY_MESSAGE)
    if key == ".":
        messages.append("must not be '.'")
    elif key == "..":
        messages.append("must not be '..'")
    elif key.startswith(".."):
        messages.append("must not start with '..'")
    return messages


def _text_size(value: Any) -> int:
    return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0


def _binary_size(value: Any) -> int:
    if not isinstance(value, str):
        return 0
    decoded = _go_base64(value)
    return len(decoded) if isinstance(decoded, bytes) else 0


def _configmap_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    data, binary = _as_dict(obj.get("data")), _as_dict(obj.get("binaryData"))
    causes: list[StatusCause] = []
    total = 0
    for key, value in data.items():
        causes.extend(_invalid(f"data[{key}]", key, msg) for msg in config_key_errors(key))
        if key in binary:
            causes.append(_invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += _text_size(value)
    for key, value in binary.items():
        causes.extend(_invalid(f"binaryData[{key}]", key, msg) for msg in config_key_errors(key))
        total += _binary_size(value)
    if total > MAX_SECRET_SIZE:
        causes.append(_too_long("", MAX_SECRET_SIZE))  # upstream: the whole object
    return causes


def _secret_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    # stringData is merged over data before validation (the v1 → internal conversion).
    sizes = {key: _binary_size(value) for key, value in _as_dict(obj.get("data")).items()}
    sizes.update({key: _text_size(value) for key, value in _as_dict(obj.get("stringData")).items()})
    causes: list[StatusCause] = []
    for key in sizes:
        causes.extend(_invalid(f"data[{key}]", key, msg) for msg in config_key_errors(key))
    if sum(sizes.values()) > MAX_SECRET_SIZE:
        causes.append(_too_long("data", MAX_SECRET_SIZE))
    return causes


def _lease_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    spec = _as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    duration = spec.get("leaseDurationSeconds")
    if _is_int(duration) and duration <= 0:
        causes.append(_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if _is_int(transitions) and transitions < 0:
        causes.append(_invalid("spec.leaseTransitions", transitions, _NEGATIVE))
    return causes


_RBAC_GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _policy_rule(rule: Any, namespaced: bool, path: str) -> list[StatusCause]:
    """``ValidatePolicyRule``: verbs, and either non-resource URLs (cluster roles only) or
    groups and resources."""
    rule = _as_dict(rule)
    causes: list[StatusCause] = []
    if not _as_list(rule.get("verbs")):
        causes.append(_required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = _as_list(rule.get("nonResourceURLs"))
    if urls:
        if namespaced:
            causes.append(
                _invalid(
                    f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"
                )
            )
        if any(_as_list(rule.get(key)) for key in ("apiGroups", "resources", "resourceNames")):
            causes.append(
                _invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        return causes
    if not _as_list(rule.get("apiGroups")):
        causes.append(_required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not _as_list(rule.get("resources")):
        causes.append(_required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


def _policy_rules(obj: Mapping[str, Any], namespaced: bool) -> list[StatusCause]:
    return [
        cause
        for index, rule in enumerate(_as_list(obj.get("rules")))
        for cause in _policy_rule(rule, namespaced, f"rules[{index}]")
    ]


def _role_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _policy_rules(obj, namespaced=True)


def _cluster_role_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    causes = _policy_rules(obj, namespaced=False)
    aggregation = obj.get("aggregationRule")
    if isinstance(aggregation, dict):
        selectors = _as_list(aggregation.get("clusterRoleSelectors"))
        if not selectors:
            causes.append(
                _required(
                    "aggregationRule.clusterRoleSelectors",
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                )
            )
        for index, selector in enumerate(selectors):
            causes.extend(
                validate_label_selector(_as_dict(selector), f"aggregationRule.clusterRoleSelectors[{index}]")
            )
    return causes


def _subject(subject: Any, namespaced: bool, path: str) -> list[StatusCause]:
    """``ValidateRoleBindingSubject``."""
    subject = _as_dict(subject)
    causes: list[StatusCause] = []
    name, group, kind = _text(subject.get("name")), _text(subject.get("apiGroup")), subject.get("kind")
    if not name:
        causes.append(_required(f"{path}.name"))
    if kind == "ServiceAccount":
        causes.extend(
            _invalid(f"{path}.name", name, msg) for msg in naming.dns1123_subdomain_errors(name) if name
        )
        if group:
            causes.append(_not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not _text(subject.get("namespace")):
            causes.append(_required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != _RBAC_GROUP:
            causes.append(_not_supported(f"{path}.apiGroup", group, [_RBAC_GROUP]))
    else:
        causes.append(_not_supported(f"{path}.kind", _text(kind), _SUBJECT_KINDS))
    return causes


def _binding_rules(namespaced: bool) -> Callable[[Mapping[str, Any]], list[StatusCause]]:
    """``ValidateRoleBinding`` / ``ValidateClusterRoleBinding``: the roleRef and the subjects."""
    ref_kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)

    def rules(obj: Mapping[str, Any]) -> list[StatusCause]:
        ref = _as_dict(obj.get("roleRef"))
        causes: list[StatusCause] = []
        if _text(ref.get("apiGroup")) != _RBAC_GROUP:
            causes.append(_not_supported("roleRef.apiGroup", _text(ref.get("apiGroup")), [_RBAC_GROUP]))
        if ref.get("kind") not in ref_kinds:
            causes.append(_not_supported("roleRef.kind", _text(ref.get("kind")), ref_kinds))
        name = _text(ref.get("name"))
        if not name:
            causes.append(_required("roleRef.name"))
        causes.extend(_invalid("roleRef.name", name, msg) for msg in naming.path_segment_errors(name) if name)
        for index, subject in enumerate(_as_list(obj.get("subjects"))):
            causes.extend(_subject(subject, namespaced, f"subjects[{index}]"))
        return causes

    return rules


def _binding_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """A binding's roleRef never changes (delete and re-create the binding instead)."""
    new_ref, old_ref = _as_dict(new.get("roleRef")), _as_dict(old.get("roleRef"))
    fields = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
    if all(_text(new_ref.get(key)) == _text(old_ref.get(key)) for _, key in fields):
        return []
    shown = _GoStruct((go_name, _text(new_ref.get(key))) for go_name, key in fields)
    return [_invalid("roleRef", shown, "cannot change roleRef")]


_PERCENT = re.compile(r"[0-9]+%")
_PERCENT_ERROR = naming.regex_error(
    "a valid percent string must be a numeric string followed by an ending '%'", "[0-9]+%", "1%", "93%"
)
_UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def _percent_over_100(value: str) -> bool:
    """A valid percent string above 100% (told by its digits: there may be thousands)."""
    digits = value[:-1].lstrip("0")
    return len(digits) > 3 or int(digits or "0") > 100


def _positive_int_or_percent(value: Any, path: str, *, at_most_100: bool = True) -> list[StatusCause]:
    """``ValidatePositiveIntOrPercent`` (and ``IsNotMoreThan100Percent`` unless told not)."""
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            return [_invalid(path, value, _PERCENT_ERROR)]
        if at_most_100 and _percent_over_100(value):
            return [_invalid(path, value, "must not be greater than 100%")]
        return []
    if _is_int(value) and value < 0:
        return [_invalid(path, value, _NEGATIVE)]
    return []


def _is_zero_int_or_percent(value: Any) -> bool:
    """``getIntOrPercentValue(v) == 0``: a percent's number, an integer, else the string's Atoi
    (which is 0 for a string that is not a number)."""
    if _is_int(value):
        return value == 0
    text = _text(value)
    number = text[:-1] if _PERCENT.fullmatch(text) else text.removeprefix("+").removeprefix("-")
    return not (number.isascii() and number.isdigit()) or not number.strip("0")


def _deployment_strategy(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateDeploymentStrategy`` and ``ValidateRollingUpdateDeployment``."""
    strategy = _as_dict(_as_dict(obj.get("spec")).get("strategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    path = "spec.strategy.rollingUpdate"
    if kind == "Recreate":
        if rolling is not None:
            return [_forbidden(path, "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate":
        rolling_shown = None
        if isinstance(rolling, dict):
            rolling_shown = _GoStruct(
                MaxUnavailable=rolling.get("maxUnavailable"), MaxSurge=rolling.get("maxSurge")
            )
        shown = _GoStruct(Type=_text(kind), RollingUpdate=rolling_shown)
        return [_not_supported("spec.strategy", shown, ("Recreate", "RollingUpdate"))]
    if not isinstance(rolling, dict):
        return [_required(path, "this should be defaulted and never be nil")]
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    causes = _positive_int_or_percent(unavailable, f"{path}.maxUnavailable", at_most_100=False)
    causes += _positive_int_or_percent(surge, f"{path}.maxSurge", at_most_100=False)
    if _is_zero_int_or_percent(unavailable) and _is_zero_int_or_percent(surge):
        causes.append(_invalid(f"{path}.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0"))
    if isinstance(unavailable, str) and _PERCENT.fullmatch(unavailable) and _percent_over_100(unavailable):
        causes.append(_invalid(f"{path}.maxUnavailable", unavailable, "must not be greater than 100%"))
    return causes


def _daemon_set_spec(obj: Mapping[str, Any]) -> list[StatusCause]:
    """The rest of ``ValidateDaemonSetSpec``: activeDeadlineSeconds, templateGeneration, the
    update strategy (``ValidateDaemonSetUpdateStrategy``) and revisionHistoryLimit."""
    spec = _as_dict(obj.get("spec"))
    causes = _no_active_deadline(spec, "DaemonSet") + _nonnegative(spec, "templateGeneration", "spec")
    strategy = _as_dict(spec.get("updateStrategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    path = "spec.updateStrategy"
    if kind == "RollingUpdate":
        if isinstance(rolling, dict):
            causes += _rolling_update_daemon_set(rolling, f"{path}.rollingUpdate")
        else:
            causes.append(_required(f"{path}.rollingUpdate"))
    elif kind != "OnDelete":
        rolling_shown = None
        if isinstance(rolling, dict):  # Go's internal struct: absent values are zero
            rolling_shown = _GoStruct(
                MaxUnavailable=rolling.get("maxUnavailable") or 0, MaxSurge=rolling.get("maxSurge") or 0
            )
        shown = _GoStruct(Type=_text(kind), RollingUpdate=rolling_shown)
        causes.append(_not_supported(path, shown, ("RollingUpdate", "OnDelete")))
    causes += _nonnegative(spec, "revisionHistoryLimit", "spec")
    return causes


def _rolling_update_daemon_set(rolling: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidateRollingUpdateDaemonSet``: both counts int-or-percent up to 100%, and exactly
    one of them non-zero (a surge replaces pods before it stops old ones, so not both)."""
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    causes = _positive_int_or_percent(unavailable, f"{path}.maxUnavailable", at_most_100=False)
    causes += _positive_int_or_percent(surge, f"{path}.maxSurge", at_most_100=False)
    for name, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
        if isinstance(value, str) and _PERCENT.fullmatch(value) and _percent_over_100(value):
            causes.append(_invalid(f"{path}.{name}", value, "must not be greater than 100%"))
    has_unavailable, has_surge = not _is_zero_int_or_percent(unavailable), not _is_zero_int_or_percent(surge)
    if has_unavailable and has_surge:
        causes.append(_invalid(f"{path}.maxSurge", surge, "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        causes.append(_required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return causes


def _stateful_set_policies(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateStatefulSetSpec``'s first rules: podManagementPolicy and the update strategy
    (a RollingUpdate's partition). ``rollingUpdate.maxUnavailable`` is behind the alpha gate
    MaxUnavailableStatefulSet upstream (off by default) and is not judged here."""
    spec = _as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    policy = spec.get("podManagementPolicy")
    if not policy:
        causes.append(_required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        causes.append(_invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = _as_dict(spec.get("updateStrategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    path = "spec.updateStrategy"
    shown_rolling = None
    if isinstance(rolling, dict):  # Go's internal struct: a partition absent is 0
        shown_rolling = _GoStruct(
            Partition=rolling.get("partition") or 0, MaxUnavailable=rolling.get("maxUnavailable")
        )
    if not kind:
        causes.append(_required(path))
    elif kind == "OnDelete":
        if rolling is not None:
            causes.append(
                _invalid(
                    f"{path}.rollingUpdate", shown_rolling, "only allowed for updateStrategy 'RollingUpdate'"
                )
            )
    elif kind == "RollingUpdate":
        if isinstance(rolling, dict):
            causes += _nonnegative(rolling, "partition", f"{path}.rollingUpdate")
    else:
        shown = _GoStruct(Type=_text(kind), RollingUpdate=shown_rolling)
        causes.append(_invalid(path, shown, "must be 'RollingUpdate' or 'OnDelete'"))
    return causes


def _stateful_set_template_limits(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateStatefulSetSpec``'s ordinals and activeDeadlineSeconds."""
    spec = _as_dict(obj.get("spec"))
    return _nonnegative(_as_dict(spec.get("ordinals")), "start", "spec.ordinals") + _no_active_deadline(
        spec, "StatefulSet"
    )


def _no_active_deadline(spec: Mapping[str, Any], kind: str) -> list[StatusCause]:
    """A set's pods run for good: their template may not give them a deadline."""
    if _as_dict(_as_dict(spec.get("template")).get("spec")).get("activeDeadlineSeconds") is None:
        return []
    path = "spec.template.spec.activeDeadlineSeconds"
    return [_forbidden(path, f"activeDeadlineSeconds in {kind} is not Supported")]


def _go_label_selector(selector: Any) -> Any:
    """A ``*metav1.LabelSelector`` as json.Marshal prints it."""
    if not isinstance(selector, dict):
        return None
    shown = _GoStruct()
    if selector.get("matchLabels"):
        shown["matchLabels"] = dict(sorted(_as_dict(selector["matchLabels"]).items()))
    if selector.get("matchExpressions"):
        shown["matchExpressions"] = [
            _GoStruct(
                [("key", _as_dict(expr).get("key")), ("operator", _as_dict(expr).get("operator"))]
                + ([("values", _as_dict(expr)["values"])] if _as_dict(expr).get("values") else [])
            )
            for expr in _as_list(selector["matchExpressions"])
        ]
    return shown


def _pdb_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidatePodDisruptionBudget`` (and the status counters of its status update rules)."""
    spec = _as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    minimum, maximum = spec.get("minAvailable"), spec.get("maxUnavailable")
    if minimum is not None and maximum is not None:
        shown = _GoStruct(
            MinAvailable=minimum,
            Selector=_go_label_selector(spec.get("selector")),
            MaxUnavailable=maximum,
            UnhealthyPodEvictionPolicy=spec.get("unhealthyPodEvictionPolicy"),
        )
        causes.append(_invalid("spec", shown, "minAvailable and maxUnavailable cannot be both set"))
    if minimum is not None:
        causes.extend(_positive_int_or_percent(minimum, "spec.minAvailable"))
    if maximum is not None:
        causes.extend(_positive_int_or_percent(maximum, "spec.maxUnavailable"))
    if isinstance(spec.get("selector"), dict):
        causes.extend(validate_label_selector(spec["selector"], "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        causes.append(
            _not_supported("spec.unhealthyPodEvictionPolicy", _text(policy), _UNHEALTHY_POD_EVICTION_POLICIES)
        )
    status = _as_dict(obj.get("status"))
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        causes.extend(_nonnegative(status, key, "status"))
    return causes


# --------------------------------------------------------------------------- update rules
#
# Upstream's Validate<Kind>Update (and the apps strategies' ValidateUpdate): what may not change.
# A changed value is shown as json.Marshal prints the new one; internal Go structs with no JSON
# tags (a Job's pod template) are shown in their v1 form instead of with Go's field names.

_IMMUTABLE = "field is immutable"


def _immutable(path: str, new: Any, old: Any, shown: Any = None) -> list[StatusCause]:
    """``ValidateImmutableField``."""
    if new == old:
        return []
    return [_invalid(path, new if shown is None else shown, _IMMUTABLE)]


def _selector_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """apps/v1 Deployments, ReplicaSets and DaemonSets: ``spec.selector`` is set once."""
    selector = _as_dict(new.get("spec")).get("selector")
    return _immutable(
        "spec.selector", selector, _as_dict(old.get("spec")).get("selector"), _go_label_selector(selector)
    )


_STATEFUL_SET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def _stateful_set_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateStatefulSetUpdate``: only the listed spec fields change."""
    new_spec, old_spec = _as_dict(new.get("spec")), _as_dict(old.get("spec"))
    rest = {k: v for k, v in new_spec.items() if k not in _STATEFUL_SET_MUTABLE}
    if rest == {k: v for k, v in old_spec.items() if k not in _STATEFUL_SET_MUTABLE}:
        return []
    allowed = ", ".join(f"'{name}'" for name in _STATEFUL_SET_MUTABLE[:-1])
    return [
        _forbidden(
            "spec",
            f"updates to statefulset spec for fields other than {allowed} and "
            f"'{_STATEFUL_SET_MUTABLE[-1]}' are forbidden",
        )
    ]


#: What a suspended Job that never started may still change in its pod template
#: (``AllowMutableSchedulingDirectives``).
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def _job_template_for_comparison(template: Any, new_template: Any, mutable: bool) -> Any:
    """The old template with the scheduling directives of the new one when they may change."""
    if not mutable or not isinstance(template, dict) or not isinstance(new_template, dict):
        return template
    merged = copy.deepcopy(template)
    new_meta = _as_dict(new_template.get("metadata"))
    meta = merged.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if key in new_meta:
            meta[key] = new_meta[key]
        else:
            meta.pop(key, None)
    new_pod, pod = _as_dict(new_template.get("spec")), merged.setdefault("spec", {})
    for key in _SCHEDULING_DIRECTIVES:
        if key in new_pod:
            pod[key] = new_pod[key]
        else:
            pod.pop(key, None)
    new_affinity = new_pod.get("affinity")
    if isinstance(new_affinity, dict):
        affinity = dict(_as_dict(pod.get("affinity")))
        if "nodeAffinity" in new_affinity:
            affinity["nodeAffinity"] = new_affinity["nodeAffinity"]
        else:
            affinity.pop("nodeAffinity", None)
        pod["affinity"] = affinity
    elif isinstance(pod.get("affinity"), dict):
        rest = {k: v for k, v in pod["affinity"].items() if k != "nodeAffinity"}
        if rest:
            pod["affinity"] = rest
        else:
            pod.pop("affinity")
    if not meta:
        merged.pop("metadata")
    return merged


def _job_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateJobSpecUpdate``: completions (non-indexed), selector, pod template (bar the
    scheduling directives of a suspended Job that never started) and the policies are fixed."""
    spec, old_spec = _as_dict(new.get("spec")), _as_dict(old.get("spec"))
    causes: list[StatusCause] = []
    if spec.get("completionMode") == "Indexed":
        completions = spec.get("completions")
        changed = completions != old_spec.get("completions") and completions is not None
        if changed and completions != spec.get("parallelism"):
            detail = "can only be modified in tandem with spec.parallelism"
            causes.append(_invalid("spec.completions", completions, detail))
    else:
        causes += _immutable("spec.completions", spec.get("completions"), old_spec.get("completions"))
    selector = spec.get("selector")
    causes += _immutable("spec.selector", selector, old_spec.get("selector"), _go_label_selector(selector))
    mutable = old_spec.get("suspend") is True and not _as_dict(old.get("status")).get("startTime")
    template = spec.get("template")
    old_template = _job_template_for_comparison(old_spec.get("template"), template, mutable)
    causes += _immutable("spec.template", template, old_template)
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        causes += _immutable(f"spec.{key}", spec.get(key), old_spec.get(key))
    return causes


_WHEN_IMMUTABLE = "field is immutable when `immutable` is set"


def _immutable_data_rules(
    *fields: str,
) -> Callable[[Mapping[str, Any], Mapping[str, Any]], list[StatusCause]]:
    """ConfigMaps and Secrets marked ``immutable``: the mark and the data stay."""

    def rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
        if old.get("immutable") is not True:
            return []
        causes: list[StatusCause] = []
        if new.get("immutable") is not True:
            causes.append(_forbidden("immutable", _WHEN_IMMUTABLE))
        causes += [_forbidden(key, _WHEN_IMMUTABLE) for key in fields if new.get(key) != old.get(key)]
        return causes

    return rules


_configmap_update_rules = _immutable_data_rules("data", "binaryData")
_secret_data_rules = _immutable_data_rules("data")


def _secret_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateSecretUpdate``: the type never changes; an immutable secret's data neither."""
    return _immutable("type", new.get("type"), old.get("type")) + _secret_data_rules(new, old)


def _controller_revision_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    return _immutable("data", new.get("data"), old.get("data"))


_MAX_PERIOD_SECONDS = 1800
_MAX_STABILIZATION_WINDOW_SECONDS = 3600
_METRIC_SOURCES = ("ContainerResource", "External", "Object", "Pods", "Resource")
_METRIC_SOURCE_FIELDS = (
    ("Object", "object"),
    ("External", "external"),
    ("Pods", "pods"),
    ("Resource", "resource"),
    ("ContainerResource", "containerResource"),
)
_SELECT_POLICIES = ("Disabled", "Max", "Min")
_SCALING_POLICY_TYPES = ("Percent", "Pods")


def _cross_version_reference(ref: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidateCrossVersionObjectReference``: kind and name, both path segments."""
    causes: list[StatusCause] = []
    for key in ("kind", "name"):
        value = _text(ref.get(key))
        if not value:
            causes.append(_required(f"{path}.{key}"))
        else:
            causes.extend(_invalid(f"{path}.{key}", value, m) for m in naming.path_segment_errors(value))
    return causes


def _metric_target(target: Mapping[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    kind = target.get("type")
    if not kind:
        causes.append(_required(f"{path}.type", "must specify a metric target type"))
    if kind not in ("Utilization", "Value", "AverageValue"):
        causes.append(
            _invalid(f"{path}.type", kind or "", "must be either Utilization, Value, or AverageValue")
        )
    for key in ("value", "averageValue"):
        if target.get(key) is not None and quantity.sign(target[key]) != 1:
            causes.append(_invalid(f"{path}.{key}", target[key], "must be positive"))
    utilization = target.get("averageUtilization")
    if _is_int(utilization) and utilization < 1:
        causes.append(_invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return causes


def _metric_identifier(identifier: Mapping[str, Any], path: str) -> list[StatusCause]:
    name = _text(identifier.get("name"))
    if not name:
        return [_required(f"{path}.name", "must specify a metric name")]
    return [_invalid(f"{path}.name", name, m) for m in naming.path_segment_errors(name)]


def _metric_source(key: str, source: Mapping[str, Any], path: str) -> list[StatusCause]:
    """One metric source's own rules (``validateObjectSource``, ``validatePodsSource``...)."""
    target = _as_dict(source.get("target"))
    causes: list[StatusCause] = []
    if key == "object":
        causes += _cross_version_reference(_as_dict(source.get("describedObject")), f"{path}.describedObject")
    if key in ("object", "external", "pods"):
        causes += _metric_identifier(_as_dict(source.get("metric")), f"{path}.metric")
    if key in ("resource", "containerResource"):
        if not _text(source.get("name")):
            causes.append(_required(f"{path}.name", "must specify a resource name"))
        if key == "containerResource":
            container = _text(source.get("container"))
            if not container:
                causes.append(_required(f"{path}.container", "must specify a container"))
            else:
                causes += [
                    _invalid(f"{path}.container", container, m)
                    for m in naming.dns1123_label_errors(container)
                ]
    causes += _metric_target(target, f"{path}.target")
    value, average = target.get("value"), target.get("averageValue")
    utilization = target.get("averageUtilization")
    if key == "object" and value is None and average is None:
        causes.append(
            _required(f"{path}.target.averageValue", "must set either a target value or averageValue")
        )
    elif key == "external":
        if value is None and average is None:
            causes.append(
                _required(
                    f"{path}.target.averageValue",
                    "must set either a target value for metric or a per-pod target",
                )
            )
        if value is not None and average is not None:
            causes.append(
                _forbidden(
                    f"{path}.target.value", "may not set both a target value for metric and a per-pod target"
                )
            )
    elif key == "pods" and average is None:
        causes.append(_required(f"{path}.target.averageValue", "must specify a positive target averageValue"))
    elif key in ("resource", "containerResource"):
        if utilization is None and average is None:
            causes.append(
                _required(
                    f"{path}.target.averageUtilization",
                    "must set either a target raw value or a target utilization",
                )
            )
        if utilization is not None and average is not None:
            causes.append(
                _forbidden(
                    f"{path}.target.averageValue",
                    "may not set both a target raw value and a target utilization",
                )
            )
    return causes


def _metric_spec(metric: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``validateMetricSpec``: a known type, its source filled in, and no other source."""
    causes: list[StatusCause] = []
    kind = _text(metric.get("type"))
    if not kind:
        causes.append(_required(f"{path}.type", "must specify a metric source type"))
    if kind not in _METRIC_SOURCES:
        causes.append(_not_supported(f"{path}.type", kind, _METRIC_SOURCES))
    present = [key for _, key in _METRIC_SOURCE_FIELDS if metric.get(key) is not None]
    if present:
        causes += _metric_source(present[0], _as_dict(metric.get(present[0])), f"{path}.{present[0]}")
    expected = dict(_METRIC_SOURCE_FIELDS).get(kind, "")
    if expected and expected not in present:
        causes.append(
            _required(f"{path}.{expected}", "must populate information for the given metric source")
        )
    if len(present) > 1:
        causes += [
            _forbidden(f"{path}.{key}", "must populate the given metric source only")
            for key in present
            if key != expected
        ]
    return causes


def _scaling_rules(rules: Mapping[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    window = rules.get("stabilizationWindowSeconds")
    if _is_int(window) and window < 0:
        causes.append(
            _invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero")
        )
    if _is_int(window) and window > _MAX_STABILIZATION_WINDOW_SECONDS:
        causes.append(
            _invalid(
                f"{path}.stabilizationWindowSeconds",
                window,
                f"must be less than or equal to {_MAX_STABILIZATION_WINDOW_SECONDS}",
            )
        )
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        causes.append(_not_supported(f"{path}.selectPolicy", select, _SELECT_POLICIES))
    policies = _as_list(rules.get("policies"))
    if not policies:
        causes.append(_required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(policies):
        item = _as_dict(policy)
        at = f"{path}.policies[{i}]"
        if item.get("type") not in _SCALING_POLICY_TYPES:
            causes.append(_not_supported(f"{at}.type", item.get("type") or "", _SCALING_POLICY_TYPES))
        value = item.get("value", 0)
        if _is_int(value) and value <= 0:
            causes.append(_invalid(f"{at}.value", value, "must be greater than zero"))
        period = item.get("periodSeconds", 0)
        if _is_int(period) and period <= 0:
            causes.append(_invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        if _is_int(period) and period > _MAX_PERIOD_SECONDS:
            causes.append(
                _invalid(
                    f"{at}.periodSeconds", period, f"must be less than or equal to {_MAX_PERIOD_SECONDS}"
                )
            )
    return causes


def _hpa_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateHorizontalPodAutoscalerSpec`` on the autoscaling/v2 form (what upstream
    validates whichever version a client writes; HPAScaleToZero is off)."""
    spec = _as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    low = spec.get("minReplicas")
    high = spec.get("maxReplicas", 0)
    if _is_int(low) and low < 1:
        causes.append(_invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if _is_int(high) and high < 1:
        causes.append(_invalid("spec.maxReplicas", high, "must be greater than 0"))
    if _is_int(low) and _is_int(high) and high < low:
        causes.append(_invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    causes += _cross_version_reference(_as_dict(spec.get("scaleTargetRef")), "spec.scaleTargetRef")
    for i, metric in enumerate(_as_list(spec.get("metrics"))):
        causes += _metric_spec(_as_dict(metric), f"spec.metrics[{i}]")
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        for direction in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(direction), Mapping):
                causes += _scaling_rules(behavior[direction], f"spec.behavior.{direction}")
    status = obj.get("status")
    if isinstance(status, Mapping):
        for key in ("currentReplicas", "desiredReplicas"):
            if _is_int(status.get(key)) and status[key] < 0:
                causes.append(_invalid(f"status.{key}", status[key], _NEGATIVE))
    return causes


# The rules of each kind, by the names the strategies bind them with.
_deployment_workload_rules = _workload_rules(_Workload("deployment"))


def deployment_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _deployment_workload_rules(obj) + _deployment_strategy(obj)


#: Upstream's ReplicaSet message really says "deployment".
replica_set_rules = _workload_rules(_Workload("deployment"))
_stateful_set_workload_rules = _workload_rules(_Workload("statefulset", invalid_selector_detail=""))
#: DaemonSet: no "Required" for a missing selector upstream, only the template mismatch.
_daemon_set_workload_rules = _workload_rules(_Workload("daemonset", selector_required=False))


def stateful_set_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return (
        _stateful_set_policies(obj) + _stateful_set_workload_rules(obj) + _stateful_set_template_limits(obj)
    )


def daemon_set_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _daemon_set_workload_rules(obj) + _daemon_set_spec(obj)


pod_rules = _pod_rules
pod_template_rules = _pod_template_kind_rules
job_rules = _job_rules
cron_job_rules = _cronjob_rules
service_rules = _service_rules
config_map_rules = _configmap_rules
secret_rules = _secret_rules
lease_rules = _lease_rules
horizontal_pod_autoscaler_rules = _hpa_rules
role_rules = _role_rules
cluster_role_rules = _cluster_role_rules
role_binding_rules = _binding_rules(namespaced=True)
cluster_role_binding_rules = _binding_rules(namespaced=False)
binding_update_rules = _binding_update_rules
pod_disruption_budget_rules = _pdb_rules
selector_update_rules = _selector_update_rules
stateful_set_update_rules = _stateful_set_update_rules
job_update_rules = _job_update_rules
config_map_update_rules = _configmap_update_rules
secret_update_rules = _secret_update_rules
controller_revision_update_rules = _controller_revision_update_rules


def deduplicated(causes: Iterable[StatusCause]) -> list[StatusCause]:
    """The causes in order, each once (the schema's required fields and a kind's rules overlap)."""
    unique: list[StatusCause] = []
    seen: set[StatusCause] = set()
    for cause in causes:
        if cause not in seen:
            seen.add(cause)
            unique.append(cause)
    return unique
