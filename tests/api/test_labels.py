"""Label selectors: upstream's grammar, messages and matching, plus properties against a model."""

from __future__ import annotations

import copy
import pickle
import re
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.api.labels import LabelSelector, Requirement, combined_selector
from kubeloop.errors import InvalidSelector

# --------------------------------------------------------------------------- parsing and printing

# (input, canonical text): upstream's String() prints the same with spaces removed (sorted by key).
GOOD = [
    ("", ""),
    ("   ", ""),
    ("x=a", "x=a"),
    ("y=a,x=b", "x=b,y=a"),
    ("x=a,y=b,z=c", "x=a,y=b,z=c"),
    ("x = a", "x=a"),
    ("x==a", "x==a"),
    ("x!=a,y=b", "x!=a,y=b"),
    ("x=", "x="),
    ("x= ", "x="),
    ("x=,z= ", "x=,z="),
    ("x= ,z= ", "x=,z="),
    ("x==", "x=="),
    ("x!=", "x!="),
    ("!x", "!x"),
    ("! x", "!x"),
    ("x", "x"),
    ("x>1", "x>1"),
    ("x>1,z<5", "x>1,z<5"),
    ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
    ("x in (a)", "x in (a)"),
    ("x in (b,a,b)", "x in (a,b)"),
    ("x in (,a)", "x in (,a)"),
    ("x in (a,)", "x in (,a)"),
    ("x notin (a, b)", "x notin (a,b)"),
    ("  x  in  (  a  ,  b  )  ", "x in (a,b)"),
    ("\tx\tin\t(a)\n,\r\ny", "x in (a),y"),
    ("environment=production,tier!=frontend", "environment=production,tier!=frontend"),
    ("environment in (production, qa)", "environment in (production,qa)"),
    ("tier notin (frontend, backend)", "tier notin (backend,frontend)"),
    ("partition", "partition"),
    ("!partition", "!partition"),
    ("in in (in)", "in in (in)"),
    ("notin=in", "notin=in"),
    ("example.com/app=web", "example.com/app=web"),
    ("app.kubernetes.io/name in (My_App.v1)", "app.kubernetes.io/name in (My_App.v1)"),
    ("a,a", "a"),
]


@pytest.mark.parametrize(("text", "canonical"), GOOD)
def test_parse_good(text: str, canonical: str) -> None:
    selector = LabelSelector.parse(text)
    assert str(selector) == canonical
    assert LabelSelector.parse(canonical) == selector


def test_parsed_structure() -> None:
    selector = LabelSelector.parse("x in (foo,,baz),y,z notin (),!w,v!=1,u==2,t=3,s>4,r<5")
    assert selector.requirements == (
        Requirement("r", "lt", ("5",)),
        Requirement("s", "gt", ("4",)),
        Requirement("t", "=", ("3",)),
        Requirement("u", "==", ("2",)),
        Requirement("v", "!=", ("1",)),
        Requirement("w", "!", ()),
        Requirement("x", "in", ("", "baz", "foo")),
        Requirement("y", "exists", ()),
        Requirement("z", "notin", ("",)),
    )


def test_order_does_not_matter() -> None:
    assert LabelSelector.parse("x=a,a=x") == LabelSelector.parse("a=x,x=a")
    assert str(LabelSelector.parse("x=a,a=x")) == "a=x,x=a"
    assert hash(LabelSelector.parse("b,a")) == hash(LabelSelector.parse("a,b"))
    assert LabelSelector.parse("a=b") != LabelSelector.parse("a==b")
    assert LabelSelector.parse("a=b") != "a=b"


WHERE_WAS = "unable to parse requirement: "
BINARY = "in, notin, =, ==, !=, gt, lt"
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# (input, exact upstream message)
BAD = [
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("x==a==b", "found '==', expected: ',' or 'end of string'"),
    ("x=a||y=b", WHERE_WAS + 'values[0][x]: Invalid value: "a||y": ' + LABEL_VALUE_MSG),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("key in (", WHERE_WAS + "found '', expected: ',', ')' or identifier"),
    ("key in", WHERE_WAS + "found '' expected: '('"),
    ("key in (a", WHERE_WAS + "found '', expected: ',' or ')'"),
    ("key in (a b)", WHERE_WAS + "found 'b', expected: ',' or ')'"),
    ("key in (a,", WHERE_WAS + "found '', expected: ',', or identifier"),
    ("key in (a,=)", WHERE_WAS + "found '=', expected: ',', or identifier"),
    ("key in ((a)", WHERE_WAS + "found '(', expected: ',', ')' or identifier"),
    ("key notin a", WHERE_WAS + "found 'a' expected: '('"),
    ("!", WHERE_WAS + "found '', expected: identifier"),
    ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
    ("!!x", WHERE_WAS + "found '!', expected: identifier"),
    ("x!==a", WHERE_WAS + "found '=', expected: identifier"),
    ("x=(a)", WHERE_WAS + "found '(', expected: identifier"),
    ("a b", WHERE_WAS + f"found 'b', expected: {BINARY}"),
    ("x (", WHERE_WAS + f"found '(', expected: {BINARY}"),
    (",", "found ',', expected: !, identifier, or 'end of string'"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("=a", "found '=', expected: !, identifier, or 'end of string'"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    ("a,", "found '', expected: identifier after ','"),
    ("a,,b", "found ',', expected: identifier after ','"),
    ("a,=b", "found '=', expected: identifier after ','"),
    (
        "x<a",
        WHERE_WAS + "values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer",
    ),
    (
        "x>",
        WHERE_WAS + "values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer",
    ),
    (
        "x>99999999999999999999",
        WHERE_WAS
        + "values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be "
        "an integer",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_parse_bad(text: str, message: str) -> None:
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse(text)
    assert info.value.message == message


def test_bad_key_is_named() -> None:
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse("a/b/c=d")
    message = info.value.message
    assert message.startswith('unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name ')
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse("Bad_Prefix/x")
    assert info.value.message.startswith(
        'unable to parse requirement: <nil>: Invalid value: "Bad_Prefix/x": prefix part a lowercase RFC 1123'
    )
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse("!" + "k" * 64)
    assert info.value.message == (
        f'unable to parse requirement: <nil>: Invalid value: "{"k" * 64}": name part must be no more than 63 characters'
    )
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse("-x in (a)")
    assert 'Invalid value: "-x": name part must consist of' in info.value.message


def test_bad_values_are_named() -> None:
    long_value = "v" * 64
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse(f"app={long_value}")
    assert info.value.message == (
        f'unable to parse requirement: values[0][app]: Invalid value: "{long_value}": must be no more than 63 characters'
    )
    assert LabelSelector.parse("app=" + "v" * 63).matches({"app": "v" * 63})
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse("tier notin (ok, -bad-, _" + "w" * 70 + ")")
    # Several bad values: upstream's aggregate, bracketed, indexed in sorted value order, each value's
    # problems joined by "; ".
    assert info.value.message == (
        'unable to parse requirement: [values[0][tier]: Invalid value: "-bad-": ' + LABEL_VALUE_MSG + ", "
        f'values[1][tier]: Invalid value: "_{"w" * 70}": must be no more than 63 characters; '
        + LABEL_VALUE_MSG
        + "]"
    )
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.parse("x=a@b")
    assert 'values[0][x]: Invalid value: "a@b"' in info.value.message


def test_nul_ends_input_like_upstream() -> None:
    # Upstream's lexer treats a NUL byte as the end of input where it expects a new token.
    assert str(LabelSelector.parse("a \x00b=c")) == "a"
    with pytest.raises(InvalidSelector):
        LabelSelector.parse("a\x00 b")


# --------------------------------------------------------------------------- matching

MATCHES = [
    ("", {"x": "y"}, True),
    ("", {}, True),
    ("x=y", {"x": "y"}, True),
    ("x==y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("x", {"x": ""}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x<1", {"x": "-5"}, True),
    ("x=", {"x": ""}, True),
    ("x in ()", {"x": ""}, True),
    ("x in (a,,b)", {"x": ""}, True),
    ("x in (a,b)", {"x": "b"}, True),
    ("x notin (a,b)", {"x": "c"}, True),
    ("x notin (a,b)", {}, True),  # notin matches objects without the key
    ("x!=a", {}, True),  # != too
    ("x!=", {"x": "a"}, True),
    ("environment=production,tier!=frontend", {"environment": "production", "tier": "backend"}, True),
    ("environment=production,tier!=frontend", {"environment": "production"}, True),
    ("x=z", {}, False),
    ("x=", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("!x", {"x": ""}, False),
    ("x>1", {"x": "0"}, False),
    ("x>1", {"x": "1"}, False),
    ("x<1", {"x": "2"}, False),
    ("x>1", {"x": "a"}, False),
    ("x<1", {}, False),
    ("x in (a,b)", {}, False),
    ("x in (a,b)", {"x": "c"}, False),
    ("x in ()", {"x": "a"}, False),
    ("x notin (a,b)", {"x": "a"}, False),
    ("x notin ()", {"x": ""}, False),
    ("x!=", {"x": ""}, False),
    ("environment=production,tier!=frontend", {"environment": "production", "tier": "frontend"}, False),
    ("environment=production,tier!=frontend", {"tier": "backend"}, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is expected


def test_empty_and_nothing() -> None:
    assert LabelSelector.parse("").is_empty
    assert LabelSelector.everything().is_empty
    assert not LabelSelector.parse("a").is_empty
    nothing = LabelSelector.nothing()
    assert not nothing.is_empty
    assert nothing.matches_nothing
    assert not nothing.matches({})
    assert nothing != LabelSelector.everything()


def test_immutable_copyable_picklable() -> None:
    selector = LabelSelector.parse("a in (x,y),!b")
    for clone in (copy.copy(selector), copy.deepcopy(selector), pickle.loads(pickle.dumps(selector))):
        assert clone == selector
    nothing = pickle.loads(pickle.dumps(LabelSelector.nothing()))
    assert nothing.matches_nothing
    with pytest.raises(AttributeError):
        selector._requirements = ()


def test_exact_value() -> None:
    selector = LabelSelector.parse("a=1,b in (2),c in (3,4),d!=5,e")
    assert selector.exact_value("a") == "1"
    assert selector.exact_value("b") == "2"
    assert selector.exact_value("c") is None
    assert selector.exact_value("d") is None
    assert selector.exact_value("e") is None
    assert selector.exact_value("zzz") is None


# --------------------------------------------------------------------------- metav1.LabelSelector


def test_from_label_selector_dict() -> None:
    selector = LabelSelector.from_label_selector_dict(
        {
            "matchLabels": {"app": "web", "tier": "front"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "qa"]},
                {"key": "track", "operator": "NotIn", "values": ["canary"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert str(selector) == "app=web,env in (prod,qa),!legacy,team,tier=front,track notin (canary)"
    assert selector == LabelSelector.parse(str(selector))
    good = {"app": "web", "tier": "front", "env": "qa", "team": "x"}
    assert selector.matches(good)
    assert selector.matches({**good, "track": "stable"})
    assert not selector.matches({**good, "track": "canary"})
    assert not selector.matches({**good, "legacy": "1"})
    assert not selector.matches({**good, "env": "dev"})
    assert not selector.matches({k: v for k, v in good.items() if k != "team"})
    assert not selector.matches({**good, "app": "db"})


def test_from_label_selector_dict_empty_and_none() -> None:
    assert LabelSelector.from_label_selector_dict({}).is_empty
    assert LabelSelector.from_label_selector_dict({"matchLabels": {}, "matchExpressions": []}).matches(
        {"a": "b"}
    )
    assert LabelSelector.from_label_selector_dict(None).matches_nothing
    assert not LabelSelector.from_label_selector_dict(None).matches({})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            '"Gt" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
        ),
        (
            {"matchLabels": {"a": "b" * 64}},
            f'values[0][a]: Invalid value: "{"b" * 64}": must be no more than 63 characters',
        ),
        ({"matchLabels": {"a/b/c": "x"}}, 'key: Invalid value: "a/b/c": a qualified name must consist'),
        ({"matchLabels": {"a": 1}}, "matchLabels: must be an object of strings"),
        ({"matchExpressions": "nope"}, "matchExpressions: must be a list"),
    ],
)
def test_from_label_selector_dict_invalid(selector: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidSelector) as info:
        LabelSelector.from_label_selector_dict(selector)
    assert info.value.message.startswith(message)


# --------------------------------------------------------------------------- properties

_ALNUM = "abcxyzABZ0189"
_NAME = st.one_of(
    st.sampled_from(_ALNUM),
    st.builds(
        lambda a, mid, b: a + mid + b,
        st.sampled_from(_ALNUM),
        st.text(_ALNUM + "-_.", max_size=6),
        st.sampled_from(_ALNUM),
    ),
)
_DNS_LABEL = st.builds(
    lambda a, mid: a + mid, st.sampled_from("ab09"), st.sampled_from(["", "x", "-1", "b-c"])
)
_PREFIX = st.lists(_DNS_LABEL, min_size=1, max_size=3).map(".".join)
_KEY_NAME = _NAME
KEYS = st.one_of(
    st.sampled_from(["a", "b", "app", "in", "notin", "x.y/z"]),
    _KEY_NAME,
    st.builds(lambda prefix, name: f"{prefix}/{name}", _PREFIX, _KEY_NAME),
)
VALUES = st.one_of(
    st.sampled_from(["", "v", "w", "1", "2", "in", "notin", "10", "007"]),
    _NAME,
)
# Operators as written in text, with the values each takes.
TERMS = st.one_of(
    st.tuples(KEYS, st.sampled_from(["=", "==", "!="]), st.lists(VALUES, min_size=1, max_size=1)),
    st.tuples(KEYS, st.sampled_from(["in", "notin"]), st.lists(VALUES, min_size=1, max_size=4)),
    st.tuples(KEYS, st.sampled_from(["exists", "!"]), st.just([])),
    st.tuples(
        KEYS, st.sampled_from([">", "<"]), st.lists(st.integers(0, 50).map(str), min_size=1, max_size=1)
    ),
)
SPACE = st.sampled_from(["", "", " ", "  ", "\t", "\n"])


@st.composite
def selector_texts(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, list[str]]]]:
    terms = draw(st.lists(TERMS, max_size=5))
    pieces = []
    for key, op, values in terms:
        s1, s2, s3 = draw(SPACE), draw(SPACE), draw(SPACE)
        if op == "exists":
            piece = f"{s1}{key}{s2}"
        elif op == "!":
            piece = f"{s1}!{s2}{key}{s3}"
        elif op in ("in", "notin"):
            # Upstream also reads empty items ("(a,,b)", "()") as the empty value.
            listed = ",".join(f"{draw(SPACE)}{v}{draw(SPACE)}" for v in values)
            piece = f"{s1}{key} {op}{s2}({listed}){s3}"
        else:
            piece = f"{s1}{key}{s2}{op}{s3}{values[0]}"
        pieces.append(piece)
    return ",".join(pieces), terms


def model_matches(terms: list[tuple[str, str, list[str]]], labels: Mapping[str, str]) -> bool:
    """An independent statement of the semantics."""
    for key, op, values in terms:
        present = key in labels
        value = labels.get(key)
        if op in ("=", "==", "in"):
            ok = present and value in values
        elif op in ("!=", "notin"):
            ok = not present or value not in values
        elif op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        else:
            number = int(value) if value is not None and re.fullmatch(r"[+-]?[0-9]+", value) else None
            limit = int(values[0])
            ok = number is not None and (number > limit if op == ">" else number < limit)
        if not ok:
            return False
    return True


def _labels_for(terms: list[tuple[str, str, list[str]]]) -> st.SearchStrategy[dict[str, str]]:
    keys = sorted({key for key, _, _ in terms} | {"other"})
    related_values = sorted({v for _, _, values in terms for v in values} | {"", "zz", "7", "-4", "+9"})
    return st.dictionaries(st.sampled_from(keys), st.sampled_from(related_values), max_size=len(keys))


@settings(max_examples=250, deadline=None)
@given(st.data())
def test_matches_agrees_with_model(data: st.DataObject) -> None:
    text, terms = data.draw(selector_texts())
    selector = LabelSelector.parse(text)
    for _ in range(4):
        labels = data.draw(_labels_for(terms))
        assert selector.matches(labels) is model_matches(terms, labels), (text, labels)


@settings(max_examples=300, deadline=None)
@given(selector_texts())
def test_canonical_text_round_trips(generated: tuple[str, list[tuple[str, str, list[str]]]]) -> None:
    text, terms = generated
    selector = LabelSelector.parse(text)
    canonical = str(selector)
    again = LabelSelector.parse(canonical)
    assert again == selector
    assert str(again) == canonical
    assert len(selector.requirements) == len({(k, op, tuple(sorted(set(v)))) for k, op, v in terms})


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="ab=!(), \tinot<>/.-_1", max_size=30)))
def test_parse_only_raises_bad_request(text: str) -> None:
    try:
        selector = LabelSelector.parse(text)
    except InvalidSelector as exc:
        assert exc.message
        return
    # Whatever parses has a canonical form that parses back to the same selector.
    assert LabelSelector.parse(str(selector)) == selector
    selector.matches({"a": "b"})


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(KEYS, VALUES, max_size=4),
    st.lists(
        st.tuples(
            KEYS,
            st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
            st.lists(VALUES, min_size=1, max_size=3),
        ),
        max_size=3,
    ),
    st.dictionaries(KEYS, VALUES, max_size=5),
)
def test_label_selector_dict_agrees_with_model(
    match_labels: dict[str, str], expressions: list[tuple[str, str, list[str]]], labels: dict[str, str]
) -> None:
    as_dict = {
        "matchLabels": match_labels,
        "matchExpressions": [
            {"key": key, "operator": op, **({"values": values} if op in ("In", "NotIn") else {})}
            for key, op, values in expressions
        ],
    }
    selector = LabelSelector.from_label_selector_dict(as_dict)
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    terms = [(k, "=", [v]) for k, v in match_labels.items()] + [(k, ops[op], v) for k, op, v in expressions]
    assert selector.matches(labels) is model_matches(terms, labels)
    assert LabelSelector.parse(str(selector)) == selector


@given(st.dictionaries(KEYS, VALUES, max_size=4), st.dictionaries(KEYS, VALUES, max_size=4))
def test_combined_selector_is_match_labels_anded_with_the_selector(
    wanted: dict[str, str], labels: dict[str, str]
) -> None:
    """What both clients' ``match_labels`` mean: exact matches, ANDed with any selector."""
    combined = combined_selector(None, wanted)
    assert (combined is None) == (not wanted)
    matches = all(labels.get(k) == v for k, v in wanted.items())
    assert (combined is None or combined.matches(labels)) == matches
    # Its text is what the API client sends: the server parses it to the same selector.
    if combined is not None:
        assert LabelSelector.parse(str(combined)) == combined
    anded = combined_selector("tier=web", wanted)
    assert anded is not None
    assert anded.matches(labels) == (matches and labels.get("tier") == "web")


@pytest.mark.parametrize(
    "bad", [{"bad key": "x"}, {"a": "bad value"}, {"a" * 64: "x"}, {"a": "v" * 64}, {"": "x"}]
)
def test_match_labels_are_validated(bad: dict[str, str]) -> None:
    with pytest.raises(InvalidSelector):
        combined_selector(None, bad)
    with pytest.raises(InvalidSelector):
        LabelSelector.validated_from_set(bad)
