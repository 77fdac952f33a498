"""The event recorder writes core/v1 Events that kubectl describe shows; repeats raise the count."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.client.rest import APIClient
from kubeloop.manager.manager import Manager
from kubeloop.manager.recorder import NORMAL, WARNING, EventRecorder, object_reference
from tests.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401  (fixture)


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


async def test_an_event_about_a_part_of_an_object_names_it_and_its_host(client: APIClient, namespace: str) -> None:
    """As a kubelet records them: the recorder takes an ObjectReference, its fieldPath kept (the
    same event about two parts is two Events), and a recorder of a host says so in its source."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace, "uid": "u-1"}}
    manager = Manager(client)
    recorder = manager.event_recorder("kubelet", host="node-1")
    assert manager.event_recorder("kubelet", host="node-1") is recorder
    assert manager.event_recorder("kubelet") is not recorder
    for part in ("spec.containers{a}", "spec.containers{b}", "spec.containers{a}"):
        recorder.event(object_reference(pod, part), NORMAL, "Started", "Started container")
    await manager.stop()

    events = await client.list(
        {"apiVersion": "v1", "kind": "Event"}, namespace=namespace, field_selector="involvedObject.name=p"
    )
    parts = {e["involvedObject"]["fieldPath"]: e for e in events.items}
    assert {part: e["count"] for part, e in parts.items()} == {"spec.containers{a}": 2, "spec.containers{b}": 1}
    event = parts["spec.containers{b}"]
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": "p",
                                       "uid": "u-1", "fieldPath": "spec.containers{b}"}  # fmt: skip
    assert event["source"] == {"component": "kubelet", "host": "node-1"}
    assert event["reportingComponent"] == "kubelet" and event["reportingInstance"] == "node-1"


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


async def events_about(client: APIClient, namespace: str, name: str) -> list[dict[str, Any]]:
    events = await client.list(
        {"apiVersion": "v1", "kind": "Event"},
        namespace=namespace,
        field_selector=f"involvedObject.name={name}",
    )
    return list(events.items)


async def test_the_events_a_recorder_remembers_are_the_latest_few(client: APIClient, namespace: str) -> None:
    """client-go's correlator keeps the last 4096 events in an LRU; an evicted event's repeat
    starts a new Event. Here with room for three."""
    assert EventRecorder(client, "defaults").cache_size == 4096
    target = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lru", "namespace": namespace}}
    )
    recorder = EventRecorder(client, "lru-controller", cache_size=3)
    for reason in ("A", "B", "C"):
        recorder.event(target, NORMAL, reason, "first")
    recorder.event(target, NORMAL, "A", "first")  # A is now the newest: B is the oldest
    recorder.event(target, NORMAL, "D", "first")  # evicts B
    recorder.event(target, NORMAL, "B", "first")  # forgotten: a new Event; evicts C
    recorder.event(target, NORMAL, "A", "first")  # remembered: its count goes up
    await recorder.stop()
    assert recorder.remembered == 3
    events = await events_about(client, namespace, "lru")
    counts = sorted((e["reason"], e["count"]) for e in events)
    assert counts == [("A", 3), ("B", 1), ("B", 1), ("C", 1), ("D", 1)]


async def test_the_spam_filter_lets_25_events_per_object_through_then_one_per_5_minutes(
    client: APIClient, namespace: str
) -> None:
    now = [1000.0]
    targets = [
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
        )
        for name in ("hot", "calm")
    ]
    hot, calm = targets
    recorder = EventRecorder(client, "spammy", clock=lambda: now[0])
    for attempt in range(40):  # a reconcile failing in a hot loop, each message different
        recorder.event(hot, WARNING, "Failed", f"attempt {attempt}")
    recorder.event(calm, WARNING, "Failed", "once")  # another object has a bucket of its own
    recorder.event(hot, NORMAL, "Synced", "a Normal event is another bucket")
    assert recorder.dropped == 15
    now[0] += 299.0
    recorder.event(hot, WARNING, "Failed", "not yet refilled")
    now[0] += 1.0
    recorder.event(hot, WARNING, "Failed", "one token after 5 minutes")
    recorder.event(hot, WARNING, "Failed", "and only one")
    assert recorder.dropped == 17
    await recorder.stop()
    hot_events = await events_about(client, namespace, "hot")
    failed = sorted(e["message"] for e in hot_events if e["reason"] == "Failed")
    assert failed == sorted([f"attempt {i}" for i in range(25)] + ["one token after 5 minutes"])
    assert {e["reason"] for e in hot_events} == {"Failed", "Synced"}
    assert [e["message"] for e in await events_about(client, namespace, "calm")] == ["once"]
