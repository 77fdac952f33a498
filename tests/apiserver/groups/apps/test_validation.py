"""apps: Deployments, ReplicaSets, StatefulSets and DaemonSets — selectors against templates,
update strategies, spec limits and what may change."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeloop import errors
from kubeloop.api import naming
from tests.apiserver.registry.validation.objects import (
    MISMATCH,
    PERCENT_ERROR,
    deployment,
    kind_rules,
    rules,
    strategy,
    update_causes,
    validate_object,
)


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
                (f"{_DS_ROLLING}.maxUnavailable", f'Invalid value: "many": {PERCENT_ERROR}'),
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
                (f"{_ROLLING}.maxSurge", f'Invalid value: "a lot": {PERCENT_ERROR}'),
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
