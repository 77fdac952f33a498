"""core/v1 Event ↔ events.k8s.io/v1 Event conversion."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.groups.core.eventconversion import core_to_events_v1, events_v1_to_core

CORE_EVENT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "web-0.17a", "namespace": "prod", "resourceVersion": "42", "uid": "u-1"},
    "involvedObject": {
        "kind": "Pod",
        "namespace": "prod",
        "name": "web-0",
        "uid": "p-1",
        "apiVersion": "v1",
        "resourceVersion": "7",
        "fieldPath": "spec.containers{web}",
    },
    "reason": "Started",
    "message": "Started container web",
    "source": {"component": "kubelet", "host": "node-1"},
    "firstTimestamp": "2024-05-01T10:00:00Z",
    "lastTimestamp": "2024-05-01T10:05:00Z",
    "count": 3,
    "type": "Normal",
    "eventTime": "2024-05-01T10:00:00.123456Z",
    "series": {"count": 2, "lastObservedTime": "2024-05-01T10:05:00.000001Z"},
    "action": "Starting",
    "related": {"kind": "Node", "name": "node-1", "apiVersion": "v1"},
    "reportingComponent": "kubelet",
    "reportingInstance": "node-1",
}

EVENTS_V1_EVENT: dict[str, Any] = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "web-0.17a", "namespace": "prod", "resourceVersion": "42", "uid": "u-1"},
    "regarding": {
        "kind": "Pod",
        "namespace": "prod",
        "name": "web-0",
        "uid": "p-1",
        "apiVersion": "v1",
        "resourceVersion": "7",
        "fieldPath": "spec.containers{web}",
    },
    "reason": "Started",
    "note": "Started container web",
    "deprecatedSource": {"component": "kubelet", "host": "node-1"},
    "deprecatedFirstTimestamp": "2024-05-01T10:00:00Z",
    "deprecatedLastTimestamp": "2024-05-01T10:05:00Z",
    "deprecatedCount": 3,
    "type": "Normal",
    "eventTime": "2024-05-01T10:00:00.123456Z",
    "series": {"count": 2, "lastObservedTime": "2024-05-01T10:05:00.000001Z"},
    "action": "Starting",
    "related": {"kind": "Node", "name": "node-1", "apiVersion": "v1"},
    "reportingController": "kubelet",
    "reportingInstance": "node-1",
}


def test_core_to_events_v1() -> None:
    original = copy.deepcopy(CORE_EVENT)
    converted = core_to_events_v1(CORE_EVENT)
    assert converted == EVENTS_V1_EVENT
    assert original == CORE_EVENT  # input untouched
    converted["metadata"]["name"] = "changed"
    converted["series"]["count"] = 99
    assert original == CORE_EVENT  # output does not alias the input


def test_events_v1_to_core() -> None:
    original = copy.deepcopy(EVENTS_V1_EVENT)
    converted = events_v1_to_core(EVENTS_V1_EVENT)
    assert converted == CORE_EVENT
    assert original == EVENTS_V1_EVENT
    converted["involvedObject"]["name"] = "changed"
    assert original == EVENTS_V1_EVENT


def test_minimal_events_v1_event() -> None:
    # What client-go's events.k8s.io/v1 recorder sends: no deprecated fields.
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "x.1", "namespace": "default"},
        "eventTime": "2024-05-01T10:00:00.000000Z",
        "reportingController": "example.com/ctrl",
        "reportingInstance": "ctrl-abc",
        "action": "Reconcile",
        "reason": "Synced",
        "regarding": {"kind": "ConfigMap", "name": "cm", "namespace": "default"},
        "note": "done",
        "type": "Normal",
    }
    core = events_v1_to_core(new)
    assert core == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "x.1", "namespace": "default"},
        "eventTime": "2024-05-01T10:00:00.000000Z",
        "reportingComponent": "example.com/ctrl",
        "reportingInstance": "ctrl-abc",
        "action": "Reconcile",
        "reason": "Synced",
        "involvedObject": {"kind": "ConfigMap", "name": "cm", "namespace": "default"},
        "message": "done",
        "type": "Normal",
    }
    assert core_to_events_v1(core) == new


def test_unknown_fields_travel_unless_they_collide() -> None:
    core = {"apiVersion": "v1", "kind": "Event", "message": "m", "extra": {"a": 1}, "note": "stray"}
    assert core_to_events_v1(core) == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "note": "m",
        "extra": {"a": 1},
    }
    new: dict[str, Any] = {"kind": "Event", "note": "n", "message": "stray", "involvedObject": {}, "x": None}
    assert events_v1_to_core(new) == {"apiVersion": "v1", "kind": "Event", "message": "n", "x": None}


# --------------------------------------------------------------------------- round trips

_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=12))
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_REF = st.fixed_dictionaries(
    {},
    optional={
        key: st.text(max_size=10)
        for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
)
_TIME = st.one_of(st.none(), st.sampled_from(["2024-05-01T10:00:00Z", "2024-05-01T10:00:00.123456Z"]))
_SERIES = st.fixed_dictionaries({}, optional={"count": st.integers(0, 100), "lastObservedTime": _TIME})
_COMMON = {
    "metadata": st.fixed_dictionaries({"name": st.text(max_size=10)}, optional={"labels": _JSON}),
    "reason": st.text(max_size=10),
    "type": st.sampled_from(["Normal", "Warning", ""]),
    "eventTime": _TIME,
    "series": st.one_of(st.none(), _SERIES),
    "action": st.text(max_size=10),
    "related": st.one_of(st.none(), _REF),
    "reportingInstance": st.text(max_size=10),
}
_SOURCE = st.fixed_dictionaries({}, optional={"component": st.text(max_size=8), "host": st.text(max_size=8)})

CORE_EVENTS = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Event")},
    optional={
        **_COMMON,
        "involvedObject": _REF,
        "message": st.text(max_size=20),
        "reportingComponent": st.text(max_size=10),
        "source": _SOURCE,
        "firstTimestamp": _TIME,
        "lastTimestamp": _TIME,
        "count": st.integers(0, 1000),
        "unknownField": _JSON,
    },
)
EVENTS_V1_EVENTS = st.fixed_dictionaries(
    {"apiVersion": st.just("events.k8s.io/v1"), "kind": st.just("Event")},
    optional={
        **_COMMON,
        "regarding": _REF,
        "note": st.text(max_size=20),
        "reportingController": st.text(max_size=10),
        "deprecatedSource": _SOURCE,
        "deprecatedFirstTimestamp": _TIME,
        "deprecatedLastTimestamp": _TIME,
        "deprecatedCount": st.integers(0, 1000),
        "unknownField": _JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(CORE_EVENTS)
def test_core_round_trip(event: dict[str, Any]) -> None:
    original = copy.deepcopy(event)
    new = core_to_events_v1(event)
    assert new["apiVersion"] == "events.k8s.io/v1"
    assert new["kind"] == "Event"
    for core_name, new_name in (
        ("involvedObject", "regarding"),
        ("message", "note"),
        ("source", "deprecatedSource"),
        ("reportingComponent", "reportingController"),
        ("count", "deprecatedCount"),
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
        ("series", "series"),
    ):
        assert new.get(new_name) == event.get(core_name)
        if core_name != new_name:
            assert core_name not in new
    assert events_v1_to_core(new) == original
    assert event == original


@settings(max_examples=300, deadline=None)
@given(EVENTS_V1_EVENTS)
def test_events_v1_round_trip(event: dict[str, Any]) -> None:
    original = copy.deepcopy(event)
    core = events_v1_to_core(event)
    assert core["apiVersion"] == "v1"
    assert core["kind"] == "Event"
    assert core.get("involvedObject") == event.get("regarding")
    assert core.get("message") == event.get("note")
    assert core.get("reportingComponent") == event.get("reportingController")
    assert core.get("reportingInstance") == event.get("reportingInstance")
    assert core.get("source") == event.get("deprecatedSource")
    for name in ("regarding", "note", "reportingController", "deprecatedSource", "deprecatedCount"):
        assert name not in core
    assert core_to_events_v1(core) == original
    assert event == original
