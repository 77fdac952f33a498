"""core/v1 Event ↔ events.k8s.io/v1 Event: two views of one stored object.

The server stores the core/v1 form and converts on the way in and out, with the field
mapping of upstream's ``pkg/apis/events/v1/conversion.go``:

=========================  ===========================
core/v1                    events.k8s.io/v1
=========================  ===========================
involvedObject             regarding
message                    note
reportingComponent         reportingController
reportingInstance          reportingInstance
source                     deprecatedSource
firstTimestamp             deprecatedFirstTimestamp
lastTimestamp              deprecatedLastTimestamp
count                      deprecatedCount
series {count, lastObservedTime}   series {count, lastObservedTime}
related, action, reason, type, eventTime, metadata: unchanged
=========================  ===========================

Both directions are plain renames (values are deep-copied, nothing is derived), so each is
the exact inverse of the other: ``events_v1_to_core(core_to_events_v1(e)) == e`` for a core
Event and the converse for an events.k8s.io/v1 one. Fields a view does not know are carried
along unless they would collide with a field of the target view, in which case they are
dropped (upstream's typed decoding drops them all).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CORE_API_VERSION",
    "CORE_TO_EVENTS_V1",
    "EVENTS_V1_API_VERSION",
    "EVENTS_V1_TO_CORE",
    "KIND",
    "core_to_events_v1",
    "events_v1_to_core",
]

CORE_API_VERSION = "v1"
EVENTS_V1_API_VERSION = "events.k8s.io/v1"
KIND = "Event"

#: core/v1 field name → events.k8s.io/v1 field name.
CORE_TO_EVENTS_V1: Mapping[str, str] = {
    "metadata": "metadata",
    "involvedObject": "regarding",
    "message": "note",
    "reportingComponent": "reportingController",
    "reportingInstance": "reportingInstance",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "series": "series",
    "related": "related",
    "action": "action",
    "reason": "reason",
    "type": "type",
    "eventTime": "eventTime",
}

#: events.k8s.io/v1 field name → core/v1 field name.
EVENTS_V1_TO_CORE: Mapping[str, str] = {target: source for source, target in CORE_TO_EVENTS_V1.items()}

_TYPE_META = ("apiVersion", "kind")


def _convert(obj: Mapping[str, Any], renames: Mapping[str, str], api_version: str) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": api_version, "kind": KIND}
    targets = set(renames.values())
    for key, value in obj.items():
        if key in _TYPE_META:
            continue
        target = renames.get(key)
        if target is None:
            if key in targets:
                continue  # an unknown field spelled like one of the target view's: drop it
            target = key
        out[target] = copy.deepcopy(value)
    return out


def core_to_events_v1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The events.k8s.io/v1 view of a core/v1 Event (a new dict; ``obj`` is not modified)."""
    return _convert(obj, CORE_TO_EVENTS_V1, EVENTS_V1_API_VERSION)


def events_v1_to_core(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The core/v1 form of an events.k8s.io/v1 Event (a new dict; ``obj`` is not modified)."""
    return _convert(obj, EVENTS_V1_TO_CORE, CORE_API_VERSION)
