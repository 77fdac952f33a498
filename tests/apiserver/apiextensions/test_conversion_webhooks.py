"""CRD conversion webhooks as kube-apiserver calls them, over real HTTPS: a Widget CRD served as
v1alpha1 (``spec.size``, a string) and v1 (``spec.replicas``, an integer; the storage version),
converted by a webhook server of the test's, which records every ConversionReview it is sent.
kubectl of every version on the machine and the official client read, write, list and watch
across the versions."""

from __future__ import annotations

import copy
import json
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from tests.apiserver.admission.webhooks.webhookserver import WebhookServer
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread
from tests.ports import refusing_port

GROUP = "conv.kubeloop.test"
V1 = f"{GROUP}/v1"
V1ALPHA1 = f"{GROUP}/v1alpha1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def convert_widgets(request: dict[str, Any]) -> dict[str, Any]:
    """v1alpha1 spec.size "3" <-> v1 spec.replicas 3; the rest as it is."""
    converted = []
    for obj in request["objects"]:
        out = copy.deepcopy(obj)
        out["apiVersion"] = request["desiredAPIVersion"]
        spec = out.setdefault("spec", {})
        if request["desiredAPIVersion"] == V1 and "size" in spec:
            spec["replicas"] = int(spec.pop("size"))
        elif request["desiredAPIVersion"] == V1ALPHA1 and "replicas" in spec:
            spec["size"] = str(spec.pop("replicas"))
        converted.append(out)
    return {"convertedObjects": converted, "result": {"status": "Success"}}


def schema(**spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": spec}},
        }
    }


def widget_crd(
    hooks: WebhookServer, path: str, *, plural: str = "widgets", storage: str = "v1"
) -> dict[str, Any]:
    kind = plural.removesuffix("s").capitalize()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.removesuffix("s"), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": storage == "v1alpha1", "schema": schema(size={"type": "string"})},
                {"name": "v1", "served": True, "storage": storage == "v1", "schema": schema(replicas={"type": "integer"})},
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {"clientConfig": hooks.client_config(path), "conversionReviewVersions": ["v1"]},
            },
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def hooks() -> Iterator[WebhookServer]:
    server = WebhookServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api(module_server: ServerThread) -> Client:
    return Client(module_server)


@pytest.fixture(scope="module")
def widgets(api: Client, hooks: WebhookServer) -> str:
    """The Widget CRD, converted at ``/convert``; the path of its conversion webhook."""
    hooks.handlers["convert"] = convert_widgets
    created = api.post(CRDS, widget_crd(hooks, "convert"))
    assert created.status_code == 201, created.text
    return "convert"


_count = iter(range(1, 10_000))


@pytest.fixture
def namespace(api: Client) -> str:
    name = f"cv{next(_count)}"
    assert api.post("/api/v1/namespaces", {"metadata": {"name": name}}).status_code == 201
    return name


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, module_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, module_server.kubeconfig, tmp_path)


def widget(name: str, api_version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def path(namespace: str, version: str, name: str = "", plural: str = "widgets") -> str:
    base = f"/apis/{GROUP}/{version}/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def reviews(hooks: WebhookServer, at: str) -> list[dict[str, Any]]:
    return [sent["review"] for sent in hooks.requests.get(at, [])]


# ------------------------------------------------------------------ across versions


def test_kubectl_writes_one_version_and_reads_the_other(
    kubectl: Kubectl, api: Client, hooks: WebhookServer, widgets: str, namespace: str
) -> None:
    before = len(reviews(hooks, widgets))
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(widget("w", V1ALPHA1, size="3")))
    as_v1 = json.loads(kubectl("get", "-n", namespace, f"widgets.v1.{GROUP}", "w", "-o", "json").stdout)
    assert (as_v1["apiVersion"], as_v1["spec"]) == (V1, {"replicas": 3})
    as_alpha = json.loads(
        kubectl("get", "-n", namespace, f"widgets.v1alpha1.{GROUP}", "w", "-o", "json").stdout
    )
    assert (as_alpha["apiVersion"], as_alpha["spec"]) == (V1ALPHA1, {"size": "3"})
    assert as_alpha["metadata"]["uid"] == as_v1["metadata"]["uid"]

    sent = reviews(hooks, widgets)[before:]
    # One call: the create's conversion to v1 is remembered both ways, so the answer and the
    # reads in either version need no other.
    assert len(sent) == 1, [review["request"]["desiredAPIVersion"] for review in sent]
    first = sent[0]
    assert (first["apiVersion"], first["kind"]) == ("apiextensions.k8s.io/v1", "ConversionReview")
    assert first["request"]["desiredAPIVersion"] == V1  # the create: v1alpha1 in, stored as v1
    assert first["request"]["objects"][0]["spec"] == {"size": "3"}
    assert hooks.requests[widgets][-1]["query"] == {"timeout": "30s"}

    # An update through v1alpha1 of what is stored as v1.
    kubectl(
        "patch",
        "-n",
        namespace,
        f"widgets.v1alpha1.{GROUP}",
        "w",
        "--type=merge",
        "-p",
        '{"spec":{"size":"5"}}',
    )
    assert api.get(path(namespace, "v1", "w")).json()["spec"] == {"replicas": 5}


def test_a_list_converts_every_item_in_one_call(
    api: Client, hooks: WebhookServer, widgets: str, namespace: str
) -> None:
    for index in range(4):
        assert api.post(path(namespace, "v1"), widget(f"w{index}", V1, replicas=index)).status_code == 201
    before = len(reviews(hooks, widgets))
    listed = api.get(path(namespace, "v1alpha1")).json()
    assert [item["spec"] for item in listed["items"]] == [{"size": str(index)} for index in range(4)]
    assert all(item["apiVersion"] == V1ALPHA1 for item in listed["items"])
    calls = reviews(hooks, widgets)[before:]
    assert len(calls) == 1 and len(calls[0]["request"]["objects"]) == 4
    # Read again: what was converted is not converted again.
    assert api.get(path(namespace, "v1alpha1")).json()["items"] == listed["items"]
    assert len(reviews(hooks, widgets)) == before + 1


def test_a_watch_of_the_other_version_sees_converted_events(
    module_server: ServerThread, api: Client, widgets: str, namespace: str
) -> None:
    watch = api.session.get(
        module_server.url + path(namespace, "v1alpha1"), params={"watch": "1"}, stream=True
    )
    lines = watch.iter_lines()
    assert api.post(path(namespace, "v1"), widget("seen", V1, replicas=7)).status_code == 201
    added = json.loads(next(lines))
    assert (added["type"], added["object"]["apiVersion"], added["object"]["spec"]) == (
        "ADDED",
        V1ALPHA1,
        {"size": "7"},
    )
    changed = api.patch(
        path(namespace, "v1", "seen"), {"spec": {"replicas": 8}}, content_type="application/merge-patch+json"
    )
    assert changed.status_code == 200, changed.text
    modified = json.loads(next(lines))
    assert (modified["type"], modified["object"]["spec"]) == ("MODIFIED", {"size": "8"})
    watch.close()


def test_the_official_client_reads_each_version(
    module_server: ServerThread, api: Client, widgets: str, namespace: str
) -> None:
    assert api.post(path(namespace, "v1"), widget("official", V1, replicas=2)).status_code == 201
    client = kubernetes.config.new_client_from_config(str(module_server.kubeconfig))
    try:
        custom = kubernetes.client.CustomObjectsApi(client)
        alpha = custom.get_namespaced_custom_object(GROUP, "v1alpha1", namespace, "widgets", "official")
        listed = custom.list_namespaced_custom_object(GROUP, "v1alpha1", namespace, "widgets")
    finally:
        client.close()
    assert alpha["spec"] == {"size": "2"}
    assert [item["spec"] for item in listed["items"]] == [{"size": "2"}]


def test_a_converter_may_change_labels_but_no_other_metadata(
    api: Client, hooks: WebhookServer, namespace: str
) -> None:
    def relabel(request: dict[str, Any]) -> dict[str, Any]:
        answer = convert_widgets(request)
        for obj in answer["convertedObjects"]:
            obj["metadata"].setdefault("labels", {})["converted-to"] = obj["apiVersion"].split("/")[1]
            obj["metadata"]["generation"] = 99  # ignored: only labels and annotations may change
        return answer

    hooks.handlers["relabel"] = relabel
    crd = widget_crd(hooks, "relabel", plural="gadgets")
    assert api.post(CRDS, crd).status_code == 201
    created = api.post(
        path(namespace, "v1", plural="gadgets"), {**widget("g", V1, replicas=1), "kind": "Gadget"}
    )
    assert created.status_code == 201, created.text
    alpha = api.get(path(namespace, "v1alpha1", "g", plural="gadgets")).json()
    assert alpha["metadata"]["labels"] == {"converted-to": "v1alpha1"}
    assert alpha["metadata"]["generation"] == 1


def test_what_a_converter_adds_beyond_the_target_schema_is_pruned(
    api: Client, hooks: WebhookServer, namespace: str
) -> None:
    """kube-apiserver prunes a converted object by the target version's schema: a field the
    converter adds that the schema does not declare never reaches the client (nor storage)."""

    def embellish(request: dict[str, Any]) -> dict[str, Any]:
        answer = convert_widgets(request)
        for obj in answer["convertedObjects"]:
            obj["spec"]["undeclared"] = "from the converter"
            obj["extra"] = {"nested": True}
        return answer

    hooks.handlers["embellish"] = embellish
    assert api.post(CRDS, widget_crd(hooks, "embellish", plural="doodads")).status_code == 201
    created = api.post(
        path(namespace, "v1", plural="doodads"), {**widget("d", V1, replicas=2), "kind": "Doodad"}
    )
    assert created.status_code == 201, created.text
    alpha = api.get(path(namespace, "v1alpha1", "d", plural="doodads")).json()
    assert alpha["spec"] == {"size": "2"} and "extra" not in alpha
    listed = api.get(path(namespace, "v1alpha1", plural="doodads")).json()["items"]
    assert [item["spec"] for item in listed] == [{"size": "2"}] and "extra" not in listed[0]
    # Written as v1alpha1 (converted to v1 to be stored): stored without what the converter added.
    updated = api.put(path(namespace, "v1alpha1", "d", plural="doodads"), {**alpha, "spec": {"size": "3"}})
    assert updated.status_code == 200, updated.text
    stored = api.get(path(namespace, "v1", "d", plural="doodads")).json()
    assert stored["spec"] == {"replicas": 3} and "extra" not in stored


def test_an_update_moves_an_object_to_the_new_storage_version(
    module_server: ServerThread, api: Client, hooks: WebhookServer, namespace: str
) -> None:
    """What is stored is read from the server's store (etcd, upstream): the version an object is
    kept in is not visible over the API, which converts every read."""
    hooks.handlers["migrate"] = convert_widgets
    crd_path = f"{CRDS}/sprockets.{GROUP}"
    made_crd = api.post(CRDS, widget_crd(hooks, "migrate", plural="sprockets", storage="v1alpha1"))
    assert made_crd.status_code == 201, made_crd.text
    made = api.post(
        path(namespace, "v1alpha1", plural="sprockets"),
        {**widget("s", V1ALPHA1, size="4"), "kind": "Sprocket"},
    )
    assert made.status_code == 201, made.text

    def stored() -> dict[str, Any]:
        server = module_server.server
        resource = server.catalog.lookup(GROUP, "v1", "sprockets")
        assert resource is not None and server.store is not None
        found = server.store.get(resource.key(namespace, "s"))
        assert found is not None
        return dict(found.obj)

    assert (stored()["apiVersion"], stored()["spec"]) == (V1ALPHA1, {"size": "4"})
    crd = api.get(crd_path).json()
    for version in crd["spec"]["versions"]:
        version["storage"] = version["name"] == "v1"
    assert api.put(crd_path, crd).status_code == 200
    assert api.get(crd_path).json()["status"]["storedVersions"] == ["v1alpha1", "v1"]

    # A read converts (by the webhook) and migrates nothing.
    assert api.get(path(namespace, "v1", "s", plural="sprockets")).json()["spec"] == {"replicas": 4}
    assert stored()["apiVersion"] == V1ALPHA1
    # An update writes the object in the storage version of the moment: v1.
    changed = api.patch(
        path(namespace, "v1alpha1", "s", plural="sprockets"),
        {"spec": {"size": "6"}},
        content_type="application/merge-patch+json",
    )
    assert changed.status_code == 200, changed.text
    assert (stored()["apiVersion"], stored()["spec"]) == (V1, {"replicas": 6})
    assert api.get(path(namespace, "v1alpha1", "s", plural="sprockets")).json()["spec"] == {"size": "6"}


# ------------------------------------------------------------------ a converter that misbehaves


Mangle = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda request, answer: {**answer, "convertedObjects": []}, "conversion webhook for {v}, Kind={kind} returned 0 objects, expected 1"),
        (
            lambda request, answer: {**answer, "result": {"status": "Failure", "message": "cannot convert that"}},
            "conversion webhook for {v}, Kind={kind} failed: cannot convert that",
        ),
        (lambda request, answer: {**answer, "uid": "someone-else"}, "conversion webhook for {v}, Kind={kind} failed: expected response.uid=\"{uid}\", got \"someone-else\""),
        (
            lambda request, answer: {**answer, "convertedObjects": [{**answer["convertedObjects"][0], "apiVersion": request["objects"][0]["apiVersion"]}]},
            "conversion webhook for {v}, Kind={kind} returned invalid object at index 0: invalid groupVersion (expected {want}, received {v})",
        ),
        (
            lambda request, answer: {**answer, "convertedObjects": [{**answer["convertedObjects"][0], "metadata": {**answer["convertedObjects"][0]["metadata"], "name": "other"}}]},
            "conversion webhook for {v}, Kind={kind} returned invalid object: must have the same name: {name} != other",
        ),
        (
            lambda request, answer: {**answer, "convertedObjects": [{**answer["convertedObjects"][0], "metadata": {**answer["convertedObjects"][0]["metadata"], "uid": "x"}}]},
            "conversion webhook for {v}, Kind={kind} returned invalid object: must have the same UID: {objuid} != x",
        ),
        (
            lambda request, answer: {**answer, "convertedObjects": [{**answer["convertedObjects"][0], "metadata": {**answer["convertedObjects"][0]["metadata"], "labels": {"bad key": "x"}}}]},
            "conversion webhook for {v}, Kind={kind} returned invalid metadata: metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters",
        ),
    ],
    ids=["count", "failure", "uid", "api-version", "name", "object-uid", "labels"],
)  # fmt: skip
def test_a_misbehaving_converter_fails_the_request_in_upstreams_words(
    api: Client, hooks: WebhookServer, namespace: str, mangle: Mangle, message: str
) -> None:
    good = convert_widgets
    mangled: list[bool] = []

    def handler(request: dict[str, Any]) -> dict[str, Any]:
        answer = good(request)
        if request["desiredAPIVersion"] == V1ALPHA1:  # reads as v1alpha1 go wrong
            mangled.append(True)
            answer = {"uid": request["uid"], **mangle(request, {"uid": request["uid"], **answer})}
        return answer

    route = f"bad-{next(_count)}"
    hooks.handlers[route] = handler
    number = next(_count)
    plural, kind = f"things{number}", f"Thing{number}"  # a kind is a group's once
    crd = widget_crd(hooks, route, plural=plural)
    crd["spec"]["names"] = {
        "plural": plural,
        "singular": f"thing{number}",
        "kind": kind,
        "listKind": f"{kind}List",
    }
    assert api.post(CRDS, crd).status_code == 201
    created = api.post(path(namespace, "v1", plural=plural), {**widget("t", V1, replicas=1), "kind": kind})
    assert created.status_code == 201, created.text
    read = api.get(path(namespace, "v1alpha1", "t", plural=plural))
    assert mangled
    status = read.json()
    assert (read.status_code, status.get("reason", "")) == (500, "")
    uid = hooks.requests[route][-1]["review"]["request"]["uid"]
    expected = message.format(
        v=V1, want=V1ALPHA1, uid=uid, name="t", objuid=created.json()["metadata"]["uid"], kind=kind
    )
    assert status["message"].startswith(expected), status["message"]


def test_an_unreachable_converter_fails_reads_and_writes_and_writes_nothing(
    api: Client, kubectl: Kubectl, hooks: WebhookServer, namespace: str
) -> None:
    number = next(_count)
    plural, kind = f"doodads{number}", f"Doodad{number}"
    crd = widget_crd(hooks, "nowhere", plural=plural)
    crd["spec"]["names"] = {
        "plural": plural,
        "singular": f"doodad{number}",
        "kind": kind,
        "listKind": f"{kind}List",
    }
    with refusing_port() as closed:
        crd["spec"]["conversion"]["webhook"]["clientConfig"] = {
            "url": f"https://127.0.0.1:{closed}/convert",
            "caBundle": hooks.ca_bundle,
        }
        assert api.post(CRDS, crd).status_code == 201
        sent = json.dumps({**widget("d", V1ALPHA1, size="1"), "kind": kind})
        refused = kubectl("create", "-n", namespace, "-f", "-", stdin=sent, check=False)
        expected = (
            f"conversion webhook for {V1ALPHA1}, Kind={kind} failed: "
            f'Post "https://127.0.0.1:{closed}/convert?timeout=30s": dial tcp 127.0.0.1:{closed}: connect: connection refused'
        )
        assert expected in refused.stderr
        assert api.get(path(namespace, "v1", plural=plural)).json()["items"] == []
        # In the storage version nothing needs converting: that works; the other version does not.
        made = api.post(path(namespace, "v1", plural=plural), {**widget("e", V1, replicas=1), "kind": kind})
        assert made.status_code == 201, made.text
        listed = api.get(path(namespace, "v1alpha1", plural=plural))
        assert listed.status_code == 500
        assert listed.json()["message"].startswith(f"conversion webhook for {V1}, Kind={kind} failed: ")


# ------------------------------------------------------------------ the CRD's conversion stanza


def test_invalid_conversion_stanzas_are_refused_with_upstreams_messages(
    api: Client, hooks: WebhookServer
) -> None:
    def refused(conversion: dict[str, Any]) -> str:
        crd = widget_crd(hooks, "convert", plural="bogons")
        crd["spec"]["conversion"] = conversion
        answer = api.post(CRDS, crd)
        assert answer.status_code == 422, answer.text
        return str(answer.json()["message"])

    assert (
        'spec.conversion.strategy: Unsupported value: "Sometimes": supported values: "None", "Webhook"'
        in refused({"strategy": "Sometimes"})
    )
    assert (
        "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook"
        in refused({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}})
    )
    assert (
        'spec.conversion.conversionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1'
        in refused(
            {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": hooks.client_config("convert"),
                    "conversionReviewVersions": ["v2"],
                },
            }
        )
        or "must include at least one of v1, v1beta1"
        in refused(
            {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": hooks.client_config("convert"),
                    "conversionReviewVersions": ["v2"],
                },
            }
        )
    )
    assert (
        "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme"
        in refused(
            {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"url": "http://x/convert"}, "conversionReviewVersions": ["v1"]},
            }
        )
    )
    assert (
        "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"
        in refused({"strategy": "None", "webhook": {"clientConfig": hooks.client_config("convert")}})
    )


def test_a_service_port_is_defaulted(api: Client, hooks: WebhookServer) -> None:
    crd = widget_crd(hooks, "convert", plural="ports")
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {
        "service": {"name": "converter", "namespace": "default", "path": "/convert"}
    }
    made = api.post(CRDS, crd)
    assert made.status_code == 201, made.text
    service = made.json()["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
    assert service["port"] == 443


def test_concurrent_reads_of_a_slow_converter_do_not_stall_the_server(
    api: Client, hooks: WebhookServer, widgets: str, namespace: str
) -> None:
    """A conversion call in flight holds only the requests that wait for it."""
    assert (
        api.post(
            path(
                namespace,
                "v1",
            ),
            widget("slow", V1, replicas=9),
        ).status_code
        == 201
    )
    # A fresh object's first read as v1alpha1 calls the webhook; hold the webhook meanwhile.
    held = hooks.held.setdefault(widgets, threading.Event())
    held.clear()
    results: list[int] = []
    reader = threading.Thread(
        target=lambda: results.append(api.get(path(namespace, "v1alpha1", "slow")).status_code)
    )
    reader.start()

    def held_read_arrived() -> bool:
        sent = hooks.requests.get(widgets, [])
        return bool(sent) and sent[-1]["review"]["request"]["objects"][0]["metadata"]["name"] == "slow"

    try:
        while reader.is_alive() and not held_read_arrived():
            reader.join(0.01)
        assert held_read_arrived(), "the read never reached the webhook"
        # The webhook holds the read; other requests are answered.
        assert api.get("/api/v1/namespaces").status_code == 200
        assert not results
    finally:
        held.set()
        hooks.held.pop(widgets, None)
        reader.join(30)
    assert results == [200]


def test_an_object_being_converted_is_not_sent_again(
    module_server: ServerThread, api: Client, hooks: WebhookServer, widgets: str, namespace: str
) -> None:
    """Two reads of one object while its conversion is in flight make one call: the second
    waits for the first's (the converter counts it waiting before the webhook answers)."""
    # Conversions are remembered by content: a spec no other test writes.
    assert api.post(path(namespace, "v1"), widget("twice", V1, replicas=9173)).status_code == 201
    server = module_server.server
    resource = server.catalog.lookup(GROUP, "v1alpha1", "widgets")
    assert resource is not None and server.registry is not None
    converter = server.registry.strategy(resource).converter
    assert converter is not None
    held = hooks.held.setdefault(widgets, threading.Event())
    held.clear()
    results: list[int] = []

    def read() -> None:
        results.append(api.get(path(namespace, "v1alpha1", "twice")).status_code)

    def sent_for_twice() -> int:
        return sum(
            1
            for sent in hooks.requests.get(widgets, [])
            if any(o["metadata"]["name"] == "twice" for o in sent["review"]["request"]["objects"])
        )

    first, second = threading.Thread(target=read), threading.Thread(target=read)
    first.start()
    try:
        while first.is_alive() and sent_for_twice() == 0:
            first.join(0.01)
        second.start()
        while second.is_alive() and converter.waiting == 0:  # type: ignore[attr-defined]
            second.join(0.01)
        assert converter.waiting == 1  # type: ignore[attr-defined]
    finally:
        held.set()
        hooks.held.pop(widgets, None)
        first.join(30)
        second.join(30)
    assert results == [200, 200]
    assert sent_for_twice() == 1


async def test_a_waiter_cancelled_leaves_the_call_and_the_other_waiters_alone() -> None:
    """The client of a request waiting for another's conversion goes away: that call and the
    other waiters finish as if nothing happened."""
    import asyncio

    from kubeloop.apiserver.apiextensions.webhookconversion import WebhookConverter

    answer = asyncio.Event()

    class SlowCaller:
        async def post(self, client: Any, body: bytes, timeout_seconds: int) -> dict[str, Any]:
            review = json.loads(body)
            await answer.wait()
            return {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "result": {"status": "Success"},
                    **convert_widgets(review["request"]),
                },
            }

    crd = widget_crd_for_unit()
    converter = WebhookConverter(crd, SlowCaller())  # type: ignore[arg-type]
    obj = {
        "apiVersion": V1,
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "n"},
        "spec": {"replicas": 1},
    }
    owner = asyncio.create_task(converter.convert([obj], V1ALPHA1))
    await asyncio.sleep(0)  # the owner's call is in flight
    waiters = [asyncio.create_task(converter.convert([obj], V1ALPHA1)) for _ in range(2)]
    await asyncio.sleep(0)  # both are waiting for it
    assert converter.waiting == 2
    waiters[0].cancel()
    answer.set()
    await owner
    await waiters[1]
    with pytest.raises(asyncio.CancelledError):
        await waiters[0]
    assert converter.cached(obj, V1ALPHA1)["spec"] == {"size": "1"}  # type: ignore[index]
    assert converter.calls == 1


def widget_crd_for_unit() -> dict[str, Any]:
    return {
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {"name": "v1alpha1", "schema": schema(size={"type": "string"})},
                {"name": "v1", "schema": schema(replicas={"type": "integer"})},
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"url": "https://x/convert"}, "conversionReviewVersions": ["v1"]},
            },
        },
    }
