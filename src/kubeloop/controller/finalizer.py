"""Finalizers done right, in the shape of kube-rs' ``finalizer()`` and controller-runtime's
``pkg/finalizer``: a reconciler hands its work to :func:`finalizer` as two functions, one for an
object that lives (``apply``) and one for an object being deleted (``cleanup``)::

    async def reconcile(request):
        website = await manager.client.get(Website, request.name, namespace=request.namespace)
        return await kubeloop.finalizer(
            manager.client, website, "web.example.com/dns", apply=publish, cleanup=unpublish
        )

- An object that lives gets the finalizer first (a merge patch that names the resourceVersion it
  read), then ``apply(obj)`` runs and its result is returned.
- An object being deleted that holds the finalizer: ``cleanup(obj)`` runs, and only once it
  returns is the finalizer removed — so a cleanup that fails (it raises; the reconcile is
  retried with back-off) runs again until it succeeds, and an object is never left behind
  without its cleanup having run. One being deleted without it returns None: nothing to do.
- A concurrent change makes the patch a ``Conflict``, which the controller requeues quietly;
  the next reconcile sees the change. The patches name the resourceVersion, so a finalizer list
  someone else changed in between is never overwritten.

``apply`` and ``cleanup`` may be async or plain functions, and get the object as it was
read (with the finalizer, once added).

:class:`Finalizers` is controller-runtime's registry instead: several named finalizers on one
object, each with its own finalize function, worked on the object in memory; the caller writes
what the :class:`FinalizerResult` says changed.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubeloop.api.model import KubeModel
from kubeloop.client.interface import Client

T = TypeVar("T")
R = TypeVar("R")

Step = Callable[[T], Awaitable[R] | R]


def _metadata(obj: Any) -> dict[str, Any]:
    if isinstance(obj, KubeModel):
        return dict(obj.to_dict().get("metadata") or {})
    return dict(obj.get("metadata") or {})


async def _run(step: Step[T, R], obj: T) -> R:
    outcome = step(obj)
    if inspect.isawaitable(outcome):
        return cast(R, await outcome)
    return outcome


async def finalizer(
    client: Client, obj: T, name: str, *, apply: Step[T, R], cleanup: Step[T, R]
) -> R | None:
    """Run ``apply`` for a living object (after making sure it holds the finalizer ``name``) or
    ``cleanup`` for one being deleted (then remove ``name``); see the module's docs."""
    metadata = _metadata(obj)
    finalizers = [str(item) for item in metadata.get("finalizers") or ()]
    version = str(metadata.get("resourceVersion") or "")
    if metadata.get("deletionTimestamp"):
        if name not in finalizers:
            return None
        result = await _run(cleanup, obj)
        remaining = [item for item in finalizers if item != name]
        await client.patch(
            cast(Any, obj), None, {"metadata": {"finalizers": remaining or None, "resourceVersion": version}}
        )
        return result
    if name not in finalizers:
        patched: Any = await client.patch(
            cast(Any, obj), None, {"metadata": {"finalizers": [*finalizers, name], "resourceVersion": version}}
        )
        obj = cast(T, patched)
    return await _run(apply, obj)


@dataclass(frozen=True)
class FinalizerResult:
    """What finalizing changed on the object, for the caller to write: its metadata (the
    finalizers; ``updated``), its status (``status_updated``); and what failed."""

    updated: bool = False
    status_updated: bool = False
    #: Each failed finalize function's exception (its finalizer stays on the object).
    errors: tuple[Exception, ...] = ()

    def raise_errors(self) -> None:
        """Raise the failures as one ``ExceptionGroup`` (nothing when none failed)."""
        if self.errors:
            raise ExceptionGroup(f"{len(self.errors)} finalizer(s) failed", list(self.errors))


#: A finalize function: given the object being deleted (which it may change, e.g. a condition),
#: it cleans up, and says whether it changed the object (None: nothing).
Finalize = Callable[[Any], Awaitable[FinalizerResult | None] | FinalizerResult | None]


class Finalizers:
    """Several named finalizers on one object, each with its own finalize function
    (controller-runtime's ``finalizer.Finalizers``)::

        finalizers = kubeloop.Finalizers()
        finalizers.register("web.example.com/dns", unpublish)
        finalizers.register("web.example.com/bucket", empty_bucket)

        async def reconcile(request):
            site = await client.get(Website, request.name, namespace=request.namespace)
            result = await finalizers.finalize(site)
            if result.updated:
                site = await client.update(site)
            if result.status_updated:
                await client.update(site, subresource="status")
            result.raise_errors()  # retried with back-off; what succeeded is written already

    :meth:`finalize` changes the object in memory only: on an object that lives it adds every
    registered finalizer it lacks; on one being deleted it runs the finalize function of each
    registered finalizer it holds, in the order they were registered, and removes those that
    returned (one that raises stays, its exception in ``errors``, the others go on). A function
    that changed the object before it failed (a condition saying why) says so with a
    ``FinalizerResult`` as its exception's ``result`` attribute, as controller-runtime's return
    both."""

    def __init__(self) -> None:
        self._registered: dict[str, Finalize] = {}

    def register(self, key: str, finalize: Finalize) -> None:
        """Register ``finalize`` for the finalizer ``key``; ValueError if ``key`` has one."""
        if key in self._registered:
            raise ValueError(f"a finalizer for {key!r} is registered already")
        self._registered[key] = finalize

    async def finalize(self, obj: Any) -> FinalizerResult:
        """Add or run and remove the registered finalizers on ``obj`` (see the class's docs)."""
        from kubeloop.controller.controllerutil import add_finalizer, contains_finalizer, remove_finalizer

        deleting = bool(_metadata(obj).get("deletionTimestamp"))
        updated = status_updated = False
        errors: list[Exception] = []
        for key, finalize in self._registered.items():
            if not deleting:
                updated = add_finalizer(obj, key) or updated
                continue
            if not contains_finalizer(obj, key):
                continue
            try:
                outcome = await _run(finalize, obj)
            except Exception as exc:  # the finalizer stays; the others still run
                errors.append(exc)
                outcome = getattr(exc, "result", None)
            else:
                updated = remove_finalizer(obj, key) or updated
            if isinstance(outcome, FinalizerResult):
                updated = updated or outcome.updated
                status_updated = status_updated or outcome.status_updated
        return FinalizerResult(updated, status_updated, tuple(errors))
