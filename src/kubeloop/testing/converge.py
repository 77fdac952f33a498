"""``assert_converged``: once an operator has settled, reconciling any of its objects again
must send no write and ask for no requeue. A reconciler that writes on every pass (a whole
``spec`` set over what the server defaulted, a status timestamp refreshed, a list reordered)
never converges: it keeps its own watch busy, floods the API server and hides real changes. The
check generalises the agent platform's ``assert_writes_nothing``.

After :func:`~kubeloop.testing.settled`, every controller of the manager reconciles, once, every
request its watches would send it for what their informers hold — ``for_``, ``owns`` and
``watches`` alike, each object mapped through the watch's handler as its create event would be,
past the watch's predicates. What each reconcile wrote is taken from the write journal the API
client keeps per reconcile (``client.writejournal``); a reconcile that writes, asks to be
requeued (``Result(requeue=True)``; ``requeue_after`` is a scheduled look, not a change) or raises
has not converged, and a check that found nothing to reconcile fails too::

    async with manager:
        await kube_client.create(website)
        await eventually(website_is_available)
        await assert_converged(manager)
"""

from __future__ import annotations

from kubeloop.client import writejournal
from kubeloop.controller.controller import Controller
from kubeloop.controller.handler import EnqueueRequestsFromMapFunc, EventHandler
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controller.source import Kind
from kubeloop.manager.manager import Manager
from kubeloop.testing.settle import settled


class _Requests:
    """A queue that keeps what a handler adds."""

    def __init__(self) -> None:
        self.requests: set[Request] = set()

    def add(self, item: Request) -> None:
        self.requests.add(item)


async def _mapped(handler: EventHandler, obj: dict[str, object]) -> set[Request]:
    """What ``obj``'s create event enqueues through ``handler`` (an async map function awaited)."""
    if isinstance(handler, EnqueueRequestsFromMapFunc) and handler.is_async:
        return set(await handler.map_func(obj))  # type: ignore[misc]
    queue = _Requests()
    handler.create(obj, queue)
    return queue.requests


async def reconciled_requests(controller: Controller) -> list[Request]:
    """Every request the controller's watches would send it for what their informers hold."""
    requests: set[Request] = set()
    for source in controller.sources:
        if not isinstance(source, Kind):
            continue  # a raw source (a channel): what it will send is not known
        for obj in source.informer.store.objects():
            if all(predicate.create(obj) for predicate in source.predicates):
                requests |= await _mapped(source.handler, obj)
    return sorted(requests, key=str)


async def assert_converged(manager: Manager, *, timeout: float = 30.0) -> None:
    """Raise ``AssertionError`` naming each reconcile that wrote (and what), asked to be requeued
    or raised, when every request is reconciled once more after the manager settled; or when
    there was no request to reconcile at all."""
    await settled(manager, timeout=timeout)
    problems: list[str] = []
    checked = 0
    for controller in manager.controllers.values():
        for request in await reconciled_requests(controller):
            checked += 1
            with writejournal.journal() as writes:
                try:
                    result = await controller.reconcile_once(request)
                except Exception as error:
                    problems.append(f"{controller.name}: reconcile {request} raised {type(error).__name__}: {error}")
                    continue
            if writes:
                problems.append(f"{controller.name}: reconcile {request} wrote {', '.join(writes)}")
            if isinstance(result, Result) and result.requeue and not result.requeue_after:
                problems.append(f"{controller.name}: reconcile {request} asked to be requeued")
    if not checked:
        raise AssertionError(
            "assert_converged checked nothing: no controller's watches hold an object to reconcile "
            "(did the test create one, in the namespace the manager's cache sees?)"
        )
    if problems:
        raise AssertionError(
            "not converged: reconciled again, with nothing changed:\n" + "\n".join(problems)
        )
