"""Static type checking of CEL rules against the schema they sit on, as upstream checks a CRD's
``x-kubernetes-validations`` when the CRD is written.

The interpreter compiles a rule without types, so on its own a rule that reads a field the
schema does not have, or compares a string with a number, would fail only when a custom
resource is written. This checker parses the rule (the optional syntax included), gives ``self``
and ``oldSelf`` the type the schema declares — an object's properties by their escaped names
(``__dash__``, ``__dot__``, ...), a map for ``additionalProperties``, a list's items, integer as
``int``, number as ``double``, string, boolean — and reports, at the line and column upstream
names:

- ``undefined field 'x'``: a field an object's schema does not declare (nor preserve unknown
  fields for), also in ``has()`` and ``.?x``;
- ``found no matching overload for '_>_' applied to '(int, string)'``: an operator given
  operands of kinds no overload takes (arithmetic needs one type on both sides, comparisons one
  kind — numbers compare across int, uint and double — and ``!`` a bool);
- ``expected type 'bool' but found 'int'`` at a side of ``&&`` or ``||`` that is not a bool;
- a rule that does not evaluate to a bool, a messageExpression that does not evaluate to a string.

Every error is reported, in the order of their positions, as upstream's ``ERROR:`` lines. The
parser follows upstream's where it matters for positions: pairs of ``!`` or ``-`` cancel, a run
sits at its first operator, ``has()`` at its ``(``; comprehensions bind their variable to the
item (or key) type, and two-variable ones (``l.all(i, v, ...)``) the index (or key) and item.

What it cannot tell (functions' argument types, formats upstream types as timestamps, durations
or bytes, int-or-string and embedded resources, anything past a function call it does not know)
is ``dyn``, which matches everything: the checker refuses only what upstream's refuses too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.apiserver.cel.syntax import CELSyntaxError, tokens_at


@dataclass(frozen=True, slots=True)
class CELType:
    """A checked type: ``kind`` is a primitive's name, ``list``, ``map``, ``object`` or ``dyn``."""

    kind: str
    args: tuple[CELType, ...] = ()
    schema: Mapping[str, Any] | None = None  # an object's schema

    @property
    def primitive(self) -> bool:
        return self.kind in _PRIMITIVES

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.args[0]})"
        if self.kind == "map":
            return f"map({self.args[0]}, {self.args[1]})"
        return self.kind


_PRIMITIVES = frozenset({"int", "uint", "double", "string", "bool", "bytes", "null_type"})
DYN = CELType("dyn")
INT = CELType("int")
UINT = CELType("uint")
DOUBLE = CELType("double")
STRING = CELType("string")
BOOL = CELType("bool")
BYTES = CELType("bytes")
NULL = CELType("null_type")
_NUMBERS = frozenset({"int", "uint", "double"})
#: What a root rule sees of the object's metadata (upstream's type of the root's ObjectMeta).
_ROOT_METADATA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
}
_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
#: Formats upstream types as something other than a string (timestamps, durations, bytes).
_NON_STRING_FORMATS = frozenset({"byte", "duration", "date", "date-time"})


class CELTypeError(Exception):
    """A rule upstream's checker refuses: ``where`` is the offset of the offending token."""

    def __init__(self, where: int, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def escaped_property_name(name: str) -> str:
    """How a rule names a property (upstream's escaping of reserved words and ``_ . - /``)."""
    if name in _RESERVED:
        return f"__{name}__"
    return (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )


def schema_type(schema: Any) -> CELType:
    """The CEL type of values of ``schema`` (``dyn`` where the checker does not judge)."""
    if not isinstance(schema, Mapping):
        return DYN
    if schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-embedded-resource"):
        return DYN
    kind = schema.get("type")
    if kind == "object":
        if isinstance(schema.get("properties"), Mapping):
            return CELType("object", schema=schema)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return CELType("map", (STRING, schema_type(extra)))
        return DYN
    if kind == "array":
        return CELType("list", (schema_type(schema.get("items")),))
    if kind == "string":
        return DYN if schema.get("format") in _NON_STRING_FORMATS else STRING
    return {"integer": INT, "number": DOUBLE, "boolean": BOOL}.get(str(kind), DYN)


def _field(owner: CELType, name: str, *, root: bool) -> CELType | None:
    """The type of ``owner``'s field ``name``; None when the schema has no such field."""
    schema = owner.schema or {}
    properties = schema.get("properties") or {}
    if root:
        if name == "metadata":
            return CELType("object", schema=_ROOT_METADATA)
        if name in ("apiVersion", "kind"):
            return STRING
    for key, sub in properties.items():
        if name == key or name == escaped_property_name(str(key)):
            return schema_type(sub)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return DYN
    return None


# ------------------------------------------------------------------------------- parsing

Node = tuple[Any, ...]  # (kind, offset, ...)


class _Parser:
    """CEL's grammar, recursive descent over ``celsyntax``'s tokens."""

    def __init__(self, source: str) -> None:
        self.tokens = tokens_at(source)
        self.position = 0
        self.end = len(source)

    def parse(self) -> Node:
        node = self.expression()
        if self.position != len(self.tokens):
            raise CELSyntaxError("unexpected trailing tokens")
        return node

    def peek(self, offset: int = 0) -> tuple[str, str, int]:
        index = self.position + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", "", self.end)

    def take(self, text: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if token[0] == "end" or (text is not None and token[1] != text):
            raise CELSyntaxError(f"expected {text!r}")
        self.position += 1
        return token

    def accept(self, text: str) -> tuple[str, str, int] | None:
        token = self.peek()
        if token[1] == text and token[0] in ("op", "optdot", "ident"):
            self.position += 1
            return token
        return None

    def expression(self) -> Node:
        condition = self.binary(0)
        if (mark := self.accept("?")) is not None:
            then = self.binary(0)
            self.take(":")
            return ("cond", mark[2], condition, then, self.expression())
        return condition

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while True:
            kind, text, where = self.peek()
            if text not in self._LEVELS[level] or kind not in ("op", "ident"):
                return left
            self.position += 1
            left = ("binary", where, text, left, self.binary(level + 1))

    def unary(self) -> Node:
        kind, text, where = self.peek()
        if kind != "op" or text not in ("!", "-"):
            return self.member()
        run = 0
        while self.peek()[:2] == ("op", text):  # CEL's grammar: a run of one operator
            self.position += 1
            run += 1
        operand = self.member()
        if run % 2 == 0:
            return operand  # pairs cancel, as upstream's parser drops them
        if text == "-" and operand[0] == "literal" and operand[2].kind in ("int", "double"):
            return operand  # a negative literal
        return ("unary", where, text, operand)  # at the run's first operator

    def member(self) -> Node:
        node = self.primary()
        while True:
            kind, text, where = self.peek()
            if kind in ("op", "optdot") and text in (".", ".?"):
                self.position += 1
                name = self.take()
                if name[0] != "ident":
                    raise CELSyntaxError("expected a field name")
                if text == "." and self.accept("(") is not None:
                    node = ("call", where, node, name[1], self.arguments(")"))
                else:
                    node = ("select", where, node, name[1], text == ".?")
            elif kind == "op" and text == "[":
                self.position += 1
                optional = self.accept("?") is not None
                index = self.expression()
                self.take("]")
                node = ("index", where, node, index, optional)
            else:
                return node

    def arguments(self, closing: str) -> list[Node]:
        out: list[Node] = []
        if self.accept(closing) is not None:
            return out
        while True:
            self.accept("?")  # an optional entry of a list literal
            out.append(self.expression())
            if self.accept(closing) is not None:
                return out
            self.take(",")
            if self.accept(closing) is not None:
                return out

    def primary(self) -> Node:
        kind, text, where = self.take()
        if kind == "number":
            if text[-1] in "uU":
                return ("literal", where, UINT)
            is_double = not text.lower().startswith("0x") and any(c in text for c in ".eE")
            return ("literal", where, DOUBLE if is_double else INT)
        if kind == "string":
            return (
                "literal",
                where,
                BYTES if text[0] in "bB" or text[:2].lower() in ("rb", "br") else STRING,
            )
        if kind == "ident":
            if text in ("true", "false"):
                return ("literal", where, BOOL)
            if text == "null":
                return ("literal", where, NULL)
            if (opening := self.accept("(")) is not None:  # a global call sits at its "("
                return ("call", opening[2], None, text, self.arguments(")"))
            if self.peek()[1] == "{":  # a message construction
                self.take("{")
                self.map_entries()
                return ("literal", where, DYN)
            return ("ident", where, text)
        if kind == "op" and text == ".":
            name = self.take()
            return ("ident", where, "." + name[1])
        if kind == "op" and text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if kind == "op" and text == "[":
            return ("list", where, self.arguments("]"))
        if kind == "op" and text == "{":
            return ("map", where, self.map_entries())
        raise CELSyntaxError(f"unexpected {text!r}")

    def map_entries(self) -> list[tuple[Node, Node]]:
        out: list[tuple[Node, Node]] = []
        if self.accept("}") is not None:
            return out
        while True:
            self.accept("?")
            key = self.expression()
            self.take(":")
            out.append((key, self.expression()))
            if self.accept("}") is not None:
                return out
            self.take(",")
            if self.accept("}") is not None:
                return out


# ------------------------------------------------------------------------------- checking

_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter"})
#: Upstream's two-variable comprehensions (Kubernetes 1.32+): ``l.all(i, v, ...)``.
_TWO_VARIABLE = frozenset({"all", "exists", "exists_one", "existsOne"})
_BOOL_METHODS = frozenset({"startsWith", "endsWith", "contains", "matches", "isSorted"})
_CONVERSIONS = {"int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bool": BOOL, "bytes": BYTES}


def _family(kind: str) -> str:
    return "number" if kind in _NUMBERS else kind


class _Checker:
    """Types a parsed rule; every error found is kept (``errors``), its node typed ``dyn``."""

    def __init__(self, variables: Mapping[str, CELType], root: bool) -> None:
        self.scopes: list[dict[str, CELType]] = [dict(variables)]
        self.root = root
        self.errors: list[CELTypeError] = []

    def check(self, node: Node) -> CELType:
        try:
            return self.judge(node)
        except CELTypeError as error:
            self.errors.append(error)
            return DYN

    def variable(self, name: str) -> CELType:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return DYN

    def overload_error(self, where: int, function: str, *operands: CELType) -> CELTypeError:
        shown = ", ".join(str(operand) for operand in operands)
        return CELTypeError(where, f"found no matching overload for '{function}' applied to '({shown})'")

    def judge(self, node: Node) -> CELType:
        kind, where = node[0], node[1]
        if kind == "literal":
            result: CELType = node[2]
            return result
        if kind == "ident":
            return self.variable(node[2])
        if kind == "select":
            field = self.select(where, self.check(node[2]), node[3], node[2])
            return DYN if node[4] else field  # ``.?``: an optional of the field
        if kind == "index":
            operand, index = self.check(node[2]), self.check(node[3])
            if node[4]:
                return DYN
            if operand.kind == "list":
                return operand.args[0]
            if operand.kind == "map":
                return operand.args[1]
            if operand.primitive and index.primitive:
                raise self.overload_error(where, "_[_]", operand, index)
            return DYN
        if kind == "list":
            items = [self.check(item) for item in node[2]]
            same = items and all(item == items[0] for item in items)
            return CELType("list", (items[0] if same else DYN,))
        if kind == "map":
            for key, value in node[2]:
                self.check(key)
                self.check(value)
            return CELType("map", (DYN, DYN))
        if kind == "unary":
            operand = self.check(node[3])
            if node[2] == "!":
                if operand.kind not in ("bool", "dyn"):
                    raise self.overload_error(where, "!_", operand)
                return BOOL
            if operand.primitive and operand.kind not in ("int", "double"):
                raise self.overload_error(where, "-_", operand)
            return operand if operand.kind in ("int", "double") else DYN
        if kind == "binary":
            if node[2] in ("&&", "||"):
                return self.logic(node[3], node[4])
            return self.binary(where, node[2], self.check(node[3]), self.check(node[4]))
        if kind == "cond":
            self.check(node[2])
            then, otherwise = self.check(node[3]), self.check(node[4])
            return then if then == otherwise else DYN
        if kind == "call":
            return self.call(where, node[2], node[3], node[4])
        return DYN

    def select(self, where: int, operand: CELType, name: str, operand_node: Node) -> CELType:
        if operand.kind == "object":
            root = self.root and operand_node[0] == "ident" and operand_node[2] in ("self", "oldSelf")
            field = _field(operand, name, root=root)
            if field is None:
                raise CELTypeError(where, f"undefined field '{name}'")
            return field
        if operand.kind == "map":
            return operand.args[1]
        return DYN

    def logic(self, *sides: Node) -> CELType:
        """``&&``, ``||``: each side must be a bool (upstream blames the side, not the operator)."""
        for side in sides:
            found = self.check(side)
            if found.kind not in ("bool", "dyn"):
                self.errors.append(CELTypeError(side[1], f"expected type 'bool' but found '{found}'"))
        return BOOL

    def binary(self, where: int, operator: str, left: CELType, right: CELType) -> CELType:
        function = "@in" if operator == "in" else f"_{operator}_"
        if operator == "in":
            return BOOL
        both = left.primitive and right.primitive
        if operator in ("==", "!=", "<", "<=", ">", ">="):
            if not both or _family(left.kind) == _family(right.kind) != "null_type":
                return BOOL
            if operator in ("==", "!=") and "null_type" in (left.kind, right.kind):
                return BOOL  # a nullable field compared with null
            raise self.overload_error(where, function, left, right)
        if both:
            allowed = {
                "+": ("int", "uint", "double", "string", "bytes"),
                "-": ("int", "uint", "double"),
                "*": ("int", "uint", "double"),
                "/": ("int", "uint", "double"),
                "%": ("int", "uint"),
            }[operator]
            if left != right or left.kind not in allowed:
                raise self.overload_error(where, function, left, right)
            return left
        if operator == "+" and left.kind == "list" and right.kind == "list":
            return left if left == right else CELType("list", (DYN,))
        return DYN

    def call(self, where: int, target: Node | None, name: str, arguments: list[Node]) -> CELType:
        if target is not None and name in _COMPREHENSIONS and arguments and arguments[0][0] == "ident":
            over = self.check(target)
            element = over.args[0] if over.kind in ("list", "map") else DYN
            bound = {arguments[0][2]: element}
            two_variables = name in _TWO_VARIABLE and len(arguments) == 3 and arguments[1][0] == "ident"
            if two_variables:  # (index or key, item or value)
                first = INT if over.kind == "list" else (over.args[0] if over.kind == "map" else DYN)
                second = over.args[-1] if over.kind in ("list", "map") else DYN
                bound = {arguments[0][2]: first, arguments[1][2]: second}
            self.scopes.append(bound)
            try:
                results = [self.check(argument) for argument in arguments[2 if two_variables else 1 :]]
            finally:
                self.scopes.pop()
            if name == "map":
                return CELType("list", (results[-1] if results else DYN,))
            if name == "filter":
                return CELType("list", (element,))
            return BOOL
        if target is None and name == "has" and len(arguments) == 1 and arguments[0][0] == "select":
            tested = arguments[0]  # an undefined field is refused here too, at has's "("
            self.select(where, self.check(tested[2]), tested[3], tested[2])
            return BOOL
        if target is not None:
            self.check(target)
        for argument in arguments:
            self.check(argument)
        if name == "size":
            return INT
        if name in _BOOL_METHODS and target is not None:
            return BOOL
        if target is None and name in _CONVERSIONS and len(arguments) == 1:
            return _CONVERSIONS[name]
        return DYN


def _located(source: str, error: CELTypeError) -> str:
    line = source.count("\n", 0, error.where) + 1
    column = error.where - (source.rfind("\n", 0, error.where) + 1) + 1
    return f"<input>:{line}:{column}: {error.message}"


def _expression_type(source: str, variables: Mapping[str, CELType], root: bool) -> tuple[CELType, str | None]:
    """The expression's type and its errors (upstream's ``ERROR: <input>:l:c: ...`` lines, in
    the order of their positions), None when it has none."""
    try:
        tree = _Parser(source).parse()
    except (CELSyntaxError, RecursionError):
        return DYN, None  # not read here: the interpreter's compile judged its syntax
    checker = _Checker(variables, root)
    try:
        result = checker.check(tree)
    except RecursionError:
        return DYN, None
    if not checker.errors:
        return result, None
    ordered = sorted(checker.errors, key=lambda error: error.where)
    return result, "\n".join(f"ERROR: {_located(source, error)}" for error in ordered)


def check_expression(source: str, variables: Mapping[str, CELType]) -> tuple[CELType, str | None]:
    """The type of an expression over ``variables`` (an admission policy's ``object``,
    ``params``...) and upstream's ``ERROR:`` lines for it, each followed by the source line and
    a caret under the column, as CEL's issues print (None: no errors)."""
    result, errors = _expression_type(source, variables, root=True)
    if errors is None:
        return result, None
    lines = source.split("\n")
    shown = []
    for line in errors.split("\n"):
        shown.append(line)
        where = line.removeprefix("ERROR: <input>:").split(":", 2)
        if len(where) == 3 and where[0].isdigit() and where[1].isdigit():
            row, column = int(where[0]), int(where[1])
            if 1 <= row <= len(lines):
                shown.append(f" | {lines[row - 1]}")
                shown.append(f" | {'.' * (column - 1)}^")
    return result, "\n".join(shown)


def check_rule(
    rule: str, schema: Mapping[str, Any], *, root: bool, optional_old_self: bool
) -> tuple[str, str] | None:
    """What upstream's checker says of ``rule`` on ``schema``: None when it passes, else
    ``("compile", "ERROR: <input>:line:column: ...")`` (one line per error) or
    ``("result", "cel expression must evaluate to a bool")``."""
    return _verdict(rule, schema, root, optional_old_self, "bool", "cel expression must evaluate to a bool")


def check_message_expression(
    expression: str, schema: Mapping[str, Any], *, root: bool, optional_old_self: bool = False
) -> tuple[str, str] | None:
    """As :func:`check_rule`, for a messageExpression, which must evaluate to a string."""
    return _verdict(
        expression, schema, root, optional_old_self, "string", "messageExpression must evaluate to a string"
    )


def _verdict(
    source: str, schema: Mapping[str, Any], root: bool, optional_old_self: bool, wanted: str, wrong: str
) -> tuple[str, str] | None:
    own = schema_type(schema)
    variables = {"self": own, "oldSelf": DYN if optional_old_self else own}
    result, errors = _expression_type(source, variables, root)
    if errors is not None:
        return "compile", errors
    if result.kind not in (wanted, "dyn"):
        return "result", wrong
    return None
