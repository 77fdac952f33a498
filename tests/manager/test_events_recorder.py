"""The events.k8s.io/v1 recorder against the embedded server: what the controller did about
which objects, repeats as a series (created, then counted), kubectl showing them."""

from __future__ import annotations

import pytest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.rest import APIClient
from kubeloop.manager.eventsrecorder import EventsV1Recorder
from kubeloop.manager.manager import Manager
from kubeloop.manager.recorder import NORMAL, WARNING
from tests.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401  (fixture)

EVENT_V1 = GroupVersionKind("events.k8s.io", "v1", "Event")


async def test_events_say_the_action_the_objects_and_count_repeats_as_a_series(
    client: APIClient,
    namespace: str,
    kubectl: Kubectl,  # noqa: F811
) -> None:
    site = await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site", "namespace": namespace}})
    pod = await client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert", "namespace": namespace}})
    manager = Manager(client)
    recorder = manager.events_v1_recorder("example.com/site-controller")
    assert manager.events_v1_recorder("example.com/site-controller") is recorder
    recorder.eventf(site, pod, NORMAL, "Issued", "IssueCertificate", "issued cert for site")
    await recorder.flush()
    [made] = (await client.list(EVENT_V1, namespace=namespace)).items
    assert "series" not in made  # the first: an Event of its own
    for attempt in range(4):  # the same again (notes differ): one series
        recorder.eventf(site, pod, WARNING, "Failed", "Publish", f"publish failed, attempt {attempt}")
    await recorder.flush()
    events = {e["reason"]: e for e in (await client.list(EVENT_V1, namespace=namespace)).items}
    failed = events["Failed"]
    assert failed["series"]["count"] == 2  # the second makes it a series at once; later ones count
    assert failed["note"] == "publish failed, attempt 0"
    assert failed["regarding"]["uid"] == site["metadata"]["uid"] and failed["related"]["name"] == "cert"
    assert (failed["action"], failed["type"], failed["reportingController"]) == ("Publish", "Warning", "example.com/site-controller")
    assert failed["reportingInstance"].startswith("example.com/site-controller-")
    with pytest.raises(ValueError, match="needs a reason and an action"):
        recorder.eventf(site, None, NORMAL, "Synced", "", "no action")
    await manager.stop()  # writes what the series counted
    stopped = {e["reason"]: e for e in (await client.list(EVENT_V1, namespace=namespace)).items}
    assert stopped["Failed"]["series"]["count"] == 4 and stopped["Failed"]["metadata"]["name"] == failed["metadata"]["name"]
    assert stopped["Issued"].get("series") is None
    # kubectl sees them (the core/v1 view of events.k8s.io Events).
    described = kubectl("get", "events", "-n", namespace, "-o", "wide").stdout
    assert "Failed" in described and "publish failed, attempt 0" in described and "Issued" in described


async def test_a_quiet_series_is_written_and_forgotten_and_a_deleted_event_made_again(client: APIClient, namespace: str) -> None:
    """With the finish time at zero, every tick finishes the series: its count is written and
    the next event starts a new Event; an Event deleted meanwhile is made again with its series."""
    site = await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site", "namespace": namespace}})
    recorder = EventsV1Recorder(client, "example.com/c", refresh_seconds=3600, finish_seconds=3600)
    recorder.eventf(site, None, NORMAL, "Synced", "Sync", "one")
    recorder.eventf(site, None, NORMAL, "Synced", "Sync", "two")
    recorder.eventf(site, None, NORMAL, "Synced", "Sync", "three")
    await recorder.flush()
    [event] = (await client.list(EVENT_V1, namespace=namespace)).items
    await client.delete(event)  # expired, say
    recorder.finish_seconds = 0
    await recorder._write_series()  # a tick: the quiet series written (made again), then forgotten
    [again] = (await client.list(EVENT_V1, namespace=namespace)).items
    assert again["series"]["count"] == 3
    recorder.eventf(site, None, NORMAL, "Synced", "Sync", "four")
    await recorder.flush()
    events = (await client.list(EVENT_V1, namespace=namespace)).items
    assert len(events) == 2 and sorted(e.get("series", {}).get("count", 1) for e in events) == [1, 3]
    await recorder.stop()
