"""Typed decoding (``fieldValidation``): unknown and repeated fields, wrong types, integer ranges,
quantities, times and bytes, as Go's typed decoding of upstream's schemas answers them."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver import decoding
from kubeloop.apiserver.registry import validation
from kubeloop.errors import StatusCause
from tests.apiserver.registry.validation.objects import (
    CRD,
    DEPLOYMENT,
    LEASE,
    POD,
    PREFIX,
    REVISION,
    SECRET,
    container,
    decode,
    deployment,
    json_values,
    kind_rules,
)


def test_unknown_field_strict_lists_all_in_order() -> None:
    obj = deployment(foo=1, bar={"x": 1})
    with pytest.raises(decoding.StrictDecodingError) as info:
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
    with pytest.raises(decoding.StrictDecodingError) as info:
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
    with pytest.raises(decoding.StrictDecodingError) as info:
        decode(obj)
    assert len(info.value.errors) == 100


def test_duplicates_reported_in_strict_error() -> None:
    raw = (
        b'{"metadata":{"name":"a","name":"b"},"spec":{"foo":1,"replicas":1,'
        b'"selector":{"matchLabels":{"app":"a","app":"b"}}}}'
    )
    duplicates = decoding.find_duplicate_fields(raw)
    assert duplicates == ["metadata.name", "spec.selector.matchLabels.app"]
    with pytest.raises(decoding.StrictDecodingError) as info:
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
        assert not isinstance(info.value, decoding.StrictDecodingError)


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
