"""Kubernetes name and metadata syntax checks (apimachinery ``pkg/util/validation``).

Every check returns the list of human-readable problems in upstream's wording (as of
Kubernetes 1.34); an empty list means the value is valid. Lengths are counted the way Go's
``len`` counts them: in UTF-8 bytes.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping

__all__ = [
    "ANNOTATIONS_SIZE_LIMIT",
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "GENERATE_NAME_ALPHABET",
    "GENERATE_NAME_SUFFIX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "annotations_size_errors",
    "byte_length",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "empty_error",
    "generate_name_suffix",
    "label_value_errors",
    "max_len_error",
    "qualified_name_errors",
    "regex_error",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
#: Total bytes of annotation keys plus values an object may carry (256 KiB).
ANNOTATIONS_SIZE_LIMIT = 256 * 1024

#: Upstream's ``rand.String`` alphabet: no vowels, no look-alike characters.
GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATE_NAME_SUFFIX_LENGTH = 5

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_QNAME_CHAR_FMT = "[A-Za-z0-9]"
_QNAME_EXT_CHAR_FMT = "[-A-Za-z0-9_.]"
_QUALIFIED_NAME_FMT = "(" + _QNAME_CHAR_FMT + _QNAME_EXT_CHAR_FMT + "*)?" + _QNAME_CHAR_FMT
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)


def byte_length(value: str) -> int:
    """Go's ``len(s)``: the UTF-8 length (lone surrogates count as the 3 bytes they'd encode to)."""
    if value.isascii():
        return len(value)
    return len(value.encode("utf-8", "surrogatepass"))


def max_len_error(length: int) -> str:
    """``validation.MaxLenError``."""
    return f"must be no more than {length} characters"


def empty_error() -> str:
    """``validation.EmptyError``."""
    return "must be non-empty"


def regex_error(message: str, regex: str, *examples: str) -> str:
    """``validation.RegexError``: the message, some examples and the regex it was checked against."""
    if not examples:
        return f"{message} (regex used for validation is '{regex}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{regex}')"


def _matches(pattern: re.Pattern[str], value: str) -> bool:
    return pattern.fullmatch(value) is not None


def dns1123_label_errors(value: str) -> list[str]:
    """``IsDNS1123Label``: at most 63 characters of ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``."""
    errs: list[str] = []
    if byte_length(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _matches(_DNS1123_LABEL_RE, value):
        if _matches(_DNS1123_SUBDOMAIN_RE, value):
            # A valid subdomain but not a valid label: the length was checked, so it is the dots.
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1035_label_errors(value: str) -> list[str]:
    """``IsDNS1035Label`` (Service names): at most 63 characters of ``[a-z]([-a-z0-9]*[a-z0-9])?``."""
    errs: list[str] = []
    if byte_length(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _matches(_DNS1035_LABEL_RE, value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: at most 253 characters, dot-separated RFC 1123 labels."""
    errs: list[str] = []
    if byte_length(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _matches(_DNS1123_SUBDOMAIN_RE, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def path_segment_errors(value: str) -> list[str]:
    """IsValidPathSegmentName: the names of RBAC objects (``system:basic-user``) and the like."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{part}'" for part in ("/", "%") if part in value]


def port_name_errors(value: str) -> list[str]:
    """``IsValidPortName`` (an IANA_SVC_NAME): a container's or a Service's named port."""
    found = []
    if len(value) > 15:
        found.append("must be no more than 15 characters")
    if not re.fullmatch(r"[-a-z0-9]+", value):
        found.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", value):
        found.append("must contain at least one letter (a-z)")
    if "--" in value:
        found.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        found.append("must not begin or end with a hyphen")
    return found


def qualified_name_errors(value: str) -> list[str]:
    """``IsQualifiedName``: label and annotation keys, ``[prefix/]name``.

    The optional prefix is a DNS subdomain; the name is at most 63 characters, alphanumeric at
    both ends with ``-``, ``_`` and ``.`` allowed inside.
    """
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + msg for msg in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif byte_length(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not _matches(_QUALIFIED_NAME_RE, name):
        errs.append(
            "name part "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    """``IsValidLabelValue``: empty, or at most 63 characters shaped like a qualified name."""
    errs: list[str] = []
    if byte_length(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _matches(_LABEL_VALUE_RE, value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def annotations_size_errors(annotations: Mapping[str, str]) -> list[str]:
    """``ValidateAnnotationsSize``: keys plus values may not exceed 256 KiB in total."""
    total = 0
    for key, value in annotations.items():
        total += byte_length(key) + byte_length(value)
    if total > ANNOTATIONS_SIZE_LIMIT:
        return [f"must have at most {ANNOTATIONS_SIZE_LIMIT} bytes"]
    return []


def generate_name_suffix() -> str:
    """The random part ``metadata.generateName`` gets: 5 characters from upstream's alphabet."""
    return "".join(secrets.choice(GENERATE_NAME_ALPHABET) for _ in range(GENERATE_NAME_SUFFIX_LENGTH))


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """``strconv.Quote``: how Go's ``%q`` renders a string in messages."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if ch in _GO_ESCAPES:
                out.append(_GO_ESCAPES[ch])
            elif code < 0x20 or code == 0x7F:
                out.append(f"\\x{code:02x}")
            elif 0xD800 <= code <= 0xDFFF:
                out.append("\ufffd")  # Go's JSON decoder turns lone surrogates into U+FFFD
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)
