"""An operator's webhooks (examples/website_webhooks: WebhookBuilder, a defaulter and a validator
of a typed custom resource) served by its manager and called by the session's embedded server,
the way kube-apiserver calls them, while kubectl (every version on the machine) and the official
client write Websites. The test kit installs the configurations (``webhooks_installed``)."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.manager.operatortarget import load_target
from kubeloop.testing import ServerThread, webhooks_installed
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl

ROOT = pathlib.Path(__file__).resolve().parents[2]
example, _ = load_target(str(ROOT / "examples" / "website_webhooks"))
Website = example.Website
WebsiteV1alpha1 = example.WebsiteV1alpha1
VALIDATE = "/validate-web-kubeloop-dev-v1-website"
MUTATE = "/mutate-web-kubeloop-dev-v1-website"


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, kube_apiserver: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, kube_apiserver.kubeconfig, tmp_path)


@pytest.fixture
async def operator(kube_client: kubeloop.APIClient) -> AsyncIterator[kubeloop.Manager]:
    """The example's manager, serving its webhooks, with their configurations installed."""
    await kubeloop.crd.install_crds(kube_client, Website, WebsiteV1alpha1)
    manager = kubeloop.Manager(
        kube_client,
        webhook_server=kubeloop.WebhookServer(port=0),
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
    )
    example.setup(manager)
    async with manager, webhooks_installed(kube_client, manager):
        yield manager


def website_v1alpha1(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "web.kubeloop.dev/v1alpha1",
        "kind": "Website",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"url": f"https://{name}.example.com/", **spec},
    }


def website(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "web.kubeloop.dev/v1",
        "kind": "Website",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"domain": f"{name}.example.com", **spec},
    }


async def run(kubectl: Kubectl, *args: str, stdin: str | None = None, check: bool = True) -> Any:
    """kubectl in a thread: the webhooks it reaches are served by this test's loop."""
    return await asyncio.to_thread(kubectl, *args, stdin=stdin, check=check)


async def test_kubectl_writes_pass_through_the_defaulter_and_the_validator(
    operator: kubeloop.Manager, kubectl: Kubectl, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    await run(
        kubectl, "apply", "-n", kube_namespace, "-f", "-", stdin=json.dumps(website("blog", kube_namespace))
    )
    stored = await kube_client.get(Website, "blog", namespace=kube_namespace)
    assert (stored.spec.image, stored.spec.replicas) == ("nginx:1.27", 1)  # the defaulter's patch

    refused = await run(
        kubectl,
        "create",
        "-f",
        "-",
        stdin=json.dumps(website("big", kube_namespace, replicas=20)),
        check=False,
    )
    assert refused.returncode != 0
    # kubectl words a 422 from its field causes, as it does kube-apiserver's.
    assert (
        'The Website "big" is invalid: spec.replicas: Invalid value: 20: must be at most 10' in refused.stderr
    )
    with pytest.raises(kubeloop.errors.NotFound):
        await kube_client.get(Website, "big", namespace=kube_namespace)

    warned = await run(
        kubectl, "create", "-f", "-", stdin=json.dumps(website("edge", kube_namespace, image="nginx:latest"))
    )
    assert "Warning: spec.image nginx:latest is a moving target; pin a version" in warned.stderr

    moved = await run(
        kubectl, "patch", "-n", kube_namespace, "website", "blog", "--type=merge",
        "-p", '{"spec": {"domain": "elsewhere.example.com"}}', check=False,
    )  # fmt: skip
    assert "spec.domain: Forbidden: the domain cannot change" in moved.stderr

    await run(kubectl, "label", "-n", kube_namespace, "website", "blog", "protected=true")
    kept = await run(kubectl, "delete", "-n", kube_namespace, "website", "blog", check=False)
    assert 'website "blog" is protected: remove the label first' in kept.stderr
    assert (await kube_client.get(Website, "blog", namespace=kube_namespace)).metadata.name == "blog"


async def test_an_object_the_model_refuses_is_denied_in_the_servers_words(
    operator: kubeloop.Manager, kubectl: Kubectl, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    """Mutating admission runs before the server's schema validation (on a real cluster too), so
    the defaulter meets objects its model cannot decode. It answers as the schema validation
    would have, field by field, never with pydantic's dump."""
    bad = website("bad", kube_namespace, replicas="many")
    del bad["spec"]["domain"]
    refused = await run(kubectl, "create", "-f", "-", stdin=json.dumps(bad), check=False)
    assert refused.returncode != 0
    assert "pydantic" not in refused.stderr and "ValidationError" not in refused.stderr
    assert 'The Website "bad" is invalid:' in refused.stderr
    assert "spec.domain: Required value" in refused.stderr
    assert (
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'
        in refused.stderr
    )
    with pytest.raises(kubeloop.errors.Invalid) as denied:
        await kube_client.create(bad)
    assert denied.value.message.startswith(
        'admission webhook "mwebsite-v1.kb.io" denied the request: Website.web.kubeloop.dev "bad" is invalid: '
    )
    assert [(cause.field, cause.type) for cause in denied.value.causes] == [
        ("spec.domain", "FieldValueRequired"),
        ("spec.replicas", "FieldValueInvalid"),
    ]
    with pytest.raises(kubeloop.errors.NotFound):
        await kube_client.get(Website, "bad", namespace=kube_namespace)


async def test_a_denial_reaches_the_client_with_its_code_and_field_causes(
    operator: kubeloop.Manager, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    with pytest.raises(kubeloop.errors.Invalid) as refused:
        await kube_client.create(website("big", kube_namespace, replicas=11))
    assert refused.value.code == 422
    assert refused.value.message == (
        'admission webhook "vwebsite-v1.kb.io" denied the request: Website.web.kubeloop.dev "big" is invalid: '
        "spec.replicas: Invalid value: 11: must be at most 10"
    )
    assert [(cause.field, cause.type) for cause in refused.value.causes] == [
        ("spec.replicas", "FieldValueInvalid")
    ]
    await kube_client.create(website("ok", kube_namespace))
    labelled = await kube_client.get(Website, "ok", namespace=kube_namespace)
    labelled.metadata.labels = {"protected": "true"}
    await kube_client.update(labelled)
    with pytest.raises(kubeloop.errors.Forbidden) as kept:
        await kube_client.delete(labelled)
    assert kept.value.code == 403


async def test_a_validator_that_fails_denies_in_its_own_words_and_the_server_goes_on(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    class Broken:
        def validate_create(self, obj: kubeloop.Obj) -> None:
            if obj["data"].get("explode"):
                raise ZeroDivisionError("division by zero")

    manager = kubeloop.Manager(kube_client, webhook_server=kubeloop.WebhookServer(port=0))
    kubeloop.WebhookBuilder(manager).for_(kinds.ConfigMap).with_validator(Broken()).complete()
    async with manager, webhooks_installed(kube_client, manager):
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": kube_namespace}}
        with pytest.raises(kubeloop.errors.InternalError) as failed:
            await kube_client.create(
                {
                    **config_map,
                    "metadata": {**config_map["metadata"], "name": "boom"},
                    "data": {"explode": "1"},
                }
            )
        assert failed.value.message == (
            'admission webhook "vconfigmap-v1.kb.io" denied the request: admission webhook '
            "/validate--v1-configmap failed: ZeroDivisionError: division by zero"
        )
        fine = await kube_client.create(
            {**config_map, "metadata": {**config_map["metadata"], "name": "fine"}, "data": {}}
        )
        assert fine["metadata"]["name"] == "fine"
        requests = manager.webhook_server.metrics.requests
        assert requests["/validate--v1-configmap", "200"] >= 2


async def test_dicts_for_a_kind_constant_and_a_patch_computed_from_them(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    def stamp(config_map: kubeloop.Obj) -> None:
        assert isinstance(config_map, dict)
        if config_map["metadata"].get("namespace") == kube_namespace:
            config_map["metadata"].setdefault("labels", {})["stamped"] = "yes"
            config_map.setdefault("data", {}).pop("secret", None)

    manager = kubeloop.Manager(kube_client, webhook_server=kubeloop.WebhookServer(port=0))
    kubeloop.WebhookBuilder(manager).for_(kinds.ConfigMap).with_defaulter(stamp).complete()
    async with manager, webhooks_installed(kube_client, manager):
        made = await kube_client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": kube_namespace},
             "data": {"secret": "x", "kept": "y"}}
        )  # fmt: skip
    assert made["metadata"]["labels"] == {"stamped": "yes"}
    assert made["data"] == {"kept": "y"}  # a dict's removals are kept: it dropped nothing by accident


async def test_defaulters_and_validators_see_the_request_they_answer(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    """``kubeloop.webhook.current_request()`` (controller-runtime's ``admission.RequestFromContext``)
    as the API server sends it: who asks (a validator refuses a user by name), the operation,
    ``dryRun`` (a defaulter keeps its side effect for real writes), the old object on an update."""
    side_effects: list[str] = []
    seen: list[tuple[str, bool, str | None]] = []
    mallory_user = f"system:serviceaccount:{kube_namespace}:mallory"

    def stamp(config_map: kubeloop.Obj) -> None:
        request = kubeloop.webhook.current_request()
        if config_map["metadata"].get("namespace") != kube_namespace:
            return
        if not request.dry_run:
            side_effects.append(config_map["metadata"]["name"])  # e.g. a record kept elsewhere
        old = (request.old_object or {}).get("data")
        seen.append((request.operation, request.dry_run, (old or {}).get("v")))

    class NotMallory:
        def validate_create(self, obj: kubeloop.Obj) -> None:
            if kubeloop.webhook.current_request().user_info.get("username") == mallory_user:
                raise kubeloop.errors.Forbidden("mallory may not make ConfigMaps here")

    manager = kubeloop.Manager(kube_client, webhook_server=kubeloop.WebhookServer(port=0))
    kubeloop.WebhookBuilder(manager).for_(kinds.ConfigMap).with_defaulter(stamp).with_validator(NotMallory()).complete()
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": kube_namespace}, "data": {"v": "1"}}
    async with manager, webhooks_installed(kube_client, manager):
        await kube_client.create(body, dry_run=True)
        made = await kube_client.create(body)
        made["data"]["v"] = "2"
        await kube_client.update(made)
        await kube_client.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mallory", "namespace": kube_namespace}})
        await kube_client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                  "metadata": {"name": "mallory", "namespace": kube_namespace},
                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                                  "subjects": [{"kind": "ServiceAccount", "name": "mallory", "namespace": kube_namespace}]})  # fmt: skip
        token = await kube_client.create({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
                                         of=kinds.ServiceAccount, name="mallory", subresource="token", namespace=kube_namespace)  # fmt: skip
        async with kubeloop.APIClient(kube_client.config.with_token(token["status"]["token"])) as mallory:
            with pytest.raises(kubeloop.errors.Forbidden) as refused:
                await mallory.create({**body, "metadata": {**body["metadata"], "name": "m"}})
    assert "mallory may not make ConfigMaps here" in refused.value.message
    assert side_effects == ["c", "c", "m"]  # not for the dry run
    assert seen[:3] == [("CREATE", True, None), ("CREATE", False, None), ("UPDATE", False, "1")]


async def test_the_manager_reports_its_webhooks_in_metrics_and_readiness(
    operator: kubeloop.Manager, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    await kube_client.create(website("m", kube_namespace))
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{operator.health_address}/readyz/webhook") as ready:
            assert ready.status == 200, await ready.text()
        async with session.get(f"http://{operator.metrics_address}/metrics") as response:
            text = await response.text()
    assert f'controller_runtime_webhook_requests_total{{code="200",webhook="{MUTATE}"}} 1.0' in text
    assert f'controller_runtime_webhook_requests_total{{code="200",webhook="{VALIDATE}"}} 1.0' in text
    assert f'controller_runtime_webhook_requests_in_flight{{webhook="{VALIDATE}"}} 0.0' in text
    assert f'controller_runtime_webhook_latency_seconds_count{{webhook="{VALIDATE}"}} 1.0' in text


async def test_kubectl_reads_and_writes_both_versions_through_the_conversion_webhook(
    operator: kubeloop.Manager, kubectl: Kubectl, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    # Written as v1alpha1: converted to v1 (the hub), defaulted there, stored as v1.
    await run(kubectl, "create", "-f", "-", stdin=json.dumps(website_v1alpha1("old", kube_namespace)))
    stored = await kube_client.get(Website, "old", namespace=kube_namespace)
    assert (stored.spec.domain, stored.spec.image, stored.spec.replicas) == (
        "old.example.com",
        "nginx:1.27",
        1,
    )
    # Written as v1, read as v1alpha1.
    await kube_client.create(website("new", kube_namespace, replicas=3))
    read = await run(kubectl, "get", "-n", kube_namespace, "websites.v1alpha1.web.kubeloop.dev", "-o", "json")
    specs = {item["metadata"]["name"]: item["spec"] for item in json.loads(read.stdout)["items"]}
    assert specs == {
        "new": {"url": "https://new.example.com/", "image": "nginx:1.27", "replicas": 3},
        "old": {"url": "https://old.example.com/", "image": "nginx:1.27", "replicas": 1},
    }
    # The validator (registered for v1) judges a v1alpha1 write too, after conversion.
    refused = await run(
        kubectl,
        "create",
        "-f",
        "-",
        stdin=json.dumps(website_v1alpha1("big", kube_namespace, replicas=40)),
        check=False,
    )
    assert "spec.replicas: Invalid value: 40: must be at most 10" in refused.stderr
    assert operator.webhook_server.metrics.requests["/convert", "200"] >= 2


class GadgetSpec(kubeloop.KubeModel):
    size: int


class Gadget(
    kubeloop.CustomResource, kubeloop.webhook.Hub, group="gadgets.kubeloop.test", version="v2", storage=True
):
    spec: GadgetSpec


class GadgetSpecV1(kubeloop.KubeModel):
    size: str


class GadgetV1(kubeloop.CustomResource, group="gadgets.kubeloop.test", version="v1", kind="Gadget"):
    spec: GadgetSpecV1

    def convert_to(self, hub: Gadget) -> None:
        hub.spec = GadgetSpec(size=int(self.spec.size))  # "large" raises ValueError

    def convert_from(self, hub: Gadget) -> None:
        self.spec = GadgetSpecV1(size=str(hub.spec.size))


async def test_a_conversion_that_fails_reaches_the_client_in_its_words(
    kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    await kubeloop.crd.install_crds(kube_client, Gadget, GadgetV1)
    manager = kubeloop.Manager(kube_client, webhook_server=kubeloop.WebhookServer(port=0))
    kubeloop.WebhookBuilder(manager).for_(Gadget).complete()  # conversion only
    gadget = {
        "apiVersion": "gadgets.kubeloop.test/v1",
        "kind": "Gadget",
        "metadata": {"namespace": kube_namespace},
    }
    async with manager, webhooks_installed(kube_client, manager):
        made = await kube_client.create(
            {**gadget, "metadata": {**gadget["metadata"], "name": "ok"}, "spec": {"size": "3"}}
        )
        assert made["spec"] == {"size": "3"}
        assert (await kube_client.get(Gadget, "ok", namespace=kube_namespace)).spec.size == 3
        with pytest.raises(kubeloop.errors.InternalError) as failed:
            await kube_client.create(
                {**gadget, "metadata": {**gadget["metadata"], "name": "bad"}, "spec": {"size": "large"}}
            )
    assert failed.value.code == 500
    assert failed.value.message == (
        "conversion webhook for gadgets.kubeloop.test/v1, Kind=Gadget failed: "
        "invalid literal for int() with base 10: 'large'"
    )
    # Uninstalled: the CRD converts in process again (the webhook server has stopped).
    crds = kubeloop.GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    crd = await kube_client.get(crds, "gadgets.gadgets.kubeloop.test")
    assert crd["spec"]["conversion"] == {"strategy": "None"}
