"""YAML answers (``yamlanswers``): what a YAML reader reads back is the JSON answer, for any JSON
value, and the text is what kube-apiserver's serializer writes (go-yaml's style): a string of
several lines a literal block when it can be one."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.http.yamlanswers import to_yaml

#: What JSON decodes to: any string (surrogates cannot be encoded), finite floats.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=["Cs"])),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(st.characters(blacklist_categories=["Cs"])), children, max_size=4),
    max_leaves=20,
)

#: Strings YAML readers would take for something else if they were written plain.
TRICKY = st.sampled_from([
    "", "yes", "No", "on", "OFF", "y", "n", "true", "null", "~", "1", "0o17", "0x1F", "1_000", "1:20",
    "1e3", ".inf", "-.NaN", "2026-11-30", "2026-11-30T10:00:00Z", "10.244.0.5", "<<", "=", "- a", "a: b",
    "a #b", "#a", "a:", ":a", "&a", "*a", "!a", "|", ">", "%a", "@a", "`a", "'a'", '"a"', "[a]", "{a}",
    " a", "a ", "a\nb", "\t", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\x00", "é", "日本", "😀",
    "a\n", "a\n\n", "a\n\nb\n\n\n", "\na", " a\nb", "a \nb", "a\n b", "a\tb\n\tc", "a\r\nb", "#a\n- b: c\n",
    "a\n\x85b", "a\n  \n", "|\n>",
])  # fmt: skip


@settings(max_examples=400)
@given(JSON_VALUES)
def test_a_yaml_reader_reads_back_every_json_value(value: Any) -> None:
    assert yaml.safe_load(to_yaml(value)) == value


@given(st.dictionaries(TRICKY, st.lists(TRICKY, max_size=3) | TRICKY, max_size=6))
def test_strings_that_would_read_as_something_else_are_quoted(value: dict[str, Any]) -> None:
    assert yaml.safe_load(to_yaml(value)) == value


def test_the_text_is_written_as_upstream_writes_it() -> None:
    """Keys sorted; a sequence in a mapping at the mapping's indent; empty ones as ``{}`` and
    ``[]``; strings plain unless they would read as something else, then double-quoted."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {}, "creationTimestamp": "2026-11-30T10:00:00Z"},
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.27", "args": ["-c", "echo hi\nbye"],
                            "ports": [{"containerPort": 80}], "env": []}],
            "hostNetwork": False,
        },
        "status": {"podIP": "10.244.0.5", "phase": "Running", "qosClass": None, "ratio": 0.5},
    }  # fmt: skip
    assert to_yaml(pod) == (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        '  creationTimestamp: "2026-11-30T10:00:00Z"\n'
        "  labels: {}\n"
        "  name: web\n"
        "spec:\n"
        "  containers:\n"
        "  - args:\n"
        '    - "-c"\n'
        "    - |-\n"
        "      echo hi\n"
        "      bye\n"
        "    env: []\n"
        "    image: nginx:1.27\n"
        "    name: web\n"
        "    ports:\n"
        "    - containerPort: 80\n"
        "  hostNetwork: false\n"
        "status:\n"
        '  phase: Running\n'
        '  podIP: "10.244.0.5"\n'
        "  qosClass: null\n"
        "  ratio: 0.5\n"
    )
    assert to_yaml([[1, [2]], {}]) == "- - 1\n  - - 2\n- {}\n"
    assert to_yaml({}) == "{}\n" and to_yaml("yes") == '"yes"\n'
    assert to_yaml({"a": "x\n", "b": "x\n\n", "c": "x \ny", "d": " x\ny"}) == (
        'a: |\n  x\nb: |+\n  x\n\nc: "x \\ny"\nd: " x\\ny"\n'
    )
