"""Name and metadata syntax checks: upstream's verdicts and wording."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.api import naming

SUBDOMAIN_REGEX_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_REGEX_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QNAME_NAME_REGEX_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "0-1",
        "a.a",
        "a.1",
        "1.a",
        "a0.b-c.d",
        "example.com",
        "a" * 253,
        ("a" * 63 + ".") * 3 + "a" * 61,
    ],
)
def test_dns1123_subdomain_valid(value: str) -> None:
    assert naming.dns1123_subdomain_errors(value) == []


@pytest.mark.parametrize(
    "value", ["", "A", "ABC", "aBc", "A1", "a_1", "a..1", "-a", "a-", ".a", "a.", "a@b", "a,b", "a b", "é"]
)
def test_dns1123_subdomain_invalid(value: str) -> None:
    assert naming.dns1123_subdomain_errors(value) == [SUBDOMAIN_REGEX_MSG]


def test_dns1123_subdomain_too_long() -> None:
    assert naming.dns1123_subdomain_errors("a" * 254) == ["must be no more than 253 characters"]
    assert naming.dns1123_subdomain_errors("A" * 254) == [
        "must be no more than 253 characters",
        SUBDOMAIN_REGEX_MSG,
    ]


@pytest.mark.parametrize("value", ["a", "ab", "a-b", "0", "1-2", "a" * 63, "my-name", "123-abc"])
def test_dns1123_label_valid(value: str) -> None:
    assert naming.dns1123_label_errors(value) == []


def test_dns1123_label_invalid() -> None:
    assert naming.dns1123_label_errors("") == [LABEL_REGEX_MSG]
    assert naming.dns1123_label_errors("A") == [LABEL_REGEX_MSG]
    assert naming.dns1123_label_errors("a_b") == [LABEL_REGEX_MSG]
    assert naming.dns1123_label_errors("-a") == [LABEL_REGEX_MSG]
    assert naming.dns1123_label_errors("a.b") == ["must not contain dots"]
    assert naming.dns1123_label_errors("a" * 64) == ["must be no more than 63 characters"]
    assert naming.dns1123_label_errors("a." * 40 + "a") == [
        "must be no more than 63 characters",
        "must not contain dots",
    ]


@pytest.mark.parametrize(
    "value",
    [
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "1234",
        "simple/simple",
        "now-with-dashes/simple",
        "now-with-dashes/now-with-dashes",
        "now.with.dots/simple",
        "now-with.dashes-and.dots/simple",
        "1-num.2-num/3-num",
        "1234/5678",
        "1.2.3.4/5678",
        "Uppercase_Is_OK_123",
        "example.com/Uppercase_Is_OK_123",
        "requests.storage-foo",
        "a" * 63,
        "a" * 253 + "/" + "b" * 63,
        "a.b_c-D",
    ],
)
def test_qualified_name_valid(value: str) -> None:
    assert naming.qualified_name_errors(value) == []


def test_qualified_name_invalid() -> None:
    assert naming.qualified_name_errors("") == ["name part must be non-empty", QNAME_NAME_REGEX_MSG]
    assert naming.qualified_name_errors("a/") == ["name part must be non-empty", QNAME_NAME_REGEX_MSG]
    assert naming.qualified_name_errors("/a") == ["prefix part must be non-empty"]
    assert naming.qualified_name_errors("Example.com/a") == ["prefix part " + SUBDOMAIN_REGEX_MSG]
    assert naming.qualified_name_errors("a" * 64) == ["name part must be no more than 63 characters"]
    assert naming.qualified_name_errors("-a") == [QNAME_NAME_REGEX_MSG]
    assert naming.qualified_name_errors("a_") == [QNAME_NAME_REGEX_MSG]
    assert naming.qualified_name_errors("a b") == [QNAME_NAME_REGEX_MSG]
    assert naming.qualified_name_errors("a" * 254 + "/b") == [
        "prefix part must be no more than 253 characters"
    ]
    three = naming.qualified_name_errors("a/b/c")
    assert len(three) == 1
    assert three[0].startswith("a qualified name must consist of alphanumeric characters")
    assert three[0].endswith("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")


@pytest.mark.parametrize(
    "value",
    [
        "",
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "end-with-num-1",
        "1234",
        "a" * 63,
        "Uppercase_And.Dots",
        "my_value",
        "12345",
    ],
)
def test_label_value_valid(value: str) -> None:
    assert naming.label_value_errors(value) == []


def test_label_value_invalid() -> None:
    assert naming.label_value_errors("a" * 64) == ["must be no more than 63 characters"]
    assert naming.label_value_errors("-a" + "a" * 63) == [
        "must be no more than 63 characters",
        LABEL_VALUE_REGEX_MSG,
    ]
    for bad in [
        "nospecialchars%^=@",
        "Tama-nui-te-rā.is.Māori.sun",
        "\\backslashes\\are\\bad",
        "-starts-with-dash",
        "ends-with-dash-",
        ".starts.with.dot",
        "ends.with.dot.",
        "a/b",
        " ",
    ]:
        assert naming.label_value_errors(bad) == [LABEL_VALUE_REGEX_MSG], bad


def test_lengths_count_utf8_bytes_like_go() -> None:
    # 32 two-byte characters are 64 bytes: too long for Go's len() even though only 32 characters.
    assert naming.label_value_errors("é" * 32)[0] == "must be no more than 63 characters"
    assert naming.byte_length("é") == 2
    assert naming.byte_length("\ud800") == 3


def test_annotations_size() -> None:
    limit = naming.ANNOTATIONS_SIZE_LIMIT
    assert limit == 262144
    assert naming.annotations_size_errors({}) == []
    assert naming.annotations_size_errors({"k": "v" * (limit - 1)}) == []
    assert naming.annotations_size_errors({"k": "v" * limit}) == ["must have at most 262144 bytes"]
    # Keys count too, and the total is over all entries.
    assert naming.annotations_size_errors({"a" * 100: "v" * (limit - 100)}) == []
    assert naming.annotations_size_errors({"a" * 101: "v" * (limit - 100)}) != []
    half = limit // 2
    assert naming.annotations_size_errors({"a": "x" * half, "b": "y" * half}) != []
    assert naming.annotations_size_errors({"a": "x" * (half - 1), "b": "y" * (half - 1)}) == []
    # Bytes, not characters.
    assert naming.annotations_size_errors({"k": "é" * (limit // 2)}) != []


def test_generate_name_suffix() -> None:
    seen = {naming.generate_name_suffix() for _ in range(200)}
    assert all(re.fullmatch("[bcdfghjklmnpqrstvwxz2456789]{5}", suffix) for suffix in seen)
    assert len(seen) > 150  # random, not constant
    assert set("".join(seen)) == set(naming.GENERATE_NAME_ALPHABET)  # the whole alphabet is used
    assert naming.dns1123_label_errors("pod-" + naming.generate_name_suffix()) == []


# --------------------------------------------------------------------------- properties against plain models

_label_re = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_name_re = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_ALPHABET = "abcXYZ019-_./ é"


def _subdomain_ok(value: str) -> bool:
    return 0 < len(value.encode()) <= 253 and all(_label_re.fullmatch(part) for part in value.split("."))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=80))
def test_checks_agree_with_models(value: str) -> None:
    assert (naming.dns1123_subdomain_errors(value) == []) == _subdomain_ok(value)
    label_ok = len(value.encode()) <= 63 and _label_re.fullmatch(value) is not None
    assert (naming.dns1123_label_errors(value) == []) == label_ok
    # RFC 1035: an RFC 1123 label that starts with a letter.
    assert (naming.dns1035_label_errors(value) == []) == (label_ok and value[:1].isalpha())
    value_ok = value == "" or (len(value.encode()) <= 63 and _name_re.fullmatch(value) is not None)
    assert (naming.label_value_errors(value) == []) == value_ok
    parts = value.split("/")
    if len(parts) == 1:
        qname_ok = len(value.encode()) <= 63 and _name_re.fullmatch(value) is not None
    elif len(parts) == 2:
        qname_ok = (
            _subdomain_ok(parts[0]) and len(parts[1]) <= 63 and _name_re.fullmatch(parts[1]) is not None
        )
    else:
        qname_ok = False
    assert (naming.qualified_name_errors(value) == []) == qname_ok


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_checks_never_raise(value: str) -> None:
    for check in (
        naming.dns1123_subdomain_errors,
        naming.dns1123_label_errors,
        naming.dns1035_label_errors,
        naming.qualified_name_errors,
        naming.label_value_errors,
    ):
        result = check(value)
        assert isinstance(result, list)
        assert all(isinstance(message, str) and message for message in result)
