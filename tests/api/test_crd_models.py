"""CRDs generated from pydantic models, on the embedded server: applied with kubectl (oldest and
newest) and a custom resource right after; validation, defaults, CEL rules, printer columns,
explain, status and scale subresources and categories from the model's declarations;
``install_crds``, ``kubeloop crd`` and ``kubeloop run --install-crds``; and a hypothesis test
that the server and pydantic agree on generated objects."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
from typing import Annotated, Any, Literal

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import Field, ValidationError

import kubeloop
from kubeloop.crd import IntOrString, PrinterColumn, Rule, Scale, install_crds, to_yaml
from kubeloop.testing import eventually
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread

GROUP = "models.example.com"


class Backend(kubeloop.KubeModel):
    name: Annotated[str, Field(min_length=1, max_length=20, pattern=r"^[a-z]+$")]
    weight: Annotated[int, Field(ge=0, le=100)] = 50


class RouterSpec(kubeloop.KubeModel):
    """How a router routes."""

    replicas: Annotated[int, Field(ge=0, le=10, description="How many router pods run.")] = 1
    mode: Literal["RoundRobin", "Random"] = "RoundRobin"
    timeout_seconds: Annotated[int, Field(gt=0), Rule("self <= 300", message="at most five minutes")] = 30
    port: IntOrString = 8080
    backends: Annotated[list[Backend], Field(max_length=4)] = []
    zone: Annotated[str, Rule("self == oldSelf", message="zone is immutable")] = "a"


class RouterStatus(kubeloop.KubeModel):
    replicas: int = 0
    observed_generation: int | None = None


class Router(
    kubeloop.CustomResource,
    group=GROUP,
    version="v1",
    short_names=("rt",),
    categories=("all",),
    scale=Scale(),
    printer_columns=(
        PrinterColumn("Mode", ".spec.mode"),
        PrinterColumn("Replicas", ".spec.replicas", type="integer"),
    ),
):
    """A Router spreads requests over its backends."""

    spec: RouterSpec = Field(default_factory=RouterSpec)
    status: RouterStatus | None = None


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


def router_yaml(name: str, spec: str) -> str:
    return f"apiVersion: {GROUP}/v1\nkind: Router\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def test_kubectl_applies_a_generated_crd_and_right_after_it_a_resource(
    kubectl: Kubectl, api: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(to_yaml([Router.crd()]))
    kubectl("apply", "-f", str(crd_file))
    ns = ["-n", namespace]
    applied = kubectl("apply", *ns, "-f", "-", stdin=router_yaml("edge", "{backends: [{name: blue}]}"))
    assert f"router.{GROUP}/edge created" in applied.stdout
    # Defaults appear on read, in JSON names.
    got = json.loads(kubectl("get", *ns, f"routers.{GROUP}", "edge", "-o", "json").stdout)
    assert got["spec"] == {
        "replicas": 1,
        "mode": "RoundRobin",
        "timeoutSeconds": 30,
        "port": 8080,
        "backends": [{"name": "blue", "weight": 50}],
        "zone": "a",
    }
    # Every offending field path is named.
    bad = router_yaml(
        "bad", "{replicas: 11, mode: Sticky, timeoutSeconds: 301, backends: [{name: Blue, weight: -1}]}"
    )
    refused = kubectl("apply", *ns, "-f", "-", stdin=bad, check=False)
    assert refused.returncode == 1
    for expected in (
        "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        'spec.mode: Unsupported value: "Sticky": supported values: "RoundRobin", "Random"',
        "spec.backends[0].name: Invalid value: \"Blue\": spec.backends[0].name in body should match '^[a-z]+$'",
        "spec.backends[0].weight: Invalid value: -1: spec.backends[0].weight in body should be greater than or equal to 0",
        'spec.timeoutSeconds: Invalid value: "integer": at most five minutes',
    ):
        assert expected in refused.stderr, refused.stderr
    # A transition rule: the zone may not change.
    moved = kubectl("apply", *ns, "-f", "-", stdin=router_yaml("edge", "{zone: b}"), check=False)
    assert 'spec.zone: Invalid value: "string": zone is immutable' in moved.stderr
    # Printer columns, short name, category all.
    table = kubectl("get", *ns, "rt").stdout.splitlines()
    assert table[0].split() == ["NAME", "MODE", "REPLICAS"]
    assert table[1].split() == ["edge", "RoundRobin", "1"]
    assert f"router.{GROUP}/edge" in kubectl("get", *ns, "all", "-o", "name").stdout
    # The docstrings and descriptions are what explain shows.
    explained = kubectl("explain", "routers.spec.replicas", f"--api-version={GROUP}/v1").stdout
    assert "How many router pods run." in explained
    assert (
        "A Router spreads requests over its backends."
        in kubectl("explain", "routers", f"--api-version={GROUP}/v1").stdout
    )
    # Scale goes through the scale subresource; status only through /status.
    kubectl("scale", *ns, f"routers.{GROUP}/edge", "--replicas=3")
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/routers/edge"
    assert api.get(path).json()["spec"]["replicas"] == 3
    ignored = api.patch(path, {"status": {"replicas": 3}}, "application/merge-patch+json").json()
    assert "status" not in ignored or ignored["status"].get("replicas", 0) == 0
    written = api.patch(f"{path}/status", {"status": {"replicas": 3}}, "application/merge-patch+json").json()
    assert written["status"]["replicas"] == 3


async def test_install_crds_from_models_and_files_then_typed_reads(
    kube_client: kubeloop.APIClient, kube_namespace: str, tmp_path: pathlib.Path
) -> None:
    class Gizmo(kubeloop.CustomResource, group="install.example.com", version="v1", scope="Cluster"):
        spec: dict[str, str] = {}

    manifest = tmp_path / "more.yaml"
    other = {**Gizmo.crd(), "metadata": {"name": "doodads.install.example.com"}}
    other["spec"] = {**other["spec"], "names": {"kind": "Doodad", "plural": "doodads"}}
    manifest.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        + "---\n"
        + yaml.safe_dump(other)
    )
    installed = await install_crds(kube_client, Router, Gizmo, manifest)
    assert [crd["metadata"]["name"] for crd in installed] == [
        f"routers.{GROUP}",
        "gizmos.install.example.com",
        "doodads.install.example.com",
    ]
    created = await kube_client.create(
        Router(metadata=kubeloop.ObjectMeta(name="typed"), spec=RouterSpec(replicas=2)),
        namespace=kube_namespace,
    )
    assert isinstance(created, Router)
    assert created.spec.timeout_seconds == 30 and created.spec.replicas == 2
    # A CRD whose kind another CRD of the group already serves is refused, with the reason.
    clash = {**Gizmo.crd(), "metadata": {"name": "clashes.install.example.com"}}
    clash["spec"] = {**clash["spec"], "names": {"kind": "Gizmo", "plural": "clashes"}}
    with pytest.raises(kubeloop.crd.CRDNotServed, match='KindConflict: "Gizmo" is already in use'):
        await install_crds(kube_client, clash, timeout=5)
    gizmo = await kube_client.create(Gizmo(metadata=kubeloop.ObjectMeta(name="g"), spec={"a": "b"}))
    assert gizmo.metadata.namespace is None
    await kube_client.delete(Gizmo, "g")


def test_kubeloop_crd_prints_the_crds_a_module_holds(tmp_path: pathlib.Path) -> None:
    operator = tmp_path / "op"
    operator.mkdir()
    (operator / "models.py").write_text(
        "import kubeloop\n"
        "class Thing(kubeloop.CustomResource, group='cli.example.com', version='v1', short_names=('th',)):\n"
        "    spec: dict[str, int] = {}\n"
    )
    (operator / "main.py").write_text("from models import Thing\n\ndef setup(manager):\n    pass\n")
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "crd", str(operator)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (crd,) = list(yaml.safe_load_all(result.stdout))
    assert crd["metadata"]["name"] == "things.cli.example.com"
    assert crd["spec"]["names"]["shortNames"] == ["th"]
    empty = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "crd", "json"], capture_output=True, text=True, timeout=60
    )
    assert empty.returncode == 1 and "holds no custom resource models" in empty.stderr


# --------------------------------------------------------------------------- the server and pydantic agree


def backend_values() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"name": st.one_of(st.from_regex(r"^[a-z]{1,20}$", fullmatch=True), st.text(max_size=25))},
        optional={"weight": st.integers(min_value=-5, max_value=105)},
    )


spec_values = st.fixed_dictionaries(
    {},
    optional={
        "replicas": st.one_of(st.integers(min_value=-2, max_value=12), st.sampled_from(["3", 2.5, None])),
        "mode": st.sampled_from(["RoundRobin", "Random", "Sticky", 3]),
        # Up to the CEL rule's bound: pydantic does not evaluate CEL, the server alone judges it.
        "timeoutSeconds": st.integers(min_value=-1, max_value=300),
        "port": st.one_of(st.integers(min_value=1, max_value=65535), st.sampled_from(["http", True])),
        "backends": st.lists(backend_values(), max_size=6),
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=spec_values)
@example(spec={"backends": [{"name": "abc\n"}]})  # RE2's $ is the end of the text, not before a newline
@example(spec={"replicas": None, "port": "http"})
def test_the_server_and_pydantic_agree_on_generated_objects(
    api: Client, namespace: str, spec: dict[str, Any]
) -> None:
    api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Router.crd())
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Router", "metadata": {"name": "agree"}, "spec": spec}
    response = api.post(f"/apis/{GROUP}/v1/namespaces/{namespace}/routers?dryRun=All", body)
    assert response.status_code in (201, 422), response.text
    # The server drops a null it has no nullable field for (a Go pointer left unset), so pydantic
    # judges the object without it.
    judged = {**body, "spec": {key: value for key, value in spec.items() if value is not None}}
    try:
        Router.model_validate(judged, strict=True)
        pydantic_accepts = True
    except ValidationError:
        pydantic_accepts = False
    assert (response.status_code == 201) is pydantic_accepts, (response.text, spec)
    if pydantic_accepts:
        served = response.json()
        assert Router.model_validate(served).spec == Router.model_validate(judged).spec  # same defaults


# --------------------------------------------------------------------------- attack: the durable server


class Quota(kubeloop.KubeModel):
    limit: Annotated[
        str, Rule("isQuantity(self) && quantity(self).isLessThan(quantity('64Gi'))", message="under 64Gi")
    ]
    owner: Annotated[str, Rule("self == oldSelf", message="owner is immutable")]
    tags: Annotated[list[str], Rule("self.all(x, self.all(y, x == y || x != y))")] = []
    code: Annotated[str, Rule("self.find('(a+)+$') == ''", message="no trailing a")] = ""
    hints: Annotated[
        dict[str, str], Rule("self[?'tier'].orValue('gold') != 'lead'", message="no lead tier")
    ] = {}


class Budget(kubeloop.CustomResource, group="attack.models.example.com", version="v1"):
    spec: Quota


# Durability is what this proves; kubectl versions are tests/apiserver/test_kubectl.py's.
@pytest.mark.parametrize("binary", KUBECTLS[-1:], ids=[p.name for p in KUBECTLS[-1:]])
def test_generated_crd_and_its_rules_on_a_durable_server_across_sigkills(
    binary: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """`kubeloop crd` output applied to `kubeloop apiserver --data-dir` with kubectl; after a
    SIGKILL the restarted server enforces the CEL rules again (compiled from the stored CRD),
    transition rules judge against the object written before the kill, a tightened schema is
    ratcheted, and hostile values (a quadratic rule over 3,000 items, a backtracking pattern,
    a 10-million-digit quantity) are refused or judged at once, writing nothing."""
    from tests.apiserver.storage.test_durability import apiserver, session_for

    data = tmp_path / "data"
    kubectl = Kubectl(binary, data / "kubeconfig", tmp_path)
    module = tmp_path / "budgets.py"
    module.write_text("from tests.api.test_crd_models import Budget\n")
    printed = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "crd", str(module)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=pathlib.Path(__file__).parents[2],
        env={**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).parents[2])},
    )
    assert printed.returncode == 0, printed.stderr
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(printed.stdout)
    group = "attack.models.example.com"
    base = f"/apis/{group}/v1/namespaces/default/budgets"

    def budget(name: str, **spec: Any) -> str:
        return yaml.safe_dump(
            {"apiVersion": f"{group}/v1", "kind": "Budget", "metadata": {"name": name}, "spec": spec}
        )

    with apiserver(data) as (proc, _url):
        kubectl("apply", "-f", str(crd_file))
        kubectl("apply", "-n", "default", "-f", "-", stdin=budget("team", limit="8Gi", owner="ann"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data) as (proc, url):
        session = session_for(data)
        refused = kubectl(
            "apply", "-n", "default", "-f", "-", stdin=budget("big", limit="128Gi", owner="bob"), check=False
        )
        assert (
            refused.returncode == 1 and 'spec.limit: Invalid value: "string": under 64Gi' in refused.stderr
        ), refused.stderr
        moved = kubectl(
            "apply", "-n", "default", "-f", "-", stdin=budget("team", limit="8Gi", owner="eve"), check=False
        )
        assert 'spec.owner: Invalid value: "string": owner is immutable' in moved.stderr, moved.stderr
        assert (
            "configured"
            in kubectl(
                "apply", "-n", "default", "-f", "-", stdin=budget("team", limit="16Gi", owner="ann")
            ).stdout
        )
        # CEL's optional syntax, compiled again from the stored CRD after the kill.
        lead = kubectl(
            "apply",
            "-n",
            "default",
            "-f",
            "-",
            check=False,
            stdin=budget("lead", limit="1Gi", owner="x", hints={"tier": "lead"}),
        )
        assert 'spec.hints: Invalid value: "object": no lead tier' in lead.stderr, lead.stderr
        kubectl(
            "apply", "-n", "default", "-f", "-", stdin=budget("tin", limit="1Gi", owner="x", hints={"a": "b"})
        )
        # The stored CRD is published in /openapi/v2 (JSON) after the restart.
        definitions = session.get(url + "/openapi/v2", timeout=30).json()["definitions"]
        quota = definitions["com.example.models.attack.v1.Budget"]["properties"]["spec"]["properties"]
        assert quota["hints"]["additionalProperties"] == {"type": "string"}
        assert "com.example.models.attack.v1.BudgetList" in definitions
        # Hostile values: judged at once, refused with a Status, nothing written.
        hostile = [
            ({"limit": "1e10000000", "owner": "x"}, "spec.limit"),
            ({"limit": "1Gi", "owner": "x", "tags": [str(i) for i in range(3000)]}, "spec.tags"),
        ]
        for index, (spec, field) in enumerate(hostile):
            body = {
                "apiVersion": f"{group}/v1",
                "kind": "Budget",
                "metadata": {"name": f"h{index}"},
                "spec": spec,
            }
            answer = session.post(url + base, json=body, timeout=30)
            assert answer.status_code == 422, answer.text
            assert [c["field"] for c in answer.json()["details"]["causes"]] == [field]
            assert session.get(url + f"{base}/h{index}", timeout=10).status_code == 404
        # A pattern that backtracks exponentially in Python's re runs in linear time on RE2.
        backtracking = {"limit": "1Gi", "owner": "x", "code": "a" * 30000 + "!"}
        body = {
            "apiVersion": f"{group}/v1",
            "kind": "Budget",
            "metadata": {"name": "re2"},
            "spec": backtracking,
        }
        assert session.post(url + base, json=body, timeout=30).status_code == 201
        # An edit whose rule does not type-check is refused with upstream's words, and nothing of
        # it is written: the stored rule still judges, after the kill below too.
        crd_path = url + f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/budgets.{group}"
        edited = session.get(crd_path, timeout=10).json()
        owner = edited["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"
        ]["owner"]
        owner["x-kubernetes-validations"][0]["rule"] = "self > 1 && self.size() < 'x'"
        (tmp_path / "ill.json").write_text(orjson.dumps(edited).decode())
        ill = kubectl("replace", "-f", str(tmp_path / "ill.json"), check=False)
        assert ill.returncode == 1, ill.stdout
        assert "x-kubernetes-validations[0].rule" in ill.stderr
        assert "<input>:1:6: found no matching overload for '_>_' applied to '(string, int)'" in ill.stderr
        assert "<input>:1:25: found no matching overload for '_<_' applied to '(int, string)'" in ill.stderr
        # A rule far too deep for either parser is refused too, with a Status, not a 500.
        owner["x-kubernetes-validations"][0]["rule"] = "(" * 3000 + "self == oldSelf" + ")" * 3000
        deep = session.put(crd_path, json=edited, timeout=30)
        assert deep.status_code == 422, deep.text
        stored = session.get(crd_path, timeout=10).json()
        assert stored["metadata"]["resourceVersion"] == edited["metadata"]["resourceVersion"]
        # Tighten the schema; the old object's limit (16Gi) now breaks it but is ratcheted.
        crd = session.get(
            url + f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/budgets.{group}", timeout=10
        ).json()
        limit = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
            "limit"
        ]
        limit["x-kubernetes-validations"][0]["rule"] = "quantity(self).isLessThan(quantity('10Gi'))"
        limit["x-kubernetes-validations"][0]["message"] = "under 10Gi"
        (tmp_path / "tight.json").write_text(orjson.dumps(crd).decode())
        kubectl("replace", "-f", str(tmp_path / "tight.json"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data) as (_proc, _url):
        labelled = kubectl("label", "-n", "default", f"budgets.{group}", "team", "tier=gold")
        assert "labeled" in labelled.stdout
        raised = kubectl(
            "apply", "-n", "default", "-f", "-", stdin=budget("team", limit="32Gi", owner="ann"), check=False
        )
        assert 'spec.limit: Invalid value: "string": under 10Gi' in raised.stderr, raised.stderr
        moved = kubectl(
            "apply", "-n", "default", "-f", "-", stdin=budget("team", limit="8Gi", owner="zed"), check=False
        )
        assert 'spec.owner: Invalid value: "string": owner is immutable' in moved.stderr, moved.stderr
        got = kubectl(
            "get", "-n", "default", f"budgets.{group}", "team", "-o", "jsonpath={.spec.limit}"
        ).stdout
        assert got == "16Gi"


def test_kubeloop_run_installs_the_crds_of_its_models_on_a_durable_server(tmp_path: pathlib.Path) -> None:
    """`kubeloop run DIR --install-crds` against `kubeloop apiserver --data-dir`: the operator's
    models (in a sibling module main.py imports) become CRDs before its controllers start, a
    custom resource applied with kubectl is reconciled, and the CRD outlives a SIGKILL."""
    from tests.apiserver.storage.test_durability import apiserver

    operator = tmp_path / "op"
    operator.mkdir()
    (operator / "models.py").write_text(
        "import kubeloop\n\n\n"
        "class NoteSpec(kubeloop.KubeModel):\n"
        "    text: str\n\n\n"
        "class Note(kubeloop.CustomResource, group='run.example.com', version='v1'):\n"
        "    spec: NoteSpec\n"
    )
    (operator / "main.py").write_text(
        "import kubeloop\n"
        "from models import Note\n\n\n"
        "def setup(manager: kubeloop.Manager) -> None:\n"
        "    async def reconcile(request: kubeloop.Request) -> None:\n"
        "        note = await manager.client.get(Note, request.name, namespace=request.namespace)\n"
        "        wanted = {'apiVersion': 'v1', 'kind': 'ConfigMap',\n"
        "                  'metadata': {'name': request.name, 'namespace': request.namespace}}\n\n"
        "        def mutate(config_map: kubeloop.Obj) -> None:\n"
        "            kubeloop.set_controller_reference(note, config_map)\n"
        "            config_map['data'] = {'text': note.spec.text}\n\n"
        "        await kubeloop.create_or_update(manager.client, wanted, mutate)\n\n"
        "    kubeloop.Builder(manager).for_(Note).owns(kubeloop.kinds.ConfigMap).complete(reconcile)\n"
    )
    data = tmp_path / "data"
    kubectl = Kubectl(KUBECTLS[-1], data / "kubeconfig", tmp_path)
    with apiserver(data) as (proc, _url):
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubeloop.cli.main",
                "run",
                str(operator),
                "--install-crds",
                "--kubeconfig",
                str(data / "kubeconfig"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert run.stdout is not None
            assert run.stdout.readline().startswith("kubeloop run: connected to https://127.0.0.1:")
            assert run.stdout.readline().strip() == "kubeloop run: installed 1 CRD(s): notes.run.example.com"
            note = "apiVersion: run.example.com/v1\nkind: Note\nmetadata: {name: hello}\nspec: {text: hi}\n"
            kubectl("apply", "-n", "default", "-f", "-", stdin=note)

            def reconciled() -> bool:
                got = kubectl(
                    "get", "configmap", "hello", "-n", "default", "-o", "jsonpath={.data.text}", check=False
                )
                return got.stdout == "hi"

            asyncio.run(eventually(reconciled, timeout=30))
        finally:
            run.terminate()
            run.wait(30)
        assert run.returncode == 0
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data):
        assert kubectl(
            "get", "notes.run.example.com", "hello", "-n", "default", "-o", "name"
        ).stdout.strip() == ("note.run.example.com/hello")
