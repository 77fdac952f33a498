"""ObjectMeta validation, and the name rule each kind declares."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.api import naming
from kubeloop.api.naming import go_quote
from kubeloop.apiserver.registry import validation
from kubeloop.errors import StatusCause
from tests.apiserver.registry.validation.objects import strategy


def meta_causes(
    metadata: dict[str, Any], *, namespaced: bool = True, name_rule: str = "subdomain"
) -> list[StatusCause]:
    return validation.validate_object_meta({"metadata": metadata}, namespaced=namespaced, name_rule=name_rule)


def invalid(field: str, value: str, message: str) -> StatusCause:
    return StatusCause("FieldValueInvalid", f"Invalid value: {go_quote(value)}: {message}", field)


def test_valid_metadata_has_no_causes() -> None:
    metadata = {
        "name": "web-1.example",
        "namespace": "default",
        "labels": {"app.kubernetes.io/name": "web", "tier": ""},
        "annotations": {"Example.com/Note": "x"},
        "finalizers": ["example.com/cleanup", "kubernetes"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}],
    }
    assert meta_causes(metadata) == []


def test_name_with_capitals() -> None:
    [cause] = meta_causes({"name": "Foo_bar", "namespace": "default"})
    assert cause == invalid("metadata.name", "Foo_bar", naming.dns1123_subdomain_errors("Foo_bar")[0])
    assert cause.message.startswith(
        'Invalid value: "Foo_bar": a lowercase RFC 1123 subdomain must consist of'
    )


def test_name_required_and_label_rule() -> None:
    assert meta_causes({"namespace": "default"}) == [
        StatusCause("FieldValueRequired", "Required value: name or generateName is required", "metadata.name")
    ]
    assert meta_causes({"name": "a.b"}, namespaced=False) == []
    [cause] = meta_causes({"name": "a.b"}, namespaced=False, name_rule="label")
    assert cause == invalid("metadata.name", "a.b", naming.dns1123_label_errors("a.b")[0])


def test_generate_name_prefix_may_end_with_dash() -> None:
    assert meta_causes({"name": "web-x1", "generateName": "web-", "namespace": "d"}) == []
    [cause] = meta_causes({"name": "web-x1", "generateName": "Web-", "namespace": "d"})
    assert cause.field == "metadata.generateName"


@pytest.mark.parametrize(
    ("metadata", "field", "value", "message_of"),
    [
        ({"labels": {"app": "x" * 64}}, "metadata.labels", "x" * 64, naming.label_value_errors),
        ({"labels": {"bad key!": "v"}}, "metadata.labels", "bad key!", naming.qualified_name_errors),
        (
            {"annotations": {"bad/key/x": "v"}},
            "metadata.annotations",
            "bad/key/x",
            naming.qualified_name_errors,
        ),
        ({"finalizers": ["no good"]}, "metadata.finalizers", "no good", naming.qualified_name_errors),
    ],
)
def test_metadata_key_and_value_rules(
    metadata: dict[str, Any], field: str, value: str, message_of: Any
) -> None:
    causes = meta_causes({"name": "ok", "namespace": "default", **metadata})
    assert causes == [invalid(field, value, msg) for msg in message_of(value)]
    assert causes


def test_annotations_total_size() -> None:
    causes = meta_causes({"name": "ok", "namespace": "d", "annotations": {"big": "x" * (256 * 1024)}})
    assert causes == [
        StatusCause(
            "FieldValueTooLong", "Too long: may not be more than 262144 bytes", "metadata.annotations"
        )
    ]


def test_namespace_rules() -> None:
    assert meta_causes({"name": "n", "namespace": "default"}, namespaced=False) == [
        StatusCause("FieldValueForbidden", "Forbidden: not allowed on this type", "metadata.namespace")
    ]
    assert meta_causes({"name": "n"}) == [
        StatusCause("FieldValueRequired", "Required value", "metadata.namespace")
    ]
    [cause] = meta_causes({"name": "n", "namespace": "Bad_NS"})
    assert cause.field == "metadata.namespace" and cause.type == "FieldValueInvalid"


def test_owner_references() -> None:
    causes = meta_causes({"name": "n", "namespace": "d", "ownerReferences": [{"apiVersion": "a/b/c"}]})
    assert causes == [
        invalid("metadata.ownerReferences[0].apiVersion", "a/b/c", "must be <group>/<version> or <version>"),
        StatusCause(
            "FieldValueRequired", "Required value: must not be empty", "metadata.ownerReferences[0].kind"
        ),
        StatusCause(
            "FieldValueRequired", "Required value: must not be empty", "metadata.ownerReferences[0].name"
        ),
        StatusCause(
            "FieldValueRequired", "Required value: must not be empty", "metadata.ownerReferences[0].uid"
        ),
    ]
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": True}
    causes = meta_causes({"name": "n", "namespace": "d", "ownerReferences": [owner, {**owner, "name": "b"}]})
    assert [c.message.split(": ")[-1] for c in causes] == [
        'Only one reference can have Controller set to true. Found "true" in references for ConfigMap/a and '
        "ConfigMap/b"
    ]


def test_finalizer_conflict_and_generation() -> None:
    causes = meta_causes(
        {"name": "n", "namespace": "d", "generation": -1, "finalizers": ["orphan", "foregroundDeletion"]}
    )
    assert [c.field for c in causes] == ["metadata.generation", "metadata.finalizers"]
    assert causes[0].message == "Invalid value: -1: must be greater than or equal to 0"
    assert causes[1].message.endswith("finalizer orphan and foregroundDeletion cannot be both set")


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("a", '"a"'),
        ('a"b', '"a\\"b"'),
        ("a\nb", '"a\\nb"'),
        ("\x01", '"\\x01"'),
        ("é", '"é"'),
        ("\u200b", '"\\u200b"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("group", "kind", "name", "rejected"),
    [
        ("", "Namespace", "a.b", True),  # an RFC 1123 label: no dots
        ("", "Service", "1abc", True),  # an RFC 1035 label: starts with a letter
        ("apps", "StatefulSet", "a.b", True),
        ("apps", "Deployment", "a.b", False),  # a subdomain
        ("", "ConfigMap", "a.b", False),
    ],
)
def test_each_kind_checks_names_by_its_declared_rule(
    group: str, kind: str, name: str, rejected: bool
) -> None:
    causes = strategy(group, kind).validate({"metadata": {"name": name, "namespace": "ns"}})
    assert any(c.field == "metadata.name" for c in causes) is rejected
