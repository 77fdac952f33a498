"""The priority queue by default, as controller-runtime since v0.23: every controller a
manager builds queues its requests in it, with upstream's rate limiter for it (per-key
exponential back-off, no overall bucket); the objects a starting controller (or a new leader)
is handed from its synced cache wait behind live changes; a builder or the manager can turn
it off."""

from __future__ import annotations

import asyncio

from kubeloop import kinds
from kubeloop.client.rest import APIClient
from kubeloop.controller.reconcile import Request
from kubeloop.manager.builder import Builder
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import Manager
from kubeloop.workqueue.priority import PriorityQueue
from kubeloop.workqueue.ratelimiter import ItemExponentialFailureRateLimiter, MaxOfRateLimiter
from kubeloop.workqueue.ratelimiting import RateLimitingQueue
from tests.conftest import eventually


async def nothing(request: Request) -> None:
    return None


def test_controllers_get_the_priority_queue_unless_told_otherwise(client: APIClient) -> None:
    manager = Manager(client)
    default = Builder(manager).for_(kinds.ConfigMap).named("default").complete(nothing)
    plain = (
        Builder(manager)
        .for_(kinds.ConfigMap)
        .named("plain")
        .with_options(use_priority_queue=False)
        .complete(nothing)
    )
    assert isinstance(manager.controllers["default"].queue, PriorityQueue)
    assert type(manager.controllers["default"].queue.rate_limiter) is ItemExponentialFailureRateLimiter
    assert isinstance(manager.controllers["plain"].queue, RateLimitingQueue)
    assert isinstance(manager.controllers["plain"].queue.rate_limiter, MaxOfRateLimiter)  # with the bucket
    assert manager.controllers == {"default": default, "plain": plain}

    off = Manager(client, use_priority_queue=False)
    Builder(off).for_(kinds.ConfigMap).named("off").complete(nothing)
    Builder(off).for_(kinds.ConfigMap).named("on").with_options(use_priority_queue=True).complete(nothing)
    assert isinstance(off.controllers["off"].queue, RateLimitingQueue)
    assert isinstance(off.controllers["on"].queue, PriorityQueue)


async def test_a_new_leader_reconciles_live_changes_before_its_initial_list(
    client: APIClient, namespace: str
) -> None:
    names = [f"c{i}" for i in range(6)]
    for name in names:
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
        )
    order: list[str] = []
    release = asyncio.Event()

    async def reconcile(request: Request) -> None:
        order.append(request.name)
        if len(order) == 1:
            await release.wait()  # hold the only worker while a live change comes in

    # The cache syncs first; the controller starts once the lease is won, and is handed the
    # cached objects then: its initial list.
    manager = Manager(
        client,
        namespace=namespace,
        leader_election=LeaderElectionConfig(f"prio-{namespace}", namespace=namespace, retry_period=0.2),
    )
    Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
    await manager.start()
    try:
        await eventually(lambda: len(order) == 1)
        queue = manager.controllers["configmap"].queue
        assert isinstance(queue, PriorityQueue)
        assert queue.depth_by_priority() == {-100: len(names) - 1}  # the initial list, waiting low
        changed = names[-1] if order[0] != names[-1] else names[-2]
        await client.patch(kinds.ConfigMap, changed, {"data": {"changed": "yes"}}, namespace=namespace)
        await eventually(lambda: queue.depth_by_priority().get(0) == 1)  # raised by the change
        release.set()
        await eventually(lambda: len(order) == len(names))
        assert order[1] == changed  # ahead of the rest of the initial list
        assert sorted(order) == names
    finally:
        await manager.stop()
