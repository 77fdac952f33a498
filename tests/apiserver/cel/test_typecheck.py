"""The static type check of CEL rules against their schema (``apiextensions/celtypes.py``): what
upstream's checker refuses when a CRD is written, with its words and positions, and nothing
else — checked against the interpreter, which fails at run time where the checker refuses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.cel.interpreter import cel_interpreter
from kubeloop.apiserver.cel.typecheck import (
    _Parser,
    check_message_expression,
    check_rule,
    escaped_property_name,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "i": {"type": "integer"},
        "d": {"type": "number"},
        "s": {"type": "string"},
        "b": {"type": "boolean"},
        "l": {"type": "array", "items": {"type": "string"}},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
        "dash-name": {"type": "string"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "when": {"type": "string", "format": "date-time"},
        "ios": {"x-kubernetes-int-or-string": True},
    },
}
VALUE = {"i": 3, "d": 1.5, "s": "ab", "b": True, "l": ["a", "b"], "m": {"k": 1}, "ports": [{"port": 80}]}


def check(rule: str) -> tuple[str, str] | None:
    return check_rule(rule, SCHEMA, root=False, optional_old_self=False)


@pytest.mark.parametrize(
    "rule",
    [
        "self.i > 1",
        "self.i < 2.5",  # numbers compare across int, uint and double
        "self.d > 1",
        "self.ports.all(p, p.port > 0)",
        "self.dash__dash__name == 'a'",
        "self.free.anything.deep == 1",  # preserved unknown fields are dyn
        "self.m.k == 1 && self.m['k'] > 0",
        "self.when < timestamp('2020-01-01T00:00:00Z')",  # a date-time is not a string upstream
        "self.ios == 1 || self.ios == 'a'",
        "self.l.map(t, t + 'x').all(t, t.startsWith('a'))",
        "self.l.filter(t, t != '').size() > 0",
        "self.i == null",
        "self.s.matches('^a') && self.s.size() < 3",
        "int(self.d) + self.i > 0",
        "self.i in [1, 2] && 'a' in self.l",
        "cel.bind(x, self.i, x > 1)",
        "self.?s.orValue('') == ''",
        "[1, 2].all(x, x > 0) && {'a': 1}.a == 1",
        "has(self.s) ? self.s != '' : true",
        "--self.i > 0 && !!self.b && --self.s == 'a'",  # pairs cancel, as upstream parses them
        "self.l.all(i, v, i < 10 && v != '')",  # two-variable comprehensions: index and item
        "self.l.exists(i, v, i == 0 && v == 'x') && self.m.exists_one(k, v, k == 'a' && v > 0)",
        "self.l.all(i, x, i < 1 || x > self.l[i - 1])",
    ],
)
def test_well_typed_rules_pass(rule: str) -> None:
    assert check(rule) is None


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("self.i > 'a'", "<input>:1:8: found no matching overload for '_>_' applied to '(int, string)'"),
        ("self.nope == 1", "<input>:1:5: undefined field 'nope'"),
        ("has(self.nope)", "<input>:1:4: undefined field 'nope'"),  # at has's "("
        ("self.?nope.orValue(1) == 1", "<input>:1:5: undefined field 'nope'"),
        ("self.ports.all(p, p.host == 'x')", "<input>:1:20: undefined field 'host'"),
        ("self.dash-name == 'a'", "<input>:1:5: undefined field 'dash'"),
        (
            "self.m['k'] == 'one'",
            "<input>:1:13: found no matching overload for '_==_' applied to '(int, string)'",
        ),
        (
            "self.i + 1.5 > 2.0",
            "<input>:1:8: found no matching overload for '_+_' applied to '(int, double)'",
        ),
        ("self.s + 1 == 'a'", "<input>:1:8: found no matching overload for '_+_' applied to '(string, int)'"),
        ("self.b && self.i", "<input>:1:15: expected type 'bool' but found 'int'"),  # at the side
        ("!!!self.i", "<input>:1:1: found no matching overload for '!_' applied to '(int)'"),
        ("!self.i", "<input>:1:1: found no matching overload for '!_' applied to '(int)'"),
        ("-self.s == 'a'", "<input>:1:1: found no matching overload for '-_' applied to '(string)'"),
        ("self.i - 1u > 0", "<input>:1:8: found no matching overload for '_-_' applied to '(int, uint)'"),
        (
            "self.l.exists(t, t == 1)",
            "<input>:1:20: found no matching overload for '_==_' applied to '(string, int)'",
        ),
        ("self.i\n  > 'x'", "<input>:2:3: found no matching overload for '_>_' applied to '(int, string)'"),
    ],
)
def test_ill_typed_rules_are_refused_where_upstream_points(rule: str, error: str) -> None:
    assert check(rule) == ("compile", f"ERROR: {error}")


def test_every_error_is_reported_in_the_order_of_its_position() -> None:
    assert check("self.i && self.nope == 1 && self.d + 1 > 0") == (
        "compile",
        "ERROR: <input>:1:5: expected type 'bool' but found 'int'\n"
        "ERROR: <input>:1:15: undefined field 'nope'\n"
        "ERROR: <input>:1:36: found no matching overload for '_+_' applied to '(double, int)'",
    )


def test_results_must_be_bool_and_messages_strings() -> None:
    assert check("self.i") == ("result", "cel expression must evaluate to a bool")
    assert check("size(self.l) > 0 ? 'a' : 'b'") == ("result", "cel expression must evaluate to a bool")
    assert check("self.free.flag") is None  # dyn: judged when evaluated
    assert check_message_expression("'n=' + string(self.i)", SCHEMA, root=False) is None
    assert check_message_expression("self.i", SCHEMA, root=False) == (
        "result",
        "messageExpression must evaluate to a string",
    )


def test_root_rules_see_api_version_kind_and_two_metadata_fields() -> None:
    root = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    assert (
        check_rule(
            "self.apiVersion == 'v1' && self.kind == 'X' && self.metadata.name != ''",
            root,
            root=True,
            optional_old_self=False,
        )
        is None
    )
    assert check_rule("self.spec.y > 0", root, root=True, optional_old_self=False) == (
        "compile",
        "ERROR: <input>:1:10: undefined field 'y'",
    )
    assert check_rule("self.metadata.name == 'a'", root, root=False, optional_old_self=False) == (
        "compile",
        "ERROR: <input>:1:5: undefined field 'metadata'",
    )


def test_property_names_escape_as_upstream_escapes_them() -> None:
    assert escaped_property_name("in") == "__in__"
    assert escaped_property_name("a-b.c/d") == "a__dash__b__dot__c__slash__d"
    assert escaped_property_name("x__y") == "x__underscores__y"


# Generated rules: well-typed ones pass the check and evaluate without a type error; one
# operator given operands it has no overload for is refused by the check, at that operator,
# and fails when the interpreter evaluates it.

_LEAVES = {
    "int": ["self.i", "2", "size(self.l)", "self.ports[0].port"],
    "double": ["self.d", "0.5"],
    "string": ["self.s", "'x'", "self.l[0]"],
    "bool": ["self.b", "true", "has(self.s)"],
}


def _typed(kind: str) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(_LEAVES[kind])

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        if kind in ("int", "double"):
            return st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            )
        if kind == "string":
            return st.tuples(inner, inner).map(lambda t: f"({t[0]} + {t[1]})")
        numbers = st.one_of(_typed_leafy("int"), _typed_leafy("double"))
        return st.one_of(
            st.tuples(numbers, st.sampled_from(["<", "<=", ">", ">="]), numbers).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda e: f"!{e}"),
            st.tuples(_typed_leafy("string"), _typed_leafy("string")).map(lambda t: f"({t[0]} == {t[1]})"),
            st.just("self.l.all(x, x.startsWith('a') || x.size() > 0)"),
        )

    return st.recursive(leaf, grow, max_leaves=6)


def _typed_leafy(kind: str) -> st.SearchStrategy[str]:
    return st.sampled_from(_LEAVES[kind])


def _offset_of(expression: str) -> int:
    """Where upstream places ``expression``: a select at its last ".", a binary expression at
    its outermost operator, a literal or a variable where it starts (the parser's node offset)."""
    return int(_Parser(expression).parse()[1])


def _evaluate(rule: str) -> Any:
    cel = cel_interpreter()
    context = cel.Context()
    context.add_variable("self", VALUE)
    return cel.compile(rule).execute(context)


@settings(max_examples=150, deadline=None)
@given(_typed("bool"))
def test_generated_well_typed_rules_pass_and_evaluate(rule: str) -> None:
    assert check(rule) is None
    assert isinstance(_evaluate(rule), bool)


_MISMATCHED = [
    ("int", "+", "string"),
    ("string", "-", "string"),
    ("int", "+", "double"),
    ("double", "*", "int"),
    ("int", "<", "string"),
    ("string", ">=", "bool"),
    ("bool", "&&", "int"),
    ("string", "||", "bool"),
    ("bool", "+", "bool"),
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_MISMATCHED).flatmap(lambda m: st.tuples(st.just(m), _typed(m[0]), _typed(m[2]))))
def test_generated_mismatches_are_refused_and_fail_when_evaluated(
    case: tuple[tuple[str, str, str], str, str],
) -> None:
    (left_kind, operator, right_kind), left, right = case
    rule = f"{left} {operator} {right}"
    if operator in "+-*":
        rule = f"size([{rule}]) > 0"
    offset = rule.index(f"{left} {operator} {right}") + len(left) + 1
    if operator in ("&&", "||"):  # upstream blames the operand that is not a bool
        if left_kind != "bool":
            where, bad_kind = _offset_of(left), left_kind
        else:
            where, bad_kind = offset + len(operator) + 1 + _offset_of(right), right_kind
        expected = f"expected type 'bool' but found '{bad_kind}'"
        assert check(rule) == ("compile", f"ERROR: <input>:1:{where + 1}: {expected}")
        return  # at run time CEL's logic absorbs an error when the other side decides ('a' || true)
    expected = f"found no matching overload for '_{operator}_' applied to '({left_kind}, {right_kind})'"
    assert check(rule) == ("compile", f"ERROR: <input>:1:{offset + 1}: {expected}")
    with pytest.raises(TypeError):
        _evaluate(rule)
