"""Sources: where a controller's events come from (controller-runtime's ``pkg/source``).

``Kind`` connects an informer to a controller's queue: each add/update/delete passes the
predicates, then the event handler turns it into requests.
"""

from __future__ import annotations

from kubeloop.cache import informer as informer_module
from kubeloop.cache.informer import Informer
from kubeloop.controller.handler import EventHandler, RequestQueue
from kubeloop.controller.predicate import Predicate


class Kind:
    def __init__(self, informer: Informer, handler: EventHandler, *predicates: Predicate) -> None:
        self.informer = informer
        self.handler = handler
        self.predicates = predicates

    def start(self, queue: RequestQueue) -> None:
        """Deliver the informer's events to ``queue`` (objects already cached arrive as creates)."""
        handler = self.handler
        predicates = self.predicates
        self.informer.add_handler(
            informer_module.EventHandler(
                on_add=lambda obj: (
                    handler.create(obj, queue) if all(p.create(obj) for p in predicates) else None
                ),
                on_update=lambda old, new: (
                    handler.update(old, new, queue) if all(p.update(old, new) for p in predicates) else None
                ),
                on_delete=lambda obj: (
                    handler.delete(obj, queue) if all(p.delete(obj) for p in predicates) else None
                ),
            )
        )
