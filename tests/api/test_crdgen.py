"""CRDs generated from custom resource models: the kind's names and subresources from the class
keywords, a structural schema from the fields (and the errors for what has none)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

import kubeloop
from kubeloop.crd import (
    EmbeddedResource,
    IntOrString,
    ListType,
    MapType,
    PreserveUnknownFields,
    PrinterColumn,
    Rule,
    Scale,
    SchemaConversionError,
    definitions,
    plural_of,
    to_yaml,
)
from kubeloop.models import core_v1


class Mode(StrEnum):
    FAST = "Fast"
    SLOW = "Slow"


class Port(kubeloop.KubeModel):
    name: str
    container_port: Annotated[int, Field(gt=0, le=65535)]


class GadgetSpec(kubeloop.KubeModel):
    """What a gadget does."""

    replicas: Annotated[int, Field(ge=0, le=10, description="How many copies run.")] = 1
    mode: Mode = Mode.FAST
    flavour: Literal["plain", "spicy"] | None = None
    run_as_user: int | None = None
    base_url: str = Field(default="http://localhost", alias="baseURL", pattern=r"^https?://")
    target: IntOrString = 80
    tags: set[str] = set()
    labels: dict[str, str] = {}
    settings: dict[str, Any] = {}
    anything: Any = None
    ports: Annotated[list[Port], ListType("map", keys=("name",)), Field(max_length=5)] = []
    limits: Annotated[dict[str, int], MapType("atomic"), Rule("self.all(k, self[k] > 0)")] = {}
    extra: Annotated[dict[str, Any], PreserveUnknownFields()] = {}
    template: core_v1.PodTemplateSpec | None = None
    ratio: Annotated[float, Field(multiple_of=0.5)] = 1.0
    sent: str | None


class GadgetStatus(kubeloop.KubeModel):
    ready_replicas: int = 0
    observed_generation: int | None = None


class Gadget(
    kubeloop.CustomResource,
    group="gen.example.com",
    version="v1",
    short_names=("gd",),
    categories=("all",),
    scale=Scale(label_selector_path=".status.selector"),
    printer_columns=(PrinterColumn("Replicas", ".spec.replicas", type="integer"),),
    selectable_fields=(".spec.mode",),
    rules=(Rule("self.metadata.name.size() < 30", message="short names only"),),
):
    """A gadget: the docstring is the schema's description."""

    spec: Annotated[
        GadgetSpec, Rule("self.replicas <= 5 || self.mode == 'Fast'", reason="FieldValueForbidden")
    ]
    status: GadgetStatus | None = None


def schema_of(*models: type[kubeloop.CustomResource]) -> dict[str, Any]:
    (crd,) = definitions(*models)
    version: dict[str, Any] = crd["spec"]["versions"][0]
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def test_the_class_keywords_name_the_kind_and_its_subresources() -> None:
    crd = Gadget.crd()
    assert crd["metadata"] == {"name": "gadgets.gen.example.com"}
    assert crd["spec"]["names"] == {
        "kind": "Gadget",
        "listKind": "GadgetList",
        "plural": "gadgets",
        "singular": "gadget",
        "shortNames": ["gd"],
        "categories": ["all"],
    }
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert version["additionalPrinterColumns"] == [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}
    ]
    assert version["selectableFields"] == [{"jsonPath": ".spec.mode"}]
    assert Gadget.__gvk__ == kubeloop.GroupVersionKind("gen.example.com", "v1", "Gadget")
    assert (Gadget.__plural__, Gadget.__namespaced__) == ("gadgets", True)
    assert Gadget(spec=GadgetSpec(sent=None)).to_dict()["apiVersion"] == "gen.example.com/v1"


def test_fields_become_a_structural_schema() -> None:
    root = schema_of(Gadget)
    assert root["description"] == "A gadget: the docstring is the schema's description."
    assert root["type"] == "object"
    assert list(root["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert root["properties"]["metadata"] == {"type": "object"}
    assert root["required"] == ["spec"]
    assert root["x-kubernetes-validations"] == [
        {"rule": "self.metadata.name.size() < 30", "message": "short names only"}
    ]
    spec = root["properties"]["spec"]
    assert spec["description"] == "What a gadget does."
    assert spec["x-kubernetes-validations"] == [
        {"rule": "self.replicas <= 5 || self.mode == 'Fast'", "reason": "FieldValueForbidden"}
    ]
    fields = spec["properties"]
    assert fields["replicas"] == {
        "default": 1,
        "description": "How many copies run.",
        "maximum": 10,
        "minimum": 0,
        "type": "integer",
    }
    assert fields["mode"] == {"default": "Fast", "enum": ["Fast", "Slow"], "type": "string"}
    assert fields["flavour"] == {"enum": ["plain", "spicy"], "type": "string"}  # optional, not nullable
    assert fields["sent"] == {"nullable": True, "type": "string"}  # required, but may be null
    assert "sent" in spec["required"]
    assert fields["runAsUser"] == {"type": "integer"}  # snake_case in Python, camelCase in JSON
    assert fields["baseURL"]["pattern"] == "^https?://"
    assert fields["target"] == {"default": 80, "x-kubernetes-int-or-string": True}
    assert fields["tags"] == {
        "default": [],
        "items": {"type": "string"},
        "type": "array",
        "x-kubernetes-list-type": "set",
    }
    assert fields["labels"]["additionalProperties"] == {"type": "string"}
    assert fields["settings"] == {
        "default": {},
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert fields["anything"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert fields["ports"]["x-kubernetes-list-type"] == "map"
    assert fields["ports"]["x-kubernetes-list-map-keys"] == ["name"]
    assert fields["ports"]["maxItems"] == 5
    assert fields["ports"]["items"]["properties"]["containerPort"] == {
        "exclusiveMinimum": True,
        "maximum": 65535,
        "minimum": 0,
        "type": "integer",
    }
    assert fields["ports"]["items"]["required"] == ["name", "containerPort"]
    assert fields["limits"]["x-kubernetes-map-type"] == "atomic"
    assert fields["limits"]["x-kubernetes-validations"] == [{"rule": "self.all(k, self[k] > 0)"}]
    assert fields["extra"]["x-kubernetes-preserve-unknown-fields"] is True
    assert fields["ratio"]["multipleOf"] == 0.5
    template = fields["template"]
    assert template["properties"]["metadata"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert template["properties"]["spec"]["properties"]["containers"]["items"]["required"] == ["name"]
    status = root["properties"]["status"]["properties"]
    assert status["readyReplicas"] == {"default": 0, "type": "integer"}


def assert_structural(node: Any, path: str = "") -> None:
    """Every node typed (or int-or-string / preserving), no $ref, anyOf or 2020-12 leftovers."""
    assert isinstance(node, dict), path
    assert not {"$ref", "anyOf", "allOf", "oneOf", "$defs", "title", "const", "prefixItems"} & set(node), path
    assert (
        "type" in node
        or node.get("x-kubernetes-int-or-string")
        or node.get("x-kubernetes-preserve-unknown-fields")
    ), path
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        assert isinstance(node.get(bound, False), bool), path  # OpenAPI 3.0's flag, not 2020-12's number
    for name, sub in (node.get("properties") or {}).items():
        assert_structural(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        assert_structural(node["additionalProperties"], f"{path}[*]")
    if "items" in node:
        assert_structural(node["items"], f"{path}[]")


def test_every_node_of_the_generated_schema_is_structural() -> None:
    assert_structural(schema_of(Gadget))


def test_a_cluster_scoped_kind_with_its_own_names() -> None:
    class Policy(
        kubeloop.CustomResource, group="gen.example.com", version="v1beta1", scope="Cluster", status=False
    ):
        spec: dict[str, str] = {}
        status: dict[str, str] = {}

    crd = Policy.crd()
    assert crd["metadata"]["name"] == "policies.gen.example.com"
    assert crd["spec"]["scope"] == "Cluster"
    assert "subresources" not in crd["spec"]["versions"][0]
    assert Policy.__namespaced__ is False
    assert [plural_of(k) for k in ("Policy", "Status", "Gateway", "Box", "Match", "Agent")] == [
        "policies",
        "statuses",
        "gateways",
        "boxes",
        "matches",
        "agents",
    ]


def test_two_models_of_one_kind_are_its_versions() -> None:
    class ThingV1(kubeloop.CustomResource, group="v.example.com", version="v1", kind="Thing", storage=True):
        spec: dict[str, str] = {}

    class ThingV2(kubeloop.CustomResource, group="v.example.com", version="v2", kind="Thing"):
        spec: dict[str, int] = {}

    (crd,) = definitions(ThingV1, ThingV2)
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1", True), ("v2", False)]

    class ThingV3(kubeloop.CustomResource, group="v.example.com", version="v3", kind="Thing"):
        spec: dict[str, int] = {}

    with pytest.raises(ValueError, match="say storage=True"):
        definitions(ThingV2, ThingV3)


class Left(kubeloop.KubeModel):
    a: int


class Right(kubeloop.KubeModel):
    b: str


class Tree(kubeloop.KubeModel):
    children: list[Tree] = []
    child: Tree | None = None


class Holder(kubeloop.KubeModel):
    tree: Tree | None = None


@pytest.mark.parametrize(
    ("field_type", "path", "reason"),
    [
        (Left | Right, "Bad.spec.value", "a union of types"),
        (tuple[int, str], "Bad.spec.value", "a tuple"),
        (Tree, "Bad.spec.value.children[*]", "Tree contains itself"),
        (int | bool, "Bad.spec.value", "a union of types"),
        (float | str, "Bad.spec.value", "a union of types"),
        (Literal[1, "x"], "Bad.spec.value", "an enum of values of several types"),
        (Holder | None, "Bad.spec.value.tree.children[*]", "Tree contains itself"),
    ],
)
def test_what_has_no_structural_form_is_an_error_naming_the_field(
    field_type: Any, path: str, reason: str
) -> None:
    spec_model = type("BadSpec", (kubeloop.KubeModel,), {"__annotations__": {"value": field_type}})

    class Bad(kubeloop.CustomResource, group="bad.example.com", version="v1"):
        spec: spec_model  # type: ignore[valid-type]

    with pytest.raises(SchemaConversionError) as caught:
        Bad.crd()
    assert caught.value.path.endswith(path)
    assert reason in caught.value.reason


def test_embedded_resources_and_yaml_output() -> None:
    class Wrapper(kubeloop.CustomResource, group="gen.example.com", version="v1"):
        spec: Annotated[dict[str, Any], EmbeddedResource(), PreserveUnknownFields()] = {}

    yaml_text = to_yaml([Wrapper.crd(), Gadget.crd()])
    assert yaml_text.count("kind: CustomResourceDefinition") == 2
    assert "\n---\n" in yaml_text
    assert "&id" not in yaml_text and "*id" not in yaml_text  # shared schemas written out, not aliased
    assert Wrapper.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-embedded-resource"
    ]
