"""CEL's optional syntax as the server runs it: ``a.?b`` and ``m[?k]`` rewritten into library
calls (``apiextensions/celsyntax.py``) and evaluated by the interpreter, against a reference of
CEL's optional chaining; rules without the syntax are compiled as written."""

from __future__ import annotations

import contextlib
from typing import Any

import cel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.cel import syntax as celsyntax

_KEYS = st.sampled_from(["a", "b", "c"])
_VALUES = st.recursive(
    st.one_of(st.integers(-5, 5), st.sampled_from(["x", "", "y"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=10,
)
_STEP = st.one_of(
    st.tuples(st.just("select"), _KEYS, st.booleans()),
    st.tuples(st.just("index"), st.one_of(st.integers(-1, 3), _KEYS), st.booleans()),
)
MISSING = "<missing>"
EITHER = object()


class _Error(Exception):
    pass


def _reference(value: Any, steps: list[tuple[str, Any, bool]]) -> Any:
    """CEL's optional chaining: once a step is optional, an absent field, key or item makes
    the whole chain empty. A ``.?`` or ``[?]`` on a value that has no fields or items of that
    kind is an error (upstream's type check refuses such rules); a plain step after the chain
    went optional is the interpreter's own, which makes it empty."""
    current = value
    for kind, key, optional in steps:
        fits = isinstance(current, dict) or (
            kind == "index" and isinstance(current, list) and isinstance(key, int)
        )
        if not fits:
            if optional:
                raise _Error
            return EITHER
        if isinstance(current, dict):
            if key not in current:
                return MISSING
            current = current[key]
        else:
            if not 0 <= key < len(current):
                return MISSING
            current = current[key]
    return current


def _source(steps: list[tuple[str, Any, bool]]) -> str:
    out = "self"
    for kind, key, optional in steps:
        literal = f"'{key}'" if isinstance(key, str) else str(key)
        if kind == "select":
            out += f".?{key}" if optional else f".{key}"
        else:
            out += f"[?{literal}]" if optional else f"[{literal}]"
    return out + f".orValue('{MISSING}')"


def _run(source: str, value: Any) -> Any:
    context = cel.Context()
    for name, function in celsyntax.FUNCTIONS.items():
        context.add_function(name, function)
    context.add_variable("self", value)
    return cel.compile(celsyntax.rewrite(source)).execute(context)


@settings(max_examples=400)
@given(_VALUES, st.lists(_STEP, min_size=1, max_size=4))
def test_optional_chains_evaluate_as_cel_defines_them(value: Any, steps: list[tuple[str, Any, bool]]) -> None:
    kind, key, _ = steps[0]
    steps = [(kind, key, True), *steps[1:]]  # the chain goes optional at its first step
    try:
        expected = _reference(value, steps)
    except _Error:
        # The interpreter's errors: a missing key or index (LookupError), a wrong type (TypeError),
        # and what our own functions raise, as it wraps it (RuntimeError).
        with pytest.raises((LookupError, TypeError, RuntimeError)):
            _run(_source(steps), value)
        return
    if expected is EITHER:
        with contextlib.suppress(KeyError, TypeError, ValueError):  # an error is fine too
            assert _run(_source(steps), value) == MISSING
        return
    assert _run(_source(steps), value) == expected


@pytest.mark.parametrize(
    "rule",
    [
        "self.a.b > 1 && self.items.all(x, x.y == 1)",
        "'.?' + \"[?\" + '''x.?y''' == r'.?[?x.?y'",
        "self.x in [1, 2] ? self.y[0] : {'a': 1}['a']",
        "// a comment with .? in it\n self.size() > 0",
    ],
)
def test_rules_without_optional_syntax_are_compiled_as_written(rule: str) -> None:
    assert celsyntax.rewrite(rule) == rule


def test_optional_entries_in_literals_still_fail_to_compile() -> None:
    with pytest.raises(ValueError):
        cel.compile(celsyntax.rewrite("[?optional.none(), 1].size() == 1"))


def test_raw_strings_hold_no_escapes() -> None:
    """``r'\\'`` is a whole string in CEL: the rule after it is still read (and rewritten)."""
    rule = r"self.a == r'\' || self.?b.hasValue() || self.c == 'z'"
    assert (
        celsyntax.rewrite(rule)
        == r"self.a == r'\' || kubeloopOptSelect(self, " + "\"b\").hasValue() || self.c == 'z'"
    )
    assert _run(rule.replace("self.a", "'x'").replace("self.c", "'y'"), {"b": 1}) is True


def test_a_rule_nested_too_deep_to_rewrite_is_refused_with_a_cause() -> None:
    from kubeloop.apiserver.cel import rules as celrules

    rule = "(" * 400 + "self.?a.hasValue()" + ")" * 400
    causes: list[Any] = []
    compiled = celrules.compile_rules(
        {"type": "object", "x-kubernetes-validations": [{"rule": rule}]},
        "spec",
        causes,
        properties={},
        correlatable=True,
    )
    assert compiled == ()
    (cause,) = causes
    assert cause.field == "spec.x-kubernetes-validations[0].rule" and "compilation failed" in cause.message


def test_metadata_fields_named_in_strings_are_not_selections() -> None:
    from kubeloop.apiserver.cel import rules as celrules

    assert celrules._hidden_metadata_field("self.metadata.name != 'self.metadata.labels'") is None
    assert celrules._hidden_metadata_field("// self.metadata.labels\nself.metadata.name == 'a'") is None
    assert celrules._hidden_metadata_field("'x' != '' && self.metadata.labels == {}") == (
        "<input>:1:27: undefined field 'labels'"
    )
