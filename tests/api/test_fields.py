"""Field selectors: upstream's grammar, escapes and messages, the field set of objects."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.api.fields import FieldSelector, escape_value, object_fields, unescape_value
from kubeloop.errors import InvalidSelector

# (input, requirements, canonical text)
GOOD: list[tuple[str, tuple[tuple[str, str, str], ...], str]] = [
    ("", (), ""),
    (",", (), ""),
    ("x=a", (("x", "=", "a"),), "x=a"),
    ("x==a", (("x", "=", "a"),), "x=a"),
    ("x!=a", (("x", "!=", "a"),), "x!=a"),
    ("y=b,x=a", (("x", "=", "a"), ("y", "=", "b")), "x=a,y=b"),
    ("x=a,y!=b", (("x", "=", "a"), ("y", "!=", "b")), "x=a,y!=b"),
    ("x=", (("x", "=", ""),), "x="),
    ("x==", (("x", "=", ""),), "x="),
    ("x!=", (("x", "!=", ""),), "x!="),
    ("=a", (("", "=", "a"),), "=a"),
    ("=", (), ""),  # neither field nor value: upstream drops the term
    ("!=", (), ""),
    (",,x=a,,", (("x", "=", "a"),), "x=a"),
    ("metadata.name=foo", (("metadata.name", "=", "foo"),), "metadata.name=foo"),
    (
        "metadata.name=foo,metadata.namespace!=kube-system",
        (("metadata.name", "=", "foo"), ("metadata.namespace", "!=", "kube-system")),
        "metadata.name=foo,metadata.namespace!=kube-system",
    ),
    (
        "involvedObject.kind=Pod,involvedObject.name=web-0",
        (("involvedObject.kind", "=", "Pod"), ("involvedObject.name", "=", "web-0")),
        "involvedObject.kind=Pod,involvedObject.name=web-0",
    ),
    # Escapes in values.
    ("x=a\\,b", (("x", "=", "a,b"),), "x=a\\,b"),
    ("x=a\\=b", (("x", "=", "a=b"),), "x=a\\=b"),
    ("x=a\\\\b", (("x", "=", "a\\b"),), "x=a\\\\b"),
    ("x=\\\\\\,\\=", (("x", "=", "\\,="),), "x=\\\\\\,\\="),
    ("x!=a\\,b,y=c", (("x", "!=", "a,b"), ("y", "=", "c")), "x!=a\\,b,y=c"),
    # Nothing is trimmed.
    ("x = a", (("x ", "=", " a"),), "x = a"),
    (" x=a ", ((" x", "=", "a "),), " x=a "),
    # The field is what precedes the first operator; '!' alone is part of it.
    ("a!b=c", (("a!b", "=", "c"),), "a!b=c"),
    ("spec.containers[0].name=x", (("spec.containers[0].name", "=", "x"),), "spec.containers[0].name=x"),
    ("a\\,b=c", (("a\\,b", "=", "c"),), "a\\,b=c"),
    ("x=é😀", (("x", "=", "é😀"),), "x=é😀"),
]


@pytest.mark.parametrize(("text", "requirements", "canonical"), GOOD)
def test_parse_good(text: str, requirements: tuple[tuple[str, str, str], ...], canonical: str) -> None:
    selector = FieldSelector.parse(text)
    assert selector.requirements == requirements
    assert str(selector) == canonical
    assert FieldSelector.parse(canonical) == selector


BAD = [
    ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
    ("x=a,abc", "invalid selector: 'x=a,abc'; can't understand 'abc'"),
    ("x!a", "invalid selector: 'x!a'; can't understand 'x!a'"),
    ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ("x!==a", "invalid field selector: unescaped character in value: 61"),
    ("x===a", "invalid field selector: unescaped character in value: 61"),
    ("x=a\\", "invalid field selector: invalid escape sequence: \\"),
    ("x=a\\b", "invalid field selector: invalid escape sequence: \\b"),
    ("x=\\n", "invalid field selector: invalid escape sequence: \\n"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_parse_bad(text: str, message: str) -> None:
    with pytest.raises(InvalidSelector) as info:
        FieldSelector.parse(text)
    assert info.value.message == message


def test_matches() -> None:
    fields = {"metadata.name": "web", "metadata.namespace": "prod", "status.phase": ""}
    assert FieldSelector.parse("").matches(fields)
    assert FieldSelector.parse("metadata.name=web").matches(fields)
    assert FieldSelector.parse("metadata.name==web,metadata.namespace=prod").matches(fields)
    assert not FieldSelector.parse("metadata.name=web,metadata.namespace=dev").matches(fields)
    assert FieldSelector.parse("metadata.name!=db").matches(fields)
    assert not FieldSelector.parse("metadata.name!=web").matches(fields)
    # Missing fields compare as the empty string.
    assert FieldSelector.parse("spec.nodeName=").matches(fields)
    assert not FieldSelector.parse("spec.nodeName!=").matches(fields)
    assert not FieldSelector.parse("spec.nodeName=node-1").matches(fields)
    assert FieldSelector.parse("spec.nodeName!=node-1").matches(fields)
    assert FieldSelector.parse("status.phase=").matches(fields)
    assert FieldSelector.parse("x=a\\,b").matches({"x": "a,b"})
    assert not FieldSelector.parse("x=a\\,b").matches({"x": "a\\,b"})


def test_fields_and_exact_value() -> None:
    selector = FieldSelector.parse("metadata.name=web,status.phase!=Failed,spec.nodeName==n1")
    assert selector.fields == frozenset({"metadata.name", "status.phase", "spec.nodeName"})
    assert selector.exact_value("metadata.name") == "web"
    assert selector.exact_value("spec.nodeName") == "n1"
    assert selector.exact_value("status.phase") is None
    assert selector.exact_value("metadata.namespace") is None
    assert FieldSelector.parse("metadata.name=").exact_value("metadata.name") == ""
    assert FieldSelector.parse("").exact_value("metadata.name") is None
    assert FieldSelector.parse("").is_empty
    assert not FieldSelector.parse("a=b").is_empty


def test_check_supported() -> None:
    supported = ["metadata.namespace", "metadata.name"]
    FieldSelector.parse("metadata.name=a,metadata.namespace!=b").check_supported(supported)
    FieldSelector.parse("").check_supported([])
    with pytest.raises(InvalidSelector) as info:
        FieldSelector.parse("metadata.name=a,spec.foo=b").check_supported(supported)
    assert (
        info.value.message
        == '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    with pytest.raises(InvalidSelector) as info:
        FieldSelector.parse('we"ird=1').check_supported({"status.phase", "metadata.name"})
    assert (
        info.value.message == '"we\\"ird" is not a known field selector: only "metadata.name", "status.phase"'
    )


def test_immutable_copyable_picklable() -> None:
    selector = FieldSelector.parse("a=x\\,y,b!=")
    for clone in (copy.copy(selector), copy.deepcopy(selector), pickle.loads(pickle.dumps(selector))):
        assert clone == selector
    with pytest.raises(AttributeError):
        selector._requirements = ()


def test_equality() -> None:
    assert FieldSelector.parse("b=1,a=2") == FieldSelector.parse("a=2,b=1")
    assert FieldSelector.parse("a==1") == FieldSelector.parse("a=1")
    assert hash(FieldSelector.parse("a==1")) == hash(FieldSelector.parse("a=1"))
    assert FieldSelector.parse("a=1") != FieldSelector.parse("a!=1")
    assert FieldSelector.from_set({"b": "x,y", "a": ""}) == FieldSelector.parse("a=,b=x\\,y")
    with pytest.raises(ValueError):
        FieldSelector([("a", "in", "b")])


# --------------------------------------------------------------------------- object fields


def test_object_fields() -> None:
    pod = {
        "metadata": {"name": "web-0", "namespace": "prod"},
        "spec": {"nodeName": "n1", "hostNetwork": True, "restartPolicy": "Always", "priority": 7},
        "status": {"phase": "Running", "replicas": 3, "ready": False, "ratio": 2.0},
    }
    extra = {
        "spec.nodeName": "spec.nodeName",
        "spec.hostNetwork": "spec.hostNetwork",
        "status.ready": "status.ready",
        "status.replicas": "status.replicas",
        "status.podIP": "status.podIP",
        "spec.priority": "spec.priority",
        "ratio": "status.ratio",
        "deep": "spec.nodeName.more",
        "source": "source.component",
        "whole": "spec",
    }
    assert object_fields(pod, True, extra) == {
        "metadata.name": "web-0",
        "metadata.namespace": "prod",
        "spec.nodeName": "n1",
        "spec.hostNetwork": "true",
        "status.ready": "false",
        "status.replicas": "3",
        "status.podIP": "",
        "spec.priority": "7",
        "ratio": "2",
        "deep": "",
        "source": "",
        "whole": "",
    }
    assert object_fields(pod, False, {}) == {"metadata.name": "web-0"}
    assert object_fields({}, True, {"a": "b.c"}) == {"metadata.name": "", "metadata.namespace": "", "a": ""}
    # CRD selectableFields spell paths with a leading dot.
    assert (
        object_fields({"spec": {"color": "red"}}, False, {"spec.color": ".spec.color"})["spec.color"] == "red"
    )


def test_object_fields_with_selector() -> None:
    node = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}
    values = object_fields(node, False, {"spec.unschedulable": "spec.unschedulable"})
    assert FieldSelector.parse("spec.unschedulable=true").matches(values)
    assert not FieldSelector.parse("spec.unschedulable=false").matches(values)
    assert FieldSelector.parse("metadata.name=n1").matches(values)


# --------------------------------------------------------------------------- properties

FIELD_NAMES = st.sampled_from(["metadata.name", "metadata.namespace", "status.phase", "a", "b", "x.y"])
VALUES = st.text(alphabet="ab,=\\ !é", max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escape_round_trips(value: str) -> None:
    escaped = escape_value(value)
    assert unescape_value(escaped) == value
    selector = FieldSelector.parse(f"f={escaped}")
    assert selector.requirements == (("f", "=", value),)
    assert selector.matches({"f": value})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FIELD_NAMES, st.sampled_from(["=", "==", "!="]), VALUES), max_size=5))
def test_generated_selectors_round_trip_and_match(terms: list[tuple[str, str, str]]) -> None:
    text = ",".join(f"{field}{op}{escape_value(value)}" for field, op, value in terms)
    selector = FieldSelector.parse(text)
    expected = sorted((field, "!=" if op == "!=" else "=", value) for field, op, value in terms)
    assert sorted(selector.requirements) == expected
    assert FieldSelector.parse(str(selector)) == selector
    assert str(FieldSelector.parse(str(selector))) == str(selector)
    for probe in ({}, {field: value for field, _, value in terms}, {"a": "a", "b": "", "metadata.name": ","}):
        assert selector.matches(probe) is _model_matches(terms, probe)


def _model_matches(terms: list[tuple[str, str, str]], fields: Mapping[str, str]) -> bool:
    for field, op, value in terms:
        have = fields.get(field, "")
        if (have == value) is (op == "!="):
            return False
    return True


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="ab=!,\\ ", max_size=20)))
def test_parse_only_raises_bad_request(text: str) -> None:
    try:
        selector = FieldSelector.parse(text)
    except InvalidSelector as exc:
        assert exc.message
        return
    assert FieldSelector.parse(str(selector)) == selector
