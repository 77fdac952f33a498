"""Go's typed JSON decoding of a request body (``sigs.k8s.io/json`` behind apimachinery's JSON
serializer), against the kind's OpenAPI schema: unknown fields are pruned (``fieldValidation=Strict``
→ 400, ``Warn`` → warnings), wrong JSON types are a 400 naming the Go struct field, and the
special types (``IntOrString``, ``Quantity``, ``Time``, ``MicroTime``, ``[]byte``) accept what
their ``UnmarshalJSON`` accepts. Decoding is driven by plans compiled once per schema definition.
"""

from __future__ import annotations

import base64
import calendar
import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop import errors
from kubeloop.api import quantity, timestamps
from kubeloop.api.fielderrors import go_number
from kubeloop.api.naming import go_quote
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.decoding.jsoncopy import copy_json

__all__ = [
    "DecodingError",
    "Plan",
    "StrictDecodingError",
    "decode_against_schema",
    "go_base64",
    "root_plan",
    "schema_kind",
]


#: sigs.k8s.io/json stops collecting strict errors after this many.
_MAX_STRICT_ERRORS = 100


class DecodingError(errors.BadRequest):
    """400 for a body the kind's type cannot hold: ``detail`` is the decoder's own error, without
    the "X in version ... cannot be handled" prefix that a create or an update puts before it.

    A PATCH answers it differently upstream (422 on the field ``patch``), so the registry can
    rebuild its own answer from :attr:`detail`.
    """

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class StrictDecodingError(DecodingError):
    """400 for ``fieldValidation=Strict``; ``errors`` keeps the individual strict errors."""

    def __init__(self, message: str, strict_errors: list[str], detail: str = "") -> None:
        super().__init__(message, detail or "strict decoding error: " + ", ".join(strict_errors))
        self.errors = strict_errors


# Plan kinds.
STRUCT, MAP, ARRAY, _STRING, _BYTES, _INT, _FLOAT, BOOL = range(8)


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
class Plan:
    kind: int
    go_type: str
    struct_name: str = ""
    props: dict[str, Plan] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    elem: Plan | None = None
    bits: int = 64
    #: For validate_required: the fields worth descending into (computed on first use).
    walk: dict[str, Plan] | None = None
    #: For validate_required: the required fields it checks, each with its plan and whether it
    #: is a struct (computed on first use).
    checks: tuple[tuple[str, Plan, bool], ...] | None = None
    #: The schema definition a struct comes from (``io.k8s.api.rbac.v1.Subject``).
    definition: str = ""


_DEF_PLANS: dict[str, Plan] = {}


_ROOT_PLANS: dict[tuple[int, str, str], tuple[Mapping[str, Any], Plan]] = {}


def _def_plan(name: str) -> Plan:
    plan = _DEF_PLANS.get(name)
    if plan is not None:
        return plan
    parts = name.rsplit(".", 2)
    short = parts[-1]
    go_type = f"{parts[-2]}.{short}" if len(parts) > 1 else short
    if name == _QUANTITY_DEF:
        plan = Plan(_QUANTITY, "resource.Quantity")
    elif name == _INTSTR_DEF:
        plan = Plan(_INTSTR, "intstr.IntOrString")
    elif name == _TIME_DEF:
        plan = Plan(_TIME, "v1.Time")
    elif name == _MICROTIME_DEF:
        plan = Plan(_MICROTIME, "v1.MicroTime")
    elif name in _FREE_FORM_DEFS:
        plan = Plan(_ANY, _FREE_FORM_DEFS[name])
    else:
        node = schemas.definitions()[name]
        plan = Plan(STRUCT, go_type, short, definition=name)
        _DEF_PLANS[name] = plan  # registered before filling: schemas are recursive
        _fill(plan, node, named=True)
        return plan
    _DEF_PLANS[name] = plan
    return plan


def _node_plan(node: Mapping[str, Any]) -> Plan:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _def_plan(ref.rsplit("/", 1)[-1])
    plan = Plan(_ANY, "interface {}")
    _fill(plan, node, named=False)
    return plan


def _fill(plan: Plan, node: Mapping[str, Any], *, named: bool) -> None:
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
        plan.kind = STRUCT
        if not named:
            plan.go_type, plan.struct_name = "struct", ""
        plan.props = {key: _node_plan(sub) for key, sub in props.items()}
        plan.required = tuple(r for r in node.get("required", ()) if r in plan.props)
        return
    if "object" in types:
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            elem = _node_plan(extra)
            plan.kind, plan.elem, plan.go_type = MAP, elem, f"map[string]{elem.go_type}"
        elif named:
            plan.kind = STRUCT  # a Go struct without fields
        else:
            plan.kind, plan.go_type = _ANY, "map[string]interface {}"
        return
    if "array" in types:
        items = node.get("items")
        elem = _node_plan(items) if isinstance(items, Mapping) else Plan(_ANY, "interface {}")
        plan.kind, plan.elem, plan.go_type = ARRAY, elem, f"[]{elem.go_type}"
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
        plan.kind, plan.go_type = BOOL, "bool"
        return
    plan.kind = _ANY


def root_plan(schema: Mapping[str, Any], kind: str, version: str) -> Plan:
    key = (id(schema), kind, version)
    cached = _ROOT_PLANS.get(key)
    if cached is not None and cached[0] is schema:
        return cached[1]
    plan = Plan(STRUCT, f"{version}.{kind}", kind)
    _fill(plan, schemas.resolve(schema), named=True)
    if len(_ROOT_PLANS) > 512:
        _ROOT_PLANS.clear()
    _ROOT_PLANS[key] = (schema, plan)  # keeps the schema alive, so its id is not reused
    return plan


def schema_kind(schema: Mapping[str, Any]) -> tuple[str, str]:
    for gvk in schema.get("x-kubernetes-group-version-kind", ()):
        if isinstance(gvk, Mapping):
            return str(gvk.get("kind", "Object")), str(gvk.get("version", "v1"))
    return "Object", "v1"


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
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (list, tuple)):
        return "array"
    if value is None:
        return "null"
    return "object"


class _Fatal(Exception):
    """An error returned (not saved) by Go's decoder: it ends decoding at once."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _go_kind(value: Any) -> str:
    """The reflect.Kind of a decoded JSON value in Go (an unstructured object's leaves)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "slice"
    return "map"


class _Decoder:
    """Go's typed decoding of a JSON value. ``converter``: word its errors as apimachinery's
    ``runtime.DefaultUnstructuredConverter`` does (what a strategic merge patch's result goes
    through upstream: "cannot restore map from string"), stopping at the first, instead of
    ``encoding/json``'s ("json: cannot unmarshal string into Go struct field ...")."""

    __slots__ = ("collect", "converter", "dups", "saved", "strict")

    def __init__(self, collect: bool, dups: set[str], converter: bool = False) -> None:
        self.collect = collect
        self.dups = dups
        self.converter = converter
        self.saved: str | None = None
        self.strict: list[str] = []

    def _mismatch(self, item: Any, plan: Plan, path: _Path, struct: str, value_desc: str = "") -> None:
        """A value of the wrong JSON type: saved as ``encoding/json`` does, or (converter) the
        converter's error at once."""
        if not self.converter:
            self._save(self._type_error(value_desc or _json_kind(item), plan.go_type, path, struct))
            return
        kind = _go_kind(item)
        if plan.kind == MAP:
            raise _Fatal(f"cannot restore map from {kind}")
        if plan.kind in (ARRAY, _BYTES):
            raise _Fatal(f"cannot restore slice from {kind}")
        if plan.kind == STRUCT:
            raise _Fatal(f"cannot restore struct from: {kind}")
        target = plan.go_type
        # reflect's ConvertibleTo: an integer converts to a string, a float to an integer, and
        # the converter then refuses what JSON would not do.
        if (kind == "int64" and plan.kind == _STRING) or (kind == "float64" and plan.kind == _INT):
            raise _Fatal(f"cannot convert {kind} to {target}")
        raise _Fatal(f"unrecognized type: {target}")

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

    def struct(self, value: dict[Any, Any], plan: Plan, path: _Path) -> dict[str, Any]:
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
                    or (kind == BOOL and item_type is bool)
                    or (kind == _INT and item_type is int and -(2**31) <= item < 2**31)
                ):
                    out[key] = item
                elif kind == STRUCT and item_type is dict:
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

    def value(self, item: Any, plan: Plan, path: _Path, struct: str) -> Any:
        kind = plan.kind
        if item is None:
            return _zero(plan)
        if kind == STRUCT:
            if isinstance(item, dict):
                return self.struct(item, plan, path)
        elif kind == _STRING:
            if isinstance(item, str):
                return item
        elif kind == _INT:
            return self._int(item, plan, path, struct)
        elif kind == ARRAY:
            if isinstance(item, list):
                elem = plan.elem
                assert elem is not None
                out: list[Any] = []
                elem_kind = elem.kind
                for index, sub in enumerate(item):
                    if elem_kind == STRUCT and type(sub) is dict:
                        out.append(self.struct(sub, elem, (path, _INDEX, index)))
                    elif elem_kind == _STRING and type(sub) is str:
                        out.append(sub)
                    else:
                        decoded = self.value(sub, elem, (path, _INDEX, index), struct)
                        out.append(None if decoded is _DROP else decoded)
                return out
        elif kind == MAP:
            if isinstance(item, dict):
                return self._map(item, plan, path, struct)
        elif kind == BOOL:
            if isinstance(item, bool):
                return item
        elif kind == _INTSTR:
            return self._int_or_string(item, path, struct)
        elif kind == _QUANTITY:
            return _quantity(item)
        elif kind in (_TIME, _MICROTIME):
            return self._time(item, kind == _MICROTIME, path, struct)
        elif kind == _FLOAT:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                return item
        elif kind == _BYTES:
            return self._bytes(item, plan, path, struct)
        else:  # _ANY
            return copy_json(item)
        self._mismatch(item, plan, path, struct)
        return _DROP

    def _map(self, item: dict[Any, Any], plan: Plan, path: _Path, struct: str) -> dict[str, Any]:
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

    def _int(self, item: Any, plan: Plan, path: _Path, struct: str) -> Any:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            self._mismatch(item, plan, path, struct)
            return _DROP
        number = _as_int(item)
        low, high = _INT_LIMITS[plan.bits]
        if number is None or not low <= number <= high:
            self._mismatch(item, plan, path, struct, f"number {go_number(item)}")
            return _DROP
        return number

    def _int_or_string(self, item: Any, path: _Path, struct: str) -> Any:
        # IntOrString.UnmarshalJSON: a JSON string, or json.Unmarshal into an int32; its error is
        # returned (decoding stops) and gets the outer field as context (not from the converter,
        # which calls UnmarshalJSON on the value alone).
        if self.converter:
            path, struct = None, ""
        if isinstance(item, str):
            return item
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            number = _as_int(item)
            if number is not None and -(2**31) <= number < 2**31:
                return number
            raise _Fatal(self._type_error(f"number {go_number(item)}", "int32", path, struct))
        raise _Fatal(self._type_error(_json_kind(item), "int32", path, struct))

    def _time(self, item: Any, micro: bool, path: _Path, struct: str) -> Any:
        if self.converter:
            path, struct = None, ""
        if not isinstance(item, str):
            raise _Fatal(self._type_error(_json_kind(item), "string", path, struct))
        problem, canonical = _parse_go_time(item, micro)
        if problem is not None:
            raise _Fatal(problem)
        return canonical

    def _bytes(self, item: Any, plan: Plan, path: _Path, struct: str) -> Any:
        if isinstance(item, str):
            decoded = go_base64(item)
            if isinstance(decoded, int):
                if self.converter:
                    raise _Fatal(f"error decoding from json: illegal base64 data at input byte {decoded}")
                self._save(f"illegal base64 data at input byte {decoded}")
                return _DROP
            return base64.b64encode(decoded).decode("ascii")
        if isinstance(item, list):  # Go decodes a JSON array of numbers into []byte as well
            out = bytearray()
            for index, sub in enumerate(item):
                if isinstance(sub, bool) or not isinstance(sub, (int, float)):
                    desc = _json_kind(sub)
                else:
                    number = _as_int(sub)
                    if number is not None and 0 <= number <= 255:
                        out.append(number)
                        continue
                    desc = f"number {go_number(sub)}"
                self._save(self._type_error(desc, "uint8", (path, _INDEX, index), struct))
                return _DROP
            return base64.b64encode(bytes(out)).decode("ascii")
        self._mismatch(item, plan, path, struct)
        return _DROP


class _DropType:
    __slots__ = ()


_DROP: Any = _DropType()


def _zero(plan: Plan) -> Any:
    """The JSON form of a Go zero value: ``null`` inside a list or map decodes to it."""
    kind = plan.kind
    if kind == STRUCT:
        return {}
    if kind == _STRING:
        return ""
    if kind in (_INT, _FLOAT, _INTSTR):
        return 0
    if kind == BOOL:
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


def decode_against_schema(
    obj: Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    kind: str,
    version: str,
    mode: str,
    duplicates: Iterable[str] | None = None,
    converter: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """Decode a request body as Go decodes it into the kind's type: (pruned copy, warnings).
    ``converter``: word type errors as apimachinery's unstructured converter does (a strategic
    merge patch's result, upstream), else as ``encoding/json`` does.

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
    plan = root_plan(schema, kind, version)
    collect = directive != "Ignore"
    decoder = _Decoder(collect, set(duplicates or ()) if collect else set(), converter)
    try:
        if obj is None:
            pruned: Any = {}
        else:
            pruned = decoder.value(obj, plan, None, "")
    except _Fatal as fatal:
        raise DecodingError(prefix + fatal.message, fatal.message) from None
    except RecursionError:
        raise DecodingError(prefix + "json: exceeded max depth", "json: exceeded max depth") from None
    if decoder.saved is not None:
        raise DecodingError(prefix + decoder.saved, decoder.saved)
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


_BASE64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def go_base64(text: str) -> bytes | int:
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
    elif isinstance(item, (int, float)) and not isinstance(item, bool):
        text = go_number(item)
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
