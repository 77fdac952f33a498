"""``assert_converged``: once an operator has settled, reconciling any of its objects again
must send no write. A reconciler that writes on every pass (a whole ``spec`` set over what the
server defaulted, a status timestamp refreshed, a list reordered) never converges: it keeps its
own watch busy, floods the API server and hides real changes. The check generalises the agent
platform's ``assert_writes_nothing``.

After :func:`~kubeloop.testing.settled`, every controller of the manager reconciles each object
its ``for_`` informer holds, once, and what each wrote is taken from the write journal the API
client keeps per reconcile (``client.writejournal``)::

    async with manager:
        await kube_client.create(website)
        await eventually(website_is_available)
        await assert_converged(manager)
"""

from __future__ import annotations

from kubeloop.cache.informer import Informer
from kubeloop.client import writejournal
from kubeloop.controller.controller import Controller
from kubeloop.controller.handler import EnqueueRequestForObject
from kubeloop.controller.reconcile import Request
from kubeloop.manager.manager import Manager
from kubeloop.testing.settle import settled


def reconciled_requests(controller: Controller) -> list[Request]:
    """The requests of the objects the controller reconciles (its ``for_`` informer's objects)."""
    requests: list[Request] = []
    for source in controller.sources:
        informer = getattr(source, "informer", None)
        if isinstance(informer, Informer) and isinstance(getattr(source, "handler", None), EnqueueRequestForObject):
            for key in informer.store.list_keys():
                namespace, _, name = key.rpartition("/")
                requests.append(Request(namespace, name))
    return sorted(set(requests), key=str)


async def assert_converged(manager: Manager, *, timeout: float = 30.0) -> None:
    """Raise ``AssertionError`` naming each reconcile that wrote (and what) when every object is
    reconciled once more after the manager settled."""
    await settled(manager, timeout=timeout)
    wrote: list[str] = []
    for controller in manager.controllers.values():
        for request in reconciled_requests(controller):
            with writejournal.journal() as writes:
                await controller.reconcile_once(request)
            if writes:
                wrote.append(f"{controller.name}: reconcile {request} wrote {', '.join(writes)}")
    if wrote:
        raise AssertionError(
            "not converged: reconciled again, with nothing changed, these wrote:\n" + "\n".join(wrote)
        )
