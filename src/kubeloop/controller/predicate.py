"""Predicates: which events reach the event handlers (controller-runtime's ``pkg/predicate``).

A predicate answers for create, update (old, new), delete and generic events. The ones here
cover controller-runtime's: generation, resourceVersion, labels and annotations changed, a label
selector, and/or/not, and ``Funcs`` for anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.controller.handler import reads_old_object


class Predicate(Protocol):
    """Whether an event goes on to the handlers (controller-runtime's ``predicate.Predicate``).
    Given to ``Builder.with_event_filter`` (every watch) or a watch's ``predicates``::

        Builder(manager).for_(Widget, predicate.GenerationChanged()).complete(reconcile)
    """

    def create(self, obj: Obj) -> bool:
        """Whether the creation of ``obj`` is handled."""
        ...

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether the change from ``old`` to ``new`` is handled."""
        ...

    def delete(self, obj: Obj) -> bool:
        """Whether the deletion of ``obj`` is handled."""
        ...

    def generic(self, obj: Obj) -> bool:
        """Whether a generic event (a channel source's) for ``obj`` is handled."""
        ...


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class _PassAll:
    #: Whether ``update`` reads the old object (see ``handler.reads_old_object``).
    reads_old_object = False

    def create(self, obj: Obj) -> bool:
        return True

    def update(self, old: Obj, new: Obj) -> bool:
        return True

    def delete(self, obj: Obj) -> bool:
        return True

    def generic(self, obj: Obj) -> bool:
        return True


@dataclass
class Funcs(_PassAll):
    """A predicate from functions; an event without a function passes.

    Example::

        only_labelled = predicate.Funcs(on_create=lambda obj: "team" in obj["metadata"].get("labels", {}))
    """

    reads_old_object = True

    on_create: Callable[[Obj], bool] | None = None
    on_update: Callable[[Obj, Obj], bool] | None = None
    on_delete: Callable[[Obj], bool] | None = None
    on_generic: Callable[[Obj], bool] | None = None

    def create(self, obj: Obj) -> bool:
        """``on_create(obj)``, or True without it."""
        return self.on_create(obj) if self.on_create else True

    def update(self, old: Obj, new: Obj) -> bool:
        """``on_update(old, new)``, or True without it."""
        return self.on_update(old, new) if self.on_update else True

    def delete(self, obj: Obj) -> bool:
        """``on_delete(obj)``, or True without it."""
        return self.on_delete(obj) if self.on_delete else True

    def generic(self, obj: Obj) -> bool:
        """``on_generic(obj)``, or True without it."""
        return self.on_generic(obj) if self.on_generic else True


class ResourceVersionChanged(_PassAll):
    """Updates only when the resourceVersion changed (drops resyncs)."""

    reads_old_object = True

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether the resourceVersion differs (a resync's update does not)."""
        return _meta(old).get("resourceVersion") != _meta(new).get("resourceVersion")


class GenerationChanged(_PassAll):
    """Updates only when metadata.generation changed (spec changes, not status or metadata)."""

    reads_old_object = True

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether ``metadata.generation`` differs."""
        return _meta(old).get("generation") != _meta(new).get("generation")


class LabelsChanged(_PassAll):
    """Updates only when the labels changed."""

    reads_old_object = True

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether the labels differ."""
        return (_meta(old).get("labels") or {}) != (_meta(new).get("labels") or {})


class AnnotationsChanged(_PassAll):
    """Updates only when the annotations changed."""

    reads_old_object = True

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether the annotations differ."""
        return (_meta(old).get("annotations") or {}) != (_meta(new).get("annotations") or {})


class LabelSelectorPredicate(_PassAll):
    """Events of objects whose labels match a selector: a selector string (the full grammar,
    ``"tier in (web,db),!legacy"``), a ``LabelSelector``, or the JSON form of a
    metav1.LabelSelector (``{"matchLabels": …, "matchExpressions": […]}``). Raises
    InvalidSelector when the selector is not valid."""

    def __init__(self, selector: str | LabelSelector | Mapping[str, Any]) -> None:
        if isinstance(selector, str):
            self.selector = LabelSelector.parse(selector)
        elif isinstance(selector, LabelSelector):
            self.selector = selector
        else:
            self.selector = LabelSelector.from_label_selector_dict(selector)

    def _matches(self, obj: Obj) -> bool:
        return self.selector.matches(_meta(obj).get("labels") or {})

    def create(self, obj: Obj) -> bool:
        """Whether ``obj``'s labels match."""
        return self._matches(obj)

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether ``new``'s labels match."""
        return self._matches(new)

    def delete(self, obj: Obj) -> bool:
        """Whether ``obj``'s labels match."""
        return self._matches(obj)

    def generic(self, obj: Obj) -> bool:
        """Whether ``obj``'s labels match."""
        return self._matches(obj)


class And(_PassAll):
    """Events that every predicate lets through.

    Example::

        predicate.And(predicate.GenerationChanged(), predicate.LabelSelectorPredicate("tier=web"))
    """

    def __init__(self, *predicates: Predicate) -> None:
        self.predicates = predicates
        self.reads_old_object = any(reads_old_object(p) for p in predicates)

    def create(self, obj: Obj) -> bool:
        """Whether every predicate passes the create event."""
        return all(p.create(obj) for p in self.predicates)

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether every predicate passes the update event."""
        return all(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Obj) -> bool:
        """Whether every predicate passes the delete event."""
        return all(p.delete(obj) for p in self.predicates)

    def generic(self, obj: Obj) -> bool:
        """Whether every predicate passes the generic event."""
        return all(p.generic(obj) for p in self.predicates)


class Or(_PassAll):
    """Events that any of the predicates lets through.

    Example::

        predicate.Or(predicate.GenerationChanged(), predicate.LabelSelectorPredicate("tier=web"))
    """

    def __init__(self, *predicates: Predicate) -> None:
        self.predicates = predicates
        self.reads_old_object = any(reads_old_object(p) for p in predicates)

    def create(self, obj: Obj) -> bool:
        """Whether any predicate passes the create event."""
        return any(p.create(obj) for p in self.predicates)

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether any predicate passes the update event."""
        return any(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Obj) -> bool:
        """Whether any predicate passes the delete event."""
        return any(p.delete(obj) for p in self.predicates)

    def generic(self, obj: Obj) -> bool:
        """Whether any predicate passes the generic event."""
        return any(p.generic(obj) for p in self.predicates)


class Not(_PassAll):
    """Events the predicate refuses.

    Example::

        predicate.Not(predicate.LabelSelectorPredicate("kubeloop.dev/ignore"))
    """

    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate
        self.reads_old_object = reads_old_object(predicate)

    def create(self, obj: Obj) -> bool:
        """Whether the predicate refuses the create event."""
        return not self.predicate.create(obj)

    def update(self, old: Obj, new: Obj) -> bool:
        """Whether the predicate refuses the update event."""
        return not self.predicate.update(old, new)

    def delete(self, obj: Obj) -> bool:
        """Whether the predicate refuses the delete event."""
        return not self.predicate.delete(obj)

    def generic(self, obj: Obj) -> bool:
        """Whether the predicate refuses the generic event."""
        return not self.predicate.generic(obj)
