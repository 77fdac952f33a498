"""Objects, schemas and helpers the validation tests share: the strategy the server serves a kind
with, a valid Deployment to break, decoding against a kind's schema, and the causes of a write."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups import builtin_resources, builtin_strategy
from kubeloop.apiserver.registry.strategies import BuiltinStrategy
from kubeloop.errors import StatusCause


def strategy(group: str, kind: str) -> BuiltinStrategy:
    """The strategy the server serves a built-in kind with (a made-up kind gets the empty one)."""
    for resource in builtin_resources():
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
    return decoding.decode_against_schema(
        obj, schema or DEPLOYMENT, kind=kind, version="v1", mode=mode, **kw
    )


def container(obj: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return result


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


def rules(group: str, kind: str, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c.type, c.field, c.message) for c in kind_rules(group, kind, obj)]


MISMATCH = "`selector` does not match template `labels`"


def update_causes(group: str, kind: str, old: dict[str, Any], change: Any) -> list[tuple[str, str]]:
    """The causes of replacing ``old`` by a copy that ``change`` edits (both defaulted)."""
    kind_strategy = strategy(group, kind)
    kind_strategy.default(old)
    new = copy.deepcopy(old)
    change(new)
    kind_strategy.default(new)
    return [(c.field, c.message) for c in kind_strategy.validate_write(new, old)]


PERCENT_ERROR = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
