"""Kubernetes protobuf bodies (``application/vnd.kubernetes.protobuf``) as JSON-shaped objects.

A body is the magic ``k8s\\x00`` and a ``runtime.Unknown`` envelope holding the object's
apiVersion/kind and its message bytes. Messages are decoded with the tables of
``protodescriptors`` into the dicts the JSON form of the same object would give, so everything
after decoding (validation, defaulting, patching, storage) is shared with JSON requests.

The JSON form follows the Go types' JSON encoding: Time is RFC 3339 (null when zero), MicroTime
has microseconds, Duration is Go's duration string, Quantity a string, IntOrString an int or a
string, bytes base64, RawExtension and FieldsV1 their embedded JSON, named string slices (such as
``ExtraValue``) a list. Protobuf cannot tell an unset field from an empty one, and the Go types
write non-pointer fields even when empty, so empty strings are left out (for the Go types an
empty string and an absent field are the same value) while zero numbers and false are kept
(pointer fields carry them on purpose: ``replicas: 0``, ``automountServiceAccountToken: false``).
"""

from __future__ import annotations

import base64
import re
import struct
from datetime import UTC, datetime
from typing import Any

import orjson

from kubeloop.api import timestamps
from kubeloop.apiserver.protobuf import wire
from kubeloop.apiserver.protobuf.descriptors import (
    TYPE_BOOL,
    TYPE_BYTES,
    TYPE_DOUBLE,
    TYPE_ENUM,
    TYPE_FIXED32,
    TYPE_FIXED64,
    TYPE_FLOAT,
    TYPE_INT32,
    TYPE_INT64,
    TYPE_MESSAGE,
    TYPE_SFIXED32,
    TYPE_SFIXED64,
    TYPE_SINT32,
    TYPE_SINT64,
    TYPE_STRING,
    TYPE_UINT32,
    TYPE_UINT64,
    FieldInfo,
    MessageInfo,
    MessageTables,
)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_TIME = _META + "Time"
_MICRO_TIME = _META + "MicroTime"
_DURATION = _META + "Duration"
_FIELDS_V1 = _META + "FieldsV1"
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"

_VARINT_TYPES = frozenset(
    {TYPE_INT32, TYPE_INT64, TYPE_UINT32, TYPE_UINT64, TYPE_BOOL, TYPE_ENUM, TYPE_SINT32, TYPE_SINT64}
)
_FIXED64_TYPES = frozenset({TYPE_DOUBLE, TYPE_FIXED64, TYPE_SFIXED64})
_FIXED32_TYPES = frozenset({TYPE_FLOAT, TYPE_FIXED32, TYPE_SFIXED32})


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf object the server can read."""


def decode_object(data: bytes, tables: MessageTables) -> dict[str, Any]:
    """The object in a protobuf request body, with its apiVersion and kind."""
    if not data.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf prefix k8s\\x00")
    api_version = kind = content_encoding = content_type = ""
    raw = b""
    try:
        for number, _, value in wire.iter_fields(data[len(MAGIC) :]):
            if not isinstance(value, bytes):
                continue
            if number == 1:  # typeMeta
                for inner, _, text in wire.iter_fields(value):
                    if inner == 1 and isinstance(text, bytes):
                        api_version = text.decode()
                    elif inner == 2 and isinstance(text, bytes):
                        kind = text.decode()
            elif number == 2:
                raw = value
            elif number == 3:
                content_encoding = value.decode()
            elif number == 4:
                content_type = value.decode()
    except (wire.WireError, UnicodeDecodeError) as exc:
        raise ProtobufError(f"the body is not a valid runtime.Unknown envelope: {exc}") from None
    if content_encoding:
        raise ProtobufError(f"content encoding {content_encoding!r} is not supported")
    if content_type and content_type != MEDIA_TYPE:
        raise ProtobufError(f"the embedded object has unsupported content type {content_type!r}")
    if not kind or not api_version:
        raise ProtobufError("Object 'Kind' or 'apiVersion' is missing in the protobuf envelope")
    message = tables.for_kind(api_version, kind)
    if message is None:
        raise ProtobufError(f'no kind "{kind}" is registered for version "{api_version}"')
    try:
        obj = decode_message(raw, message, tables)
    except (wire.WireError, UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise ProtobufError(f"the {kind} object could not be decoded: {exc}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}


def decode_message(data: bytes, message: MessageInfo, tables: MessageTables) -> dict[str, Any]:
    """One message as its JSON form (see the module docstring for the conventions)."""
    out: dict[str, Any] = {}
    for number, wire_type, value in wire.iter_fields(data):
        field = message.fields.get(number)
        if field is None:
            continue  # a field newer than the tables: skipped, as protobuf readers do
        if field.type == TYPE_MESSAGE:
            if not isinstance(value, bytes):
                raise wire.WireError(f"field {field.name} is a message but has wire type {wire_type}")
            nested = _message_of(field, tables)
            if nested.map_entry:
                key, entry = _map_entry(value, nested, tables)
                out.setdefault(field.name, {})[key] = entry
                continue
            decoded = _message_value(value, nested, tables)
            if field.inline:
                out.update(decoded)
            elif field.repeated:
                out.setdefault(field.name, []).append(decoded)
            elif decoded is not None:
                out[field.name] = decoded
            continue
        if field.repeated:
            out.setdefault(field.name, []).extend(_scalars(field, wire_type, value))
            continue
        scalar = _scalar(field, wire_type, value)
        if scalar == "" and field.type in (TYPE_STRING, TYPE_BYTES):
            out.pop(field.name, None)
        else:
            out[field.name] = scalar
    return out


def _message_of(field: FieldInfo, tables: MessageTables) -> MessageInfo:
    nested = tables.message(field.type_name)
    if nested is None:
        raise wire.WireError(f"field {field.name} has unknown type {field.type_name}")
    return nested


def _map_entry(data: bytes, entry: MessageInfo, tables: MessageTables) -> tuple[str, Any]:
    key: Any = ""
    value: Any = None
    key_field = entry.fields.get(1)
    value_field = entry.fields.get(2)
    for number, wire_type, raw in wire.iter_fields(data):
        if number == 1 and key_field is not None:
            key = _scalar(key_field, wire_type, raw)
        elif number == 2 and value_field is not None:
            if value_field.type == TYPE_MESSAGE:
                if not isinstance(raw, bytes):
                    raise wire.WireError(f"map value has wire type {wire_type}")
                value = _message_value(raw, _message_of(value_field, tables), tables)
            else:
                value = _scalar(value_field, wire_type, raw)
    if value is None and value_field is not None:
        value = _empty_value(value_field, tables)
    return str(key), value


def _empty_value(field: FieldInfo, tables: MessageTables) -> Any:
    """What a map entry without a value holds: the value type's zero."""
    if field.type in (TYPE_STRING, TYPE_BYTES):
        return ""
    if field.type == TYPE_BOOL:
        return False
    if field.type == TYPE_MESSAGE:
        return _message_value(b"", _message_of(field, tables), tables)
    return 0


def _message_value(data: bytes, message: MessageInfo, tables: MessageTables) -> Any:
    name = message.full_name
    if name in (_TIME, _MICRO_TIME):
        return _time(data, micro=name == _MICRO_TIME)
    if name == _DURATION:
        fields = {n: v for n, _, v in wire.iter_fields(data)}
        nanos = fields.get(1, 0)
        return go_duration(wire.signed64(nanos) if isinstance(nanos, int) else 0)
    if name == _QUANTITY:
        text = next((v for n, _, v in wire.iter_fields(data) if n == 1 and isinstance(v, bytes)), b"")
        return text.decode() or "0"
    if name == _INT_OR_STRING:
        return _int_or_string(data)
    if name in (_RAW_EXTENSION, _FIELDS_V1):
        raw = next((v for n, _, v in wire.iter_fields(data) if n == 1 and isinstance(v, bytes)), b"")
        if not raw.strip():
            return None
        if raw.startswith(MAGIC):
            return decode_object(raw, tables)
        return orjson.loads(raw)
    if _is_named_list(message):
        return decode_message(data, message, tables).get("items", [])
    return decode_message(data, message, tables)


def _is_named_list(message: MessageInfo) -> bool:
    """Go named slices (``type ExtraValue []string``) travel as a message with ``repeated items``."""
    if len(message.fields) != 1:
        return False
    only = next(iter(message.fields.values()))
    return only.name == "items" and only.repeated and only.type != TYPE_MESSAGE


def _time(data: bytes, *, micro: bool) -> str | None:
    seconds = nanos = 0
    present = False
    for number, _, value in wire.iter_fields(data):
        if isinstance(value, int):
            present = True
            if number == 1:
                seconds = wire.signed64(value)
            elif number == 2:
                nanos = wire.signed32(value)
    if not present:
        return None  # the zero Time, which Go writes as an empty message and JSON as null
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return timestamps.format_time(moment.replace(microsecond=nanos // 1000), micro=micro)


def _int_or_string(data: bytes) -> int | str:
    kind = 0
    int_value = 0
    str_value = ""
    for number, _, value in wire.iter_fields(data):
        if number == 1 and isinstance(value, int):
            kind = value
        elif number == 2 and isinstance(value, int):
            int_value = wire.signed32(value)
        elif number == 3 and isinstance(value, bytes):
            str_value = value.decode()
    return str_value if kind == 1 else int_value


def _scalars(field: FieldInfo, wire_type: int, value: int | bytes) -> list[Any]:
    """The values of one occurrence of a repeated scalar field (packed or not)."""
    if wire_type == wire.LENGTH_DELIMITED and field.type in _VARINT_TYPES and isinstance(value, bytes):
        values: list[Any] = []
        position = 0
        while position < len(value):
            number, position = wire.read_varint(value, position)
            values.append(_scalar(field, wire.VARINT, number))
        return values
    return [_scalar(field, wire_type, value)]


def _scalar(field: FieldInfo, wire_type: int, value: int | bytes) -> Any:
    kind = field.type
    if kind in (TYPE_STRING, TYPE_BYTES):
        if not isinstance(value, bytes):
            raise wire.WireError(f"field {field.name} is a string but has wire type {wire_type}")
        return value.decode() if kind == TYPE_STRING else base64.b64encode(value).decode()
    if not isinstance(value, int):
        raise wire.WireError(f"field {field.name} is a number but has wire type {wire_type}")
    expected = (
        wire.VARINT
        if kind in _VARINT_TYPES
        else wire.FIXED64
        if kind in _FIXED64_TYPES
        else wire.FIXED32
        if kind in _FIXED32_TYPES
        else -1
    )
    if wire_type != expected:
        raise wire.WireError(f"field {field.name} has wire type {wire_type}")
    if kind == TYPE_BOOL:
        return value != 0
    if kind in (TYPE_INT64, TYPE_SFIXED64):
        return wire.signed64(value)
    if kind in (TYPE_INT32, TYPE_ENUM, TYPE_SFIXED32):
        return wire.signed32(value)
    if kind in (TYPE_SINT32, TYPE_SINT64):
        return wire.zigzag_decode(value)
    if kind in (TYPE_DOUBLE, TYPE_FLOAT):
        return (
            struct.unpack("<d", value.to_bytes(8, "little"))[0]
            if kind == TYPE_DOUBLE
            else struct.unpack("<f", value.to_bytes(4, "little"))[0]
        )
    return value


def go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``: ``1h2m3.5s``, ``150ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    remaining = abs(nanoseconds)
    if remaining < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if remaining >= size:
                return sign + _decimal(remaining, size) + unit
    hours, remaining = divmod(remaining, 3_600_000_000_000)
    minutes, remaining = divmod(remaining, 60_000_000_000)
    text = _decimal(remaining, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{fraction:0{digits}d}".rstrip("0")


# ------------------------------------------------------------------ encoding


def encode_object(obj: dict[str, Any], tables: MessageTables) -> bytes:
    """An object (or list) in its protobuf body form: the magic and a ``runtime.Unknown`` envelope."""
    api_version = str(obj.get("apiVersion", ""))
    kind = str(obj.get("kind", ""))
    message = tables.for_kind(api_version, kind)
    if message is None:
        raise ProtobufError(f'no kind "{kind}" is registered for version "{api_version}"')
    type_meta = wire.string_field(1, api_version) + wire.string_field(2, kind)
    envelope = (
        wire.bytes_field(1, type_meta)
        + wire.bytes_field(2, encode_message(obj, message, tables))
        + wire.bytes_field(3, b"")
        + wire.bytes_field(4, b"")
    )
    return MAGIC + envelope


def encode_message(obj: dict[str, Any], message: MessageInfo, tables: MessageTables) -> bytes:
    """The JSON form of one message back in protobuf; keys the message lacks are left out."""
    if not isinstance(obj, dict):
        raise ProtobufError(f"{message.full_name} must be an object, not {type(obj).__name__}")
    out = bytearray()
    for number in sorted(message.fields):
        field = message.fields[number]
        if field.inline:
            out += wire.bytes_field(number, encode_message(obj, _message_of(field, tables), tables))
            continue
        value = obj.get(field.name)
        if value is None:
            continue
        if field.type == TYPE_MESSAGE:
            nested = _message_of(field, tables)
            if nested.map_entry:
                out += _encode_map(field, value, nested, tables)
            elif field.repeated:
                for item in _as_list(field, value):
                    out += wire.bytes_field(number, _encode_message_value(item, nested, tables))
            else:
                out += wire.bytes_field(number, _encode_message_value(value, nested, tables))
        elif field.repeated:
            for item in _as_list(field, value):
                out += _encode_scalar(field, item)
        else:
            out += _encode_scalar(field, value)
    return bytes(out)


def _as_list(field: FieldInfo, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ProtobufError(f"{field.name} must be a list")
    return value


def _encode_map(field: FieldInfo, value: Any, entry: MessageInfo, tables: MessageTables) -> bytes:
    if not isinstance(value, dict):
        raise ProtobufError(f"{field.name} must be an object")
    key_field = entry.fields[1]
    value_field = entry.fields[2]
    out = bytearray()
    for key in sorted(value):
        item = value[key]
        payload = _encode_scalar(key_field, key)
        if value_field.type == TYPE_MESSAGE:
            payload += wire.bytes_field(
                2, _encode_message_value(item, _message_of(value_field, tables), tables)
            )
        elif item is not None:
            payload += _encode_scalar(value_field, item)
        out += wire.bytes_field(field.number, payload)
    return bytes(out)


def _encode_message_value(value: Any, message: MessageInfo, tables: MessageTables) -> bytes:
    name = message.full_name
    if name in (_TIME, _MICRO_TIME):
        return _encode_time(value)
    if name == _DURATION:
        return _varint_field(1, parse_go_duration(str(value)))
    if name == _QUANTITY:
        return wire.bytes_field(1, str(value).encode())
    if name == _INT_OR_STRING:
        if isinstance(value, str):
            return _varint_field(1, 1) + _varint_field(2, 0) + wire.bytes_field(3, value.encode())
        return _varint_field(1, 0) + _varint_field(2, int(value)) + wire.bytes_field(3, b"")
    if name in (_RAW_EXTENSION, _FIELDS_V1):
        return wire.bytes_field(1, orjson.dumps(value))
    if _is_named_list(message):
        return encode_message({"items": value}, message, tables)
    return encode_message(value, message, tables)


def _encode_time(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ProtobufError(f"a time must be an RFC 3339 string, not {value!r}")
    moment = timestamps.parse_time(value)
    if moment is None:
        raise ProtobufError(f"{value!r} is not an RFC 3339 time")
    seconds = int(moment.timestamp() // 1)
    nanos = moment.microsecond * 1000
    return _varint_field(1, seconds) + (_varint_field(2, nanos) if nanos else b"")


def _varint_field(number: int, value: int) -> bytes:
    return wire.tag(number, wire.VARINT) + wire.varint(value)


def _encode_scalar(field: FieldInfo, value: Any) -> bytes:
    kind = field.type
    number = field.number
    if kind == TYPE_STRING:
        if not isinstance(value, str):
            raise ProtobufError(f"{field.name} must be a string")
        return wire.bytes_field(number, value.encode())
    if kind == TYPE_BYTES:
        if not isinstance(value, str):
            raise ProtobufError(f"{field.name} must be a base64 string")
        return wire.bytes_field(number, base64.b64decode(value))
    if kind == TYPE_BOOL:
        if not isinstance(value, bool):
            raise ProtobufError(f"{field.name} must be a boolean")
        return _varint_field(number, int(value))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtobufError(f"{field.name} must be a number")
    if kind in (TYPE_SINT32, TYPE_SINT64):
        return _varint_field(number, wire.zigzag_encode(int(value)))
    if kind in _VARINT_TYPES:
        return _varint_field(number, int(value))
    if kind in (TYPE_DOUBLE, TYPE_FLOAT):
        packed = struct.pack("<d" if kind == TYPE_DOUBLE else "<f", float(value))
        return wire.tag(number, wire.FIXED64 if kind == TYPE_DOUBLE else wire.FIXED32) + packed
    if kind in _FIXED64_TYPES:
        return wire.tag(number, wire.FIXED64) + struct.pack(
            "<q" if kind == TYPE_SFIXED64 else "<Q", int(value)
        )
    return wire.tag(number, wire.FIXED32) + struct.pack("<i" if kind == TYPE_SFIXED32 else "<I", int(value))


_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds: ``1h2m3.5s``, ``-150ms``, ``0``."""
    body = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    if body == "0":
        return 0
    position = 0
    total = 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ProtobufError(f'time: invalid duration "{text}"')
        number, unit = match.groups()
        whole, _, fraction = number.partition(".")
        scale = _DURATION_UNITS[unit]
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        position = match.end()
    if not body:
        raise ProtobufError(f'time: invalid duration "{text}"')
    return sign * total
