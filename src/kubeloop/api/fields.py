"""Field selectors with the grammar and semantics of apimachinery's ``fields.ParseSelector``.

A selector is a comma-separated AND of ``field=value``, ``field==value`` or ``field!=value``
terms. Nothing is trimmed; the field is everything before the first operator; in values ``\\,``,
``\\=`` and ``\\\\`` stand for ``,``, ``=`` and ``\\``, and an unescaped ``,`` or ``=`` is an error.
A field an object lacks compares as the empty string.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kubeloop.errors import InvalidSelector

__all__ = ["EQUALS", "NOT_EQUALS", "FieldSelector", "escape_value", "object_fields", "unescape_value"]

EQUALS = "="
NOT_EQUALS = "!="

# "==" is tried before "=" so that the value does not keep a leading '='.
_TERM_OPERATORS = ("!=", "==", "=")


def escape_value(value: str) -> str:
    """``fields.EscapeValue``: backslash-escape ``\\``, ``,`` and ``=``."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(text: str) -> str:
    """``fields.UnescapeValue``; InvalidSelector on an unknown escape or an unescaped ``,``/``=``."""
    if "\\" not in text and "," not in text and "=" not in text:
        return text
    out: list[str] = []
    in_slash = False
    for ch in text:
        if in_slash:
            if ch not in "\\,=":
                raise InvalidSelector(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            # Go prints the offending rune with %v, that is as its code point number.
            raise InvalidSelector(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if in_slash:
        raise InvalidSelector("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """The comma-separated terms; an escaped comma stays in its term with its backslash."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for index, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """(field, operator, raw value) split at the first operator, or None without one."""
    for index in range(len(term)):
        for operator in _TERM_OPERATORS:
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _term_text(requirement: tuple[str, str, str]) -> str:
    field, operator, value = requirement
    return f"{field}{operator}{escape_value(value)}"


class FieldSelector:
    """An immutable, hashable AND of (field, operator, value) requirements.

    ``operator`` is ``"="`` (``==`` is read as ``=``) or ``"!="``.
    """

    __slots__ = ("_requirements",)

    _requirements: tuple[tuple[str, str, str], ...]

    def __init__(self, requirements: Iterable[tuple[str, str, str]] = ()) -> None:
        checked: list[tuple[str, str, str]] = []
        for field, operator, value in requirements:
            if operator == "==":
                operator = EQUALS
            if operator not in (EQUALS, NOT_EQUALS):
                raise ValueError(f"unsupported field selector operator {operator!r}")
            if field or value:  # like upstream, a term with neither field nor value selects nothing
                checked.append((field, operator, value))
        checked.sort(key=_term_text)
        object.__setattr__(self, "_requirements", tuple(checked))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FieldSelector is immutable")

    def __copy__(self) -> FieldSelector:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FieldSelector:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FieldSelector, (self._requirements,))

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """``fields.ParseSelector``: InvalidSelector with upstream's message on bad input."""
        requirements: list[tuple[str, str, str]] = []
        for term in sorted(_split_terms(text)):
            if not term:
                continue
            split = _split_term(term)
            if split is None:
                raise InvalidSelector(f"invalid selector: '{text}'; can't understand '{term}'")
            field, operator, raw = split
            requirements.append((field, operator, unescape_value(raw)))
        return cls(requirements)

    @classmethod
    def from_set(cls, fields: Mapping[str, str]) -> FieldSelector:
        """``fields.SelectorFromSet``: ``field=value`` for every entry."""
        return cls((field, EQUALS, value) for field, value in fields.items())

    @property
    def requirements(self) -> tuple[tuple[str, str, str], ...]:
        return self._requirements

    @property
    def is_empty(self) -> bool:
        return not self._requirements

    @property
    def fields(self) -> frozenset[str]:
        """The names of the fields the selector looks at."""
        return frozenset(field for field, _, _ in self._requirements)

    def matches(self, fields: Mapping[str, str]) -> bool:
        for field, operator, value in self._requirements:
            equal = fields.get(field, "") == value
            if equal != (operator == EQUALS):
                return False
        return True

    def exact_value(self, field: str) -> str | None:
        """``RequiresExactMatch``: the value of the first ``field=value`` term, if any."""
        for name, operator, value in self._requirements:
            if name == field and operator == EQUALS:
                return value
        return None

    def check_supported(self, supported: Collection[str]) -> None:
        """InvalidSelector naming the first field that is not in ``supported``."""
        for field, _, _ in self._requirements:
            if field not in supported:
                allowed = ", ".join(_go_quote(name) for name in sorted(supported))
                raise InvalidSelector(f"{_go_quote(field)} is not a known field selector: only {allowed}")

    def __str__(self) -> str:
        """Canonical text (values escaped); it parses back to an equal selector."""
        return ",".join(_term_text(requirement) for requirement in self._requirements)

    def __repr__(self) -> str:
        return f"FieldSelector.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash(self._requirements)


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the plain names that appear in these messages."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(
                f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
    out.append('"')
    return "".join(out)


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    return ""


def _lookup(obj: Mapping[str, Any], path: str) -> Any:
    node: Any = obj
    for part in path.lstrip(".").split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def object_fields(obj: Mapping[str, Any], namespaced: bool, extra: Mapping[str, str]) -> dict[str, str]:
    """The selectable fields of a stored object.

    ``metadata.name``, ``metadata.namespace`` (namespaced kinds only) and, for every ``extra``
    entry (selector name → dotted path into the object), the value found there: booleans as
    ``true``/``false``, numbers in decimal, strings as they are, anything missing as ``""``.
    """
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    result = {"metadata.name": _render(metadata.get("name"))}
    if namespaced:
        result["metadata.namespace"] = _render(metadata.get("namespace"))
    for name, path in extra.items():
        result[name] = _render(_lookup(obj, path))
    return result
