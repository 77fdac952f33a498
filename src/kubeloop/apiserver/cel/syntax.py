"""CEL's optional syntax (``a.?b``, ``m[?k]``), which the interpreter does not parse, written as
calls of two library functions it can run.

Kubernetes enables CEL optionals for CRD rules: ``self.?spec.?replicas.orValue(1)`` is an
optional that is empty when a field is absent. The ``common-expression-language`` interpreter
has optional values (``optional.of``, ``orValue``, ``hasValue``, ...) but not the syntax, so a
rule that uses it is rewritten before it is compiled:

- ``x.?f`` becomes ``kubeloopOptSelect(x, "f")``, and ``x[?k]`` becomes
  ``kubeloopOptIndex(x, k)``: the value's field (or entry, or item) as an optional, empty when
  it is absent, and empty when ``x`` is itself an empty optional;
- what follows is left as written: the interpreter chains selections and indexes on an
  optional itself (``a.?b.c`` is empty when ``b`` is absent, not an error), and runs its
  methods (``.orValue(0)``).

Only rules holding ``.?`` or ``[?`` outside string literals are rewritten, so every other rule is
compiled exactly as written. Optional entries in list and map literals (``[?x]``, ``{?k: v}``)
are not supported: such a rule still fails to compile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SELECT = "kubeloopOptSelect"
INDEX = "kubeloopOptIndex"

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<raw>(?:[rR][bB]?|[bB][rR])(?:'''.*?'''|\"\"\".*?\"\"\"|'[^'\n]*'|"[^"\n]*"))
  | (?P<string>[bB]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<number>(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<optdot>\.\?)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)


class CELSyntaxError(ValueError):
    """A rule the rewriter cannot read (the interpreter's own error is reported instead)."""


def _tokens(source: str) -> list[tuple[str, str]]:
    return [(kind, text) for kind, text, _ in tokens_at(source)]


def tokens_at(source: str) -> list[tuple[str, str, int]]:
    """The rule's tokens (kind, text, offset): ``string``, ``number``, ``ident``, ``optdot``
    (``.?``) and ``op``; spaces and comments dropped. Raises :class:`CELSyntaxError`."""
    out: list[tuple[str, str, int]] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise CELSyntaxError(f"unexpected {source[position]!r} at {position}")
        kind = match.lastgroup or ""
        if kind == "raw":  # raw strings: no escapes inside, one token all the same
            kind = "string"
        if kind != "space":
            out.append((kind, match.group(), position))
        position = match.end()
    return out


def without_strings(source: str) -> str:
    """``source`` with the text of its string literals and comments blanked (same length, so
    positions still hold), for checks that look at the expression's own text."""
    out: list[str] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            return source
        text = match.group()
        if match.lastgroup in ("raw", "string") or text.startswith("//"):
            text = "".join(c if c == "\n" else " " for c in text)
        out.append(text)
        position = match.end()
    return "".join(out)


def uses_optional_syntax(source: str) -> bool:
    """Whether ``source`` has ``.?`` or ``[?`` outside its string literals."""
    if ".?" not in source and "[?" not in source.replace(" ", ""):
        return False
    try:
        tokens = _tokens(source)
    except CELSyntaxError:
        return False
    return any(
        kind == "optdot" or (text == "[" and i + 1 < len(tokens) and tokens[i + 1][1] == "?")
        for i, (kind, text) in enumerate(tokens)
    )


def rewrite(source: str) -> str:
    """``source`` with its optional selections and indexes as function calls (see above);
    ``source`` itself when it has none."""
    if not uses_optional_syntax(source):
        return source
    tokens = _tokens(source)
    text, position = _Rewriter(tokens).sequence(0, None)
    if position != len(tokens):
        raise CELSyntaxError(f"unexpected {tokens[position][1]!r}")
    return text


class _Rewriter:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens

    def _text(self, i: int) -> str:
        return self.tokens[i][1] if i < len(self.tokens) else ""

    def sequence(self, i: int, closer: str | None) -> tuple[str, int]:
        """Tokens up to ``closer`` (not consumed), operands rewritten."""
        parts: list[str] = []
        while i < len(self.tokens) and self._text(i) != closer:
            kind, text = self.tokens[i]
            if (kind in ("ident", "number", "string") and text != "in") or text in ("(", "[", "{"):
                operand, i = self.operand(i)
                parts.append(operand)
            elif text in (")", "]", "}"):
                raise CELSyntaxError(f"unbalanced {text!r}")
            else:
                parts.append(text)
                i += 1
        return " ".join(parts), i

    def _enclosed(self, i: int, opener: str, closer: str) -> tuple[str, int]:
        inner, i = self.sequence(i + 1, closer)
        if self._text(i) != closer:
            raise CELSyntaxError(f"{opener!r} is not closed")
        return f"{opener}{inner}{closer}", i + 1

    def operand(self, i: int) -> tuple[str, int]:
        """A primary expression and its chain of selections, indexes and calls."""
        kind, text = self.tokens[i]
        if text == "(":
            out, i = self._enclosed(i, "(", ")")
        elif text == "[":
            out, i = self._enclosed(i, "[", "]")
        elif text == "{":
            out, i = self._enclosed(i, "{", "}")
        else:
            out, i = text, i + 1
            if kind == "ident" and self._text(i) in ("(", "{"):
                opener = self._text(i)
                args, i = self._enclosed(i, opener, ")" if opener == "(" else "}")
                out += args
        while i < len(self.tokens):
            kind, text = self.tokens[i]
            if kind == "optdot":
                if not (i + 1 < len(self.tokens) and self.tokens[i + 1][0] == "ident"):
                    raise CELSyntaxError("a field name must follow '.?'")
                out, i = f'{SELECT}({out}, "{self.tokens[i + 1][1]}")', i + 2
            elif text == "." and i + 1 < len(self.tokens) and self.tokens[i + 1][0] == "ident":
                name = self.tokens[i + 1][1]
                if self._text(i + 2) == "(":
                    args, i = self._enclosed(i + 2, "(", ")")
                    out += f".{name}{args}"
                else:
                    out, i = f"{out}.{name}", i + 2
            elif text == "[":
                optional_index = self._text(i + 1) == "?"
                inner, j = self.sequence(i + 2 if optional_index else i + 1, "]")
                if self._text(j) != "]":
                    raise CELSyntaxError("'[' is not closed")
                out = f"{INDEX}({out}, {inner})" if optional_index else f"{out}[{inner}]"
                i = j + 1
            else:
                break
        return out, i


# ---------------------------------------------------------------------------- the functions


def _present(value: Any) -> tuple[bool, Any]:
    """(whether there is a value, the value): an optional's, or ``value`` itself."""
    has_value = getattr(value, "has_value", None)
    if callable(has_value) and hasattr(value, "value"):
        return (True, value.value()) if has_value() else (False, None)
    return True, value


def opt_select(value: Any, name: str) -> Any:
    """``value.?name``: the field (or map entry) as an optional, empty when absent."""
    from cel import OptionalValue

    present, inner = _present(value)
    if present and isinstance(inner, Mapping) and name in inner:
        return OptionalValue.of(inner[name])
    if present and not isinstance(inner, Mapping):
        raise ValueError("no such overload")
    return OptionalValue.none()


def opt_index(value: Any, key: Any) -> Any:
    """``value[?key]``: the map entry or list item as an optional, empty when absent."""
    from cel import OptionalValue

    present, inner = _present(value)
    if not present:
        return OptionalValue.none()
    if isinstance(inner, Mapping):
        return OptionalValue.of(inner[key]) if key in inner else OptionalValue.none()
    if isinstance(inner, list) and isinstance(key, int) and not isinstance(key, bool):
        return OptionalValue.of(inner[key]) if 0 <= key < len(inner) else OptionalValue.none()
    raise ValueError("no such overload")


FUNCTIONS: dict[str, Any] = {SELECT: opt_select, INDEX: opt_index}
