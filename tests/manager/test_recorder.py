"""The event recorder writes core/v1 Events that kubectl describe shows; repeats raise the count."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.manager.manager import Manager
from kubeloop.manager.recorder import NORMAL, WARNING
from tests.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401  (fixture)
from tests.conftest import ServerThread


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


async def test_events_are_recorded_and_aggregated(
    client: APIClient,
    namespace: str,
    kubectl: Kubectl,  # noqa: F811
) -> None:
    target = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "subject", "namespace": namespace}}
    )
    manager = Manager(client)
    recorder = manager.event_recorder("widget-controller")
    assert manager.event_recorder("widget-controller") is recorder
    for _ in range(3):
        recorder.event(target, WARNING, "BackOff", "retrying the thing")
    recorder.event(target, NORMAL, "Synced", "all good")
    with pytest.raises(ValueError):
        recorder.event(target, "Odd", "R", "m")
    await manager.stop()  # flushes the recorder

    events = await client.list(
        {"apiVersion": "v1", "kind": "Event"},
        namespace=namespace,
        field_selector="involvedObject.name=subject",
    )
    by_reason = {e["reason"]: e for e in events.items}
    assert set(by_reason) == {"BackOff", "Synced"}  # three BackOffs are one Event
    assert by_reason["BackOff"]["count"] == 3 and by_reason["BackOff"]["type"] == "Warning"
    assert by_reason["BackOff"]["involvedObject"]["uid"] == target["metadata"]["uid"]
    assert by_reason["BackOff"]["source"] == {"component": "widget-controller"}
    described = kubectl("describe", "configmap", "subject", "-n", namespace).stdout
    assert "BackOff" in described and "retrying the thing" in described and "x3" in described


async def test_an_event_is_written_under_the_fence_of_the_code_that_recorded_it(
    client: APIClient, namespace: str
) -> None:
    from kubeloop.client.fence import current_write_fence
    from tests.client.test_rest import SwitchFence

    target = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fenced", "namespace": namespace}}
    )
    manager = Manager(client)
    recorder = manager.event_recorder("fenced-controller")
    shut = SwitchFence()
    shut.open = False
    token = current_write_fence.set(shut)  # as inside a reconcile of a leader whose lease lapsed
    try:
        recorder.event(target, NORMAL, "FromStaleLeader", "must not be written")
    finally:
        current_write_fence.reset(token)
    recorder.event(target, NORMAL, "FromEveryReplica", "written")  # a runnable on every replica
    await manager.stop()
    events = await client.list(
        {"apiVersion": "v1", "kind": "Event"},
        namespace=namespace,
        field_selector="involvedObject.name=fenced",
    )
    assert {e["reason"] for e in events.items} == {"FromEveryReplica"}
