"""events.k8s.io/v1 Events: a view of the core Events' storage."""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.core import eventconversion
from kubeloop.apiserver.registry.strategies import BuiltinStrategy


class EventsV1Strategy(BuiltinStrategy):
    """events.k8s.io/v1 Events: the core/v1 Events' storage, converted on the way in and out."""

    def to_served(self, stored: Obj, *, defaulted: bool = False) -> Obj:
        served = eventconversion.core_to_events_v1(stored)
        # Upstream's events.k8s.io/v1 Event always writes eventTime (no omitempty), as null for
        # a core Event recorded without one (the kubelet's, client-go's old recorder).
        served.setdefault("eventTime", None)
        return served

    def to_stored(self, served: Obj) -> Obj:
        return eventconversion.events_v1_to_core(served)
