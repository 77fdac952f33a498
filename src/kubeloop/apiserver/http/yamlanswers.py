"""JSON answers written as YAML, as kube-apiserver's YAML serializer (sigs.k8s.io/yaml over
go-yaml) writes them: keys sorted, block style, a sequence in a mapping not indented, ``{}`` and
``[]`` for empty ones, strings plain where every YAML reader reads them back as the same string,
a string of several lines as a literal block (``|``), and double-quoted otherwise.

It writes strings and nothing else. PyYAML's dumper builds a node for every value of the
document first: for a list of 20,000 ConfigMaps (12 MB) that is millions of objects, which the
cyclic GC walks while the serving process waits; the list took 12.8 s to answer and held every
other request up for 1.2 s (``bench/stall.py``).

A double-quoted string is the value's JSON string (a JSON string is a YAML double-quoted scalar),
with the characters YAML does not allow raw, or reads as line breaks, escaped too.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

#: Strings written plain: a letter, ``_`` or ``/`` first, then letters, digits and ``-_./:@+``,
#: not ending with ``:``. A digit, sign or dot first is quoted: numbers, timestamps, IP
#: addresses and ``.inf`` resolve to other types in YAML 1.1 or 1.2.
_PLAIN = re.compile(r"[A-Za-z_/][-A-Za-z0-9_./:@+]*")
#: Words YAML 1.1 (go-yaml v2, PyYAML) or 1.2 reads as booleans or null.
_RESERVED = frozenset(
    {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False"}
    | {"FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL"}
)
#: What a double-quoted YAML scalar may not hold raw: characters outside YAML's printable set
#: (JSON leaves DEL and the C1 controls raw) and those YAML 1.1 reads as line breaks.
_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
#: Lines joined and encoded at a time by :func:`to_yaml_bytes` (~150 KB of a list of ConfigMaps).
_CHUNK_LINES = 4096


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _string(text: str) -> str:
    if text.isalnum() and text.isascii() and not text[0].isdigit():  # most keys and many values
        return text if text not in _RESERVED else f'"{text}"'
    if _PLAIN.fullmatch(text) is not None and text not in _RESERVED and text[-1] != ":":
        return text
    quoted = orjson.dumps(text).decode()
    if _UNPRINTABLE.search(quoted) is not None:
        quoted = _UNPRINTABLE.sub(_escape, quoted)
    return quoted


#: Characters a literal block cannot hold as they are: controls (but tab and line feed), what
#: YAML reads as line breaks (CR, NEL, LS, PS) and what it does not allow raw.
_NOT_LITERAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _literal(text: str, pad: str) -> str | None:
    """``text`` (several lines) as a literal block whose lines are indented by ``pad``, header
    included; None when it cannot be one as go-yaml writes them: a space before a line break or
    at the end, a space or line break first (that would need an indentation indicator), or a
    character a block cannot hold."""
    if text[0] in " \n" or text[-1] == " " or " \n" in text or _NOT_LITERAL.search(text) is not None:
        return None
    if not text.endswith("\n"):
        header, body = "|-", text
    elif text.endswith("\n\n"):
        header, body = "|+", text[:-1]
    else:
        header, body = "|", text[:-1]
    lines = [f"{pad}{line}\n" if line else "\n" for line in body.split("\n")]
    return f"{header}\n{''.join(lines)}"


def _float(number: float) -> str:
    text = repr(number)
    if "e" in text and "." not in text:  # YAML 1.1 reads 1e+20 as a string: 1.0e+20
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return "{}"  # only empty ones are written as scalars
    return "[]"


def _mapping(value: dict[str, Any], pad: str, first: str, out: _Text) -> None:
    """Write a non-empty mapping, its keys indented by ``pad``; its first line starts with
    ``first`` (``pad``, or a sequence item's ``- `` after its own pad)."""
    lead = first
    for key in sorted(value):
        item = value[key]
        name = _string(key)
        if type(item) is str:
            if "\n" in item and (block := _literal(item, pad + "  ")) is not None:
                out.append(f"{lead}{name}: {block}")
            else:
                out.append(f"{lead}{name}: {_string(item)}\n")
        elif isinstance(item, dict) and item:
            out.append(f"{lead}{name}:\n")
            inner = pad + "  "
            _mapping(item, inner, inner, out)
        elif isinstance(item, list) and item:
            out.append(f"{lead}{name}:\n")
            _sequence(item, pad, pad, out)  # a sequence in a mapping is not indented
        else:
            out.append(f"{lead}{name}: {_scalar(item)}\n")
        lead = pad


def _sequence(value: list[Any], pad: str, first: str, out: _Text) -> None:
    """Write a non-empty sequence, its ``- `` indented by ``pad``; its first line starts with
    ``first``."""
    lead = first
    inner = pad + "  "
    for item in value:
        if isinstance(item, dict) and item:
            _mapping(item, inner, lead + "- ", out)
        elif isinstance(item, list) and item:
            _sequence(item, inner, lead + "- ", out)
        elif type(item) is str and "\n" in item and (block := _literal(item, inner)) is not None:
            out.append(f"{lead}- {block}")
        else:
            out.append(f"{lead}- {_scalar(item)}\n")
        lead = pad
        if len(out) >= _CHUNK_LINES:
            out.flush()


class _Text(list[str]):
    """The lines written so far, and the UTF-8 chunks made of those before: a large answer is
    joined and encoded a chunk at a time, never in one call that holds the interpreter lock."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []

    def flush(self) -> None:
        self.chunks.append("".join(self).encode())
        self.clear()

    def encoded(self) -> bytes:
        self.flush()
        return b"".join(self.chunks)


def _write(value: Any, out: _Text) -> None:
    if isinstance(value, dict) and value:
        _mapping(value, "", "", out)
    elif isinstance(value, list) and value:
        _sequence(value, "", "", out)
    else:
        out.append(f"{_scalar(value)}\n")


def to_yaml_bytes(value: Any) -> bytes:
    """``value`` (what JSON decodes to: dicts, lists, strings, numbers, booleans, None) as a
    YAML document in UTF-8, an answer's body: joined and encoded a chunk at a time."""
    out = _Text()
    _write(value, out)
    return out.encoded()


def to_yaml(value: Any) -> str:
    """``value`` as a YAML document."""
    return to_yaml_bytes(value).decode()
