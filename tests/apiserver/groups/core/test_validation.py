"""core: pods and pod templates, Services, ConfigMaps and Secrets."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.api import naming
from kubeloop.apiserver.groups.core import validation as core_validation
from kubeloop.errors import StatusCause
from tests.apiserver.registry.validation.objects import (
    deployment,
    kind_rules,
    rules,
    update_causes,
    validate_object,
)


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
                'Invalid value: "a/b": ' + core_validation.config_key_errors("a/b")[0],
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
            "envFrom": [
                {"prefix": "A=", "secretRef": {"name": "Chat_Bridge"}},
                {"configMapRef": {"name": "ok.example"}},
            ]
        },
        [],
        [
            (
                "FieldValueInvalid",
                "spec.containers[0].envFrom[0].prefix",
                'Invalid value: "A=": a valid environment variable name must consist only of printable ASCII '
                "characters other than '='",
            ),
            (
                "FieldValueInvalid",
                "spec.containers[0].envFrom[0].secretRef.name",
                'Invalid value: "Chat_Bridge": a lowercase RFC 1123 subdomain must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
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


def test_configmap_keys_judged_again_are_judged_alike() -> None:
    """Valid keys are remembered, invalid ones never: each write of the same keys is judged as
    the first was."""
    for _ in range(3):
        assert kind_rules("", "ConfigMap", {"data": {"size": "1", "color": "blue"}}) == []
        causes = kind_rules("", "ConfigMap", {"data": {"size": "1", "no way": "x"}, "binaryData": {"..b": "eA=="}})
        assert [c.field for c in causes] == ["data[no way]", "binaryData[..b]"]


def test_secret_keys_and_size() -> None:
    assert kind_rules("", "Secret", {"data": {"ok": "eA=="}, "stringData": {"ok2": "x"}}) == []
    [cause] = kind_rules("", "Secret", {"stringData": {"no way": "x"}})
    assert (cause.field, cause.message) == ("data[no way]", f'Invalid value: "no way": {CONFIG_KEY}')
    big = "A" * (4 * 350 * 1024)  # decodes to 1,075,200 bytes
    [cause] = kind_rules("", "Secret", {"data": {"k": big}})
    assert (cause.type, cause.field) == ("FieldValueTooLong", "data")


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
