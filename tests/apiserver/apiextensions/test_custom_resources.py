"""CustomResourceDefinitions and custom resources on the embedded server, driven by the real
kubectl (oldest and newest on the machine) and over HTTP: established in the same write,
pruning, defaults, validation with every offending path, status and scale subresources, printer
columns, categories, explain, patch types, deletion of a CRD and its objects, and durability."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import time
from typing import Any

import orjson
import pytest

from kubeloop.testing import eventually, start_server
from tests.apiserver.schemas import map_list
from tests.apiserver.storage.test_durability import apiserver, session_for
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread

MERGE = "application/merge-patch+json"


def crd_yaml(group: str) -> str:
    return f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.{group}
spec:
  group: {group}
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    schema:
      openAPIV3Schema:
        type: object
        description: A CronTab runs an image on a schedule.
        properties:
          spec:
            type: object
            description: What to run and when.
            required: [cronSpec]
            properties:
              cronSpec:
                type: string
                description: The schedule in cron format.
                pattern: '^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){{4}}$'
              image:
                type: string
                maxLength: 20
              replicas:
                type: integer
                description: How many copies run.
                minimum: 1
                maximum: 10
                default: 1
              mode:
                type: string
                enum: [Fast, Slow]
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {{type: string}}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              replicas:
                type: integer
"""


def crontab_yaml(group: str, name: str, **spec: Any) -> str:
    fields = {"cronSpec": "* * * * */5", "image": "my-image", **spec}
    lines = "".join(
        f"  {key}: {value!r}\n" if isinstance(value, str) else f"  {key}: {value}\n"
        for key, value in fields.items()
    )
    return f"apiVersion: {group}/v1\nkind: CronTab\nmetadata:\n  name: {name}\nspec:\n{lines}"


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


@pytest.mark.kubectl
def test_kubectl_applies_a_crd_and_right_after_it_a_custom_resource(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    group = f"{namespace}.example.com"
    kubectl("apply", "-f", "-", stdin=crd_yaml(group))
    # No waiting for Established: the CRD was established in the same write.
    kubectl("apply", "-n", namespace, "-f", "-", stdin=crontab_yaml(group, "nightly"))

    table = kubectl("get", f"crontabs.{group}", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "SPEC", "REPLICAS"]
    assert table[1].split() == ["nightly", "*", "*", "*", "*", "*/5", "1"]  # the default, on read
    assert "crontab." + group + "/nightly" in kubectl("get", "all", "-n", namespace).stdout
    assert "nightly" in kubectl("get", f"ct.{group}", "-n", namespace, "-o", "name").stdout

    # The CRD's manifest has no resourceVersion, which a CRD update must name: kubectl replace
    # fills in the server's, so it is not refused.
    replaced = kubectl("replace", "-f", "-", stdin=crd_yaml(group))
    assert "replaced" in replaced.stdout

    kubectl("scale", "-n", namespace, f"crontab.{group}/nightly", "--replicas=3")
    obj = api.get(f"/apis/{group}/v1/namespaces/{namespace}/crontabs/nightly").json()
    assert obj["spec"]["replicas"] == 3
    assert obj["metadata"]["generation"] == 2

    explained = kubectl("explain", "crontab.spec", f"--api-version={group}/v1").stdout
    assert "What to run and when." in explained
    assert "The schedule in cron format." in explained
    assert (
        "How many copies run."
        in kubectl("explain", "crontab.spec.replicas", f"--api-version={group}/v1").stdout
    )


@pytest.mark.kubectl
def test_kubectl_gets_every_offending_field_of_an_invalid_custom_resource(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    group = f"{namespace}.example.com"
    kubectl("apply", "-f", "-", stdin=crd_yaml(group))
    bad = crontab_yaml(group, "bad", cronSpec="nope", image="x" * 30, replicas=50, mode="Medium")
    result = kubectl("apply", "-n", namespace, "-f", "-", stdin=bad, check=False)
    assert result.returncode != 0
    for expected in (
        'spec.cronSpec: Invalid value: "nope": spec.cronSpec in body should match',
        "spec.image: Too long: may not be more than 20 bytes",
        "spec.replicas: Invalid value: 50: spec.replicas in body should be less than or equal to 10",
        'spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow"',
    ):
        assert expected in result.stderr, result.stderr
    assert api.get(f"/apis/{group}/v1/namespaces/{namespace}/crontabs/bad").status_code == 404


def crd_body(group: str, **version: Any) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "default": 2},
                    "keep": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "nothing": {"type": "string", "nullable": True},
                },
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    **version,
                }
            ],
        },
    }


def create_crd(api: Client, group: str, **version: Any) -> dict[str, Any]:
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd_body(group, **version))
    assert response.status_code == 201, response.text
    crd: dict[str, Any] = response.json()
    return crd


def test_a_created_crd_is_established_at_once_with_defaulted_names(api: Client, namespace: str) -> None:
    crd = create_crd(api, f"{namespace}.example.com")
    names = crd["spec"]["names"]
    assert names["singular"] == "widget" and names["listKind"] == "WidgetList"
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"] == names
    assert crd["status"]["storedVersions"] == ["v1"]
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]
    resources = api.get(f"/apis/{namespace}.example.com/v1").json()["resources"]
    assert {r["name"] for r in resources} == {"widgets", "widgets/status"}


def test_a_crd_update_must_name_the_version_it_replaces(api: Client, namespace: str) -> None:
    """As upstream's CRD strategy: a PUT of a manifest without a resourceVersion is a 422 naming
    the field, and nothing is written (``kubectl replace`` fills in the server's first)."""
    group = f"{namespace}.example.com"
    crd = create_crd(api, group)
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}"
    as_written = crd_body(group)
    as_written["spec"]["names"]["shortNames"] = ["wd"]
    refused = api.put(path, as_written)
    assert refused.status_code == 422, refused.text
    assert refused.json()["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0x0: must be specified for an update",
            "field": "metadata.resourceVersion",
        }
    ]
    assert "shortNames" not in api.get(path).json()["spec"]["names"]
    as_written["metadata"]["resourceVersion"] = crd["metadata"]["resourceVersion"]
    accepted = api.put(path, as_written)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["spec"]["names"]["shortNames"] == ["wd"]


def test_custom_resources_are_pruned_defaulted_and_status_goes_through_status(
    api: Client, namespace: str
) -> None:
    group = f"{namespace}.example.com"
    create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"unknown": 1, "keep": {"any": {"thing": 1}}, "nothing": None},
        "status": {"phase": "Ignored"},
        "extra": True,
    }
    created = api.post(path, body)
    assert created.status_code == 201, created.text
    obj = created.json()
    assert obj["spec"] == {"size": 2, "keep": {"any": {"thing": 1}}, "nothing": None}
    assert "extra" not in obj and "status" not in obj
    assert created.headers.get("Warning", "").count("unknown field") == 2

    strict = api.post(path + "?fieldValidation=Strict", {**body, "metadata": {"name": "w2"}})
    assert strict.status_code == 400
    assert 'unknown field "spec.unknown"' in strict.json()["message"]

    # The main resource cannot write status; /status writes only status.
    api.patch(f"{path}/w", {"status": {"phase": "Main"}, "spec": {"size": 3}}, MERGE)
    after = api.patch(f"{path}/w/status", {"status": {"phase": "Done"}, "spec": {"size": 9}}, MERGE).json()
    assert after["status"] == {"phase": "Done"}
    assert after["spec"]["size"] == 3
    assert after["metadata"]["generation"] == 2  # the spec change only

    smp = api.patch(f"{path}/w", {"spec": {"size": 4}}, "application/strategic-merge-patch+json")
    assert smp.status_code == 415
    assert "application/merge-patch+json" in smp.json()["message"]
    assert "strategic" not in smp.json()["message"]

    wrong = api.patch(f"{path}/w", {"spec": {"size": "big"}}, MERGE)
    assert wrong.status_code == 422
    assert wrong.json()["details"]["causes"] == [
        {
            "reason": "FieldValueTypeInvalid",
            "message": 'Invalid value: "string": spec.size in body must be of type integer: "string"',
            "field": "spec.size",
        }
    ]

    # An update must name the version it replaces (unlike most built-in kinds): nothing written.
    current = api.get(f"{path}/w").json()
    unconditional = {**current, "metadata": {"name": "w"}, "spec": {"size": 5}}
    refused = api.put(f"{path}/w", unconditional)
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0x0: must be specified for an update",
            "field": "metadata.resourceVersion",
        }
    ]
    assert api.get(f"{path}/w").json()["spec"]["size"] == 3
    conditional = api.put(f"{path}/w", {**current, "spec": {"size": 5}})
    assert conditional.status_code == 200 and conditional.json()["spec"]["size"] == 5


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metadata": {"name": "wrong.example.com"}}, "metadata.name"),
        ({"spec": {"scope": "Everywhere"}}, "spec.scope"),
        ({"spec": {"group": "nodots"}}, "spec.group"),
        ({"spec": {"names": {"plural": "widgets", "kind": "bad kind"}}}, "spec.names.kind"),
        ({"version": {"storage": False}}, "spec.versions"),
        (
            {"version": {"schema": {"openAPIV3Schema": {"type": "object", "properties": {"a": {}}}}}},
            "spec.versions[0].schema.openAPIV3Schema.properties[a].type",
        ),
        (
            {"version": {"schema": {"openAPIV3Schema": {"type": "string"}}}},
            "spec.versions[0].schema.openAPIV3Schema.type",
        ),
    ],
)
def test_an_invalid_crd_is_rejected_naming_the_field(
    api: Client, namespace: str, change: dict[str, Any], field: str
) -> None:
    group = f"{namespace}.example.com"
    body = crd_body(group)
    if "metadata" in change:
        body["metadata"].update(change["metadata"])
    if "spec" in change:
        body["spec"].update(change["spec"])
        if "group" in change["spec"]:
            body["metadata"]["name"] = f"widgets.{change['spec']['group']}"
    if "version" in change:
        body["spec"]["versions"][0].update(change["version"])
    response = api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
    assert response.status_code == 422, response.text
    assert field in [c["field"] for c in response.json()["details"]["causes"]]
    assert (
        api.get(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{body['metadata']['name']}"
        ).status_code
        == 404
    )


def test_deleting_a_crd_deletes_its_objects_and_then_its_kind(api: Client, namespace: str) -> None:
    group = f"{namespace}.example.com"
    create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    for name in ("a", "b"):
        assert (
            api.post(
                path, {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}}
            ).status_code
            == 201
        )
    assert (
        api.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}").status_code
        == 200
    )

    def gone() -> bool:
        crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}")
        return crd.status_code == 404 and api.get(f"/apis/{group}/v1").status_code == 404

    asyncio.run(eventually(gone))
    # Re-created, the kind starts empty.
    create_crd(api, group)
    assert api.get(path).json()["items"] == []


def test_crds_and_their_objects_survive_a_restart_of_the_durable_server(tmp_path: pathlib.Path) -> None:
    group = "durable.example.com"
    server = start_server(tmp_path)
    try:
        api = Client(server)
        create_crd(api, group)
        assert (
            api.post(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d"}}
            ).status_code
            == 201
        )
        created = api.post(
            f"/apis/{group}/v1/namespaces/d/widgets",
            {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}},
        )
        assert created.status_code == 201, created.text
        uid = created.json()["metadata"]["uid"]
    finally:
        server.stop()
    server = start_server(tmp_path)
    try:
        api = Client(server)
        obj = api.get(f"/apis/{group}/v1/namespaces/d/widgets/w").json()
        assert obj["metadata"]["uid"] == uid
        assert obj["spec"] == {"size": 2}
        assert (
            api.post(
                f"/apis/{group}/v1/namespaces/d/widgets",
                {
                    "apiVersion": f"{group}/v1",
                    "kind": "Widget",
                    "metadata": {"name": "v"},
                    "spec": {"size": 5},
                },
            ).status_code
            == 201
        )
    finally:
        server.stop()


@pytest.mark.kubectl
# Durability is what this proves; the kubectls meet custom resources in the tests above.
@pytest.mark.parametrize("binary", KUBECTLS[-1:], ids=[p.name for p in KUBECTLS[-1:]])
def test_custom_resources_on_a_durable_server_across_sigkills(
    binary: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """`kubeloop apiserver --data-dir` driven by kubectl: the CRD and its objects outlive a SIGKILL,
    bad and huge bodies are refused naming the field and write nothing, and a CRD deleted just
    before a SIGKILL finishes its cleanup after the restart."""
    data = tmp_path / "data"
    kubectl = Kubectl(binary, data / "kubeconfig", tmp_path)
    group = "attack.example.com"
    base = f"/apis/{group}/v1/namespaces/default/crontabs"
    with apiserver(data) as (proc, _url):
        kubectl("apply", "-f", "-", stdin=crd_yaml(group))
        kubectl("apply", "-n", "default", "-f", "-", stdin=crontab_yaml(group, "before"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data) as (proc, url):
        session = session_for(data)
        table = kubectl("get", f"crontabs.{group}", "-n", "default").stdout.splitlines()
        assert table[1].split()[0] == "before" and table[1].split()[-1] == "1"
        kubectl("apply", "-n", "default", "-f", "-", stdin=crontab_yaml(group, "after", replicas=4))
        bad = kubectl(
            "apply",
            "-n",
            "default",
            "-f",
            "-",
            stdin=crontab_yaml(group, "bad", replicas="many"),
            check=False,
        )
        assert bad.returncode != 0 and "spec.replicas" in bad.stderr, bad.stderr
        huge = {
            "apiVersion": f"{group}/v1",
            "kind": "CronTab",
            "metadata": {"name": "huge"},
            "spec": {"cronSpec": "* * * * *", "extra": {"blob": "x" * (2 * 1024 * 1024)}},
        }
        (tmp_path / "huge.json").write_text(orjson.dumps(huge).decode())
        too_big = kubectl("create", "-n", "default", "-f", str(tmp_path / "huge.json"), check=False)
        assert too_big.returncode != 0 and "too large" in too_big.stderr.lower(), too_big.stderr
        nested: dict[str, object] = {}
        for _ in range(300):
            nested = {"a": nested}
        deep = session.post(
            url + base,
            json={**huge, "metadata": {"name": "deep"}, "spec": {"cronSpec": "* * * * *", "extra": nested}},
            timeout=30,
        )
        assert deep.status_code == 400, deep.text
        assert deep.json()["kind"] == "Status"
        for name in ("bad", "huge", "deep"):
            assert session.get(url + f"{base}/{name}", timeout=10).status_code == 404
        deleted = session.delete(
            url + f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.{group}", timeout=10
        )
        assert deleted.status_code == 200, deleted.text
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data) as (_proc, url):
        session = session_for(data)

        def cleaned_up() -> bool:
            crd = session.get(
                url + f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.{group}", timeout=10
            )
            return (
                crd.status_code == 404
                and session.get(url + f"/apis/{group}/v1", timeout=10).status_code == 404
            )

        asyncio.run(eventually(cleaned_up))
        kubectl("apply", "-f", "-", stdin=crd_yaml(group))
        assert kubectl("get", f"crontabs.{group}", "-n", "default", "-o", "name").stdout == ""


def test_an_edited_schema_defaults_older_objects_on_read_and_judges_later_writes(
    api: Client, namespace: str
) -> None:
    group = f"{namespace}.example.com"
    crd = create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "old"}, "spec": {"size": 3}}
    assert api.post(path, widget).status_code == 201
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema["properties"]["size"]["maximum"] = 5
    schema["properties"]["color"] = {"type": "string", "default": "blue"}
    updated = api.put(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}", crd)
    assert updated.status_code == 200, updated.text
    # The object written before the edit is served with the new default; it is not rewritten.
    old = api.get(f"{path}/old").json()
    assert old["spec"] == {"size": 3, "color": "blue"}
    assert old["metadata"]["resourceVersion"] == api.get(f"{path}/old").json()["metadata"]["resourceVersion"]
    # A status write keeps the stored spec as it was, and the object is stored defaulted then,
    # as upstream decodes every write: newer than the schema, it is still served with the default.
    status = api.patch(f"{path}/old/status", {"status": {"phase": "Ready"}}, MERGE)
    assert status.status_code == 200, status.text
    assert status.json()["spec"] == {"size": 3, "color": "blue"}
    assert api.get(f"{path}/old").json()["spec"] == {"size": 3, "color": "blue"}
    too_big = api.post(path, {**widget, "metadata": {"name": "new"}, "spec": {"size": 7}})
    assert too_big.status_code == 422
    assert too_big.json()["details"]["causes"][0]["field"] == "spec.size"
    fresh = api.post(path, {**widget, "metadata": {"name": "fresh"}, "spec": {}}).json()
    assert fresh["spec"] == {"size": 2, "color": "blue"}


def test_a_crd_write_that_leaves_its_spec_keeps_its_kinds_served_as_they_were(
    shared_server: ServerThread, api: Client, namespace: str
) -> None:
    """Writes of a CRD's labels or status leave its kinds' strategies (and every cache made for
    their schemas) and the catalog's entries as they were; a schema edit replaces
    them, and the edited schema is in force at once."""
    group = f"{namespace}.example.com"
    create_crd(api, group)
    server = shared_server.server
    assert server is not None and server.registry is not None
    resource = server.catalog.lookup(group, "v1", "widgets")
    assert resource is not None
    strategy = server.registry.strategy(resource)
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}"
    labelled = api.patch(crd_path, {"metadata": {"labels": {"team": "a"}}}, MERGE)
    assert labelled.status_code == 200, labelled.text
    conditions = labelled.json()["status"]["conditions"]
    noted = [*conditions, {"type": "Noted", "status": "True", "reason": "Test", "message": "m"}]
    status = api.patch(f"{crd_path}/status", {"status": {"conditions": noted}}, MERGE)
    assert status.status_code == 200, status.text
    assert server.registry.strategy(resource) is strategy
    assert server.catalog.lookup(group, "v1", "widgets") is resource
    crd = api.get(crd_path).json()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["maximum"] = 5
    assert api.put(crd_path, crd).status_code == 200
    assert server.registry.strategy(resource) is not strategy
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "big"}, "spec": {"size": 7}}
    too_big = api.post(path, widget)
    assert too_big.status_code == 422, too_big.text
    assert too_big.json()["details"]["causes"][0]["field"] == "spec.size"


@pytest.mark.kubectl
def test_a_status_write_is_defaulted_as_every_write_is(kubectl: Kubectl, api: Client, namespace: str) -> None:
    """Upstream decodes every write with the schema's defaults, a /status write's too: a status
    field's default is stored whichever way the status was written (kubectl's merge patch of
    /status, a PUT of it), not only when the main resource was."""
    group = f"{namespace}.example.com"
    crd = crd_body(group)
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    status["properties"] = {"phase": {"type": "string", "default": "Pending"}, "ready": {"type": "integer"}}
    kubectl("apply", "-f", "-", stdin=json.dumps(crd))
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(widget))
    patched = kubectl(
        "patch",
        f"widgets.{group}",
        "w",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"ready": 1}}',
        "-o",
        "json",
    )
    assert json.loads(patched.stdout)["status"] == {"phase": "Pending", "ready": 1}
    shown = kubectl("get", f"widgets.{group}", "w", "-n", namespace, "-o", "jsonpath={.status.phase}")
    assert shown.stdout == "Pending"
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets/w"
    replaced = {**api.get(path).json(), "status": {"ready": 2}}
    put = api.put(f"{path}/status", replaced)
    assert put.status_code == 200, put.text
    assert put.json()["status"] == {"phase": "Pending", "ready": 2}
    assert api.get(path).json()["status"] == {"phase": "Pending", "ready": 2}


def test_a_create_whose_metadata_the_schema_defaults_keeps_its_name_and_managed_fields(
    api: Client, namespace: str
) -> None:
    """A CRD's schema may declare metadata's name and generateName; a null one is then dropped
    as the schema's defaulting drops non-nullable nulls, which changes the metadata: the create
    goes on with that metadata (its generated name, its managedFields), not the one it had."""
    group = f"{namespace}.example.com"
    crd = crd_body(group)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 30}, "generateName": {"type": "string"}},
    }
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).status_code == 201
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    generated = api.post(path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                "metadata": {"generateName": "w-", "name": None}, "spec": {}})  # fmt: skip
    assert generated.status_code == 201, generated.text
    name = generated.json()["metadata"]["name"]
    assert name.startswith("w-") and len(name) == 7
    named = api.post(path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                            "metadata": {"name": "plain", "generateName": None}, "spec": {}})  # fmt: skip
    assert named.status_code == 201, named.text
    for created in (generated.json(), named.json()):
        stored = api.get(f"{path}/{created['metadata']['name']}").json()
        assert [entry["operation"] for entry in stored["metadata"]["managedFields"]] == ["Update"]
        assert stored["metadata"]["managedFields"] == created["metadata"]["managedFields"]
        assert stored["spec"] == {"size": 2}


def test_a_watch_opened_before_a_schema_edit_leaves_the_edited_schema_in_force(
    api: Client, namespace: str
) -> None:
    """A watch (any client's, or the garbage collector's) that began before its CRD changed still
    delivers events afterwards; serving them must not put a schema-less strategy in place of the
    edited one, which let invalid objects in and dropped defaults."""
    group = f"{namespace}.example.com"
    crd = create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w0"}, "spec": {"size": 1}}
    with api.get(f"{path}?watch=true", stream=True, timeout=30) as watch:
        lines = watch.iter_lines()
        assert api.post(path, widget).status_code == 201
        assert json.loads(next(lines))["type"] == "ADDED"
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        schema["properties"]["size"]["maximum"] = 5
        schema["properties"]["color"] = {"type": "string", "default": "blue"}
        updated = api.put(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}", crd)
        assert updated.status_code == 200, updated.text
        # The old watch goes on, or ends at the edit as upstream's may; either way, the schema holds.
        assert api.post(path, {**widget, "metadata": {"name": "w1"}}).status_code == 201
        for line in lines:
            if line and json.loads(line)["object"]["metadata"]["name"] == "w1":
                break
    too_big = api.post(path, {**widget, "metadata": {"name": "w2"}, "spec": {"size": 7}})
    assert too_big.status_code == 422, too_big.text
    assert api.get(f"{path}/w1").json()["spec"] == {"size": 1, "color": "blue"}


def test_custom_resources_take_the_paths_of_built_in_kinds(api: Client, namespace: str) -> None:
    """selectableFields as field selectors, pagination, watch from a resourceVersion,
    managedFields, and protobuf: a protobuf body is refused with 415, a protobuf Accept gets JSON."""
    group = f"{namespace}.example.com"
    create_crd(api, group, selectableFields=[{"jsonPath": ".spec.size"}])
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    for index in range(5):
        body = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": f"w{index}"},
            "spec": {"size": index % 2},
        }
        assert api.post(path + "?fieldManager=tester", body).status_code == 201
    selected = api.get(path, params={"fieldSelector": "spec.size=1"}).json()
    assert [w["metadata"]["name"] for w in selected["items"]] == ["w1", "w3"]
    unknown = api.get(path, params={"fieldSelector": "spec.color=red"})
    assert unknown.status_code == 400
    assert '"spec.color" is not a known field selector' in unknown.json()["message"]
    first = api.get(path, params={"limit": 2}).json()
    assert [w["metadata"]["name"] for w in first["items"]] == ["w0", "w1"]
    rest = api.get(path, params={"limit": 10, "continue": first["metadata"]["continue"]}).json()
    assert [w["metadata"]["name"] for w in rest["items"]] == ["w2", "w3", "w4"]
    assert "continue" not in rest["metadata"]
    managed = api.get(f"{path}/w0").json()["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in managed] == [("tester", "Update")]
    assert "f:size" in managed[0]["fieldsV1"]["f:spec"]

    since = first["metadata"]["resourceVersion"]
    assert api.patch(f"{path}/w4", {"spec": {"size": 7}}, MERGE).status_code == 200
    watch = api.get(path, params={"watch": "1", "resourceVersion": since, "timeoutSeconds": "1"}, stream=True)
    events = [orjson.loads(line) for line in watch.iter_lines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["spec"]["size"]) for e in events] == [
        ("MODIFIED", "w4", 7)
    ]

    protobuf = "application/vnd.kubernetes.protobuf"
    refused = api.request("POST", path, data=b"k8s\x00", headers={"Content-Type": protobuf})
    assert refused.status_code == 415
    assert refused.json()["kind"] == "Status"
    answered = api.get(f"{path}/w0", headers={"Accept": f"{protobuf}, application/json"})
    assert answered.status_code == 200
    assert answered.headers["Content-Type"].startswith("application/json")


def _fields_by_entry(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(m["manager"], m.get("subresource", "")): m["fieldsV1"] for m in obj["metadata"]["managedFields"]}


def test_an_update_owns_the_objects_it_creates_in_a_custom_resource(api: Client, namespace: str) -> None:
    """structured-merge-diff compares an Update against the live object, and a custom resource's
    live object before its create is empty: every object a write creates is its writer's as a
    whole ("." in FieldsV1), struct or map, as a cluster shows for custom resources (a built-in
    kind's zero value holds its structs, so a ConfigMap's create marks only its data map)."""
    group = f"{namespace}.example.com"
    create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    assert api.post(path + "?fieldManager=creator", widget).status_code == 201
    status = api.patch(f"{path}/w/status?fieldManager=operator", {"status": {"phase": "Ready"}}, MERGE)
    assert status.status_code == 200, status.text
    edited = api.patch(f"{path}/w?fieldManager=editor", {"spec": {"keep": {"a": {"b": 1}}}}, MERGE)
    assert edited.status_code == 200, edited.text
    managed = _fields_by_entry(edited.json())
    assert managed == {
        ("creator", ""): {"f:spec": {".": {}, "f:size": {}}},
        ("operator", "status"): {"f:status": {".": {}, "f:phase": {}}},
        ("editor", ""): {"f:spec": {"f:keep": {".": {}, "f:a": {".": {}, "f:b": {}}}}},
    }
    # An object present before the write is not taken: the editor's next change is only a leaf.
    again = api.patch(f"{path}/w?fieldManager=operator", {"spec": {"keep": {"a": {"c": 2}}}}, MERGE)
    managed = _fields_by_entry(again.json())
    assert managed[("operator", "")] == {"f:spec": {"f:keep": {"f:a": {"f:c": {}}}}}
    configmap = {"metadata": {"name": "c"}, "data": {"a": "b"}}
    created = api.post(f"/api/v1/namespaces/{namespace}/configmaps?fieldManager=creator", configmap).json()
    assert created["metadata"]["managedFields"][0]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}


def test_values_an_update_leaves_alone_are_not_judged_by_a_tightened_schema(
    api: Client, namespace: str
) -> None:
    """Validation ratcheting (upstream's default since 1.30): an object written before its schema
    was tightened can still be updated elsewhere; a changed value is judged by the new schema."""
    group = f"{namespace}.example.com"
    crd = create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 9}}
    assert api.post(path, widget).status_code == 201
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["size"]["maximum"] = 5
    spec["properties"]["label"] = {
        "type": "string",
        "x-kubernetes-validations": [{"rule": "self.size() < 4"}],
    }
    spec["x-kubernetes-validations"] = [{"rule": "!has(self.label) || self.label != 'x'", "message": "not x"}]
    assert (
        api.put(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}", crd).status_code
        == 200
    )
    # size stays 9: not judged again; the new field is judged.
    assert api.patch(f"{path}/w", {"spec": {"label": "ok"}}, MERGE).status_code == 200
    refused = api.patch(f"{path}/w", {"spec": {"label": "long!"}}, MERGE)
    assert refused.status_code == 422
    assert [c["field"] for c in refused.json()["details"]["causes"]] == ["spec.label"]
    # Changing size itself is judged: 8 is still over the new maximum, 5 is fine.
    too_big = api.patch(f"{path}/w", {"spec": {"size": 8}}, MERGE)
    assert [c["field"] for c in too_big.json()["details"]["causes"]] == ["spec.size"]
    # A rule on spec judges the whole spec, which this update changes.
    assert (
        api.patch(f"{path}/w", {"spec": {"label": "x"}}, MERGE).json()["details"]["causes"][0]["field"]
        == "spec"
    )
    assert api.patch(f"{path}/w", {"spec": {"size": 5}}, MERGE).status_code == 200
    # A new object gets no such grace.
    assert api.post(path, {**widget, "metadata": {"name": "w2"}}).status_code == 422


def test_schema_errors_are_ratcheted_where_upstreams_validator_correlates(api: Client, namespace: str) -> None:
    """Upstream's ratcheting validator drops an error when a value on its path, reached through
    correlated steps, is unchanged: a map list's items correlate by their keys (reordering the
    list changes nothing), an atomic list's items with nothing (a changed list's items are
    judged again, even one that stayed where it was)."""
    group = f"{namespace}.ratchet.example.com"
    body = crd_body(group)
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["sizes"] = {"type": "array", "items": {"type": "integer"}}
    spec["properties"]["ports"] = map_list({"name": {"type": "string"}, "port": {"type": "integer"}})
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert api.post(crds, body).status_code == 201
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    ports = [{"name": "a", "port": 900}, {"name": "b", "port": 1}]
    widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"sizes": [9, 1], "ports": ports}}
    assert api.post(path, widget).status_code == 201
    spec["properties"]["sizes"]["items"]["maximum"] = 5
    spec["properties"]["ports"]["items"]["properties"]["port"]["maximum"] = 100
    current = api.get(f"{crds}/widgets.{group}").json()
    current["spec"] = body["spec"]
    assert api.put(f"{crds}/widgets.{group}", current).status_code == 200

    def fields(response: Any) -> list[str]:
        assert response.status_code == 422, response.text
        return [cause["field"] for cause in response.json()["details"]["causes"]]

    assert api.patch(f"{path}/w", {"metadata": {"labels": {"a": "b"}}}, MERGE).status_code == 200
    assert api.patch(f"{path}/w", {"spec": {"ports": ports[::-1]}}, MERGE).status_code == 200
    assert api.patch(f"{path}/w", {"spec": {"ports": [{"name": "b", "port": 2}, ports[0]]}}, MERGE).status_code == 200
    assert fields(api.patch(f"{path}/w", {"spec": {"ports": [{"name": "a", "port": 800}]}}, MERGE)) == [
        "spec.ports[0].port"
    ]
    assert fields(api.patch(f"{path}/w", {"spec": {"sizes": [9, 2]}}, MERGE)) == ["spec.sizes[0]"]
    assert api.patch(f"{path}/w", {"spec": {"sizes": [4, 2]}}, MERGE).status_code == 200


def test_openapi_v2_publishes_custom_resources_as_upstream_converts_them(api: Client, namespace: str) -> None:
    group = f"{namespace}.v2.example.com"
    body = crd_body(group)
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["description"] = "What the widget should be."
    spec["required"] = ["size", "nothing"]
    spec["properties"]["port"] = {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    }
    spec["properties"]["keep"]["properties"] = {"inner": {"type": "string"}}
    spec["properties"]["loose"] = {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-preserve-unknown-fields": True,
    }
    spec["properties"]["mode"] = {"type": "string", "enum": ["a", "b"], "nullable": True}
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body).status_code == 201
    reversed_group = ".".join(reversed(group.split(".")))

    definitions = api.get("/openapi/v2").json()["definitions"]
    widget = definitions[f"{reversed_group}.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [{"group": group, "kind": "Widget", "version": "v1"}]
    assert (
        widget["properties"]["metadata"]["$ref"]
        == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    )
    published = widget["properties"]["spec"]
    assert published["description"] == "What the widget should be."
    assert published["required"] == ["size"]  # a nullable field is not required in v2
    fields = published["properties"]
    assert fields["size"] == {"type": "integer", "default": 2}
    assert fields["nothing"] == {}  # nullable: no type
    assert fields["mode"] == {"enum": ["a", "b"]}
    assert fields["port"] == {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True}
    assert fields["keep"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert fields["loose"] == {"x-kubernetes-preserve-unknown-fields": True}  # no items, so no type
    listed = definitions[f"{reversed_group}.v1.WidgetList"]
    assert listed["properties"]["items"]["items"] == {"$ref": f"#/definitions/{reversed_group}.v1.Widget"}
    assert listed["x-kubernetes-group-version-kind"][0]["kind"] == "WidgetList"

    protobuf = api.get(
        "/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
    ).content
    assert f"{reversed_group}.v1.Widget".encode() in protobuf and b"What the widget should be." in protobuf
    assert (
        api.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}").status_code
        == 200
    )
    deadline = time.monotonic() + 10  # the CRD goes once its (here no) objects are cleaned up
    while f"{reversed_group}.v1.Widget" in api.get("/openapi/v2").json()["definitions"]:
        assert time.monotonic() < deadline, "the deleted CRD's definition is still published"
        time.sleep(0.05)


def test_writes_and_watches_answer_each_version_as_it_is_served(api: Client, namespace: str) -> None:
    """An answer to a write and a watch line reuse the JSON the store encoded only when the
    object is served as stored: through a version other than the storage one (conversion None:
    the apiVersion changes) each is that version's, as a read is; through the storage version,
    byte for byte what encoding the object would give."""
    group = f"{namespace}.example.com"
    body = crd_body(group)
    stored_version = body["spec"]["versions"][0]
    body["spec"]["versions"].append({**stored_version, "name": "v2", "storage": False})
    assert api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body).status_code == 201
    for version, other in (("v2", "v1"), ("v1", "v2")):
        path = f"/apis/{group}/{version}/namespaces/{namespace}/widgets"
        with api.get(f"{path}?watch=true", stream=True, timeout=30) as watch:
            # Without a resourceVersion the watch starts with the objects there (the other loop's).
            lines = (
                event
                for event in (json.loads(line) for line in watch.iter_lines() if line)
                if event["object"]["metadata"]["name"] == version
            )
            widget = {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": {"name": version}}
            answers = [api.post(path, {**widget, "spec": {"size": 1}})]
            current = answers[0].json()
            answers.append(api.put(f"{path}/{version}", {**current, "spec": {"size": 3}}))
            answers.append(api.patch(f"{path}/{version}/status", {"status": {"phase": "Ready"}}, MERGE))
            for answer in answers:
                assert answer.status_code in (200, 201), answer.text
                assert answer.content == orjson.dumps(answer.json()) + b"\n"
                assert answer.json()["apiVersion"] == f"{group}/{version}"
            read = api.get(f"{path}/{version}").json()
            assert answers[-1].json() == read
            events = [next(lines) for _ in range(3)]
        assert [event["type"] for event in events] == ["ADDED", "MODIFIED", "MODIFIED"]
        assert [event["object"]["apiVersion"] for event in events] == [f"{group}/{version}"] * 3
        assert events[-1]["object"] == read
        # The same object read through the other version differs only in its apiVersion.
        assert api.get(f"/apis/{group}/{other}/namespaces/{namespace}/widgets/{version}").json() == {
            **read,
            "apiVersion": f"{group}/{other}",
        }


def test_a_generated_name_taken_is_drawn_again_a_given_one_is_409_and_no_metadata_500(
    api: Client, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create's body becomes the object it makes (it is not copied): the generated name the
    create sets must not make it forget that the client asked for none. A taken generated name
    is drawn again (upstream retries the storage's conflict); a name the client gave is 409.
    Metadata that is not an object is a 400 (it was a 500 for custom resources)."""
    from kubeloop.api import naming

    group = f"{namespace}.example.com"
    create_crd(api, group)
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    drawn = iter(["aaaaa", "aaaaa", "bbbbb"])
    monkeypatch.setattr(naming, "generate_name_suffix", lambda: next(drawn))
    body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"generateName": "w-"}, "spec": {}}
    first = api.post(path, body)
    assert first.status_code == 201 and first.json()["metadata"]["name"] == "w-aaaaa"
    second = api.post(path, body)
    assert second.status_code == 201, second.text
    assert second.json()["metadata"]["name"] == "w-bbbbb"
    given = api.post(path, {**body, "metadata": {"name": "w-bbbbb", "generateName": "w-"}})
    assert given.status_code == 409 and given.json()["reason"] == "AlreadyExists"
    for metadata, go_type in ((5, "float64"), ("w", "string"), (["w"], "[]interface {}"), (True, "bool")):
        odd = api.post(path, {**body, "metadata": metadata})  # never a 500: upstream's 400
        assert odd.status_code == 400, (metadata, odd.text)
        assert odd.json()["message"] == f"invalid metadata: expected object, got {go_type}"
