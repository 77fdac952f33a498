"""The protobuf wire format: varints, tags and length-delimited fields, read and written by hand.

The server needs protobuf in two places — the gnostic OpenAPI v2 document it writes and the
``application/vnd.kubernetes.protobuf`` bodies kubectl's typed commands send — and both need only
the wire format, not a protobuf runtime: messages are described by field tables elsewhere.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5

_FIXED64 = struct.Struct("<Q")
_FIXED32 = struct.Struct("<I")


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def varint(value: int) -> bytes:
    """``value`` (non-negative, or a negative int64 as its 64-bit two's complement) as a varint."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def bytes_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (bytes, string, embedded message or packed repeated scalars)."""
    return tag(number, LENGTH_DELIMITED) + varint(len(payload)) + payload


def string_field(number: int, text: str) -> bytes:
    """A string field, left out when empty (the proto3 convention gnostic's messages use)."""
    return bytes_field(number, text.encode()) if text else b""


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The varint starting at ``position`` and the position after it."""
    result = 0
    shift = 0
    while True:
        if position >= len(data):
            raise WireError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def iter_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` for each field in ``data``, in wire order.

    Varints and fixed-width values come back as unsigned ints, length-delimited values as bytes.
    Groups (wire types 3 and 4, unused by every message the server reads) are an error.
    """
    position = 0
    end = len(data)
    while position < end:
        key, position = read_varint(data, position)
        number = key >> 3
        wire_type = key & 7
        if number == 0:
            raise WireError("field number 0")
        value: int | bytes
        if wire_type == VARINT:
            value, position = read_varint(data, position)
        elif wire_type == LENGTH_DELIMITED:
            length, position = read_varint(data, position)
            if position + length > end:
                raise WireError(f"field {number} runs past the end of the message")
            value = data[position : position + length]
            position += length
        elif wire_type == FIXED64:
            if position + 8 > end:
                raise WireError("truncated fixed64")
            (value,) = _FIXED64.unpack_from(data, position)
            position += 8
        elif wire_type == FIXED32:
            if position + 4 > end:
                raise WireError("truncated fixed32")
            (value,) = _FIXED32.unpack_from(data, position)
            position += 4
        else:
            raise WireError(f"unsupported wire type {wire_type} for field {number}")
        yield number, wire_type, value


def signed64(value: int) -> int:
    """An unsigned 64-bit varint read back as int64."""
    return value - (1 << 64) if value >= 1 << 63 else value


def signed32(value: int) -> int:
    """A varint or fixed32 read back as int32 (negative int32s travel sign-extended to 64 bits)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63)
