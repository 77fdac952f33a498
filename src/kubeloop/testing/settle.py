"""``settled``: wait until an operator has nothing left to do, so a test can show that something
did *not* happen.

"The predicate filtered that update" cannot be shown by sleeping and then seeing no reconcile:
the reconcile may come after the sleep. ``await settled(manager)`` returns once the manager's
caches hold exactly what the server holds (so every event of every write made so far has been
delivered), no controller has a request queued or a reconcile running, no event is being mapped
to requests and no Event is left to write — twice in a row, with the server asked afresh each time.
What has not happened by then will not happen without a new cause (requests scheduled for later,
``requeue_after`` or a back-off, excepted)::

    await client.update(config_map_with_an_ignored_change)
    await settled(manager)
    assert reconciles == before
"""

from __future__ import annotations

import asyncio

from kubeloop.cache.informer import Informer
from kubeloop.cache.store import object_key
from kubeloop.client.rest import APIClient
from kubeloop.controller.controller import Controller
from kubeloop.controllermanager.controllermanager import ControllerManager
from kubeloop.manager.manager import Manager


async def settled(
    target: Manager | Controller | ControllerManager, *, timeout: float = 30.0, interval: float = 0.01
) -> None:
    """Return once ``target`` — a manager, a controller run without one, or the embedded server's
    control loops (``ServerThread.settled`` passes those) — is idle and its caches are current (see
    the module's docstring); raise ``AssertionError`` naming what is still going on after
    ``timeout`` seconds."""
    if isinstance(target, ControllerManager):
        informers = list(target.manager.cache.informers.values())
        reader: APIClient | None = target.manager.api_reader
    elif isinstance(target, Manager):
        informers = list(target.cache.informers.values())
        reader = target.api_reader
    else:
        watched = (getattr(source, "informer", None) for source in target.sources)
        informers = list(dict.fromkeys(informer for informer in watched if isinstance(informer, Informer)))
        reader = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    quiet = 0
    while True:
        reasons = target.busy()
        if not reasons:
            reasons = await _stale_caches(informers, reader)
        quiet = 0 if reasons else quiet + 1
        if quiet == 2:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"the manager did not settle in {timeout} s: " + "; ".join(reasons))
        await asyncio.sleep(interval)


async def _stale_caches(informers: list[Informer], reader: APIClient | None) -> list[str]:
    reasons = []
    for informer in informers:
        difference = await _difference(reader or informer.client, informer)
        if difference:
            reasons.append(f"cache of {informer.kind}: {difference}")
    return reasons


async def _difference(reader: APIClient, informer: Informer) -> str:
    """How the informer's objects differ from the server's now (empty: not at all), by key and
    resourceVersion, listed with each of its reflectors' own scope and selectors."""
    served: dict[str, str] = {}
    for reflector in informer.reflectors:
        options = reflector.options
        async for page in reader.list_pages(
            informer.kind,
            namespace=options.namespace,
            label_selector=options.label_selector,
            field_selector=options.field_selector,
            metadata_only=True,
        ):
            for item in page.get("items") or ():
                served[object_key(item)] = str((item.get("metadata") or {}).get("resourceVersion"))
    cached = {}
    for key in informer.store.list_keys():
        obj = informer.store.get(key)
        if obj is not None:
            cached[key] = str((obj.get("metadata") or {}).get("resourceVersion"))
    if served == cached:
        return ""
    missing = sorted(set(served) - set(cached))
    extra = sorted(set(cached) - set(served))
    behind = sorted(key for key in set(served) & set(cached) if served[key] != cached[key])
    parts = [
        f"{label} {', '.join(keys[:3])}{' …' if len(keys) > 3 else ''}"
        for label, keys in (("not yet cached:", missing), ("still cached:", extra), ("behind:", behind))
        if keys
    ]
    return "; ".join(parts)
