"""Label selectors with the grammar and semantics of apimachinery's ``labels.Parse``.

::

    <selector>    ::= <requirement> | <requirement> "," <selector>
    <requirement> ::= ["!"] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]

Requirements are ANDed; an empty selector matches everything. ``!=`` and ``notin`` match
objects without the key, ``=``/``==``/``in`` need it. ``>``/``<`` (upstream's Gt/Lt) compare
integers and fail on labels that are not integers. Keys and values are checked with
:mod:`kubeloop.api.naming`; a selector that does not parse raises
:class:`~kubeloop.errors.InvalidSelector` with upstream's message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.api import naming
from kubeloop.errors import InvalidSelector

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "LabelSelector",
    "Requirement",
]

# selection.Operator values, as upstream spells them.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
GREATER_THAN = "gt"
LESS_THAN = "lt"
EXISTS = "exists"
DOES_NOT_EXIST = "!"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_OPERATORS = frozenset((*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST))
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GO_INT = re.compile(r"[+-]?[0-9]+")


# ----------------------------------------------------------------------------- messages


def _invalid(path: str, shown_value: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``; a nil path prints as ``<nil>``."""
    return f"{path}: Invalid value: {shown_value}: {detail}"


def _aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message as is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _key_error(key: str, path: str) -> str | None:
    problems = naming.qualified_name_errors(key)
    if problems:
        return _invalid(path, naming.go_quote(key), "; ".join(problems))
    return None


def _parse_go_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``, None where Go would fail."""
    if not _GO_INT.fullmatch(text):
        return None
    number = int(text)
    if not _INT64_MIN <= number <= _INT64_MAX:
        return None
    return number


# ----------------------------------------------------------------------------- requirements


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term: a key, an operator (upstream's ``selection.Operator``) and its values.

    ``values`` is sorted and free of duplicates. Build validated requirements with
    :meth:`create`; the plain constructor trusts its arguments.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def create(cls, key: str, operator: str, values: Iterable[str] = (), *, path: str = "") -> Requirement:
        """``labels.NewRequirement``: validates the key, the operator's arity and every value.

        Raises InvalidSelector with upstream's message (field paths relative to ``path``).
        """
        given = list(values)
        problems: list[str] = []
        prefix = f"{path}." if path else ""
        key_problem = _key_error(key, f"{prefix}key")
        if key_problem is not None:
            problems.append(key_problem)
        values_path = f"{prefix}values"
        shown = json.dumps(given, separators=(",", ":"), ensure_ascii=False) if given else "null"
        if operator in (IN, NOT_IN):
            if not given:
                problems.append(
                    _invalid(values_path, shown, "for 'in', 'notin' operators, values set can't be empty")
                )
        elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            if len(given) != 1:
                problems.append(
                    _invalid(values_path, shown, "exact-match compatibility requires one single value")
                )
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if given:
                problems.append(
                    _invalid(values_path, shown, "values set must be empty for exists and does not exist")
                )
        elif operator in (GREATER_THAN, LESS_THAN):
            if len(given) != 1:
                problems.append(
                    _invalid(values_path, shown, "for 'Gt', 'Lt' operators, exactly one value is required")
                )
            for index, value in enumerate(given):
                if _parse_go_int(value) is None:
                    problems.append(
                        _invalid(
                            f"{values_path}[{index}]",
                            naming.go_quote(value),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        )
                    )
        else:
            supported = ", ".join(naming.go_quote(op) for op in (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST))
            problems.append(
                f"{prefix}operator: Unsupported value: {naming.go_quote(operator)}: supported values: {supported}"
            )
        for index, value in enumerate(given):
            value_problems = naming.label_value_errors(value)
            if value_problems:
                problems.append(
                    _invalid(
                        f"{values_path}[{index}][{key}]", naming.go_quote(value), "; ".join(value_problems)
                    )
                )
        if problems:
            raise InvalidSelector(_aggregate(problems))
        return cls(key, operator, tuple(sorted(set(given))))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches``."""
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op in (NOT_IN, NOT_EQUALS):
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            value = labels.get(self.key)
            if value is None or len(self.values) != 1:
                return False
            have, want = _parse_go_int(value), _parse_go_int(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        """Upstream's ``Requirement.String``: ``k=v``, ``k in (a,b)``, ``!k``..."""
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({joined})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{joined}"


# ----------------------------------------------------------------------------- lexer and parser

_END = "\x00"  # upstream's lexer reads a zero byte at the end of input, and stops at a NUL too
_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")

_T_ERROR = "error"
_T_END = "end"
_T_CLOSE = ")"
_T_COMMA = ","
_T_NOT = "!"
_T_DOUBLE_EQUALS = "=="
_T_EQUALS = "="
_T_GREATER = ">"
_T_IDENT = "identifier"
_T_IN = "in"
_T_LESS = "<"
_T_NOT_EQUALS = "!="
_T_NOT_IN = "notin"
_T_OPEN = "("

_KEYWORDS = {
    ")": _T_CLOSE,
    ",": _T_COMMA,
    "!": _T_NOT,
    "==": _T_DOUBLE_EQUALS,
    "=": _T_EQUALS,
    ">": _T_GREATER,
    "in": _T_IN,
    "<": _T_LESS,
    "!=": _T_NOT_EQUALS,
    "notin": _T_NOT_IN,
    "(": _T_OPEN,
}

_TOKEN_OPERATORS = {
    _T_IN: IN,
    _T_EQUALS: EQUALS,
    _T_DOUBLE_EQUALS: DOUBLE_EQUALS,
    _T_GREATER: GREATER_THAN,
    _T_LESS: LESS_THAN,
    _T_NOT_IN: NOT_IN,
    _T_NOT_EQUALS: NOT_EQUALS,
}


def _tokenize(text: str) -> list[tuple[str, str]]:
    """Upstream's ``Lexer``: (token, literal) pairs, ending with an end-of-string token."""
    items: list[tuple[str, str]] = []
    pos = 0
    size = len(text)

    def read() -> str:
        nonlocal pos
        if pos < size:
            ch = text[pos]
            pos += 1
            return ch
        return _END

    while True:
        ch = read()
        while ch in _WHITESPACE:
            ch = read()
        if ch == _END:
            items.append((_T_END, ""))
            return items
        if ch in _SPECIAL:
            # The longest run of symbols that still spells an operator.
            buffer = ch
            token, literal = _KEYWORDS[ch], ch
            while True:
                nxt = read()
                if nxt == _END:
                    break
                if nxt not in _SPECIAL or buffer + nxt not in _KEYWORDS:
                    pos -= 1
                    break
                buffer += nxt
                token, literal = _KEYWORDS[buffer], buffer
            items.append((token, literal))
            continue
        start = pos - 1
        while pos < size and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE and text[pos] != _END:
            pos += 1
        word = text[start:pos]
        if pos < size and text[pos] == _END:
            pos += 1  # upstream consumes a NUL that ends a word
        items.append((_KEYWORDS.get(word, _T_IDENT), word))


class _Parser:
    """Upstream's recursive-descent ``Parser`` over the token list."""

    def __init__(self, text: str) -> None:
        self.items = _tokenize(text)
        self.position = 0

    def _at(self, index: int, values: bool) -> tuple[str, str]:
        token, literal = self.items[min(index, len(self.items) - 1)]
        # 'in' and 'notin' are plain words where a key or a value is expected.
        if values and token in (_T_IN, _T_NOT_IN):
            token = _T_IDENT
        return token, literal

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        return self._at(self.position, values)

    def consume(self, values: bool = True) -> tuple[str, str]:
        self.position += 1
        return self._at(self.position - 1, values)

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token in (_T_IDENT, _T_NOT):
                try:
                    requirement = self.parse_requirement()
                except _ParseError as exc:
                    raise _ParseError(f"unable to parse requirement: {exc}") from None
                requirements.append(requirement)
                token, literal = self.consume()
                if token == _T_END:
                    return requirements
                if token == _T_COMMA:
                    after, after_literal = self.lookahead()
                    if after not in (_T_IDENT, _T_NOT):
                        raise _ParseError(f"found '{after_literal}', expected: identifier after ','")
                    continue
                raise _ParseError(f"found '{literal}', expected: ',' or 'end of string'")
            if token == _T_END:
                return requirements
            raise _ParseError(f"found '{literal}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return _new_requirement(key, operator, [])
        operator = self.parse_operator()
        if operator in (IN, NOT_IN):
            values = self.parse_values()
        else:
            values = self.parse_exact_value()
        return _new_requirement(key, operator, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        operator = ""
        token, literal = self.consume()
        if token == _T_NOT:
            operator = DOES_NOT_EXIST
            token, literal = self.consume()
        if token != _T_IDENT:
            raise _ParseError(f"found '{literal}', expected: identifier")
        problem = _key_error(literal, "<nil>")
        if problem is not None:
            raise _ParseError(problem)
        if self.lookahead()[0] in (_T_END, _T_COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return literal, operator

    def parse_operator(self) -> str:
        token, literal = self.consume(values=False)
        operator = _TOKEN_OPERATORS.get(token)
        if operator is None:
            raise _ParseError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        return operator

    def parse_values(self) -> set[str]:
        token, literal = self.consume()
        if token != _T_OPEN:
            raise _ParseError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token in (_T_IDENT, _T_COMMA):
            values = self.parse_identifiers_list()
            if self.consume()[0] != _T_CLOSE:  # pragma: no cover - the list always stops at ')'
                raise _ParseError(f"found '{literal}', expected: ')'")
            return values
        if token == _T_CLOSE:  # "()" is the set holding the empty string
            self.consume()
            return {""}
        raise _ParseError(f"found '{literal}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self.consume()
            if token == _T_IDENT:
                values.add(literal)
                after, after_literal = self.lookahead()
                if after == _T_COMMA:
                    continue
                if after == _T_CLOSE:
                    return values
                raise _ParseError(f"found '{after_literal}', expected: ',' or ')'")
            if token == _T_COMMA:
                # Empty items: "(,a", "a,,b" and "a,)" all hold the empty string.
                if not values:
                    values.add("")
                after = self.lookahead()[0]
                if after == _T_CLOSE:
                    values.add("")
                    return values
                if after == _T_COMMA:
                    values.add("")
                continue
            raise _ParseError(f"found '{literal}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_T_END, _T_COMMA):
            return {""}
        token, literal = self.consume()
        if token == _T_IDENT:
            return {literal}
        raise _ParseError(f"found '{literal}', expected: identifier")


class _ParseError(Exception):
    pass


def _new_requirement(key: str, operator: str, values: list[str]) -> Requirement:
    try:
        return Requirement.create(key, operator, values)
    except InvalidSelector as exc:
        raise _ParseError(exc.message) from None


# ----------------------------------------------------------------------------- selectors


class LabelSelector:
    """An immutable, hashable AND of :class:`Requirement` (upstream's ``labels.Selector``)."""

    __slots__ = ("_nothing", "_requirements")

    _requirements: tuple[Requirement, ...]
    _nothing: bool

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        ordered = sorted(set(requirements), key=lambda r: (r.key, r.operator, r.values))
        object.__setattr__(self, "_requirements", tuple(ordered))
        object.__setattr__(self, "_nothing", nothing)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LabelSelector is immutable")

    def __copy__(self) -> LabelSelector:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LabelSelector:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        if self._nothing:
            return (LabelSelector.nothing, ())
        return (LabelSelector, (self._requirements,))

    # -- construction

    @classmethod
    def everything(cls) -> LabelSelector:
        """The empty selector: matches every object."""
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        """``labels.Nothing()``: matches no object (what a nil metav1.LabelSelector means)."""
        return cls(nothing=True)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """``labels.Parse``: InvalidSelector with upstream's message when ``text`` is not a selector."""
        try:
            requirements = _Parser(text).parse()
        except _ParseError as exc:
            raise InvalidSelector(str(exc)) from None
        return cls(requirements)

    @classmethod
    def from_set(cls, labels: Mapping[str, str]) -> LabelSelector:
        """``labels.SelectorFromSet``: ``k=v`` for every entry (not validated)."""
        return cls(Requirement(key, EQUALS, (value,)) for key, value in labels.items())

    @classmethod
    def validated_from_set(cls, labels: Mapping[str, str]) -> LabelSelector:
        """``labels.ValidatedSelectorFromSet``: ``k=v`` for every entry; InvalidSelector for a key
        or value that is not a valid label (what ``match_labels`` takes, on either client)."""
        return cls(Requirement.create(key, EQUALS, (value,)) for key, value in labels.items())

    @classmethod
    def from_label_selector_dict(cls, selector: Mapping[str, Any] | None) -> LabelSelector:
        """``metav1.LabelSelectorAsSelector`` over the JSON form of a metav1.LabelSelector.

        ``None`` matches nothing, ``{}`` everything; ``matchLabels`` become ``k=v`` and
        ``matchExpressions`` use In/NotIn/Exists/DoesNotExist. Raises InvalidSelector when a key,
        value or operator is invalid.
        """
        if selector is None:
            return cls.nothing()
        if not isinstance(selector, Mapping):
            raise InvalidSelector("a label selector must be an object")
        match_labels = selector.get("matchLabels") or {}
        match_expressions = selector.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping):
            raise InvalidSelector("matchLabels: must be an object of strings")
        if not isinstance(match_expressions, list):
            raise InvalidSelector("matchExpressions: must be a list")
        requirements: list[Requirement] = []
        for key, value in match_labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidSelector("matchLabels: must be an object of strings")
            requirements.append(Requirement.create(key, EQUALS, [value]))
        operators = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}
        for expression in match_expressions:
            if not isinstance(expression, Mapping):
                raise InvalidSelector("matchExpressions: every item must be an object")
            key = expression.get("key")
            raw_operator = expression.get("operator")
            values = expression.get("values") or []
            if not isinstance(key, str):
                raise InvalidSelector("matchExpressions: key must be a string")
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise InvalidSelector("matchExpressions: values must be a list of strings")
            operator = operators.get(raw_operator) if isinstance(raw_operator, str) else None
            if operator is None:
                shown = (
                    naming.go_quote(raw_operator)
                    if isinstance(raw_operator, str)
                    else naming.go_quote(str(raw_operator))
                )
                raise InvalidSelector(f"{shown} is not a valid label selector operator")
            requirements.append(Requirement.create(key, operator, values))
        return cls(requirements)

    # -- queries

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        return self._requirements

    @property
    def is_empty(self) -> bool:
        """True when the selector does not restrict anything (matches every object)."""
        return not self._nothing and not self._requirements

    @property
    def matches_nothing(self) -> bool:
        return self._nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self._nothing:
            return False
        return all(requirement.matches(labels) for requirement in self._requirements)

    def exact_value(self, key: str) -> str | None:
        """``RequiresExactMatch``: the one value ``key`` must have, if the selector pins it."""
        for requirement in self._requirements:
            if requirement.key == key:
                if requirement.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(requirement.values) == 1:
                    return requirement.values[0]
                return None
        return None

    # -- value semantics

    def __str__(self) -> str:
        """Canonical text; it parses back to an equal selector (``Nothing`` prints as ``""``)."""
        return ",".join(str(requirement) for requirement in self._requirements)

    def __repr__(self) -> str:
        if self._nothing:
            return "LabelSelector.nothing()"
        return f"LabelSelector.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._nothing == other._nothing and self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash((self._nothing, self._requirements))


def combined_selector(
    selector: str | LabelSelector | None, match_labels: Mapping[str, str] | None
) -> LabelSelector | None:
    """A list's label filter: ``selector`` (text is parsed) ANDed with exact ``match_labels``
    (validated); None when nothing is asked. InvalidSelector for either part that is not valid."""
    parsed = LabelSelector.parse(selector) if isinstance(selector, str) else selector
    if match_labels:
        from_set = LabelSelector.validated_from_set(match_labels)
        parsed = from_set if parsed is None else LabelSelector((*parsed.requirements, *from_set.requirements))
    if parsed is not None and parsed.is_empty:
        return None
    return parsed
