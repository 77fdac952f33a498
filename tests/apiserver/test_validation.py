"""Typed decoding (fieldValidation), metadata, required-field and kind-specific validation."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.api import naming
from kubeloop.api.naming import go_quote
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import BUILTIN_RESOURCES, ResourceType
from kubeloop.apiserver.registry import validation
from kubeloop.apiserver.registry.strategies import BuiltinStrategy, builtin_strategy
from kubeloop.errors import StatusCause


def strategy(group: str, kind: str) -> BuiltinStrategy:
    """The strategy the server serves a built-in kind with (a made-up kind gets the empty one)."""
    for resource in BUILTIN_RESOURCES:
        if resource.group == group and resource.kind == kind:
            return builtin_strategy(resource)
    return builtin_strategy(ResourceType(group, "v1", kind.lower() + "s", kind.lower(), kind, True))


def kind_rules(group: str, kind: str, obj: Mapping[str, Any]) -> list[StatusCause]:
    return strategy(group, kind).kind_rules(obj)


def validate_object(group: str, kind: str, obj: dict[str, Any]) -> list[StatusCause]:
    return strategy(group, kind).validate(obj)


def kind_schema(group: str, version: str, kind: str) -> Mapping[str, Any]:
    schema = schemas.kind_schema(group, version, kind)
    assert schema is not None, kind
    return schema


DEPLOYMENT = kind_schema("apps", "v1", "Deployment")
POD = kind_schema("", "v1", "Pod")
CONFIGMAP = kind_schema("", "v1", "ConfigMap")
SERVICE = kind_schema("", "v1", "Service")
LEASE = kind_schema("coordination.k8s.io", "v1", "Lease")
SECRET = kind_schema("", "v1", "Secret")
CRD = kind_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
REVISION = kind_schema("apps", "v1", "ControllerRevision")
PREFIX = 'Deployment in version "v1" cannot be handled as a Deployment: '


def deployment(**spec_overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                        }
                    ]
                },
            },
        },
    }
    obj["spec"].update(spec_overrides)
    return obj


def decode(obj: Any, mode: str = "Strict", schema: Any = None, kind: str = "Deployment", **kw: Any) -> Any:
    return validation.decode_against_schema(
        obj, schema or DEPLOYMENT, kind=kind, version="v1", mode=mode, **kw
    )


def container(obj: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return result


# ------------------------------------------------------------------ duplicate fields


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"metadata":{"name":"a","name":"b"}}', ["metadata.name"]),
        (b'{"a":{"b":[{"c":1},{"c":1,"c":2}]}}', ["a.b[1].c"]),
        (b'{"metadata":{"labels":{"x":"1","x":"2","x":"3"}}}', ["metadata.labels.x"]),
        (b'{"kind":"A","kind":"B","spec":{"x":1,"x":2}}', ["kind", "spec.x"]),
        (b'{"a":{"n\\u0061me":1,"name":2}}', ["a.name"]),  # keys compared after unescaping
        (b'{"metadata":{"name":"a"}}', []),
        (b"not json", []),
        (b"[1, 2]", []),
    ],
)
def test_find_duplicate_fields(raw: bytes, expected: list[str]) -> None:
    assert validation.find_duplicate_fields(raw) == expected


# ------------------------------------------------------------------ unknown fields


def test_unknown_field_strict_lists_all_in_order() -> None:
    obj = deployment(foo=1, bar={"x": 1})
    with pytest.raises(validation.StrictDecodingError) as info:
        decode(obj, "Strict")
    assert info.value.code == 400
    assert info.value.message == (
        PREFIX + 'strict decoding error: unknown field "spec.foo", unknown field "spec.bar"'
    )
    assert info.value.errors == ['unknown field "spec.foo"', 'unknown field "spec.bar"']


def test_unknown_field_warn_returns_warnings_and_prunes() -> None:
    obj = deployment(foo=1)
    pruned, warnings = decode(obj, "Warn")
    assert warnings == ['unknown field "spec.foo"']
    assert "foo" not in pruned["spec"]
    assert pruned["spec"]["replicas"] == 3
    assert obj["spec"]["foo"] == 1  # the input is not touched


def test_unknown_field_ignore_drops_silently() -> None:
    pruned, warnings = decode(deployment(foo=1), "Ignore")
    assert warnings == []
    assert "foo" not in pruned["spec"]


@pytest.mark.parametrize("mode", ["Strict", "strict", "Warn", "Ignore"])
def test_known_fields_are_kept_in_every_mode(mode: str) -> None:
    obj = deployment()
    pruned, warnings = decode(obj, mode)
    assert pruned == obj
    assert warnings == []


def test_nested_unknown_field_in_container_has_indexed_path() -> None:
    obj = deployment()
    container(obj)["foo"] = "x"
    container(obj)["ports"][0]["bogus"] = 1
    with pytest.raises(validation.StrictDecodingError) as info:
        decode(obj, "Strict")
    assert info.value.errors == [
        'unknown field "spec.template.spec.containers[0].ports[0].bogus"',
        'unknown field "spec.template.spec.containers[0].foo"',
    ]
    pruned, _ = decode(obj, "Ignore")
    assert "foo" not in container(pruned)
    assert container(pruned)["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_unknown_fields_under_map_values_use_dotted_keys() -> None:
    pod = {"spec": {"overhead": {"cpu": "1"}, "containers": [{"name": "a", "image": "b"}]}}
    pruned, _ = decode(pod, schema=POD, kind="Pod")
    assert pruned["spec"]["overhead"] == {"cpu": "1"}
    # Maps keep every key: labels are a map, not a struct.
    pruned, warnings = decode({"metadata": {"labels": {"anything": "x"}}}, "Warn")
    assert pruned["metadata"]["labels"] == {"anything": "x"} and warnings == []


def test_free_form_fields_are_kept_but_fieldless_structs_are_not() -> None:
    revision: dict[str, Any] = {"data": {"whatever": [1, {"deep": True}]}, "revision": 2}
    pruned, warnings = decode(revision, "Warn", schema=REVISION, kind="ControllerRevision")
    assert pruned["data"] == {"whatever": [1, {"deep": True}]} and warnings == []
    pruned["data"]["whatever"][1]["deep"] = False
    assert revision["data"]["whatever"][1]["deep"] is True  # a copy

    crd = {"spec": {"versions": [{"name": "v1", "subresources": {"status": {"foo": 1}}}]}}
    pruned, warnings = decode(crd, "Warn", schema=CRD, kind="CustomResourceDefinition")
    assert warnings == ['unknown field "spec.versions[0].subresources.status.foo"']
    assert pruned["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_strict_error_count_is_capped_at_100() -> None:
    obj = deployment(**{f"f{i}": i for i in range(150)})
    with pytest.raises(validation.StrictDecodingError) as info:
        decode(obj)
    assert len(info.value.errors) == 100


# ------------------------------------------------------------------ duplicates in decoding


def test_duplicates_reported_in_strict_error() -> None:
    raw = (
        b'{"metadata":{"name":"a","name":"b"},"spec":{"foo":1,"replicas":1,'
        b'"selector":{"matchLabels":{"app":"a","app":"b"}}}}'
    )
    duplicates = validation.find_duplicate_fields(raw)
    assert duplicates == ["metadata.name", "spec.selector.matchLabels.app"]
    with pytest.raises(validation.StrictDecodingError) as info:
        decode(orjson.loads(raw), "Strict", duplicates=duplicates)
    assert info.value.message == PREFIX + (
        'strict decoding error: duplicate field "metadata.name", unknown field "spec.foo", '
        'duplicate field "spec.selector.matchLabels.app"'
    )


def test_duplicates_warn_and_ignore() -> None:
    obj = {"metadata": {"name": "b"}}
    _, warnings = decode(obj, "Warn", duplicates=["metadata.name"])
    assert warnings == ['duplicate field "metadata.name"']
    assert decode(obj, "Ignore", duplicates=["metadata.name"])[1] == []
    # Duplicates inside values Go never decodes field by field are not reported.
    assert decode(obj, "Warn", duplicates=["spec.foo.bar"])[1] == []


# ------------------------------------------------------------------ wrong types


def go_field(struct: str, path: str, go_type: str, value: str) -> str:
    return PREFIX + f"json: cannot unmarshal {value} into Go struct field {struct}.{path} of type {go_type}"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda o: o["spec"].update(replicas="3"),
            go_field("DeploymentSpec", "spec.replicas", "int32", "string"),
        ),
        (
            lambda o: o["spec"].update(paused="yes"),
            go_field("DeploymentSpec", "spec.paused", "bool", "string"),
        ),
        (
            lambda o: container(o).update(name=5),
            go_field("Container", "spec.template.spec.containers.name", "string", "number"),
        ),
        (
            lambda o: o["spec"]["template"]["spec"].update(containers={"name": "x"}),
            go_field("PodSpec", "spec.template.spec.containers", "[]v1.Container", "object"),
        ),
        (
            lambda o: o["spec"]["template"]["spec"].update(containers=["x"]),
            go_field("PodSpec", "spec.template.spec.containers", "v1.Container", "string"),
        ),
        (
            lambda o: o["metadata"].update(labels={"app": 1}),
            go_field("ObjectMeta", "metadata.labels", "string", "number"),
        ),
        (
            lambda o: o["metadata"].update(labels=["app"]),
            go_field("ObjectMeta", "metadata.labels", "map[string]string", "array"),
        ),
        (
            lambda o: o.update(spec="x"),
            go_field("Deployment", "spec", "v1.DeploymentSpec", "string"),
        ),
        (
            lambda o: container(o).update(args=[True]),
            go_field("Container", "spec.template.spec.containers.args", "string", "bool"),
        ),
    ],
)
def test_wrong_type_messages(mutate: Any, message: str) -> None:
    obj = deployment()
    mutate(obj)
    for mode in ("Strict", "Warn", "Ignore"):
        with pytest.raises(errors.BadRequest) as info:
            decode(obj, mode)
        assert info.value.message == message
        assert not isinstance(info.value, validation.StrictDecodingError)


def test_root_must_be_an_object() -> None:
    with pytest.raises(errors.BadRequest) as info:
        decode([1, 2])
    assert info.value.message == PREFIX + "json: cannot unmarshal array into Go value of type v1.Deployment"


def test_type_error_wins_over_unknown_fields() -> None:
    with pytest.raises(errors.BadRequest) as info:
        decode(deployment(foo=1, replicas="x"), "Strict")
    assert "cannot unmarshal string" in info.value.message
    assert "strict decoding error" not in info.value.message


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (2**31 - 1, True),
        (-(2**31), True),
        (2**31, False),
        (-(2**31) - 1, False),
        (3.0, True),
        (1.5, False),
        (True, False),
    ],
)
def test_int32_range(value: Any, ok: bool) -> None:
    obj = deployment(replicas=value)
    if ok:
        pruned, _ = decode(obj)
        assert pruned["spec"]["replicas"] == value and type(pruned["spec"]["replicas"]) is int
    else:
        with pytest.raises(errors.BadRequest) as info:
            decode(obj)
        shown = "bool" if value is True else f"number {value}"
        assert info.value.message == go_field("DeploymentSpec", "spec.replicas", "int32", shown)


def test_int64_range() -> None:
    pod = {"spec": {"activeDeadlineSeconds": 2**40, "containers": []}}
    assert decode(pod, schema=POD, kind="Pod")[0]["spec"]["activeDeadlineSeconds"] == 2**40
    pod["spec"]["activeDeadlineSeconds"] = 2**63
    with pytest.raises(errors.BadRequest) as info:
        decode(pod, schema=POD, kind="Pod")
    assert info.value.message == (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number '
        f"{2**63} into Go struct field PodSpec.spec.activeDeadlineSeconds of type int64"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("25%", "25%"), (1, 1), (0, 0), (2.0, 2)],
)
def test_int_or_string_accepts_both(value: Any, expected: Any) -> None:
    obj = deployment()
    obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = value
    pruned, _ = decode(obj)
    assert pruned["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "bool"), ({"a": 1}, "object"), ([1], "array"), (2**31, f"number {2**31}"), (1.5, "number 1.5")],
)
def test_int_or_string_rejects_others(value: Any, shown: str) -> None:
    obj = deployment()
    obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = value
    with pytest.raises(errors.BadRequest) as info:
        decode(obj)
    assert info.value.message == go_field(
        "RollingUpdateDeployment", "spec.strategy.rollingUpdate.maxSurge", "int32", shown
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("500m", "500m"), ("1Gi", "1Gi"), (" 2 ", "2"), (1, "1"), (0.5, "0.5"), ("1e3", "1e3"), ("0", "0")],
)
def test_quantity_accepts_strings_and_numbers(value: Any, expected: str) -> None:
    obj = deployment()
    container(obj)["resources"]["limits"]["cpu"] = value
    pruned, _ = decode(obj)
    assert container(pruned)["resources"]["limits"]["cpu"] == expected


QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1x", QUANTITY_FORMAT),
        ("", QUANTITY_FORMAT),
        (True, QUANTITY_FORMAT),
        ({"a": 1}, QUANTITY_FORMAT),
        ("1mm", "unable to parse quantity's suffix"),
        ("5Ki5", "unable to parse quantity's suffix"),
    ],
)
def test_quantity_rejects_garbage(value: Any, message: str) -> None:
    obj = deployment()
    container(obj)["resources"]["limits"]["cpu"] = value
    with pytest.raises(errors.BadRequest) as info:
        decode(obj)
    assert info.value.message == PREFIX + message


def test_null_optional_field_is_dropped_and_null_elements_become_zero_values() -> None:
    obj = deployment(replicas=None, paused=None)
    obj["metadata"]["labels"] = {"app": None}
    container(obj)["args"] = ["a", None]
    pruned, warnings = decode(obj)
    assert "replicas" not in pruned["spec"] and "paused" not in pruned["spec"]
    assert pruned["metadata"]["labels"] == {"app": ""}
    assert container(pruned)["args"] == ["a", ""]
    assert warnings == []
    assert decode(None)[0] == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00Z"),
        ("2024-05-01T10:00:00.123Z", "2024-05-01T10:00:00Z"),
    ],
)
def test_time_fields_are_parsed_and_normalised(value: str, expected: str) -> None:
    obj = deployment()
    obj["metadata"]["creationTimestamp"] = value
    assert decode(obj)[0]["metadata"]["creationTimestamp"] == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "yesterday",
            'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"',
        ),
        ("2024-13-01T00:00:00Z", 'parsing time "2024-13-01T00:00:00Z": month out of range'),
        ("2023-02-29T00:00:00Z", 'parsing time "2023-02-29T00:00:00Z": day out of range'),
        (
            "2024-05-01 10:00:00Z",
            'parsing time "2024-05-01 10:00:00Z" as "2006-01-02T15:04:05Z07:00": '
            'cannot parse " 10:00:00Z" as "T"',
        ),
        ("2024-05-01T10:00:00Zjunk", 'parsing time "2024-05-01T10:00:00Zjunk": extra text: "junk"'),
        (
            12,
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp "
            "of type string",
        ),
    ],
)
def test_time_fields_reject_garbage(value: Any, message: str) -> None:
    obj = deployment()
    obj["metadata"]["creationTimestamp"] = value
    with pytest.raises(errors.BadRequest) as info:
        decode(obj)
    assert info.value.message == PREFIX + message


def test_micro_time_needs_microseconds() -> None:
    lease = {"spec": {"holderIdentity": "me", "renewTime": "2024-05-01T10:00:00.123456+01:00"}}
    pruned, _ = decode(lease, schema=LEASE, kind="Lease")
    assert pruned["spec"]["renewTime"] == "2024-05-01T09:00:00.123456Z"
    lease["spec"]["renewTime"] = "2024-05-01T10:00:00Z"
    with pytest.raises(errors.BadRequest) as info:
        decode(lease, schema=LEASE, kind="Lease")
    assert info.value.message == (
        'Lease in version "v1" cannot be handled as a Lease: parsing time "2024-05-01T10:00:00Z" as '
        '"2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"'
    )


@pytest.mark.parametrize(
    ("value", "result"),
    [
        ("aGVsbG8=", "aGVsbG8="),
        ("aGVs\nbG8=", "aGVsbG8="),
        ("", ""),
        ("aGVsbG8", 4),
        ("aGV!bG8=", 3),
        ("a===", 1),
        ("aGVsbG8=x", 8),
    ],
)
def test_bytes_fields_are_base64(value: str, result: Any) -> None:
    secret = {"data": {"k": value}}
    if isinstance(result, str):
        assert decode(secret, schema=SECRET, kind="Secret")[0]["data"]["k"] == result
    else:
        with pytest.raises(errors.BadRequest) as info:
            decode(secret, schema=SECRET, kind="Secret")
        assert info.value.message == (
            f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte {result}'
        )


def test_bytes_fields_accept_a_number_array_like_go() -> None:
    assert decode({"data": {"k": [104, 105]}}, schema=SECRET, kind="Secret")[0]["data"]["k"] == "aGk="
    with pytest.raises(errors.BadRequest) as info:
        decode({"data": {"k": [104, 300]}}, schema=SECRET, kind="Secret")
    assert info.value.message.endswith(
        "json: cannot unmarshal number 300 into Go struct field Secret.data of type uint8"
    )


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(errors.BadRequest):
        decode(deployment(), "Loose")


# ------------------------------------------------------------------ property: only APIErrors

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "labels",
                    "annotations",
                    "replicas",
                    "selector",
                    "matchLabels",
                    "template",
                    "spec",
                    "containers",
                    "image",
                    "ports",
                    "containerPort",
                    "resources",
                    "limits",
                    "strategy",
                    "rollingUpdate",
                    "maxSurge",
                    "creationTimestamp",
                    "ownerReferences",
                    "managedFields",
                    "fieldsV1",
                    "env",
                    "value",
                    "valueFrom",
                    "volumes",
                    "x",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    metadata=json_values,
    spec=json_values,
    mode=st.sampled_from(["Strict", "Warn", "Ignore"]),
    duplicates=st.lists(st.sampled_from(["metadata.name", "spec.replicas", "spec.x", "x"]), max_size=2),
)
def test_decode_only_raises_api_errors(metadata: Any, spec: Any, mode: str, duplicates: list[str]) -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}
    before = copy.deepcopy(obj)
    try:
        pruned, warnings = decode(obj, mode, duplicates=duplicates)
    except errors.APIError as error:
        assert error.code == 400
    else:
        assert isinstance(pruned, dict)
        assert all(isinstance(w, str) for w in warnings)
        for cause in (
            validation.validate_required(pruned, DEPLOYMENT)
            + kind_rules("apps", "Deployment", pruned)
            + validation.validate_object_meta(pruned, namespaced=True)
        ):
            assert isinstance(cause, StatusCause)
    assert obj == before


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
def test_find_duplicate_fields_never_raises(raw: bytes) -> None:
    assert isinstance(validation.find_duplicate_fields(raw), list)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c.d", "é"]), json_values), max_size=6))
def test_find_duplicate_fields_reports_each_repeated_key_once(pairs: list[tuple[str, Any]]) -> None:
    raw = ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs) + "}").encode()
    keys = [k for k, _ in pairs]
    expected = [k for k in dict.fromkeys(keys) if keys.count(k) > 1]
    assert validation.find_duplicate_fields(raw) == expected


_KEYS = st.sampled_from(["a", "b", 'q":', "\\", "é", 'x\\":'])
_NESTED = st.recursive(
    st.none() | st.integers() | st.sampled_from(["", '":', 'a":"b', "\\"]),
    lambda inner: st.lists(inner, max_size=3) | st.lists(st.tuples(_KEYS, inner), max_size=4),
    max_leaves=12,
)


def _render(value: Any, spaced: bool) -> str:
    """JSON text of ``value``, where a list of (key, value) pairs is an object written with its
    repeated keys (and a space before colons when ``spaced``)."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        colon = " :" if spaced else ":"
        return "{" + ",".join(f"{json.dumps(k)}{colon}{_render(v, spaced)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_render(v, spaced) for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_KEYS, _NESTED), max_size=5), st.booleans())
def test_find_duplicate_fields_answers_alike_with_the_decoded_body(
    pairs: list[tuple[str, Any]], spaced: bool
) -> None:
    """The shortcut from orjson's reading (a key count) finds what the full parse finds, with
    keys and values holding quotes, colons and backslashes, and with spaces before colons."""
    raw = _render(pairs, spaced).encode() if pairs else b"{}"
    assert validation.find_duplicate_fields(raw, orjson.loads(raw)) == validation.find_duplicate_fields(raw)


# ------------------------------------------------------------------ object metadata


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


# ------------------------------------------------------------------ required fields


@pytest.mark.parametrize(
    ("schema", "obj", "fields"),
    [
        (POD, {"spec": {"containers": [{"image": "x"}]}}, ["spec.containers[0].name"]),
        (POD, {"spec": {"containers": [{"name": "", "image": "x"}]}}, ["spec.containers[0].name"]),
        (POD, {"spec": {}}, ["spec.containers"]),
        (POD, {"spec": {"containers": []}}, ["spec.containers"]),
        (
            POD,
            {"spec": {"containers": [{"name": "a", "env": [{"value": "1"}], "ports": [{"name": "p"}]}]}},
            ["spec.containers[0].env[0].name", "spec.containers[0].ports[0].containerPort"],
        ),
        (
            DEPLOYMENT,
            {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
            ["spec.template.spec.containers[0].name"],
        ),
        (SERVICE, {"spec": {"ports": [{"name": "http"}]}}, ["spec.ports[0].port"]),
        (POD, {"spec": {"containers": [{"name": "a"}]}, "status": {"conditions": [{}]}}, []),
        (CONFIGMAP, {"data": {"a": "b"}}, []),
        (LEASE, {"spec": {}}, []),
    ],
)
def test_validate_required(schema: Any, obj: dict[str, Any], fields: list[str]) -> None:
    causes = validation.validate_required(obj, schema)
    assert sorted(c.field for c in causes) == sorted(fields)
    assert all(c == StatusCause("FieldValueRequired", "Required value", c.field) for c in causes)


# ------------------------------------------------------------------ kind rules


def rules(group: str, kind: str, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c.type, c.field, c.message) for c in kind_rules(group, kind, obj)]


MISMATCH = "`selector` does not match template `labels`"


def test_valid_deployment_passes_every_rule() -> None:
    obj = deployment()
    assert validate_object("apps", "Deployment", obj) == []


def test_selector_mismatch() -> None:
    obj = deployment(selector={"matchLabels": {"app": "other"}})
    assert rules("apps", "Deployment", obj) == [
        ("FieldValueInvalid", "spec.template.metadata.labels", 'Invalid value: {"app":"web"}: ' + MISMATCH)
    ]
    error = errors.invalid("apps", "Deployment", "web", kind_rules("apps", "Deployment", obj))
    assert error.code == 422
    assert error.message == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: {"app":"web"}: '
        + MISMATCH
    )


def test_match_expressions_are_evaluated() -> None:
    expr = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
    assert rules("apps", "Deployment", deployment(selector=expr)) == []
    expr = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}
    assert [r[1] for r in rules("apps", "Deployment", deployment(selector=expr))] == [
        "spec.template.metadata.labels"
    ]


def test_missing_selector_and_negative_replicas() -> None:
    obj = deployment(replicas=-1)
    del obj["spec"]["selector"]
    assert rules("apps", "Deployment", obj) == [
        ("FieldValueInvalid", "spec.replicas", "Invalid value: -1: must be greater than or equal to 0"),
        ("FieldValueRequired", "spec.selector", "Required value"),
        ("FieldValueInvalid", "spec.template.metadata.labels", 'Invalid value: {"app":"web"}: ' + MISMATCH),
    ]


def test_empty_and_invalid_selectors() -> None:
    assert rules("apps", "Deployment", deployment(selector={})) == [
        ("FieldValueInvalid", "spec.selector", "Invalid value: {}: empty selector is invalid for deployment")
    ]
    bad = {"matchExpressions": [{"key": "app", "operator": "Near"}]}
    assert rules("apps", "Deployment", deployment(selector=bad)) == [
        (
            "FieldValueInvalid",
            "spec.selector.matchExpressions[0].operator",
            'Invalid value: "Near": not a valid selector operator',
        ),
        (
            "FieldValueInvalid",
            "spec.selector",
            'Invalid value: {"matchExpressions":[{"key":"app","operator":"Near"}]}: invalid label selector',
        ),
    ]


def test_selector_requirement_without_operator_is_reported_once() -> None:
    obj = deployment(selector={"matchExpressions": [{"key": "app", "values": ["web"]}]})
    causes = validate_object("apps", "Deployment", obj)
    assert [(c.type, c.field) for c in causes] == [
        ("FieldValueInvalid", "spec.selector"),  # invalid label selector
        ("FieldValueRequired", "spec.selector.matchExpressions[0].operator"),
    ]


def test_daemonset_selector_is_not_required_but_must_match() -> None:
    obj = deployment()
    del obj["spec"]["selector"]
    del obj["spec"]["strategy"]
    daemon_set, stateful_set = copy.deepcopy(obj), copy.deepcopy(obj)
    strategy("apps", "DaemonSet").default(daemon_set)  # as the server does before its rules
    strategy("apps", "StatefulSet").default(stateful_set)
    assert rules("apps", "DaemonSet", daemon_set) == [
        ("FieldValueInvalid", "spec.template.metadata.labels", 'Invalid value: {"app":"web"}: ' + MISMATCH)
    ]
    assert rules("apps", "StatefulSet", stateful_set)[0] == (
        "FieldValueRequired",
        "spec.selector",
        "Required value",
    )


_PERCENT_ERROR = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
_DS_ROLLING = "spec.updateStrategy.rollingUpdate"


@pytest.mark.parametrize(
    ("update_strategy", "expected"),
    [
        (None, []),  # defaulted: RollingUpdate, maxUnavailable 1, maxSurge 0
        ({"type": "RollingUpdate"}, []),  # its rollingUpdate is defaulted field by field
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%"}},
            [
                (
                    f"{_DS_ROLLING}.maxSurge",
                    'Invalid value: "100%": may not be set when maxUnavailable is non-zero',
                )
            ],
        ),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}}, []),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "0%", "maxSurge": 0}},
            [(f"{_DS_ROLLING}.maxUnavailable", "Required value: cannot be 0 when maxSurge is 0")],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "101%", "maxSurge": -1}},
            [
                (f"{_DS_ROLLING}.maxSurge", "Invalid value: -1: must be greater than or equal to 0"),
                (f"{_DS_ROLLING}.maxUnavailable", 'Invalid value: "101%": must not be greater than 100%'),
                (
                    f"{_DS_ROLLING}.maxSurge",
                    "Invalid value: -1: may not be set when maxUnavailable is non-zero",
                ),
            ],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "many", "maxSurge": 0}},
            [
                (f"{_DS_ROLLING}.maxUnavailable", f'Invalid value: "many": {_PERCENT_ERROR}'),
                (f"{_DS_ROLLING}.maxUnavailable", "Required value: cannot be 0 when maxSurge is 0"),
            ],
        ),
        ({"type": "OnDelete"}, []),
        (
            {"type": "Gradual"},
            [
                (
                    "spec.updateStrategy",
                    'Unsupported value: {"Type":"Gradual","RollingUpdate":null}: '
                    'supported values: "RollingUpdate", "OnDelete"',
                )
            ],
        ),
    ],
)
def test_daemonset_update_strategies(update_strategy: Any, expected: list[tuple[str, str]]) -> None:
    """``ValidateDaemonSetUpdateStrategy`` after ``SetDefaults_DaemonSet``: exactly one of
    maxUnavailable and maxSurge is non-zero, each an int or a percent up to 100%."""
    assert update_strategy_causes("DaemonSet", update_strategy) == expected


def update_strategy_causes(kind: str, update_strategy: Any) -> list[tuple[str, str]]:
    """The rules' causes for a workload of ``kind`` with ``update_strategy``, defaulted first."""
    obj = deployment()
    del obj["spec"]["strategy"]
    if update_strategy is not None:
        obj["spec"]["updateStrategy"] = update_strategy
    strategy("apps", kind).default(obj)
    return [(c.field, c.message) for c in kind_rules("apps", kind, obj)]


def test_daemonset_and_statefulset_spec_limits() -> None:
    obj = deployment()
    del obj["spec"]["strategy"]
    obj["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 30
    obj["spec"]["revisionHistoryLimit"] = -1
    obj["spec"]["templateGeneration"] = -2
    daemon_set = copy.deepcopy(obj)
    strategy("apps", "DaemonSet").default(daemon_set)
    assert [(c.field, c.message) for c in kind_rules("apps", "DaemonSet", daemon_set)] == [
        (
            "spec.template.spec.activeDeadlineSeconds",
            "Forbidden: activeDeadlineSeconds in DaemonSet is not Supported",
        ),
        ("spec.templateGeneration", "Invalid value: -2: must be greater than or equal to 0"),
        ("spec.revisionHistoryLimit", "Invalid value: -1: must be greater than or equal to 0"),
    ]
    stateful_set = copy.deepcopy(obj)
    stateful_set["spec"]["ordinals"] = {"start": -1}
    stateful_set["spec"]["podManagementPolicy"] = "AllAtOnce"
    stateful_set["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": -3}}
    strategy("apps", "StatefulSet").default(stateful_set)
    assert [(c.field, c.message) for c in kind_rules("apps", "StatefulSet", stateful_set)] == [
        ("spec.podManagementPolicy", "Invalid value: \"AllAtOnce\": must be 'OrderedReady' or 'Parallel'"),
        (
            "spec.updateStrategy.rollingUpdate.partition",
            "Invalid value: -3: must be greater than or equal to 0",
        ),
        ("spec.ordinals.start", "Invalid value: -1: must be greater than or equal to 0"),
        (
            "spec.template.spec.activeDeadlineSeconds",
            "Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
        ),
    ]


@pytest.mark.parametrize(
    ("update_strategy", "expected"),
    [
        (None, []),  # defaulted: RollingUpdate with partition 0
        ({"type": "RollingUpdate"}, []),  # a given type gets no rollingUpdate, and needs none
        ({"type": "OnDelete"}, []),
        (
            {"type": "OnDelete", "rollingUpdate": {"partition": 2}},
            [
                (
                    "spec.updateStrategy.rollingUpdate",
                    'Invalid value: {"Partition":2,"MaxUnavailable":null}: '
                    "only allowed for updateStrategy 'RollingUpdate'",
                )
            ],
        ),
        (
            {"type": "Canary"},
            [
                (
                    "spec.updateStrategy",
                    'Invalid value: {"Type":"Canary","RollingUpdate":null}: must be \'RollingUpdate\' or \'OnDelete\'',
                )
            ],
        ),
    ],
)
def test_statefulset_update_strategies(update_strategy: Any, expected: list[tuple[str, str]]) -> None:
    """``ValidateStatefulSetSpec``'s update strategy after ``SetDefaults_StatefulSet``."""
    assert update_strategy_causes("StatefulSet", update_strategy) == expected


def test_template_restart_policy_and_labels() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    obj["spec"]["template"]["metadata"]["labels"]["bad key"] = "x"
    causes = rules("apps", "ReplicaSet", obj)
    assert causes == [
        (
            "FieldValueInvalid",
            "spec.template.labels",
            f'Invalid value: "bad key": {naming.qualified_name_errors("bad key")[0]}',
        ),
        (
            "FieldValueNotSupported",
            "spec.template.spec.restartPolicy",
            'Unsupported value: "Never": supported values: "Always"',
        ),
    ]


def test_pod_containers() -> None:
    assert rules("", "Pod", {"metadata": {"name": "p"}}) == [
        ("FieldValueRequired", "spec.containers", "Required value")
    ]
    pod = {
        "spec": {
            "containers": [{"name": "Web", "image": "x"}, {"name": "a", "image": "x"}, {"name": "a"}],
            "initContainers": [{"name": "a", "image": "x"}],
        }
    }
    assert rules("", "Pod", pod) == [
        (
            "FieldValueInvalid",
            "spec.containers[0].name",
            f'Invalid value: "Web": {naming.dns1123_label_errors("Web")[0]}',
        ),
        # 1.33's validateContainers: the container's own rules, then the duplicate name.
        ("FieldValueRequired", "spec.containers[2].image", "Required value"),
        ("FieldValueDuplicate", "spec.containers[2].name", 'Duplicate value: "a"'),
        ("FieldValueDuplicate", "spec.initContainers[0].name", 'Duplicate value: "a"'),
    ]


POD_SPEC_CASES = [
    (
        {"env": [{"name": "A=B", "value": "1"}, {"name": "OK.name-1", "value": "2"}]},
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].env[0].name",
                'Invalid value: "A=B": a valid environment variable name must consist only of printable'
                " ASCII characters other than '='",
            )
        ],
    ),
    (
        {"env": [{"name": "X", "valueFrom": {}}, {"name": "Y", "value": "v", "valueFrom": {"fieldRef": {}}}]},
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].env[0].valueFrom",
                'Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`'
                " or `secretKeyRef`",
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].env[1].valueFrom",
                'Invalid value: "": may not be specified when `value` is not empty',
            ),
        ],
    ),
    (
        {"env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a/b"}, "fieldRef": {}}}]},
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].env[0].valueFrom.secretKeyRef.key",
                'Invalid value: "a/b": ' + validation.core.config_key_errors("a/b")[0],
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].env[0].valueFrom",
                'Invalid value: "": may not have more than one field specified at a time',
            ),
        ],
    ),
    (
        {"envFrom": [{"prefix": "P_"}, {"configMapRef": {"name": "c"}, "secretRef": {"name": "s"}}]},
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].envFrom",
                'Invalid value: "": must specify one of: `configMapRef` or `secretRef`',
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].envFrom",
                'Invalid value: "": may not have more than one field specified at a time',
            ),
        ],
    ),
    (
        {
            "ports": [
                {"name": "http", "containerPort": 70000},
                {"name": "http", "containerPort": 81, "hostPort": 65536},
                {"name": "Bad_Name--", "containerPort": 82, "protocol": "ICMP"},
            ]
        },
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].ports[0].containerPort",
                "Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            ("FieldValueDuplicate", "spec.containers[0].ports[1].name", 'Duplicate value: "http"'),
            (
                "FieldValueInvalid",
                "spec.containers[0].ports[1].hostPort",
                "Invalid value: 65536: must be between 1 and 65535, inclusive",
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].ports[2].name",
                'Invalid value: "Bad_Name--": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].ports[2].name",
                'Invalid value: "Bad_Name--": must not contain consecutive hyphens',
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].ports[2].name",
                'Invalid value: "Bad_Name--": must not begin or end with a hyphen',
            ),
            (
                "FieldValueNotSupported",
                "spec.containers[0].ports[2].protocol",
                'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"',
            ),
        ],
    ),
    (
        {
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/app"},
                {"name": "missing", "mountPath": "/etc/app"},
                {"name": "both", "mountPath": "/b"},
                {"name": "config", "mountPath": "/c", "subPath": "../up"},
            ]
        },
        [
            {"name": "config", "configMap": {"name": "app", "defaultMode": 1000}},
            {"name": "both", "emptyDir": {}, "configMap": {"name": "x"}},
            {"name": "Config", "secret": {"secretName": "s"}},
            {"name": "none"},
            {"name": "config2", "configMap": {"name": "c", "items": [{"key": "k", "path": "/abs"}]}},
        ],
        [
            (
                "FieldValueInvalid",
                "spec.volumes[0].configMap.defaultMode",
                "Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
            ),
            (
                "FieldValueForbidden",
                "spec.volumes[1].configMap",
                "Forbidden: may not specify more than 1 volume type",
            ),
            (
                "FieldValueInvalid",
                "spec.volumes[2].name",
                f'Invalid value: "Config": {naming.dns1123_label_errors("Config")[0]}',
            ),
            ("FieldValueRequired", "spec.volumes[3]", "Required value: must specify a volume type"),
            (
                "FieldValueInvalid",
                "spec.volumes[4].configMap.items[0].path",
                'Invalid value: "/abs": must be a relative path',
            ),
            ("FieldValueNotFound", "spec.containers[0].volumeMounts[0].name", 'Not found: "config"'),
            ("FieldValueNotFound", "spec.containers[0].volumeMounts[1].name", 'Not found: "missing"'),
            (
                "FieldValueInvalid",
                "spec.containers[0].volumeMounts[1].mountPath",
                'Invalid value: "/etc/app": must be unique',
            ),
            ("FieldValueNotFound", "spec.containers[0].volumeMounts[2].name", 'Not found: "both"'),
            ("FieldValueNotFound", "spec.containers[0].volumeMounts[3].name", 'Not found: "config"'),
            (
                "FieldValueInvalid",
                "spec.containers[0].volumeMounts.subPath",
                "Invalid value: \"../up\": must not contain '..'",
            ),
        ],
    ),
    (
        {
            "resources": {
                "requests": {"cpu": "2", "memory": "64Mi"},
                "limits": {"cpu": "1500m", "memory": "1Gi"},
            }
        },
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].resources.requests",
                'Invalid value: "2": must be less than or equal to cpu limit of 1500m',
            )
        ],
    ),
    ({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}, [], []),
]


@pytest.mark.parametrize(("container", "volumes", "expected"), POD_SPEC_CASES)
def test_pod_spec_rules_as_upstream(
    container: dict[str, Any], volumes: list[dict[str, Any]], expected: list[tuple[str, str, str]]
) -> None:
    """ValidatePodSpec's container and volume rules, with upstream's paths, messages and order (a
    volume with an error of its own is not one mounts may name: upstream leaves it out too)."""
    pod = {"spec": {"containers": [{"name": "app", "image": "x", **container}], "volumes": volumes}}
    assert rules("", "Pod", pod) == expected


def test_pod_template_of_a_deployment_without_spec() -> None:
    obj = deployment()
    del obj["spec"]["template"]["spec"]
    assert rules("apps", "Deployment", obj) == [
        ("FieldValueRequired", "spec.template.spec.containers", "Required value")
    ]


def test_validate_object_reports_containers_once() -> None:
    obj = {"metadata": {"name": "p", "namespace": "d"}, "spec": {}}
    assert validate_object("", "Pod", obj) == [
        StatusCause("FieldValueRequired", "Required value", "spec.containers")
    ]
    del obj["spec"]
    assert validate_object("", "Pod", obj) == [
        StatusCause("FieldValueRequired", "Required value", "spec.containers")
    ]


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([{"port": 80}], []),
        ([{"port": 65535}], []),
        (
            [{"port": 70000}],
            [("spec.ports[0].port", "Invalid value: 70000: must be between 1 and 65535, inclusive")],
        ),
        ([{"port": 0}], [("spec.ports[0].port", "Invalid value: 0: must be between 1 and 65535, inclusive")]),
        (
            [{"port": 80, "targetPort": 70000}],
            [("spec.ports[0].targetPort", "Invalid value: 70000: must be between 1 and 65535, inclusive")],
        ),
        ([{"port": 80, "targetPort": "http"}], []),
        ([{"name": "a", "port": 80}, {"port": 81}], [("spec.ports[1].name", "Required value")]),
        (
            [{"name": "a", "port": 80}, {"name": "a", "port": 81}],
            [("spec.ports[1].name", 'Duplicate value: "a"')],
        ),
        (
            [{"port": 80, "protocol": "HTTP"}],
            [("spec.ports[0].protocol", 'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"')],
        ),
    ],
)
def test_service_ports(ports: list[dict[str, Any]], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("", "Service", {"spec": {"ports": ports}})
    assert [(c.field, c.message) for c in causes] == expected


CONFIG_KEY = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"data": {"app.conf": "x", "KEY_1": "y", "a-b": ""}}, []),
        ({"data": {"bad key": "x"}}, [("data[bad key]", f'Invalid value: "bad key": {CONFIG_KEY}')]),
        ({"data": {"..x": "x"}}, [("data[..x]", "Invalid value: \"..x\": must not start with '..'")]),
        ({"binaryData": {"a/b": "eA=="}}, [("binaryData[a/b]", f'Invalid value: "a/b": {CONFIG_KEY}')]),
        (
            {"data": {"a": "x"}, "binaryData": {"a": "eA=="}},
            [("data[a]", 'Invalid value: "a": duplicate of key present in binaryData')],
        ),
        ({"data": {"a": "x" * (1024 * 1024)}}, []),
        (
            {"data": {"a": "x" * (1024 * 1024), "b": "y"}},
            [("", "Too long: may not be more than 1048576 bytes")],
        ),
    ],
)
def test_configmap_keys_and_size(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("", "ConfigMap", obj)
    assert [(c.field, c.message) for c in causes] == expected


def test_secret_keys_and_size() -> None:
    assert kind_rules("", "Secret", {"data": {"ok": "eA=="}, "stringData": {"ok2": "x"}}) == []
    [cause] = kind_rules("", "Secret", {"stringData": {"no way": "x"}})
    assert (cause.field, cause.message) == ("data[no way]", f'Invalid value: "no way": {CONFIG_KEY}')
    big = "A" * (4 * 350 * 1024)  # decodes to 1,075,200 bytes
    [cause] = kind_rules("", "Secret", {"data": {"k": big}})
    assert (cause.type, cause.field) == ("FieldValueTooLong", "data")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"leaseDurationSeconds": 15, "leaseTransitions": 0}, []),
        ({}, []),
        (
            {"leaseDurationSeconds": 0},
            [("spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0")],
        ),
        (
            {"leaseDurationSeconds": -5},
            [("spec.leaseDurationSeconds", "Invalid value: -5: must be greater than 0")],
        ),
        (
            {"leaseTransitions": -1},
            [("spec.leaseTransitions", "Invalid value: -1: must be greater than or equal to 0")],
        ),
    ],
)
def test_lease_rules(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("coordination.k8s.io", "Lease", {"spec": spec})
    assert [(c.field, c.message) for c in causes] == expected


RBAC = "rbac.authorization.k8s.io"
_VERBS_REQUIRED = "Required value: verbs must contain at least one value"


@pytest.mark.parametrize(
    ("kind", "rules", "expected"),
    [
        ("Role", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], []),
        ("ClusterRole", [{"nonResourceURLs": ["/healthz", "/api/*"], "verbs": ["get"]}], []),
        (
            "Role",
            [{"resources": ["pods"]}],
            [
                ("rules[0].verbs", _VERBS_REQUIRED),
                ("rules[0].apiGroups", "Required value: resource rules must supply at least one api group"),
            ],
        ),
        (
            "Role",
            [{"apiGroups": ["apps"], "verbs": ["*"]}],
            [("rules[0].resources", "Required value: resource rules must supply at least one resource")],
        ),
        (
            "Role",
            [{"nonResourceURLs": ["/x"], "verbs": ["get"]}],
            [
                (
                    "rules[0].nonResourceURLs",
                    'Invalid value: ["/x"]: namespaced rules cannot apply to non-resource URLs',
                )
            ],
        ),
        (
            "ClusterRole",
            [{"nonResourceURLs": ["/x"], "resources": ["pods"], "verbs": ["get"]}],
            [
                (
                    "rules[0].nonResourceURLs",
                    'Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs',
                )
            ],
        ),
    ],
)
def test_policy_rules(kind: str, rules: list[dict[str, Any]], expected: list[tuple[str, str]]) -> None:
    meta = {"name": "r", "namespace": "a"} if kind == "Role" else {"name": "r"}
    causes = validate_object(RBAC, kind, {"metadata": meta, "rules": rules})
    assert [(c.field, c.message) for c in causes] == expected


def test_aggregation_rule_needs_a_valid_selector() -> None:
    role = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": []}}
    assert [(c.field, c.message) for c in validate_object(RBAC, "ClusterRole", role)] == [
        (
            "aggregationRule.clusterRoleSelectors",
            "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
        )
    ]
    role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"bad key!": "x"}}]}
    assert [c.field for c in validate_object(RBAC, "ClusterRole", role)] == [
        "aggregationRule.clusterRoleSelectors[0].matchLabels"
    ]


def _binding(kind: str, ref: dict[str, Any], subjects: list[dict[str, Any]]) -> dict[str, Any]:
    meta = {"name": "b", "namespace": "a"} if kind == "RoleBinding" else {"name": "b"}
    binding = {"metadata": meta, "roleRef": ref, "subjects": subjects}
    strategy(RBAC, kind).default(binding)
    return binding


def test_bindings_default_the_rbac_group_for_the_role_users_and_groups() -> None:
    binding = _binding(
        "RoleBinding",
        {"kind": "Role", "name": "r"},
        [
            {"kind": "User", "name": "u"},
            {"kind": "Group", "name": "g"},
            {"kind": "ServiceAccount", "name": "s"},
        ],
    )
    assert binding["roleRef"]["apiGroup"] == RBAC
    assert [s.get("apiGroup") for s in binding["subjects"]] == [RBAC, RBAC, None]
    assert validate_object(RBAC, "RoleBinding", binding) == []


@pytest.mark.parametrize(
    ("kind", "ref", "subjects", "expected"),
    [
        (
            "ClusterRoleBinding",
            {"kind": "Role", "name": "r"},
            [{"kind": "ServiceAccount", "name": "s"}],
            [
                ("roleRef.kind", 'Unsupported value: "Role": supported values: "ClusterRole"'),
                ("subjects[0].namespace", "Required value"),
            ],
        ),
        (
            "RoleBinding",
            {"apiGroup": "example.com", "kind": "Thing", "name": "a/b"},
            [],
            [
                (
                    "roleRef.apiGroup",
                    'Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"',
                ),
                ("roleRef.kind", 'Unsupported value: "Thing": supported values: "Role", "ClusterRole"'),
                ("roleRef.name", "Invalid value: \"a/b\": may not contain '/'"),
            ],
        ),
        (
            "RoleBinding",
            {"kind": "ClusterRole", "name": "view"},
            [
                {"kind": "Robot", "name": "r2"},
                {"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "x"},
                {"kind": "User", "name": "", "apiGroup": "x"},
            ],
            [
                (
                    "subjects[0].kind",
                    'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
                ),
                (
                    "subjects[1].name",
                    'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
                    "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                    "(e.g. 'example.com', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ),
                ("subjects[1].apiGroup", 'Unsupported value: "x": supported values: ""'),
                ("subjects[2].name", "Required value"),
                (
                    "subjects[2].apiGroup",
                    'Unsupported value: "x": supported values: "rbac.authorization.k8s.io"',
                ),
            ],
        ),
    ],
)
def test_binding_rules(
    kind: str, ref: dict[str, Any], subjects: list[dict[str, Any]], expected: list[tuple[str, str]]
) -> None:
    causes = validate_object(RBAC, kind, _binding(kind, ref, subjects))
    assert [(c.field, c.message) for c in causes] == expected


def test_a_bindings_role_ref_cannot_change() -> None:
    old = _binding("RoleBinding", {"kind": "Role", "name": "r"}, [])
    new = copy.deepcopy(old)
    assert strategy(RBAC, "RoleBinding").validate_write(new, old) == []
    new["roleRef"]["name"] = "other"
    assert [(c.field, c.message) for c in strategy(RBAC, "RoleBinding").validate_write(new, old)] == [
        (
            "roleRef",
            'Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"other"}: '
            "cannot change roleRef",
        )
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}, []),
        ({"maxUnavailable": "100%", "unhealthyPodEvictionPolicy": "AlwaysAllow"}, []),
        ({"minAvailable": "0%"}, []),
        (
            {"minAvailable": "50%", "maxUnavailable": 1, "selector": {"matchLabels": {"b": "2", "a": "1"}}},
            [
                (
                    "spec",
                    'Invalid value: {"MinAvailable":"50%","Selector":{"matchLabels":{"a":"1","b":"2"}},'
                    '"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: '
                    "minAvailable and maxUnavailable cannot be both set",
                )
            ],
        ),
        (
            {"minAvailable": "101%"},
            [("spec.minAvailable", 'Invalid value: "101%": must not be greater than 100%')],
        ),
        ({"maxUnavailable": "half"}, [("spec.maxUnavailable", f'Invalid value: "half": {_PERCENT_ERROR}')]),
        (
            {"maxUnavailable": -2},
            [("spec.maxUnavailable", "Invalid value: -2: must be greater than or equal to 0")],
        ),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}},
            [
                (
                    "spec.selector.matchExpressions[0].values",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            ],
        ),
        # Thousands of digits are still a percent, and above 100 (not an overflow).
        (
            {"minAvailable": "9" * 5000 + "%"},
            [("spec.minAvailable", f'Invalid value: "{"9" * 5000}%": must not be greater than 100%')],
        ),
        ({"minAvailable": "0000000100%"}, []),
        (
            {"unhealthyPodEvictionPolicy": "Never"},
            [
                (
                    "spec.unhealthyPodEvictionPolicy",
                    'Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"',
                )
            ],
        ),
    ],
)
def test_pod_disruption_budget_rules(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("policy", "PodDisruptionBudget", {"spec": spec})
    assert [(c.field, c.message) for c in causes] == expected


_ROLLING = "spec.strategy.rollingUpdate"


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "300%", "maxUnavailable": "100%"}}, []),
        ({"type": "Recreate"}, []),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}},
            [(f"{_ROLLING}.maxUnavailable", 'Invalid value: "0%": may not be 0 when `maxSurge` is 0')],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "a lot", "maxUnavailable": "101%"}},
            [
                (f"{_ROLLING}.maxSurge", f'Invalid value: "a lot": {_PERCENT_ERROR}'),
                (f"{_ROLLING}.maxUnavailable", 'Invalid value: "101%": must not be greater than 100%'),
            ],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": -1, "maxUnavailable": 1}},
            [(f"{_ROLLING}.maxSurge", "Invalid value: -1: must be greater than or equal to 0")],
        ),
        (
            {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
            [(_ROLLING, "Forbidden: may not be specified when strategy `type` is 'Recreate'")],
        ),
        (
            {"type": "Gradual"},
            [
                (
                    "spec.strategy",
                    'Unsupported value: {"Type":"Gradual","RollingUpdate":null}: '
                    'supported values: "Recreate", "RollingUpdate"',
                )
            ],
        ),
    ],
)
def test_deployment_strategies(strategy: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("apps", "Deployment", deployment(strategy=strategy))
    assert [(c.field, c.message) for c in causes] == expected


def update_causes(group: str, kind: str, old: dict[str, Any], change: Any) -> list[tuple[str, str]]:
    """The causes of replacing ``old`` by a copy that ``change`` edits (both defaulted)."""
    kind_strategy = strategy(group, kind)
    kind_strategy.default(old)
    new = copy.deepcopy(old)
    change(new)
    kind_strategy.default(new)
    return [(c.field, c.message) for c in kind_strategy.validate_write(new, old)]


def test_apps_selectors_are_set_once() -> None:
    def relabel(obj: dict[str, Any]) -> None:
        obj["spec"]["selector"] = {"matchLabels": {"app": "other"}}
        obj["spec"]["template"]["metadata"]["labels"] = {"app": "other"}

    expected = [("spec.selector", 'Invalid value: {"matchLabels":{"app":"other"}}: field is immutable')]
    for kind in ("Deployment", "ReplicaSet", "DaemonSet"):
        assert update_causes("apps", kind, deployment(), relabel) == expected, kind
    # Everything else in the spec may change.
    assert update_causes("apps", "Deployment", deployment(), lambda d: d["spec"].update(replicas=5)) == []


def test_stateful_sets_change_only_upstreams_list_of_fields() -> None:
    stateful_set = deployment()
    stateful_set["spec"]["serviceName"] = "web"
    assert update_causes("apps", "StatefulSet", stateful_set, lambda s: s["spec"].update(replicas=4)) == []
    forbidden = update_causes(
        "apps", "StatefulSet", stateful_set, lambda s: s["spec"].update(serviceName="db")
    )
    assert forbidden == [
        (
            "spec",
            "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
            "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
            "are forbidden",
        )
    ]


def job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "a"},
        "spec": {
            "template": {
                "metadata": {"labels": {"run": "j"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
            **spec,
        },
    }


def test_a_jobs_template_and_policies_are_fixed() -> None:
    def new_image(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "alpine"

    causes = update_causes("batch", "Job", job(), new_image)
    assert [field for field, _ in causes] == ["spec.template"]
    assert causes[0][1].endswith(": field is immutable") and '"image":"alpine"' in causes[0][1]
    assert update_causes("batch", "Job", job(), lambda j: j["spec"].update(completions=3)) == [
        ("spec.completions", "Invalid value: 3: field is immutable")
    ]
    assert update_causes("batch", "Job", job(), lambda j: j["spec"].update(completionMode="Indexed")) == [
        ("spec.completionMode", 'Invalid value: "Indexed": field is immutable')
    ]
    # Parallelism, suspension and the backoff limit may change.
    assert update_causes("batch", "Job", job(), lambda j: j["spec"].update(parallelism=3, suspend=True)) == []


def test_a_suspended_job_that_never_started_may_move_its_pods() -> None:
    def reschedule(obj: dict[str, Any]) -> None:
        pod = obj["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"zone": "b"}
        pod["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        obj["spec"]["template"]["metadata"]["annotations"] = {"queue": "high"}

    assert update_causes("batch", "Job", job(suspend=True), reschedule) == []
    started = job(suspend=True)
    started["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    assert [field for field, _ in update_causes("batch", "Job", started, reschedule)] == ["spec.template"]
    assert [field for field, _ in update_causes("batch", "Job", job(), reschedule)] == ["spec.template"]


def test_an_indexed_jobs_completions_change_with_its_parallelism() -> None:
    indexed = job(completionMode="Indexed", completions=2, parallelism=2)
    assert (
        update_causes("batch", "Job", indexed, lambda j: j["spec"].update(completions=4, parallelism=4)) == []
    )
    assert update_causes("batch", "Job", indexed, lambda j: j["spec"].update(completions=4)) == [
        ("spec.completions", "Invalid value: 4: can only be modified in tandem with spec.parallelism")
    ]


_WHEN_IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"


def test_immutable_config_maps_and_secrets_keep_their_data() -> None:
    config = {"metadata": {"name": "c", "namespace": "a"}, "data": {"k": "v"}, "immutable": True}
    assert update_causes("", "ConfigMap", config, lambda c: c["metadata"].update(labels={"x": "y"})) == []
    assert update_causes("", "ConfigMap", config, lambda c: c.update(data={"k": "w"}, immutable=False)) == [
        ("immutable", _WHEN_IMMUTABLE),
        ("data", _WHEN_IMMUTABLE),
    ]
    mutable = {"metadata": {"name": "c", "namespace": "a"}, "data": {"k": "v"}}
    assert update_causes("", "ConfigMap", mutable, lambda c: c.update(data={}, immutable=True)) == []
    secret = {"metadata": {"name": "s", "namespace": "a"}, "data": {"k": "dg=="}, "immutable": True}
    assert update_causes("", "Secret", secret, lambda s: s.update(stringData={"k": "w"})) == [
        ("data", _WHEN_IMMUTABLE)
    ]
    assert update_causes("", "Secret", secret, lambda s: s.update(type="kubernetes.io/tls")) == [
        ("type", 'Invalid value: "kubernetes.io/tls": field is immutable')
    ]


def test_unlisted_kinds_have_no_rules() -> None:
    assert kind_rules("example.com", "Widget", {"spec": {"replicas": -1}}) == []


# ------------------------------------------------------------------ formatting and speed


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


@pytest.mark.parametrize(
    ("group", "kind", "obj", "required"),
    [
        # A kubelet registers its CSINode before any driver; a LimitRange may list no limits.
        ("storage.k8s.io", "CSINode", {"metadata": {"name": "n"}, "spec": {"drivers": []}}, []),
        ("storage.k8s.io", "CSINode", {"metadata": {"name": "n"}, "spec": {}}, []),
        ("", "LimitRange", {"metadata": {"name": "l", "namespace": "a"}, "spec": {"limits": []}}, []),
        # Lists upstream asks an item of stay required.
        (
            "",
            "Pod",
            {"metadata": {"name": "p", "namespace": "a"}, "spec": {"containers": []}},
            ["spec.containers"],
        ),
        (
            "rbac.authorization.k8s.io",
            "Role",
            {
                "metadata": {"name": "r", "namespace": "a"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}],
            },
            ["rules[0].verbs"],
        ),
    ],
)
def test_empty_required_lists_are_missing_unless_upstream_accepts_them(
    group: str, kind: str, obj: dict[str, Any], required: list[str]
) -> None:
    causes = strategy(group, kind).validate(obj)
    assert [c.field for c in causes if c.type == validation.causes.REQUIRED] == required
