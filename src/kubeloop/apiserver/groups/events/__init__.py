"""The events.k8s.io API group: Events, a view of the core Events' storage in their own
vocabulary, printed as core Events are."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.core.columns import core_event, event_columns
from kubeloop.apiserver.groups.declaration import BuiltinKind
from kubeloop.apiserver.groups.events.strategies import EventsV1Strategy


def _events_v1_fields() -> Mapping[str, str]:
    # events.k8s.io/v1 selects on the same stored fields, spelled in its own vocabulary.
    return MappingProxyType(
        {
            "regarding.kind": "regarding.kind",
            "regarding.namespace": "regarding.namespace",
            "regarding.name": "regarding.name",
            "regarding.uid": "regarding.uid",
            "regarding.apiVersion": "regarding.apiVersion",
            "regarding.resourceVersion": "regarding.resourceVersion",
            "regarding.fieldPath": "regarding.fieldPath",
            "reason": "reason",
            "reportingController": "reportingController",
            "type": "type",
        }
    )


#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            True,
            short_names=("ev",),
            storage_of=("", "events"),
            field_selectors=_events_v1_fields(),
        ),
        strategy=EventsV1Strategy,
        columns=event_columns,
        printed_form=core_event,
    ),
)
