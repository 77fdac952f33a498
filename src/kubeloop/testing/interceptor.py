"""A client whose calls pass through functions of the test's first (controller-runtime's
``interceptor.Funcs``): to inject errors, conflicts and slow answers into a reconciler while the
rest of the test runs against the real embedded server, with its real semantics::

    calls = 0

    async def update(client, obj, **options):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise conflict(obj)  # as the API server words it
        return await client.update(obj, **options)

    manager.client = intercepted(manager.client, update=update)

Each interceptor gets the wrapped client (to call through) and the call's arguments; what it
returns is the call's answer, what it raises the call's error. Verbs without one go straight
through. :func:`conflict` and :func:`unavailable` make the errors an API server answers with.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from kubeloop import errors
from kubeloop.api.model import as_dict
from kubeloop.client.interface import Client, gvk_of

Interceptor = Callable[..., Any]
VERBS = ("get", "list", "create", "update", "patch", "apply", "delete", "delete_collection")


class InterceptedClient:
    """``client`` with some verbs answered by interceptors first; the rest of it (the cache,
    the writer, attributes) is the wrapped client's."""

    def __init__(self, client: Client, interceptors: dict[str, Interceptor]) -> None:
        unknown = set(interceptors) - set(VERBS)
        if unknown:
            raise TypeError(f"no such verb to intercept: {', '.join(sorted(unknown))} (verbs: {', '.join(VERBS)})")
        self.client = client
        self.interceptors = interceptors
        for verb in VERBS:
            if verb in interceptors:
                setattr(self, verb, self._through(verb))

    def _through(self, verb: str) -> Callable[..., Any]:
        interceptor = self.interceptors[verb]

        async def call(*args: Any, **kwargs: Any) -> Any:
            outcome = interceptor(self.client, *args, **kwargs)
            return await outcome if inspect.isawaitable(outcome) else outcome

        call.__name__ = verb
        return call

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def intercepted(client: Client, **interceptors: Interceptor) -> Any:
    """``client`` with the verbs named (``get``, ``list``, ``create``, ``update``, ``patch``,
    ``apply``, ``delete``, ``delete_collection``) answered by the functions given first."""
    return InterceptedClient(client, interceptors)


def _plural(kind: str) -> str:
    """The resource name of a kind, by the rules kubebuilder's pluralizer applies."""
    lower = kind.lower()
    if lower == "endpoints":
        return lower
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def _resource(obj: Any) -> tuple[str, str]:
    gvk = gvk_of(obj)
    metadata = as_dict(obj).get("metadata") or {}
    return errors.resource_label(gvk.group, _plural(gvk.kind)), str(metadata.get("name") or "")


def conflict(obj: Any) -> errors.Conflict:
    """The Conflict an API server answers an update of ``obj`` from a stale read with."""
    label, name = _resource(obj)
    return errors.Conflict(
        f'Operation cannot be fulfilled on {label} "{name}": the object has been modified; please apply '
        "your changes to the latest version and try again"
    )


def unavailable(message: str = "the server is currently unable to handle the request") -> errors.ServiceUnavailable:
    """The 503 an API server answers with while it cannot serve."""
    return errors.ServiceUnavailable(message)
