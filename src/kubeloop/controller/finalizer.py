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
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
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
