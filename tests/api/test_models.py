"""Typed models: generated from the upstream schemas (and up to date), faithful to the JSON form
the server sends, registered in the Scheme, and accepted and returned by the client."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop import errors
from kubeloop.api.customresource import CustomResource
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeModel, scheme
from kubeloop.api.models import apps_v1, batch_v1, core_v1, meta_v1
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.interface import ObjectList
from kubeloop.client.rest import APIClient, PatchType
from tests.conftest import ServerThread

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_models_are_up_to_date(tmp_path: pathlib.Path) -> None:
    spec = importlib.util.spec_from_file_location("generate_models", ROOT / "scripts" / "generate_models.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    from kubeloop.apiserver.catalog import schemas

    written = generator.Generator(schemas.definitions(), generator.served_kinds()).write(tmp_path)
    assert {str(path) for path in written} >= {"src/kubeloop/kinds.py", "src/kubeloop/models.py"}
    for path in written:
        assert (ROOT / path).read_text() == (tmp_path / path).read_text(), (
            f"{path} is stale: run scripts/generate_models.py"
        )
    for package in ("models", "applyconfigurations"):
        generated = {path.name for path in written if path.parent.name == package}
        assert {path.name for path in (ROOT / "src/kubeloop/api" / package).glob("*.py")} == generated


def test_a_kinds_json_starts_with_api_version_kind_and_metadata() -> None:
    """As every manifest does, and not in name order (a ConfigMap went out as apiVersion, data,
    kind, metadata): the first three fields of every generated kind and apply configuration."""
    from kubeloop.api import applyconfigurations, models
    from kubeloop.api.applyconfiguration import ObjectApplyConfiguration
    from kubeloop.api.model import KubeObject

    first = ["api_version", "kind", "metadata"]
    kinds = 0
    for package in (models, applyconfigurations):
        for path in pathlib.Path(package.__path__[0]).glob("*_v*.py"):
            module = importlib.import_module(f"{package.__name__}.{path.stem}")
            for name in module.__all__:
                cls = getattr(module, name)
                if isinstance(cls, type) and issubclass(cls, (KubeObject, ObjectApplyConfiguration)):
                    assert list(cls.model_fields)[:3] == first, (module.__name__, name)
                    kinds += 1
    assert kinds > 100
    config_map = core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="c"), data={"k": "v"})
    assert list(config_map.to_dict()) == ["apiVersion", "kind", "metadata", "data"]
    event = applyconfigurations.events_v1.Event(metadata={"name": "e"}, note="n")
    assert list(event.to_dict()) == ["apiVersion", "kind", "metadata", "note"]


def test_import_kubeloop_loads_no_models_or_pydantic() -> None:
    code = "import sys, kubeloop, kubeloop.client; print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'kubeloop.api.models', 'kubeloop.api.apply'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_aliases_types_and_unknown_fields() -> None:
    pod = core_v1.Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "creationTimestamp": "2026-11-22T10:00:00Z", "futureField": {"x": 1}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "nginx",
                        "ports": [{"containerPort": 80, "hostIP": "0.0.0.0"}],
                        "resources": {"limits": {"cpu": "500m", "memory": 1024}},
                        "readinessProbe": {"httpGet": {"port": "http"}},
                    }
                ],
                "terminationGracePeriodSeconds": 0,
            },
        }
    )
    container = pod.spec.containers[0] if pod.spec else None
    assert container is not None and container.ports is not None
    assert container.ports[0].container_port == 80 and container.ports[0].host_ip == "0.0.0.0"
    assert pod.metadata.creation_timestamp is not None and pod.metadata.creation_timestamp.year == 2026
    assert container.readiness_probe is not None and container.readiness_probe.http_get is not None
    assert container.readiness_probe.http_get.port == "http"  # IntOrString keeps a name a string
    out = pod.to_dict()
    assert out["metadata"]["creationTimestamp"] == "2026-11-22T10:00:00Z"
    assert out["metadata"]["futureField"] == {"x": 1}  # unknown fields survive a round trip
    assert out["spec"]["terminationGracePeriodSeconds"] == 0  # zero is not "unset"
    assert out["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m", "memory": 1024}}
    # metav1.Time in whole seconds; MicroTime always with six digits, as the server's decoder
    # wants them (a MicroTime without them is refused: "cannot parse "Z" as ".000000"").
    from datetime import UTC, datetime

    from kubeloop.api.models import coordination_v1

    moment = datetime(2026, 11, 28, 10, 0, 0, tzinfo=UTC)
    lease = coordination_v1.LeaseSpec(acquire_time=moment, renew_time=moment.replace(microsecond=1500))
    assert lease.to_dict() == {
        "acquireTime": "2026-11-28T10:00:00.000000Z",
        "renewTime": "2026-11-28T10:00:00.001500Z",
    }
    stamped = meta_v1.ObjectMeta(creation_timestamp=moment.replace(microsecond=999_999))
    assert stamped.to_dict() == {"creationTimestamp": "2026-11-28T10:00:00Z"}
    built = core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="d"))
    assert built.to_dict() == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}}


class WidgetSpec(KubeModel):
    size: int
    color: str | None = None


class Widget(CustomResource):
    __gvk__ = GroupVersionKind("example.com", "v1", "Widget")
    spec: WidgetSpec


def test_scheme_and_custom_resources() -> None:
    assert scheme.class_for(GroupVersionKind("batch", "v1", "Job")) is batch_v1.Job
    assert scheme.class_for(GroupVersionKind("example.com", "v1", "Widget")) is Widget
    # A kind no model declares (other tests declare theirs, Gadget among them, in this process).
    assert scheme.class_for(GroupVersionKind("example.com", "v1", "Undeclared")) is None
    widget = Widget(metadata=meta_v1.ObjectMeta(name="w"), spec=WidgetSpec(size=3))
    assert widget.to_dict() == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 3},
    }
    assert Widget.from_dict({"metadata": {"name": "w"}, "spec": {"size": 1}}).api_version == "example.com/v1"


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


def deployment_dict(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "nginx", "readinessProbe": {"httpGet": {"port": 8080}}}
                    ]
                },
            },
        },
    }


async def test_models_round_trip_what_the_server_sends(client: APIClient, namespace: str) -> None:
    created = await client.create(deployment_dict("web", namespace))
    typed = await client.get(apps_v1.Deployment, "web", namespace=namespace)
    assert isinstance(typed, apps_v1.Deployment)
    assert typed.to_dict() == created  # every field the server filled in survives, in its JSON form


async def test_client_takes_and_returns_models(client: APIClient, namespace: str) -> None:
    cm = core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="typed", namespace=namespace), data={"a": "1"})
    created = await client.create(cm)
    assert isinstance(created, core_v1.ConfigMap) and created.metadata.uid
    created.data = {"a": "2"}
    updated = await client.update(created)
    assert updated.data == {"a": "2"}
    with pytest.raises(errors.Conflict):
        await client.update(created)  # created's resourceVersion is stale now
    patched = await client.patch(core_v1.ConfigMap, "typed", {"data": {"b": "3"}}, namespace=namespace)
    assert patched.data == {"a": "2", "b": "3"}
    json_patched = await client.patch(
        patched, None, [{"op": "remove", "path": "/data/a"}], patch_type=PatchType.JSON
    )
    assert json_patched.data == {"b": "3"}

    listed = await client.list(core_v1.ConfigMap, namespace=namespace)
    assert isinstance(listed, ObjectList)
    assert [item.metadata.name for item in listed.items] == ["typed"]
    # Compared with a list, a list's answer is its items (a listing of nothing is [] as well).
    assert listed == [json_patched] and listed == (json_patched,) and listed != []
    assert listed == ObjectList([json_patched], listed.resource_version)
    assert listed != ObjectList([json_patched], "1")
    assert await client.list(core_v1.ConfigMap, namespace=namespace, label_selector="absent=yes") == []
    assert int(listed.resource_version) >= int(json_patched.metadata.resource_version or 0)

    await client.create(deployment_dict("d", namespace))
    with pytest.raises(ValueError, match="scale subresource"):
        await client.get(apps_v1.Deployment, "d", namespace=namespace, subresource="scale")
    scale = await client.get(
        GroupVersionKind("apps", "v1", "Deployment"), "d", namespace=namespace, subresource="scale"
    )
    assert scale["kind"] == "Scale"

    await client.delete(json_patched)
    with pytest.raises(errors.NotFound):
        await client.get(core_v1.ConfigMap, "typed", namespace=namespace)
