"""Strategic merge patch: upstream's apply cases on a test schema, then the real built-in schemas."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.patch.mergepatch import apply_merge_patch, copy_json
from kubeloop.apiserver.patch.strategicpatch import accepts_strategic_merge, apply_strategic_merge_patch

# --- a schema shaped like upstream's test type (strategicpatch "mergeItem") --------------------


def merge_item_schema() -> dict[str, Any]:
    """Lists of every strategy, nested (the item type refers to itself)."""
    string = {"type": "string"}
    item: dict[str, Any] = {"type": "object", "properties": {}}

    def merged_by_name(**extra: str) -> dict[str, Any]:
        return {
            "type": "array",
            "items": item,
            "x-kubernetes-patch-merge-key": "name",
            "x-kubernetes-patch-strategy": "merge",
            **extra,
        }

    common = {
        "name": string,
        "value": string,
        "other": string,
        "simpleMap": {"type": "object", "additionalProperties": string},
        "mergingList": merged_by_name(),
        "nonMergingList": {"type": "array", "items": item},
        "mergingIntList": {
            "type": "array",
            "items": {"type": "integer"},
            "x-kubernetes-patch-strategy": "merge",
        },
    }
    retain_keys_item = {
        "type": "object",
        "properties": dict(common),
        "x-kubernetes-patch-strategy": "retainKeys",
    }
    item["properties"].update(
        common,
        nonMergingIntList={"type": "array", "items": {"type": "integer"}},
        mergeItemPtr=merged_by_name(),
        replacingItem={"type": "object", "x-kubernetes-patch-strategy": "replace"},
        retainKeysMap=retain_keys_item,
        retainKeysMergingList=merged_by_name(**{"x-kubernetes-patch-strategy": "merge,retainKeys"}),
    )
    return item


MERGE_ITEM = merge_item_schema()

# Cases ported from upstream's strategicpatch tests (the result of applying a two-way patch to
# the original, or a three-way patch to the live object). "error" names a message fragment.
UPSTREAM_CASES = yaml.safe_load(
    r"""
- name: scalars are unioned in a merging list
  original: {mergingIntList: [1, 2]}
  patch: {mergingIntList: [2, 3]}
  result: {mergingIntList: [1, 2, 3]}
- name: non-merging scalar list is replaced
  original: {nonMergingIntList: [1, 2]}
  patch: {nonMergingIntList: [2, 3]}
  result: {nonMergingIntList: [2, 3]}
- name: $patch delete empties a nested map
  original: {simpleMap: {key1: 1, key2: 1}}
  patch: {simpleMap: {$patch: delete}}
  result: {simpleMap: {}}
- name: $patch replace element empties a merging list
  original: {mergingList: [{name: 1}, {name: 2}]}
  patch: {mergingList: [{$patch: replace}]}
  result: {mergingList: []}
- name: $patch replace element keeps only the patch elements
  original: {mergingList: [{name: 1, value: a}, {name: 2}]}
  patch: {mergingList: [{name: 3}, {$patch: replace}]}
  result: {mergingList: [{name: 3}]}
- name: $patch replace at the top replaces the document
  original: {name: 1, value: 1}
  patch: {$patch: replace, other: a}
  result: {other: a}
- name: $patch delete at the top empties the document
  original: {name: 1, value: 1}
  patch: {$patch: delete}
  result: {}
- name: empty merging lists stay empty
  original: {mergingList: []}
  patch: {mergingList: []}
  result: {mergingList: []}
- name: deleting by merge key removes every duplicate
  original: {mergingList: [{name: 1}, {name: 1}, {name: 2, value: a}, {name: 3}, {name: 3}]}
  patch: {mergingList: [{name: 1, $patch: delete}, {name: 3, $patch: delete}]}
  result: {mergingList: [{name: 2, value: a}]}
- name: deleting a missing element is a no-op
  original: {mergingList: [{name: 1}]}
  patch: {mergingList: [{name: 9, $patch: delete}]}
  result: {mergingList: [{name: 1}]}
- name: elements the patch names come in patch order
  original: {mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]}
  patch: {mergingList: [{name: 3, value: c}, {name: 1, value: a}, {name: 2, other: x}]}
  result: {mergingList: [{name: 3, value: c}, {name: 1, value: a}, {name: 2, value: b, other: x}]}
- name: elements the patch does not name keep their place
  original: {mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]}
  patch: {mergingList: [{name: 3, value: c}, {name: 1, value: a}]}
  result: {mergingList: [{name: 2, value: b}, {name: 3, value: c}, {name: 1, value: a}]}
- name: merging int list takes the patch order
  original: {mergingIntList: [1, 2, 3]}
  patch: {mergingIntList: [3, 1]}
  result: {mergingIntList: [2, 3, 1]}
- name: a new element without $setElementOrder goes first (upstream)
  original: {mergingList: [{name: 1}, {name: 2}]}
  patch: {mergingList: [{name: 3}]}
  result: {mergingList: [{name: 3}, {name: 1}, {name: 2}]}
- name: $setElementOrder lists an element that is absent
  original: {mergingList: [{name: 1}, {name: 3}]}
  patch:
    $setElementOrder/mergingList: [{name: 3}, {name: 2}, {name: 1}]
    mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]
  result: {mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}
- name: $setElementOrder alone reorders an int list
  original: {mergingIntList: [1, 3]}
  patch: {$setElementOrder/mergingIntList: [3, 2, 1]}
  result: {mergingIntList: [3, 1]}
- name: $setElementOrder that contradicts the patch list is refused
  original: {mergingList: [{name: 1}, {name: 3}, {name: 2}]}
  patch:
    $setElementOrder/mergingList: [{name: 1}, {name: 2}, {name: 3}]
    mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]
  error: doesn't match
- name: $setElementOrder that contradicts an int patch list is refused
  original: {mergingIntList: [1, 3, 2]}
  patch: {$setElementOrder/mergingIntList: [1, 2, 3], mergingIntList: [3, 1]}
  error: doesn't match
- name: an element without its merge key is refused
  original: {mergingList: [{name: 1, value: a}]}
  patch: {mergingList: [{value: b}]}
  error: does not contain declared merge key
- name: $deleteFromPrimitiveList of an absent value changes nothing
  original: {mergingIntList: [1, 2]}
  patch: {$deleteFromPrimitiveList/mergingIntList: [3]}
  result: {mergingIntList: [1, 2]}
- name: $deleteFromPrimitiveList on a null list leaves it
  original: {mergingIntList: null}
  patch: {$deleteFromPrimitiveList/mergingIntList: [3]}
  result: {mergingIntList: null}
- name: $deleteFromPrimitiveList does not create the list
  original: {foo: [bar]}
  patch: {$deleteFromPrimitiveList/mergingIntList: [3]}
  result: {foo: [bar]}
- name: $deleteFromPrimitiveList from a merging list
  original: {mergingIntList: [1, 2, 3]}
  patch: {$deleteFromPrimitiveList/mergingIntList: [2]}
  result: {mergingIntList: [1, 3]}
- name: $deleteFromPrimitiveList from a non-merging list
  original: {nonMergingIntList: [1, 2, 3]}
  patch: {$deleteFromPrimitiveList/nonMergingIntList: [2]}
  result: {nonMergingIntList: [1, 3]}
- name: deletions and order of a scalar list (three-way)
  original: {mergingIntList: [1, 2, 3, 3, 4]}
  patch:
    $setElementOrder/mergingIntList: [1, 2]
    $deleteFromPrimitiveList/mergingIntList: [3]
  result: {mergingIntList: [1, 2, 4]}
- name: add and delete in a scalar list
  original: {mergingIntList: [1, 2, 3]}
  patch:
    $setElementOrder/mergingIntList: [1, 2, 4]
    $deleteFromPrimitiveList/mergingIntList: [3]
    mergingIntList: [4]
  result: {mergingIntList: [1, 2, 4]}
- name: a new list drops its directive elements
  original: {name: hi}
  patch: {mergingList: [{name: hello}, {$patch: delete, name: doesntexist}]}
  result: {name: hi, mergingList: [{name: hello}]}
- name: merge lists of maps keeps live fields (three-way)
  original: {mergingList: [{name: 1, other: a}, {name: 2, value: 2, other: b}]}
  patch:
    $setElementOrder/mergingList: [{name: 4}, {name: 1}, {name: 2}, {name: 3}]
    mergingList: [{name: 4, value: 4}, {name: 3, value: 3}]
  result:
    mergingList:
    - {name: 4, value: 4}
    - {name: 1, other: a}
    - {name: 2, value: 2, other: b}
    - {name: 3, value: 3}
- name: add one map and delete another, live-only element stays (three-way)
  original: {mergingList: [{name: 1}, {name: 2, other: b}, {name: 4, other: c}]}
  patch:
    $setElementOrder/mergingList: [{name: 2}, {name: 3}]
    mergingList: [{name: 3}, {name: 1, $patch: delete}]
  result: {mergingList: [{name: 2, other: b}, {name: 4, other: c}, {name: 3}]}
- name: add a map to a list with a live-only element (three-way)
  original: {mergeItemPtr: [{name: 1, other: a}, {name: 3}]}
  patch:
    $setElementOrder/mergeItemPtr: [{name: 1}, {name: 2}]
    mergeItemPtr: [{name: 2}]
  result: {mergeItemPtr: [{name: 1, other: a}, {name: 2}, {name: 3}]}
- name: add a scalar to a list with a live-only value (three-way)
  original: {mergingIntList: [1, 2, 4]}
  patch: {$setElementOrder/mergingIntList: [1, 2, 3], mergingIntList: [3]}
  result: {mergingIntList: [1, 2, 3, 4]}
- name: $setElementOrder with live-only elements interleaved
  original: {mergingList: [{name: 1, other: a}, {name: 2, value: 2}, {name: 7}, {name: 9}, {name: 8},
                           {name: 3, value: 3}, {name: 4, value: 4}]}
  patch: {$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}]}
  result:
    mergingList:
    - {name: 2, value: 2}
    - {name: 1, other: a}
    - {name: 7}
    - {name: 9}
    - {name: 8}
    - {name: 4, value: 4}
    - {name: 3, value: 3}
- name: $setElementOrder with duplicates groups them
  original: {mergingList: [{name: 1}, {name: 2, value: dup1}, {name: 3}, {name: 2, value: dup2}, {name: 4}]}
  patch: {$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}, {name: 2}]}
  result:
    mergingList:
    - {name: 2, value: dup1}
    - {name: 2, value: dup2}
    - {name: 1}
    - {name: 4}
    - {name: 3}
- name: nested merging list with its own $setElementOrder
  original:
    mergingList:
    - {name: 1, other: a, mergingList: [{name: 1}, {name: 2, value: 2}]}
    - {name: 2, other: b}
  patch:
    $setElementOrder/mergingList: [{name: 1}, {name: 2}]
    mergingList:
    - $setElementOrder/mergingList: [{name: 1}, {name: 2}]
      name: 1
      mergingList: [{name: 1, value: 1}]
  result:
    mergingList:
    - {name: 1, other: a, mergingList: [{name: 1, value: 1}, {name: 2, value: 2}]}
    - {name: 2, other: b}
- name: non-merging list nested in a merging list is replaced
  original:
    mergingList:
    - {name: 1, other: a, nonMergingList: [{name: 1}, {name: 2, value: 2}]}
    - {name: 2, other: b}
  patch:
    $setElementOrder/mergingList: [{name: 1}, {name: 2}]
    mergingList: [{name: 1, nonMergingList: [{name: 1, value: 1}]}]
  result:
    mergingList:
    - {name: 1, other: a, nonMergingList: [{name: 1, value: 1}]}
    - {name: 2, other: b}
- name: delete and reorder in one list, reorder in another
  original:
    mergingList: [{name: a, value: a}, {name: b, value: b}]
    mergeItemPtr: [{name: c, value: c}, {name: d, value: d}]
  patch:
    $setElementOrder/mergingList: [{name: b}]
    $setElementOrder/mergeItemPtr: [{name: d}, {name: c}]
    mergingList: [{$patch: delete, name: a}]
  result:
    mergingList: [{name: b, value: b}]
    mergeItemPtr: [{name: d, value: d}, {name: c, value: c}]
- name: retainKeys map merges normally without the directive
  original: {retainKeysMap: {name: foo, value: a}}
  patch: {retainKeysMap: {value: b}}
  result: {retainKeysMap: {name: foo, value: b}}
- name: $retainKeys clears fields not listed (three-way)
  original: {retainKeysMap: {name: type1, value: foo}}
  patch: {retainKeysMap: {$retainKeys: [name, other], name: type2, other: bar}}
  result: {retainKeysMap: {name: type2, other: bar}}
- name: $retainKeys with a deleted field
  original: {retainKeysMap: {name: foo, value: bar, other: a}}
  patch: {retainKeysMap: {$retainKeys: [name], value: null}}
  result: {retainKeysMap: {name: foo}}
- name: $retainKeys inside an element of a merging list (three-way)
  original: {retainKeysMergingList: [{name: bar}, {name: foo, value: a, other: x}]}
  patch:
    $setElementOrder/retainKeysMergingList: [{name: bar}, {name: foo}]
    retainKeysMergingList: [{$retainKeys: [name, value], name: foo}]
  result: {retainKeysMergingList: [{name: bar}, {name: foo, value: a}]}
- name: a field set but not in $retainKeys is refused
  original: {retainKeysMap: {name: foo}}
  patch: {retainKeysMap: {$retainKeys: [name], value: bar}}
  error: retainKeys
- name: replace strategy replaces the whole object
  original: {name: o, replacingItem: {Some: Generic, Yaml: Inside, Field: Period}}
  patch: {replacingItem: {Newly: Modified, Yaml: Inside}}
  result: {name: o, replacingItem: {Newly: Modified, Yaml: Inside}}
- name: nulls are dropped from new nested objects
  original: {}
  patch: {complex: {nested: null, nested2: foo}}
  result: {complex: {nested2: foo}}
- name: nulls are dropped from objects inside new lists
  original: {}
  patch: {complex_nullable: [{inner_one: {key_one: foo, key_two: null}}]}
  result: {complex_nullable: [{inner_one: {key_one: foo}}]}
- name: nulls inside a scalar list are kept
  original: {}
  patch: {complex_nullable: [key1, null, key2]}
  result: {complex_nullable: [key1, null, key2]}
- name: nulls already in the original are kept
  original: {complex: {key: null}, thing: null}
  patch: {nested: {value: 5}}
  result: {complex: {key: null}, thing: null, nested: {value: 5}}
- name: null deletes
  original: {name: 1, value: 1, simpleMap: {a: x, b: y}}
  patch: {name: null, other: a, simpleMap: {b: null}}
  result: {value: 1, other: a, simpleMap: {a: x}}
"""
)


@pytest.mark.parametrize("case", UPSTREAM_CASES, ids=[case["name"] for case in UPSTREAM_CASES])
def test_upstream_cases(case: dict[str, Any]) -> None:
    before = copy_json(case)
    if "error" in case:
        with pytest.raises(errors.BadRequest, match=case["error"]):
            apply_strategic_merge_patch(case["original"], case["patch"], MERGE_ITEM)
    else:
        assert apply_strategic_merge_patch(case["original"], case["patch"], MERGE_ITEM) == case["result"]
    assert case == before, "inputs must not be mutated"


# --- the real schemas ---------------------------------------------------------------------------

DEPLOYMENT = schemas.kind_schema("apps", "v1", "Deployment")
POD = schemas.kind_schema("", "v1", "Pod")
PDB = schemas.kind_schema("policy", "v1", "PodDisruptionBudget")


def deployment(**spec: Any) -> dict[str, Any]:
    containers = [
        {
            "name": "app",
            "image": "app:1",
            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "https"}],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        },
        {"name": "sidecar", "image": "side:1"},
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "labels": {"app": "web", "tier": "front"},
            "finalizers": ["a.example.com/x", "b.example.com/y"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Thing", "name": "one", "uid": "u1"},
                {"apiVersion": "v1", "kind": "Thing", "name": "two", "uid": "u2"},
            ],
        },
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": containers,
                    "volumes": [
                        {"name": "data", "emptyDir": {}},
                        {"name": "conf", "configMap": {"name": "web-conf"}},
                    ],
                },
            },
            **spec,
        },
    }


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod_spec(obj)["containers"])


def template_patch(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec}}}


def smp(patch: dict[str, Any], original: dict[str, Any] | None = None) -> dict[str, Any]:
    original = deployment() if original is None else original
    before = copy_json([original, patch])
    result = apply_strategic_merge_patch(original, patch, DEPLOYMENT)
    assert [original, patch] == before, "inputs must not be mutated"
    return result


def test_containers_merge_by_name() -> None:
    result = smp(template_patch({"containers": [{"name": "sidecar", "image": "side:2"}]}))
    assert [(c["name"], c["image"]) for c in containers(result)] == [("app", "app:1"), ("sidecar", "side:2")]
    assert containers(result)[0] == containers(deployment())[0]
    # With a merge patch the list is replaced instead.
    merged = apply_merge_patch(deployment(), template_patch({"containers": [{"name": "sidecar"}]}))
    assert containers(merged) == [{"name": "sidecar"}]


def test_new_container_is_added_and_others_kept() -> None:
    result = smp(template_patch({"containers": [{"name": "init", "image": "i:1"}]}))
    assert [c["name"] for c in containers(result)] == ["init", "app", "sidecar"]
    ordered = smp(
        template_patch(
            {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}, {"name": "init"}],
                "containers": [{"name": "init", "image": "i:1"}],
            }
        )
    )
    assert [c["name"] for c in containers(ordered)] == ["app", "sidecar", "init"]


def test_ports_merge_by_container_port_and_env_by_name() -> None:
    patch = template_patch(
        {
            "containers": [
                {
                    "name": "app",
                    "ports": [{"containerPort": 443, "name": "tls"}, {"containerPort": 8080}],
                    "env": [
                        {"name": "B", "value": "two"},
                        {"name": "C", "value": "3"},
                        {"name": "A", "value": None},
                    ],
                }
            ]
        }
    )
    app = containers(smp(patch))[0]
    assert app["ports"] == [
        {"containerPort": 80, "name": "http"},
        {"containerPort": 443, "name": "tls"},
        {"containerPort": 8080},
    ]
    # A's value is deleted (null) but the element stays; B is updated; C is added; the elements
    # the patch names come in the patch's order.
    assert app["env"] == [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}, {"name": "A"}]


def test_delete_a_container_with_patch_delete() -> None:
    result = smp(template_patch({"containers": [{"name": "app", "$patch": "delete"}]}))
    assert [c["name"] for c in containers(result)] == ["sidecar"]


def test_delete_an_env_var_and_a_port() -> None:
    patch = template_patch(
        {
            "containers": [
                {
                    "name": "app",
                    "env": [{"name": "A", "$patch": "delete"}],
                    "ports": [{"containerPort": 80, "$patch": "delete"}],
                }
            ]
        }
    )
    app = containers(smp(patch))[0]
    assert app["env"] == [{"name": "B", "value": "2"}]
    assert app["ports"] == [{"containerPort": 443, "name": "https"}]


def test_replace_a_list_with_patch_replace() -> None:
    patch = template_patch({"containers": [{"name": "only", "image": "o:1"}, {"$patch": "replace"}]})
    assert containers(smp(patch)) == [{"name": "only", "image": "o:1"}]


def test_replace_a_map_with_patch_replace() -> None:
    result = smp({"metadata": {"labels": {"$patch": "replace", "new": "yes"}}})
    assert result["metadata"]["labels"] == {"new": "yes"}
    result = smp({"spec": {"template": {"metadata": {"$patch": "replace", "labels": {"x": "y"}}}}})
    assert result["spec"]["template"]["metadata"] == {"labels": {"x": "y"}}


def test_patch_delete_of_a_missing_map_creates_nothing() -> None:
    result = smp(template_patch({"securityContext": {"$patch": "delete"}, "hostname": "h"}))
    assert "securityContext" not in pod_spec(result)
    assert pod_spec(result)["hostname"] == "h"
    emptied = smp({"spec": {"strategy": {"$patch": "delete"}}})
    assert emptied["spec"]["strategy"] == {}


def test_patch_merge_is_the_default() -> None:
    result = smp({"metadata": {"labels": {"$patch": "merge", "new": "yes"}}})
    assert result["metadata"]["labels"] == {"app": "web", "tier": "front", "new": "yes"}


def test_set_element_order_reorders_containers() -> None:
    patch = template_patch({"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]})
    result = smp(patch)
    assert [c["name"] for c in containers(result)] == ["sidecar", "app"]
    assert containers(result)[1] == containers(deployment())[0]


def test_set_element_order_with_changes_and_deletion_like_kubectl_apply() -> None:
    patch = template_patch(
        {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "new"}],
            "containers": [{"name": "new", "image": "n:1"}, {"name": "app", "$patch": "delete"}],
        }
    )
    assert [c["name"] for c in containers(smp(patch))] == ["sidecar", "new"]


def test_retain_keys_on_deployment_strategy() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert smp(patch)["spec"]["strategy"] == {"type": "Recreate"}
    # Without the directive the map merges and rollingUpdate survives.
    merged = smp({"spec": {"strategy": {"type": "Recreate"}}})
    assert merged["spec"]["strategy"] == {
        "type": "Recreate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


def test_retain_keys_refuses_a_field_it_does_not_list() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {}}}}
    with pytest.raises(errors.BadRequest, match=r"spec\.strategy"):
        smp(patch)


def test_volumes_merge_by_name_and_retain_keys_switches_source() -> None:
    patch = template_patch(
        {
            "volumes": [
                {"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/srv"}},
                {"name": "extra", "secret": {"secretName": "s"}},
            ]
        }
    )
    volumes = pod_spec(smp(patch))["volumes"]
    # Upstream's order: the patch's elements in patch order; "conf" (live only) stays behind
    # "data", which preceded it, and the new "extra" is not held back by it.
    assert volumes == [
        {"name": "data", "hostPath": {"path": "/srv"}},
        {"name": "extra", "secret": {"secretName": "s"}},
        {"name": "conf", "configMap": {"name": "web-conf"}},
    ]


def test_finalizers_are_a_set() -> None:
    result = smp({"metadata": {"finalizers": ["b.example.com/y", "c.example.com/z"]}})
    assert result["metadata"]["finalizers"] == ["a.example.com/x", "b.example.com/y", "c.example.com/z"]


def test_delete_from_primitive_list_finalizers() -> None:
    result = smp({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x"]}})
    assert result["metadata"]["finalizers"] == ["b.example.com/y"]
    cleared = smp(
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x", "b.example.com/y"]}}
    )
    assert cleared["metadata"]["finalizers"] == []


def test_finalizers_can_be_removed_with_null() -> None:
    assert "finalizers" not in smp({"metadata": {"finalizers": None}})["metadata"]


def test_owner_references_merge_by_uid() -> None:
    patch = {
        "metadata": {
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Thing", "name": "two-renamed", "uid": "u2", "controller": True},
                {"uid": "u1", "$patch": "delete"},
            ]
        }
    }
    refs = smp(patch)["metadata"]["ownerReferences"]
    assert refs == [
        {"apiVersion": "v1", "kind": "Thing", "name": "two-renamed", "uid": "u2", "controller": True}
    ]


def test_labels_merge_and_null_deletes() -> None:
    result = smp({"metadata": {"labels": {"tier": None, "env": "prod"}}, "spec": {"replicas": 5}})
    assert result["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert result["spec"]["replicas"] == 5


def test_atomic_lists_are_replaced() -> None:
    original = deployment()
    pod_spec(original)["tolerations"] = [{"key": "a", "operator": "Exists"}]
    result = smp(template_patch({"tolerations": [{"key": "b", "operator": "Exists"}]}), original)
    assert pod_spec(result)["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_container_args_are_replaced_not_merged() -> None:
    original = deployment()
    pod_spec(original)["containers"][0]["args"] = ["--a", "--b"]
    result = smp(template_patch({"containers": [{"name": "app", "args": ["--c"]}]}), original)
    assert containers(result)[0]["args"] == ["--c"]


def test_pod_schema_works_at_top_level() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec(deployment())}
    assert POD is not None
    result = apply_strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}, POD
    )
    assert [(c["name"], c["image"]) for c in result["spec"]["containers"]] == [
        ("app", "app:2"),
        ("sidecar", "side:1"),
    ]


def test_replace_strategy_of_pdb_selector() -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "p"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web", "tier": "front"}}},
    }
    result = apply_strategic_merge_patch(pdb, {"spec": {"selector": {"matchLabels": {"app": "api"}}}}, PDB)
    assert result["spec"]["selector"] == {"matchLabels": {"app": "api"}}
    assert result["spec"]["minAvailable"] == 1


def test_unknown_fields_merge_like_a_merge_patch() -> None:
    result = smp(
        {"spec": {"fancy": {"a": [1]}, "template": {"spec": {"containers": [{"name": "app", "x": 1}]}}}}
    )
    assert result["spec"]["fancy"] == {"a": [1]}
    assert containers(result)[0]["x"] == 1


def test_result_shares_nothing_with_inputs() -> None:
    original = deployment()
    patch = template_patch({"containers": [{"name": "new", "env": [{"name": "X", "value": "1"}]}]})
    result = apply_strategic_merge_patch(original, patch, DEPLOYMENT)
    for container in containers(result):
        container["image"] = "mutated"
    result["metadata"]["labels"]["mutated"] = "yes"
    assert original == deployment()
    assert patch == template_patch({"containers": [{"name": "new", "env": [{"name": "X", "value": "1"}]}]})


BAD_PATCHES: list[tuple[str, dict[str, Any], str, type[errors.APIError]]] = [
    ("unknown $patch on a map", {"metadata": {"labels": {"$patch": "explode"}}}, "metadata.labels",
     errors.BadRequest),
    ("unknown $patch in a list", template_patch({"containers": [{"name": "app", "$patch": "explode"}]}),
     "spec.template.spec.containers", errors.BadRequest),
    ("container without a name", template_patch({"containers": [{"image": "x"}]}),
     "spec.template.spec.containers", errors.BadRequest),
    ("string in a list of objects", template_patch({"containers": ["app"]}), "spec.template.spec.containers",
     errors.BadRequest),
    ("$patch delete without merge key", template_patch({"containers": [{"$patch": "delete"}]}),
     "merge key", errors.BadRequest),
    ("$retainKeys not a list", {"spec": {"strategy": {"$retainKeys": "type"}}}, "spec.strategy",
     errors.BadRequest),
    ("$setElementOrder not a list", template_patch({"$setElementOrder/containers": "app"}),
     "spec.template.spec.containers", errors.BadRequest),
    ("malformed $setElementOrder key", {"metadata": {"$setElementOrderfinalizers": []}}, "setElementOrder",
     errors.BadRequest),
    ("$deleteFromPrimitiveList not a list", {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
     "metadata.finalizers", errors.BadRequest),
    ("malformed $deleteFromPrimitiveList key", {"metadata": {"$deleteFromPrimitiveList": ["a"]}},
     "primitive list", errors.BadRequest),
    ("mixed finalizer types", {"metadata": {"finalizers": [1]}}, "metadata.finalizers", errors.BadRequest),
    ("lists of lists", {"metadata": {"finalizers": [["a"]]}}, "lists of lists", errors.Invalid),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "patch", "fragment", "error"), BAD_PATCHES, ids=[case[0] for case in BAD_PATCHES]
)
def test_bad_patches(name: str, patch: dict[str, Any], fragment: str, error: type[errors.APIError]) -> None:
    with pytest.raises(error) as raised:
        smp(patch)
    assert type(raised.value) is error
    assert fragment in raised.value.message, raised.value.message


def test_a_value_of_another_type_replaces_the_member_as_upstream_merges_it() -> None:
    # Upstream's mergeMap replaces a member whose patch value is of another type; the result's
    # decoding is what refuses it then ("cannot restore struct from: string", a 422).
    assert smp({"spec": {"template": "nope"}})["spec"]["template"] == "nope"
    assert pod_spec(smp(template_patch({"containers": {"name": "app"}})))["containers"] == {"name": "app"}
    assert smp({"metadata": 5})["metadata"] == 5


def test_top_level_must_be_objects() -> None:
    with pytest.raises(errors.BadRequest):
        apply_strategic_merge_patch(deployment(), [1], DEPLOYMENT)  # type: ignore[arg-type]
    with pytest.raises(errors.BadRequest):
        apply_strategic_merge_patch([1], {}, DEPLOYMENT)  # type: ignore[arg-type]


def test_accepts_strategic_merge() -> None:
    assert accepts_strategic_merge("apps", "v1", "Deployment")
    assert accepts_strategic_merge("", "v1", "ConfigMap")
    assert accepts_strategic_merge("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    assert not accepts_strategic_merge("example.com", "v1", "Widget")
    assert not accepts_strategic_merge("apps", "v1", "Widget")


def test_schema_none_still_understands_directives() -> None:
    original = {"a": {"b": 1}, "l": [{"name": "x"}, {"name": "y"}]}
    assert apply_strategic_merge_patch(original, {"a": {"$patch": "replace", "c": 2}}, None) == {
        "a": {"c": 2},
        "l": [{"name": "x"}, {"name": "y"}],
    }
    assert apply_strategic_merge_patch(original, {"l": [{"name": "z"}]}, None) == {
        "a": {"b": 1},
        "l": [{"name": "z"}],
    }


# --- properties -------------------------------------------------------------------------------

# JSON has no NaN or infinity (request decoding refuses both).
SCALARS = st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4)
PLAIN_KEYS = st.sampled_from(["a", "b", "c", "name", "spec"]) | st.text(max_size=3).filter(
    lambda key: not key.startswith("$")
)
NULL_FREE = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(PLAIN_KEYS, children, max_size=3),
    max_leaves=10,
)
# Objects whose members may be null (deletions), whose lists hold null-free values.
PATCH_VALUES = st.recursive(
    st.none() | SCALARS | st.lists(NULL_FREE, max_size=3),
    lambda children: st.dictionaries(PLAIN_KEYS, children, max_size=3),
    max_leaves=12,
)
DOCUMENTS = st.dictionaries(PLAIN_KEYS, st.none() | NULL_FREE, max_size=4)
PATCHES = st.dictionaries(PLAIN_KEYS, PATCH_VALUES, max_size=4)


@settings(max_examples=200, deadline=None)
@given(DOCUMENTS, PATCHES)
def test_without_schema_it_is_a_merge_patch(document: dict[str, Any], patch: dict[str, Any]) -> None:
    assert apply_strategic_merge_patch(document, patch, None) == apply_merge_patch(document, patch)


DEPLOYMENT_KEYS = st.sampled_from(
    [
        "spec", "template", "metadata", "containers", "name", "image", "ports", "containerPort", "env",
        "value", "finalizers", "labels", "ownerReferences", "uid", "strategy", "type", "volumes",
        "replicas", "$patch", "$retainKeys", "$setElementOrder/containers", "$setElementOrder/finalizers",
        "$deleteFromPrimitiveList/finalizers", "$setElementOrder/env", "$deleteFromPrimitiveList/args",
        "args", "tolerations", "x",
    ]
)  # fmt: skip
DIRECTIVE_VALUES = st.sampled_from(["replace", "delete", "merge", "bogus", "app", "sidecar", 80, 443])
ANY_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 500) | DIRECTIVE_VALUES | st.text(max_size=3),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(DEPLOYMENT_KEYS, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(DEPLOYMENT_KEYS, ANY_VALUES, max_size=4))
def test_arbitrary_patches_against_a_deployment_raise_only_api_errors(patch: dict[str, Any]) -> None:
    original = deployment()
    try:
        result = apply_strategic_merge_patch(original, patch, DEPLOYMENT)
    except errors.APIError as exc:
        assert exc.code in (400, 422)
    else:
        assert isinstance(result, dict)
    assert original == deployment()


@settings(max_examples=100, deadline=None)
@given(st.permutations(["app", "sidecar", "init"]), st.booleans())
def test_set_element_order_always_wins(order: list[str], with_new: bool) -> None:
    patch_list = [{"name": "init", "image": "i:1"}] if with_new else []
    names = order if with_new else [name for name in order if name != "init"]
    patch = template_patch(
        {"$setElementOrder/containers": [{"name": name} for name in names], "containers": patch_list}
    )
    assert [c["name"] for c in containers(smp(patch))] == names
