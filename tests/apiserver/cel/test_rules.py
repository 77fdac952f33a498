"""CEL validation rules (x-kubernetes-validations) of custom resources: compiled when the CRD is
written (a bad rule makes the CRD invalid), evaluated on every write with upstream's messages,
reasons and field paths; transition rules (oldSelf) on updates, optionalOldSelf on creates;
messageExpression; Kubernetes' CEL libraries; the cost limit. Over HTTP and with kubectl."""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

import pytest

from tests.apiserver.schemas import map_list
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread

MERGE = "application/merge-patch+json"

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [
        {
            "rule": "self.minReplicas <= self.maxReplicas",
            "message": "minReplicas cannot be larger than maxReplicas",
        },
        {
            "rule": "self.maxReplicas >= oldSelf.maxReplicas",
            "messageExpression": "'maxReplicas may not shrink below ' + string(oldSelf.maxReplicas)",
        },
        {
            "rule": "!has(self.image) || self.image.contains(':')",
            "fieldPath": ".image",
            "reason": "FieldValueRequired",
            "message": "a tag is needed",
        },
    ],
    "properties": {
        "minReplicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "image": {"type": "string"},
        "mode": {
            "type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "mode is immutable"}],
        },
        "tags": {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.isSorted()", "reason": "FieldValueForbidden"}],
        },
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "port": {
                        "type": "integer",
                        "x-kubernetes-validations": [
                            {"rule": "self >= oldSelf", "message": "ports only go up"}
                        ],
                    },
                },
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": {
                "type": "string",
                "x-kubernetes-validations": [
                    {"rule": "isQuantity(self) && quantity(self).isLessThan(quantity('8Gi'))"}
                ],
            },
        },
        "level": {
            "type": "integer",
            "x-kubernetes-validations": [
                {
                    "rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
                    "optionalOldSelf": True,
                    "message": "level only rises",
                },
                {
                    "rule": "oldSelf.hasValue() || self == 0",
                    "optionalOldSelf": True,
                    "message": "level starts at 0",
                },
            ],
        },
        "endpoint": {
            "type": "string",
            "x-kubernetes-validations": [
                {"rule": "isURL(self) && url(self).getScheme() == 'https'", "message": "an https URL"}
            ],
        },
        "items": {
            "type": "array",
            "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y || x != y))"}],
        },
        "settings": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-validations": [{"rule": "self.required > 0"}],
        },
    },
}


def crd(group: str, spec_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"scalers.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "scalers", "kind": "Scaler"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec_schema or SPEC_SCHEMA},
                            "x-kubernetes-validations": [
                                {
                                    "rule": "self.metadata.name.startsWith('s')",
                                    "message": "names start with s",
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def group(api: Client, namespace: str) -> str:
    group = f"{namespace}.cel.example.com"
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group))
    assert response.status_code == 201, response.text
    return group


def scaler(group: str, name: str = "s1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Scaler",
        "metadata": {"name": name},
        "spec": {"minReplicas": 1, "maxReplicas": 3, **spec},
    }


def causes(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["reason"] == "Invalid"
    return {c["field"]: f"{c['reason']}: {c['message']}" for c in body["details"]["causes"]}


def test_rules_reject_with_their_message_reason_and_field(api: Client, namespace: str, group: str) -> None:
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    bad = scaler(
        group, "x1", minReplicas=5, image="nginx", tags=["b", "a"], limits={"memory": "16Gi", "cpu": "1"}
    )
    bad["spec"]["endpoint"] = "http://example.com"
    bad["spec"]["settings"] = {"required": 0}
    got = causes(api.post(path, bad))
    assert got == {
        "<root>": 'FieldValueInvalid: Invalid value: "object": names start with s',
        "spec": 'FieldValueInvalid: Invalid value: "object": minReplicas cannot be larger than maxReplicas',
        "spec.image": "FieldValueRequired: Required value: a tag is needed",
        "spec.tags": "FieldValueForbidden: Forbidden: failed rule: self.isSorted()",
        "spec.limits.memory": (
            'FieldValueInvalid: Invalid value: "string": failed rule: '
            "isQuantity(self) && quantity(self).isLessThan(quantity('8Gi'))"
        ),
        "spec.endpoint": 'FieldValueInvalid: Invalid value: "string": an https URL',
        "spec.settings": 'FieldValueInvalid: Invalid value: "object": failed rule: self.required > 0',
    }
    # Nothing was written.
    assert api.get(f"{path}/x1").status_code == 404


def test_a_valid_object_passes_and_evaluation_errors_are_causes(
    api: Client, namespace: str, group: str
) -> None:
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    good = scaler(
        group, image="nginx:1", tags=["a", "b"], limits={"memory": "512Mi"}, endpoint="https://x.io/a"
    )
    good["spec"]["settings"] = {"required": 2, "free": "form"}
    response = api.post(path, good)
    assert response.status_code == 201, response.text
    missing = scaler(group, "s2")
    missing["spec"]["settings"] = {"other": 1}
    assert causes(api.post(path, missing)) == {
        "spec.settings": 'FieldValueInvalid: Invalid value: "object": no such key: required evaluating rule: self.required > 0'
    }


def test_transition_rules_judge_updates_against_the_old_values(
    api: Client, namespace: str, group: str
) -> None:
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    first = scaler(group, maxReplicas=5, mode="fast", ports=[{"name": "http", "port": 80}])
    assert api.post(path, first).status_code == 201  # oldSelf rules do not run on create
    got = causes(api.patch(f"{path}/s1", {"spec": {"maxReplicas": 4, "mode": "slow"}}, MERGE))
    assert got == {
        "spec": 'FieldValueInvalid: Invalid value: "object": maxReplicas may not shrink below 5',
        "spec.mode": 'FieldValueInvalid: Invalid value: "string": mode is immutable',
    }
    # Items of a map list are correlated by key: a lower port on the same name is refused,
    # a new name has no old self to be judged against.
    lower = {"spec": {"ports": [{"name": "http", "port": 79}, {"name": "admin", "port": 1}]}}
    assert causes(api.patch(f"{path}/s1", lower, MERGE)) == {
        "spec.ports[0].port": 'FieldValueInvalid: Invalid value: "integer": ports only go up'
    }
    higher = {
        "spec": {"maxReplicas": 6, "ports": [{"name": "http", "port": 81}, {"name": "admin", "port": 1}]}
    }
    response = api.patch(f"{path}/s1", higher, MERGE)
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["maxReplicas"] == 6


def test_optional_old_self_rules_judge_creates_too(api: Client, namespace: str, group: str) -> None:
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    assert causes(api.post(path, scaler(group, level=3))) == {
        "spec.level": 'FieldValueInvalid: Invalid value: "integer": level starts at 0'
    }
    assert api.post(path, scaler(group, level=0)).status_code == 201
    assert api.patch(f"{path}/s1", {"spec": {"level": 2}}, MERGE).status_code == 200
    assert causes(api.patch(f"{path}/s1", {"spec": {"level": 1}}, MERGE)) == {
        "spec.level": 'FieldValueInvalid: Invalid value: "integer": level only rises'
    }


def test_a_rule_over_the_cost_limit_is_refused(api: Client, namespace: str, group: str) -> None:
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    small = scaler(group, items=list(range(100)))
    assert api.post(path, small).status_code == 201
    big = scaler(group, "s2", items=list(range(2000)))  # 2000² comparisons: over the per-call limit
    (message,) = causes(api.post(path, big)).values()
    assert "call cost exceeds limit for rule: self.all(x, self.all(y, x == y || x != y))" in message


def test_all_rules_of_a_write_share_one_runtime_budget(api: Client, namespace: str) -> None:
    """Rules that do not read oldSelf and transition rules are judged in two passes; the runtime
    budget (10,000,000) is the write's, not each pass's. Here the first kind costs ~6.9M, the
    transition rules ~3.7M: each fits alone, together they do not."""
    plain = [{"rule": f"self.exists(x, self.exists(y, x >= {i}))"} for i in range(30)]  # 481² each
    transition = [{"rule": f"self.exists(x, oldSelf.exists(y, y >= {i}))"} for i in range(4)]  # 962²
    spec = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "integer"},
                "x-kubernetes-validations": plain + transition,
            }
        },
    }
    group = f"{namespace}.budget.example.com"
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, spec))
    assert response.status_code == 201, response.text
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    created = api.post(path, {**scaler(group), "spec": {"items": list(range(480))}})
    assert created.status_code == 201, created.text  # no transition rules on a create
    got = causes(api.patch(f"{path}/s1", {"spec": {"items": list(range(1, 481))}}, MERGE))
    assert got == {
        "spec.items": 'FieldValueInvalid: Invalid value: "array": validation failed due to running out '
        "of cost budget, no further validation rules will be run"
    }


@pytest.mark.parametrize(
    ("rule_schema", "field", "message"),
    [
        (
            {"type": "integer", "x-kubernetes-validations": [{"rule": "self >"}]},
            "x-kubernetes-validations[0].rule",
            'Invalid value: "self >": compilation failed: ERROR: <input>:1:7: Syntax error',
        ),
        (
            {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0", "reason": "Bad"}]},
            "x-kubernetes-validations[0].reason",
            'Unsupported value: "Bad": supported values: "FieldValueDuplicate", "FieldValueForbidden"',
        ),
        (
            {"type": "integer", "x-kubernetes-validations": [{"rule": " "}]},
            "x-kubernetes-validations[0].rule",
            "Required value: rule is not specified",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".b"}],
            },
            "x-kubernetes-validations[0].fieldPath",
            'Invalid value: ".b": fieldPath must be a valid path',
        ),
        (
            {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self > 0", "messageExpression": "'a' +"}],
            },
            "x-kubernetes-validations[0].messageExpression",
            "messageExpression compilation failed: ERROR:",
        ),
        (
            {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self > 0", "messageExpression": "string(oldSelf)"}],
            },
            "x-kubernetes-validations[0].messageExpression",
            "messageExpression may only reference oldSelf if the rule does",
        ),
        (
            {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0", "message": "two\nlines"}]},
            "x-kubernetes-validations[0].message",
            "message must not contain line breaks",
        ),
        (  # the static type check, as upstream's: operands no overload takes ...
            {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 'a'"}]},
            "x-kubernetes-validations[0].rule",
            "Invalid value: \"self > 'a'\": compilation failed: ERROR: <input>:1:6: found no matching "
            "overload for '_>_' applied to '(int, string)'",
        ),
        (  # ... a field the schema does not declare ...
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.a < self.b"}],
            },
            "x-kubernetes-validations[0].rule",
            "compilation failed: ERROR: <input>:1:14: undefined field 'b'",
        ),
        (  # ... a result that is not a bool, a message that is not a string
            {"type": "integer", "x-kubernetes-validations": [{"rule": "self + 1"}]},
            "x-kubernetes-validations[0].rule",
            'Invalid value: "self + 1": cel expression must evaluate to a bool',
        ),
        (
            {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self > 0", "messageExpression": "self"}],
            },
            "x-kubernetes-validations[0].messageExpression",
            'Invalid value: "self": messageExpression must evaluate to a string',
        ),
    ],
)
def test_a_bad_rule_makes_the_crd_invalid(
    api: Client, namespace: str, rule_schema: dict[str, Any], field: str, message: str
) -> None:
    spec = {"type": "object", "properties": {"value": rule_schema}}
    response = api.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(f"{namespace}.bad.example.com", spec)
    )
    assert response.status_code == 422, response.text
    (cause,) = response.json()["details"]["causes"]
    assert (
        cause["field"]
        == f"spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[value].{field}"
    )
    assert message in cause["message"]


def test_root_rules_see_only_the_name_and_generate_name_of_metadata(api: Client, namespace: str) -> None:
    group = f"{namespace}.rootmeta.example.com"
    definition = crd(group, {"type": "object"})
    root = definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    root["x-kubernetes-validations"] = [{"rule": "true && self.metadata.labels.size() > 0"}]
    refused = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", definition)
    assert refused.status_code == 422, refused.text
    (cause,) = refused.json()["details"]["causes"]
    assert cause["field"] == "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule"
    assert cause["message"].endswith("compilation failed: ERROR: <input>:1:22: undefined field 'labels'")
    root["x-kubernetes-validations"] = [
        {"rule": "self.metadata.size() == 1 && self.metadata.name.startsWith('s')", "message": "only a name"}
    ]
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", definition)
    assert response.status_code == 201, response.text
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    labelled = scaler(group)
    labelled["metadata"].update(labels={"a": "b"}, annotations={"c": "d"}, finalizers=["x/y"])
    assert api.post(path, labelled).status_code == 201  # labels, namespace, uid... are not seen
    assert causes(api.post(path, scaler(group, "t1"))) == {
        "<root>": 'FieldValueInvalid: Invalid value: "object": only a name'
    }


def test_rules_with_optional_syntax(api: Client, namespace: str) -> None:
    """``a.?b`` and ``m[?k]`` (the interpreter cannot parse them; they are rewritten), with
    optional chaining, on the root, on a field and in a transition rule with optionalOldSelf."""
    spec = {
        "type": "object",
        "x-kubernetes-validations": [
            {
                "rule": "self.?minReplicas.orValue(1) <= self.?maxReplicas.orValue(10)",
                "message": "min above max",
            },
            {
                "rule": "oldSelf.?mode.orValue(self.?mode.orValue('')) == self.?mode.orValue('')",
                "optionalOldSelf": True,
                "message": "mode is immutable",
            },
            {"rule": "self.?labels[?'tier'].orValue('web') != 'db' && '.?'.size() == 2", "message": "no db"},
        ],
        "properties": {
            "minReplicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "mode": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "ports": {
                "type": "array",
                "items": {"type": "integer"},
                "x-kubernetes-validations": [{"rule": "self[?0].orValue(80) >= 80", "message": "low port"}],
            },
        },
    }
    group = f"{namespace}.optional.example.com"
    definition = crd(group, spec)
    definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [
        {"rule": "self.?spec.?nested.inner.orValue('') == ''", "message": "no nested.inner"}
    ]
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", definition)
    assert response.status_code == 201, response.text
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"

    def named(name: str, **fields: Any) -> dict[str, Any]:
        return {"apiVersion": f"{group}/v1", "kind": "Scaler", "metadata": {"name": name}, "spec": fields}

    assert api.post(path, named("s0")).status_code == 201  # every optional empty: defaults apply
    assert api.post(path, named("s1", minReplicas=3, mode="fast", ports=[80])).status_code == 201
    assert causes(api.post(path, named("s2", minReplicas=11))) == {
        "spec": 'FieldValueInvalid: Invalid value: "object": min above max'
    }
    got = api.post(path, named("s3", minReplicas=3, maxReplicas=2, labels={"tier": "db"}))
    assert [c["message"] for c in got.json()["details"]["causes"]] == [
        'Invalid value: "object": min above max',
        'Invalid value: "object": no db',
    ]
    assert causes(api.post(path, named("s4", ports=[22]))) == {
        "spec.ports": 'FieldValueInvalid: Invalid value: "array": low port'
    }
    assert causes(api.patch(f"{path}/s1", {"spec": {"mode": "slow"}}, MERGE)) == {
        "spec": 'FieldValueInvalid: Invalid value: "object": mode is immutable'
    }
    assert api.patch(f"{path}/s1", {"spec": {"maxReplicas": 5}}, MERGE).status_code == 200


def test_old_self_on_the_uncorrelatable_part_of_a_schema_is_forbidden(api: Client, namespace: str) -> None:
    spec = {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf"}]},
            }
        },
    }
    response = api.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(f"{namespace}.bad.example.com", spec)
    )
    (cause,) = response.json()["details"]["causes"]
    assert cause["message"].startswith(
        "Forbidden: oldSelf cannot be used on the uncorrelatable portion of the schema"
    )


@pytest.mark.parametrize(
    ("rule", "value", "passes"),
    [
        ("self.isSorted()", [1, 2, 2], True),
        ("self.isSorted()", ["b", "a"], False),
        ("self.indexOf(3) == 1 && self.lastIndexOf(9) == -1", [1, 3, 3], True),
        ("self.sum() == 6 && self.min() == 1 && self.max() == 3", [1, 2, 3], True),
        ("sets.contains(self, [2]) && !sets.intersects(self, [9])", [1, 2], True),
        ("self.map(x, x * 2).filter(x, x > 2).size() == 2", [1, 2, 3], True),
        ("self.exists_one(x, x == 2)", [1, 2, 2], False),
    ],
)
def test_kubernetes_list_library(api: Client, namespace: str, rule: str, value: Any, passes: bool) -> None:
    assert (
        _judged(
            api,
            namespace,
            {"type": "array", "items": {"type": "integer" if isinstance(value[0], int) else "string"}},
            rule,
            value,
        )
        is passes
    )


@pytest.mark.parametrize(
    ("rule", "value", "passes"),
    [
        ("self.find('[0-9]+') == '12' && self.findAll('[a-z]').size() == 2", "ab12", True),
        ("self.lowerAscii() == 'ab12' && self.upperAscii() == 'AB12'", "aB12", True),
        ("self.split('-').size() == 3 && self.replace('-', '') == 'abc'", "a-b-c", True),
        ("self.matches('^[a-z]+$')", "abc1", False),
        ("isQuantity(self) && quantity(self).compareTo(quantity('1Gi')) == 0", "1024Mi", True),
        ("quantity(self).isGreaterThan(quantity('500m')) && quantity(self).isInteger()", "1", True),
        ("quantity(self).add(quantity('1')).asInteger() == 3", "2", True),
        ("isQuantity(self)", "1Zi", False),
        ("!isQuantity(self)", "1e10000000", True),  # refused at once, not expanded
        ("self.find('(a+)+$') == ''", "a" * 5000 + "!", True),  # RE2: linear time, no backtracking blow-up
        ("self.find('[[:digit:]]+') == '42'", "x42", True),
        ("self != 'oldSelf'", "oldSelf", False),  # a string, not a transition rule: judged on create
        (
            "url(self).getHost() == 'x.io:8443' && url(self).getPort() == '8443' && url(self).getEscapedPath() == '/p'",
            "https://x.io:8443/p",
            True,
        ),
        ("duration(self) > duration('30m')", "1h", True),
        ("timestamp(self) < timestamp('2030-01-01T00:00:00Z')", "2020-01-01T00:00:00Z", True),
    ],
)
def test_kubernetes_string_libraries(
    api: Client, namespace: str, rule: str, value: str, passes: bool
) -> None:
    assert _judged(api, namespace, {"type": "string"}, rule, value) is passes


_judged_count = 0


def _judged(api: Client, namespace: str, schema: dict[str, Any], rule: str, value: Any) -> bool:
    """Whether a custom resource whose ``spec.value`` is ``value`` passes ``rule``."""
    global _judged_count
    _judged_count += 1
    group = f"{namespace}-{_judged_count}.lib.example.com"
    spec = {
        "type": "object",
        "properties": {"value": {**schema, "x-kubernetes-validations": [{"rule": rule}]}},
    }
    created = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, spec))
    assert created.status_code == 201, created.text
    obj = {"apiVersion": f"{group}/v1", "kind": "Scaler", "metadata": {"name": "s"}, "spec": {"value": value}}
    response = api.post(f"/apis/{group}/v1/namespaces/{namespace}/scalers", obj)
    assert response.status_code in (201, 422), response.text
    if response.status_code == 422:
        assert "failed rule" in response.text, response.text
    return response.status_code == 201


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


def test_kubectl_sees_rules_reject_and_accept_including_old_self(
    kubectl: Kubectl, namespace: str, group: str
) -> None:
    def apply(spec: str, check: bool = True) -> Any:
        manifest = f"apiVersion: {group}/v1\nkind: Scaler\nmetadata: {{name: s1}}\nspec: {spec}\n"
        return kubectl("apply", "-n", namespace, "-f", "-", stdin=manifest, check=check)

    refused = apply("{minReplicas: 5, maxReplicas: 3}", check=False)
    assert refused.returncode == 1
    assert 'The Scaler "s1" is invalid' in refused.stderr
    assert 'spec: Invalid value: "object": minReplicas cannot be larger than maxReplicas' in refused.stderr
    assert "created" in apply("{minReplicas: 1, maxReplicas: 3, mode: fast}").stdout
    shrunk = apply("{minReplicas: 1, maxReplicas: 2, mode: slow}", check=False)
    assert 'spec: Invalid value: "object": maxReplicas may not shrink below 3' in shrunk.stderr
    assert 'spec.mode: Invalid value: "string": mode is immutable' in shrunk.stderr
    assert "configured" in apply("{minReplicas: 2, maxReplicas: 4, mode: fast}").stdout
    got = kubectl(
        "get", "-n", namespace, f"scalers.{group}", "s1", "-o", "jsonpath={.spec.maxReplicas}"
    ).stdout
    assert got == "4"


def test_kubectl_sees_an_ill_typed_rule_refused_when_the_crd_is_applied(
    kubectl: Kubectl, namespace: str, tmp_path: pathlib.Path
) -> None:
    group = f"{namespace}.typed.example.com"
    spec = {
        "type": "object",
        "properties": {"replicas": {"type": "integer"}, "mode": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.replicas > self.mode", "message": "never"}],
    }
    manifest = tmp_path / "crd.json"
    manifest.write_text(json.dumps(crd(group, spec)))
    refused = kubectl("apply", "-f", str(manifest), check=False)
    assert refused.returncode == 1
    assert "is invalid" in refused.stderr
    assert "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule" in (
        refused.stderr
    )
    assert "found no matching overload for '_>_' applied to '(int, string)'" in refused.stderr
    spec["x-kubernetes-validations"] = [{"rule": "self.replicas > 0 && self.mode != ''", "message": "never"}]
    manifest.write_text(json.dumps(crd(group, spec)))
    assert "created" in kubectl("apply", "-f", str(manifest)).stdout


def test_patterns_are_re2_and_a_root_rules_field_path_has_no_leading_dot(api: Client, namespace: str) -> None:
    group = f"{namespace}.re2.example.com"
    spec = {
        "type": "object",
        "properties": {
            "word": {"type": "string", "pattern": "^[[:alpha:]]+$"},
            "letters": {"type": "string", "pattern": "^\\pL+$"},
            "lines": {"type": "string", "pattern": "(?m)^b$"},
            "a": {"type": "integer"},
        },
    }
    body = crd(group, spec)
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [
        {"rule": "self.spec.a > 0", "fieldPath": ".spec.a", "message": "a must be positive"}
    ]
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body).status_code == 201
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"

    def obj(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": f"{group}/v1",
            "kind": "Scaler",
            "metadata": {"name": name},
            "spec": {"a": 1, **spec},
        }

    assert api.post(path, obj("s1", word="abc", letters="été", lines="a\nb")).status_code == 201
    got = causes(api.post(path, obj("s2", word="abc\n", letters="1", a=0)))
    assert set(got) == {"spec.word", "spec.letters", "spec.a"}  # RE2's $ is the end of the text
    assert got["spec.a"] == 'FieldValueInvalid: Invalid value: "object": a must be positive'


def test_failing_library_calls_are_causes_not_log_lines(
    api: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A value that makes a library function fail is the writer's problem, reported in the
    cause; the server's log gets nothing a client could flood it with."""
    spec = {
        "type": "object",
        "properties": {
            "size": {"type": "string", "x-kubernetes-validations": [{"rule": "quantity(self).sign() >= 0"}]},
            "extra": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-validations": [{"rule": "self.?a.?b.orValue(0) == 0"}],
            },
        },
    }
    group = f"{namespace}.logs.example.com"
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, spec))
    assert response.status_code == 201, response.text
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    with caplog.at_level(logging.DEBUG):
        for index in range(3):
            obj = {**scaler(group, f"s{index}"), "spec": {"size": f"bad{index}", "extra": {"a": 7}}}
            got = causes(api.post(path, obj))
            assert set(got) == {"spec.size", "spec.extra"}
            assert got["spec.size"].endswith(f'"bad{index}" evaluating rule: quantity(self).sign() >= 0')
            assert got["spec.extra"].endswith("rule: self.?a.?b.orValue(0) == 0")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("cel")] == []


def test_a_stored_crd_written_before_the_type_check_is_still_served(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CRD stored by a server without the static check (simulated by turning it off for the
    # write) keeps serving after a restart: only writes of the CRD are type-checked.
    from kubeloop.apiserver.cel import typecheck as celtypes
    from tests.conftest import start_server

    group = "stored.typed.example.com"
    spec = {
        "type": "object",
        "properties": {"minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.minReplicas == 'x' || self.minReplicas > 0"}],
    }
    server = start_server(tmp_path)
    try:
        with monkeypatch.context() as patched:
            patched.setattr(celtypes, "check_rule", lambda *args, **kwargs: None)
            created = Client(server).post(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, spec)
            )
            assert created.status_code == 201, created.text
    finally:
        server.stop()
    server = start_server(tmp_path)
    try:
        api = Client(server)
        path = f"/apis/{group}/v1/namespaces/default/scalers"
        ok = api.post(path, scaler(group, "s-ok"))
        assert ok.status_code == 201, ok.text
        assert "failed rule" in api.post(path, scaler(group, "s-zero", minReplicas=0)).text
        stored = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/scalers.{group}").json()
        refused = api.put(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/scalers.{group}", stored)
        assert refused.status_code == 422  # a write of the CRD is checked
        assert "applied to '(int, string)'" in refused.text
    finally:
        server.stop()


def test_a_rule_failing_where_an_update_changed_nothing_is_a_warning(
    api: Client, namespace: str, shared_server: ServerThread, tmp_path: pathlib.Path
) -> None:
    """Upstream's CEL ratcheting (apiextensions-apiserver's CEL validator, since 1.30): a rule that
    does not read oldSelf and fails at a value the update left as it was is sent back as a
    warning, and the write goes through; where the update changed the value, it is an error; a
    rule that cannot be evaluated is an error either way. "Unchanged" as upstream's
    CorrelatedObject decides: a map list item by item through its keys (a reordered one is
    unchanged), an atomic list's item by its list, a map holding a member its schema does not
    describe never, and the object's own rules by the whole objects (so never, in practice)."""
    group = f"{namespace}.ratchet.example.com"
    spec = {
        "type": "object",
        "properties": {
            "note": {"type": "string"},
            "replicas": {"type": "integer"},
            "inner": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "sizes": {"type": "array", "items": {"type": "integer"}},
            "ports": map_list({"name": {"type": "string"}, "port": {"type": "integer"}}),
            "settings": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    body = crd(group, spec)
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert api.post(crds, body).status_code == 201
    path = f"/apis/{group}/v1/namespaces/{namespace}/scalers"
    ports = [{"name": "a", "port": 500}, {"name": "b", "port": 1}]
    made = {"note": "a", "replicas": 3, "inner": {"size": 9}, "sizes": [7, 1], "ports": ports}
    for name, fields in (("s1", made), ("s2", {"settings": {"other": 1}})):
        scaler = {"apiVersion": f"{group}/v1", "kind": "Scaler", "metadata": {"name": name}, "spec": fields}
        assert api.post(path, scaler).status_code == 201

    def tighten(root_rules: list[dict[str, str]] | None = None) -> None:
        if root_rules is not None:
            body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = root_rules
        current = api.get(f"{crds}/scalers.{group}").json()
        current["spec"] = body["spec"]
        assert api.put(f"{crds}/scalers.{group}", current).status_code == 200

    # Tightened afterwards: the stored objects break the rules on inner, on sizes' items, on
    # ports, on settings and on spec itself.
    spec["properties"]["inner"]["x-kubernetes-validations"] = [{"rule": "self.size <= 5", "message": "at most 5"}]
    spec["properties"]["sizes"]["items"]["x-kubernetes-validations"] = [{"rule": "self < 5"}]
    spec["properties"]["ports"]["x-kubernetes-validations"] = [{"rule": "self.all(p, p.port < 100)"}]
    spec["properties"]["settings"]["x-kubernetes-validations"] = [{"rule": "!has(self.other) || self.other < 0"}]
    spec["x-kubernetes-validations"] = [{"rule": "!has(self.replicas) || self.replicas <= 2", "message": "at most 2 replicas"}]
    tighten()

    def warnings(response: Any) -> str:
        assert response.status_code == 200, response.text
        return str(response.headers.get("Warning", ""))

    # Only a label changes: every rule's value is unchanged, each failure a warning.
    labelled = warnings(api.patch(f"{path}/s1", {"metadata": {"labels": {"a": "b"}}}, MERGE))
    assert 'spec.inner: Invalid value: \\"object\\": at most 5' in labelled
    assert 'spec: Invalid value: \\"object\\": at most 2 replicas' in labelled
    assert 'spec.sizes[0]: Invalid value: \\"integer\\": failed rule: self < 5' in labelled
    assert "spec.ports: Invalid value" in labelled
    # spec changes, its members do not: spec's rule is an error, theirs stay warnings.
    refused = api.patch(f"{path}/s1", {"spec": {"note": "b"}}, MERGE)
    assert causes(refused) == {"spec": 'FieldValueInvalid: Invalid value: "object": at most 2 replicas'}
    kept = warnings(api.patch(f"{path}/s1", {"spec": {"note": "b", "replicas": 2}}, MERGE))
    assert "at most 5" in kept and "spec.sizes[0]" in kept and "spec.ports" in kept and "replicas" not in kept
    # A map list reordered is unchanged item by item; an atomic list changed judges its items.
    assert "spec.ports" in warnings(api.patch(f"{path}/s1", {"spec": {"ports": ports[::-1]}}, MERGE))
    assert causes(api.patch(f"{path}/s1", {"spec": {"sizes": [7, 2]}}, MERGE)) == {
        "spec.sizes[0]": 'FieldValueInvalid: Invalid value: "integer": failed rule: self < 5'
    }
    assert causes(api.patch(f"{path}/s1", {"spec": {"inner": {"size": 8}}}, MERGE)) == {
        "spec.inner": 'FieldValueInvalid: Invalid value: "object": at most 5'
    }
    # A map holding a member its schema does not describe is never unchanged.
    assert causes(api.patch(f"{path}/s2", {"metadata": {"labels": {"a": "b"}}}, MERGE)) == {
        "spec.settings": 'FieldValueInvalid: Invalid value: "object": failed rule: !has(self.other) || self.other < 0'
    }
    # kubectl prints the warning and the label lands.
    kubectl = Kubectl(KUBECTLS[-1], shared_server.kubeconfig, tmp_path)
    out = kubectl("label", "-n", namespace, f"scalers.{group}", "s1", "c=d")
    assert 'Warning: spec.inner: Invalid value: "object": at most 5' in out.stderr
    # A rule that cannot be evaluated is an error though nothing it reads changed; and the
    # object's own rule judges every update (the objects differ, if only in their labels).
    spec["properties"]["inner"]["x-kubernetes-validations"] = [{"rule": "self.size > self.missing"}]
    spec["properties"]["inner"]["x-kubernetes-preserve-unknown-fields"] = True
    spec["x-kubernetes-validations"] = []
    tighten([{"rule": "self.metadata.name.startsWith('x')", "message": "names start with x"}])
    assert causes(api.patch(f"{path}/s1", {"metadata": {"labels": {"a": "c"}}}, MERGE)) == {
        "<root>": 'FieldValueInvalid: Invalid value: "object": names start with x',
        "spec.inner": 'FieldValueInvalid: Invalid value: "object": no such key: missing evaluating rule: self.size > self.missing',
    }
