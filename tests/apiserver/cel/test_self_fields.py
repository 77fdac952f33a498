"""A rule is given only the fields of ``self`` it selects (the interpreter converts all it is
given, ~120 µs for an object with a large spec against ~20 for its metadata): which mentions of
self allow that, and that a rule's verdict, message and errors never depend on it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.api.fielderrors import StatusCause
from kubeloop.apiserver.cel import rules as celrules


@pytest.mark.parametrize(
    ("source", "fields"),
    [
        ("self.metadata.name.size() <= 63", {"metadata"}),
        ("has(self.spec) && self.status.x == oldSelf.status.x", {"spec", "status"}),
        ("self .  spec . x > 0", {"spec"}),
        ("self.spec.all(x, x > 0)", {"spec"}),
        ("myself.x == self_y", set()),  # no mention of self: none of it is read
        ("self.size() == 2", None),  # a method of self reads all of it
        ("size(self) == 2", None),
        ("self == oldSelf", None),
        ('self["spec"] == 1', None),
        ("self.?spec.orValue(1) == 1", None),
        ("[1].all(self, self > 0)", None),  # a macro's own variable named self
        ("'self' == 'a'", None),  # in a string: the whole value, to be safe
    ],
)
def test_the_fields_a_rule_selects(source: str, fields: set[str] | None) -> None:
    found = celrules._self_fields(source)
    assert (None if found is None else set(found)) == fields


RULES = [
    "self.metadata.name.size() <= 5",
    "!has(self.spec) || self.spec.a > 1",
    "self.size() <= 3",
    "has(self.status) == has(self.spec)",
    "self.all(k, k != 'extra')",
    "self.spec.a + self.spec.b > 3",  # an evaluation error when a field is missing
]

_values = st.one_of(st.integers(-3, 9), st.text("ab", max_size=3))
_objects = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.text("abcdefg", min_size=1, max_size=8)})},
    optional={
        "spec": st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-3, 9), max_size=2),
        "status": st.dictionaries(st.sampled_from(["c"]), _values, max_size=1),
        "extra": _values,
    },
)


@settings(max_examples=150)
@given(obj=_objects)
def test_a_rules_verdict_is_the_same_given_the_selected_fields_only(obj: dict[str, Any]) -> None:
    entries = [{"rule": rule, "messageExpression": "'at ' + self.metadata.name"} for rule in RULES]
    causes: list[StatusCause] = []
    compiled = celrules.compile_rules(
        {"type": "object", "x-kubernetes-validations": entries},
        "spec.validation.openAPIV3Schema",
        causes,
        properties={},
        correlatable=False,
        check_types=False,
    )
    assert not causes and len(compiled) == len(RULES)
    assert [rule.self_fields is not None for rule in compiled] == [True, True, False, True, False, True]
    whole = tuple(dataclasses.replace(rule, self_fields=None) for rule in compiled)

    def verdicts(rules: tuple[celrules.CompiledRule, ...]) -> list[tuple[str, str, str]]:
        found: list[StatusCause] = []
        celrules.evaluate(
            rules,
            obj,
            None,
            has_old=False,
            transition_only=False,
            node_type="object",
            path="",
            budget=celrules.Budget(),
            causes=found,
        )
        return [(cause.type, cause.message, cause.field) for cause in found]

    assert verdicts(compiled) == verdicts(whole)
