"""``kubeloop run --console``: the web console, seen in headless Chromium as a user sees it.

The page is opened once, before the operator has anything to do; then kubectl creates objects,
and the same page — never reloaded — shows the reconciles with what they wrote, the owner tree
down to the simulated Pods, the warning event first and the failed reconcile counted, while
``/api/controllers`` serves the same counters as JSON. Against a cluster that is not embedded,
the objects are said to be unavailable rather than shown empty. Owner trees survive references
that form cycles, objects owned twice and owners that are missing (hypothesis).
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
from typing import Any

import aiohttp
import hypothesis.strategies as st
from hypothesis import given

import kubeloop
from kubeloop.cli.console import Console, object_summary
from kubeloop.client.rest import APIClient
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import eventually
from tests.apiserver.test_kubectl import KUBECTLS
from tests.browser import Browser

WEB_CONFIG = pathlib.Path(__file__).parents[2] / "examples" / "web_config"

#: The rows of a table on the page, as lists of cell texts.
ROWS = "Array.from(document.querySelectorAll('#{table} tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))"

#: The owner tree under the object named ``{name}`` of kind ``{kind}``: [kind, name, state, [children]].
TREE = """(() => {
  const node = (li) => [li.dataset.kind, li.dataset.name, (li.querySelector(':scope > .state') || {}).textContent || '',
                        Array.from(li.querySelectorAll(':scope > ul > li')).map(node)];
  const root = document.querySelector('#trees > li[data-kind="{kind}"][data-name="{name}"]');
  return root ? node(root) : null;
})()"""


#: Each chart's sum of what it draws, by chart (the page's only controller's).
CHART_TOTALS = (
    "(() => { const charts = document.querySelectorAll('svg[data-chart]');"
    " return charts.length ? Object.fromEntries(Array.from(charts).map(s => [s.dataset.chart, Number(s.dataset.total)]))"
    " : null; })()"
)

LONG_CRD = json.dumps(
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "reconciliationpolicybindings.configuration.platform-engineering.example.com"},
        "spec": {
            "group": "configuration.platform-engineering.example.com",
            "scope": "Cluster",
            "names": {"plural": "reconciliationpolicybindings", "kind": "ReconciliationPolicyBinding"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": True,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
            ],
        },
    }
)  # fmt: skip
LONG_OBJECT = json.dumps(
    {
        "apiVersion": "configuration.platform-engineering.example.com/v1alpha1",
        "kind": "ReconciliationPolicyBinding",
        "metadata": {"name": "one"},
    }
)

#: Whether the kinds table's count header is inside its scrolling box's visible width.
KINDS_COUNT_IN_VIEW = """(() => {
  const th = document.querySelector('#kinds thead th.num');
  return th.getBoundingClientRect().right <= th.closest('.scroll').getBoundingClientRect().right + 0.5;
})()"""


async def read_until(stream: asyncio.StreamReader, wanted: str) -> list[str]:
    lines = []
    while True:
        line = (await stream.readline()).decode()
        assert line, f"ended before {wanted!r}: {lines}"
        lines.append(line)
        if wanted in line:
            return lines


async def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [str(KUBECTLS[-1]), "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_console_follows_the_operator_live_in_chromium(tmp_path: pathlib.Path) -> None:
    with (tmp_path / "stderr").open("w") as stderr:
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubeloop.cli.main", "run", str(WEB_CONFIG), "--embedded", "--simulate",
            "--console", "127.0.0.1:0",
            stdout=subprocess.PIPE, stderr=stderr, env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
    assert run.stdout is not None
    try:
        started = await read_until(run.stdout, "console at ")
        kubeconfig = started[0].split("kubeconfig=", 1)[1].strip()
        url = started[-1].split("console at ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")

        async with Browser(1400, 1000) as browser:
            await browser.open(url)

            async def page_is_live() -> bool:
                return await browser.evaluate("document.getElementById('status').textContent") == "live"

            await eventually(page_is_live)
            assert (await browser.evaluate("document.title")).startswith("kubeloop run — https://127.0.0.1:")
            assert await browser.evaluate(ROWS.format(table="controllers")) == [
                ["configmap", "0", "0", "0", "0", "0", "-", "-"]
            ]
            assert await browser.evaluate(ROWS.format(table="reconciles")) == [["no reconciles yet"]]
            kinds = await browser.evaluate(ROWS.format(table="kinds"))
            assert ["Namespace", "v1", "4"] in kinds  # the embedded server's own objects
            # At 1400 px the kinds table's count column is in view, not scrolled away, even with
            # the long apiVersions of an operator's CRDs.
            await kubectl(kubeconfig, "apply", "-f", "-", stdin=LONG_CRD)

            async def long_kind_listed() -> bool:
                return any(
                    row[0] == "ReconciliationPolicyBinding"
                    for row in await browser.evaluate(ROWS.format(table="kinds"))
                )

            await kubectl(
                kubeconfig,
                "wait",
                "--for=condition=Established",
                "crd/reconciliationpolicybindings.configuration.platform-engineering.example.com",
            )
            await kubectl(kubeconfig, "apply", "-f", "-", stdin=LONG_OBJECT)
            await eventually(long_kind_listed)
            assert await browser.evaluate(KINDS_COUNT_IN_VIEW)
            # The charts are drawn, flat: nothing reconciled yet.
            await eventually(lambda: browser.evaluate(CHART_TOTALS))
            assert await browser.evaluate(CHART_TOTALS) == {
                "reconciles": 0,
                "errors": 0,
                "queue": 0,
                "reconcile-time": 0,
            }

            await kubectl(kubeconfig, "create", "configmap", "web", "--from-literal=replicas=2")
            await kubectl(kubeconfig, "label", "configmap", "web", "web.example.com/deploy=true")

            async def pods_running() -> Any:
                tree = await browser.evaluate(
                    TREE.replace("{kind}", "ConfigMap").replace("{name}", "default/web")
                )
                assert tree is not None
                _, _, _, [deployment] = tree
                assert deployment[:3] == ["Deployment", "default/web", "Available=True"]
                [replica_set] = deployment[3]
                assert replica_set[0] == "ReplicaSet" and replica_set[1].startswith("default/web-")
                pods = replica_set[3]
                assert [pod[0] for pod in pods] == ["Pod", "Pod"] and all(pod[2] == "Running" for pod in pods)
                return tree

            await eventually(pods_running, timeout=60)

            async def charts_moved() -> bool:
                totals = await browser.evaluate(CHART_TOTALS)
                heights = await browser.evaluate(
                    "Array.from(document.querySelectorAll('svg[data-chart=\"reconcile-time\"] rect'))"
                    ".map(r => Number(r.getAttribute('height')))"
                )
                points = await browser.evaluate(
                    "document.querySelector('svg[data-chart=\"reconciles\"] polyline').getAttribute('points')"
                )
                heights_drawn = any(height > 0 for height in heights)
                line_rose = len({point.split(",")[1] for point in points.split()}) > 1
                return (
                    totals["reconciles"] > 0 and totals["reconcile-time"] > 0 and heights_drawn and line_rose
                )

            await eventually(charts_moved, timeout=20)  # the load reached the charts
            reconciles = await browser.evaluate(ROWS.format(table="reconciles"))
            first = [row for row in reconciles if "Deployment/web created" in row[5]]
            assert len(first) == 1 and first[0][1:4] == ["configmap", "default/web", "ok"]

            await kubectl(kubeconfig, "create", "configmap", "bad", "--from-literal=replicas=many")
            await kubectl(kubeconfig, "label", "configmap", "bad", "web.example.com/deploy=true")

            async def warned() -> list[list[str]]:
                events = await browser.evaluate(ROWS.format(table="events"))
                assert events[0][1:4] == ["Warning", "InvalidReplicas", "ConfigMap/bad"]
                assert (
                    await browser.evaluate("document.querySelector('#events tbody tr').className")
                    == "warning"
                )
                [controller] = await browser.evaluate(ROWS.format(table="controllers"))
                assert controller[2] == "1"  # errors
                return events

            events = await eventually(warned)
            assert any(event[2] == "SuccessfulCreate" for event in events)  # the simulated ReplicaSet's
            failed = await browser.evaluate(
                "Array.from(document.querySelectorAll('#reconciles tr[data-result=\"failed for good\"]'))"
                ".map(r => r.dataset.object)"
            )
            assert failed == ["default/bad"]
            said = await browser.evaluate(
                "document.querySelector('#reconciles tr[data-result=\"failed for good\"]').cells[5].textContent"
            )
            assert said.startswith("TerminalError: ")  # why it failed, where what it wrote would be
            assert (
                await browser.evaluate("document.querySelector('[data-field=errors]').className") == "num bad"
            )

            png = await browser.screenshot()
            (tmp_path / "console.png").write_bytes(png)
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            assert struct.unpack(">II", png[16:24]) == (1400, 1000)
            assert len(png) > 50_000  # a drawn page, not a blank one (which is under 10 kB)

        async with aiohttp.ClientSession() as http:
            async with http.get(url + "api/controllers") as response:
                assert response.status == 200 and response.content_type == "application/json"
                [controller] = await response.json()
            async with http.get(url + "api/events") as response:
                [warning, *_] = await response.json()
        assert controller["name"] == "configmap"
        assert controller["errors"] == 1 and controller["reconciles"] >= 3 and controller["queue"] == 0
        assert controller["median_ms"] is not None
        assert warning["type"] == "Warning" and warning["object"] == {"kind": "ConfigMap", "namespace": "default", "name": "bad"}  # fmt: skip
    finally:
        run.send_signal(signal.SIGTERM)
        code = await run.wait()
    assert code == 0, (tmp_path / "stderr").read_text()


async def test_on_a_cluster_not_embedded_the_objects_are_said_to_be_unavailable(
    kube_client: APIClient, kube_namespace: str
) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(lambda request: None)
    served: asyncio.Queue[str] = asyncio.Queue()
    console = Console(
        manager,
        kube_client,
        address=":0",  # no host given: loopback
        title="test",
        namespace=kube_namespace,
        on_serving=served.put_nowait,
    )
    manager.add(console.run, name="console", need_leader_election=False)
    async with manager:
        url = await served.get()
        await kube_client.create(
            core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="one", namespace=kube_namespace))
        )
        await eventually(lambda: manager.controllers["configmap"].results["success"] >= 1)
        async with aiohttp.ClientSession() as http, http.get(url + "api/objects") as response:
            assert response.status == 200 and await response.json() is None
        # It listens on loopback, and answers for no other site's name (DNS rebinding).
        assert url.startswith("http://127.0.0.1:")
        async with aiohttp.ClientSession() as http:
            for host, status in (("evil.example:8090", 403), ("localhost:1", 200), ("127.0.0.1", 200)):
                async with http.get(url + "api/events", headers={"Host": host}) as response:
                    assert response.status == status, host
        async with Browser(1000, 700) as browser:
            await browser.open(url)

            async def reconciled() -> bool:
                rows = await browser.evaluate(ROWS.format(table="reconciles"))
                return bool(rows) and rows[0][1:4] == ["configmap", f"{kube_namespace}/one", "ok"]

            await eventually(reconciled)
            note = await browser.evaluate("document.getElementById('objects-note').textContent")
            assert note == "shown with an embedded server (kubeloop run --embedded)"
            assert await browser.evaluate(ROWS.format(table="kinds")) == [["not shown"]]
    assert console.url == url


def owned_objects(draw: st.DrawFn) -> list[kubeloop.Obj]:
    count = draw(st.integers(1, 12))
    uids = [f"uid-{index}" for index in range(count)]
    owner_uids = st.sampled_from([*uids, "uid-missing"])
    return [
        {
            "apiVersion": "v1",
            "kind": draw(st.sampled_from(["ConfigMap", "Secret"])),
            "metadata": {
                "name": f"o{index}",
                "namespace": "default",
                "uid": uid,
                "ownerReferences": [{"uid": owner} for owner in draw(st.lists(owner_uids, max_size=3))],
            },
        }
        for index, uid in enumerate(uids)
    ]


@given(st.composite(owned_objects)())
def test_owner_trees_show_each_object_once_under_an_owner_whatever_the_references(
    objects: list[kubeloop.Obj],
) -> None:
    summary = object_summary(objects)
    json.dumps(summary)  # a tree, not a graph
    assert sum(kind["count"] for kind in summary["kinds"]) == len(objects)
    by_name = {obj["metadata"]["name"]: obj for obj in objects}
    seen: list[str] = []

    def walk(node: dict[str, Any], parent: str | None) -> None:
        name = node["name"]
        seen.append(name)
        owners = [ref["uid"] for ref in by_name[name]["metadata"]["ownerReferences"]]
        if parent is None:  # a root is owned by none of the objects listed, and owns some
            own = by_name[name]["metadata"]["uid"]
            assert all(owner in ("uid-missing", own) for owner in owners) and node["children"]
        else:
            assert by_name[parent]["metadata"]["uid"] in owners
        for child in node["children"]:
            walk(child, name)

    for root in summary["trees"]:
        walk(root, None)
    assert len(seen) == len(set(seen))
    listed = {obj["metadata"]["uid"] for obj in objects}

    def rootless(uid: str) -> bool:
        [obj] = [obj for obj in objects if obj["metadata"]["uid"] == uid]
        return all(
            ref["uid"] not in listed or ref["uid"] == uid for ref in obj["metadata"]["ownerReferences"]
        )

    for obj in objects:  # whatever an owner without owners of its own owns is shown
        uid = obj["metadata"]["uid"]
        if any(
            ref["uid"] in listed and ref["uid"] != uid and rootless(ref["uid"])
            for ref in obj["metadata"]["ownerReferences"]
        ):
            assert obj["metadata"]["name"] in seen
