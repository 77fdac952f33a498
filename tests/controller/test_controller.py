"""Controllers against the embedded server: requests from informer events, retries with back-off
after exceptions, TerminalError not retried, requeue_after, sync reconcilers in threads, never two
workers on one key, predicates and owner mapping."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.cache.informer import Informer
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.deadline import DeadlineExceeded
from kubeloop.client.rest import APIClient
from kubeloop.client.sync import BlockingClient
from kubeloop.controller import handler, predicate
from kubeloop.controller.controller import Controller, new_reconcile_id, reconcile_id
from kubeloop.controller.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    request_for,
)
from kubeloop.controller.reconcile import Request, Result, TerminalError
from kubeloop.controller.source import Channel, Kind
from kubeloop.testing import settled
from kubeloop.workqueue.ratelimiter import ItemExponentialFailureRateLimiter
from kubeloop.workqueue.ratelimiting import RateLimitingQueue
from tests.conftest import ServerThread, eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")


def configmap(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, **extra},
    }


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c


async def test_level_triggered_reconcile_with_retries_and_terminal_errors(
    client: APIClient, namespace: str
) -> None:
    calls: Counter[str] = Counter()
    ids: list[str] = []

    async def reconcile(request: Request) -> Result | None:
        calls[request.name] += 1
        ids.append(reconcile_id.get())
        if request.name == "flaky" and calls["flaky"] < 3:
            raise RuntimeError("not yet")
        if request.name == "broken":
            raise TerminalError("cannot be fixed by retrying")
        if request.name == "periodic" and calls["periodic"] < 3:
            return Result(requeue_after=0.05)
        obj = await client.get(CONFIGMAP, request.name, namespace=request.namespace)
        await client.patch(CONFIGMAP, request.name, {"data": {"seen": "yes"}}, namespace=request.namespace)
        assert obj["metadata"]["name"] == request.name
        return None

    informer = Informer(client, CONFIGMAP, namespaces=[namespace])
    controller = Controller(
        "configmaps", reconcile, rate_limiter=ItemExponentialFailureRateLimiter(0.01, 1.0)
    )
    controller.watch(Kind(informer, EnqueueRequestForObject(), predicate.GenerationChanged()))
    for name in ("ok", "flaky", "broken", "periodic"):
        await client.create(configmap(name, namespace))
    informer.start()
    await controller.start()
    try:
        await eventually(
            lambda: (
                calls["ok"] >= 1 and calls["flaky"] >= 3 and calls["periodic"] >= 3 and calls["broken"] >= 1
            )
        )
        # Every event of the reconciles' patches has reached the cache and the predicate, the
        # queue is empty and nothing is scheduled for later: what has not run will not.
        await settled(controller)
        assert controller.queue.waiting() == 0
        assert calls["broken"] == 1  # a terminal error is not retried
        assert calls["flaky"] == 3  # two failures with back-off, then success, then nothing (the patch
        # made by reconcile changes no generation: the predicate drops it)
        assert controller.terminal_errors == 1
        assert controller.results["error"] == 3 and controller.results["requeue_after"] == 2
        assert controller.queue.num_requeues(Request(namespace, "flaky")) == 0  # forgotten after success
        assert all(ids) and len(set(ids)) == len(ids)  # every reconcile has its own ID
        assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)  # random UUIDs
        ok = await client.get(CONFIGMAP, "ok", namespace=namespace)
        assert ok["data"] == {"seen": "yes"}
    finally:
        await controller.stop()
        await informer.stop()


async def test_sync_reconcilers_run_in_threads_and_keys_never_overlap(
    client: APIClient, namespace: str
) -> None:
    loop_thread = threading.get_ident()
    running: set[str] = set()
    overlaps: list[str] = []
    threads: set[int] = set()
    done: Counter[str] = Counter()
    lock = threading.Lock()

    def reconcile(request: Request) -> None:
        threads.add(threading.get_ident())
        with lock:
            if request.name in running:
                overlaps.append(request.name)
            running.add(request.name)
        time.sleep(0.05)  # blocking is fine here: this is a worker thread
        with lock:
            running.discard(request.name)
        done[request.name] += 1

    informer = Informer(client, CONFIGMAP, namespaces=[namespace])
    controller = Controller("sync", reconcile, max_concurrent_reconciles=4)
    controller.watch(Kind(informer, EnqueueRequestForObject()))
    informer.start()
    await controller.start()
    try:
        for i in range(4):
            await client.create(configmap(f"c{i}", namespace))
        await eventually(lambda: bool(running))
        for _ in range(5):  # bursts of updates to the same keys while they are being reconciled
            for i in range(4):
                await client.patch(
                    CONFIGMAP, f"c{i}", {"data": {"n": str(time.monotonic())}}, namespace=namespace
                )
        # Each key once for its create and at least once more for the updates that came while
        # (or after) it was reconciled; an update during its reconcile waits for it (dirty set).
        await eventually(
            lambda: (
                len(done) == 4
                and sum(done.values()) >= 5
                and controller.active_workers == 0
                and len(controller.queue) == 0
            )
        )
        assert overlaps == []
        assert loop_thread not in threads
    finally:
        await controller.stop()
        await informer.stop()


async def test_a_sync_reconcile_past_its_timeout_keeps_its_key_until_it_returns(
    client: APIClient, namespace: str
) -> None:
    """controller-runtime cancels the reconcile's context and waits for Reconcile to return. A
    thread cannot be cancelled: the worker waits for it, and its blocking client refuses calls
    once the deadline has passed. Only then is the key requeued, with back-off."""
    release = threading.Event()
    lock = threading.Lock()
    calls: Counter[str] = Counter()
    running: set[str] = set()
    overlaps: list[str] = []
    refused: list[BaseException] = []
    blocking = BlockingClient(client, asyncio.get_running_loop())

    def reconcile(request: Request) -> None:
        with lock:
            if request.name in running:
                overlaps.append(request.name)
            running.add(request.name)
            calls[request.name] += 1
            first = calls[request.name] == 1
        try:
            if request.name == "stuck" and first:
                release.wait()  # long past the timeout
                try:
                    blocking.get(CONFIGMAP, "anything", namespace=namespace)
                except DeadlineExceeded as exc:
                    refused.append(exc)
                    raise
        finally:
            with lock:
                running.discard(request.name)

    controller = Controller(
        "stuck",
        reconcile,
        max_concurrent_reconciles=3,
        reconcile_timeout=0.05,
        rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01),
    )
    controller.queue.add(Request(namespace, "stuck"))
    await controller.start()
    try:
        await eventually(lambda: controller.timeouts == 1)
        # A requeue of "stuck" would be due 1 ms after the timeout. A request added later, due
        # later, is reconciled by one of the two idle workers: "stuck" was not started again.
        controller.queue.add_after(Request(namespace, "later"), 0.02)
        await eventually(lambda: calls["later"] == 1)
        assert calls["stuck"] == 1 and overlaps == []
        assert controller.results["error"] == 0  # not counted until the call has returned
        release.set()
        await eventually(lambda: calls["stuck"] == 2 and controller.active_workers == 0)
        assert overlaps == []
        assert len(refused) == 1 and "ran past its timeout of 0.05s" in str(refused[0])
        assert controller.timeouts == 1
        assert controller.results["error"] == 1 and controller.panics == 0
        assert controller.results["success"] == 2  # "later", and "stuck" requeued with back-off
    finally:
        release.set()
        await controller.stop()


async def test_an_async_reconcile_past_its_timeout_is_cancelled_and_awaited() -> None:
    release = asyncio.Event()
    calls: Counter[str] = Counter()
    running: set[str] = set()
    overlaps: list[str] = []
    cancelled: list[str] = []

    async def reconcile(request: Request) -> None:
        if request.name in running:
            overlaps.append(request.name)
        running.add(request.name)
        calls[request.name] += 1
        try:
            if request.name == "stuck" and calls[request.name] == 1:
                try:
                    await asyncio.Event().wait()  # never set: only the timeout ends it
                except asyncio.CancelledError:
                    cancelled.append(request.name)
                    await release.wait()  # a slow clean-up: the key is still this reconcile's
                    raise
        finally:
            running.discard(request.name)

    controller = Controller(
        "slow-async",
        reconcile,
        max_concurrent_reconciles=3,
        reconcile_timeout=0.05,
        rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01),
    )
    controller.queue.add(Request("ns", "stuck"))
    await controller.start()
    try:
        await eventually(lambda: cancelled == ["stuck"])
        controller.queue.add_after(Request("ns", "later"), 0.02)
        await eventually(lambda: calls["later"] == 1)
        assert calls["stuck"] == 1 and controller.timeouts == 1  # counted when it fired
        release.set()
        await eventually(lambda: calls["stuck"] == 2 and controller.active_workers == 0)
        assert overlaps == []
        assert controller.timeouts == 1
        assert controller.results["error"] == 1 and controller.panics == 0
    finally:
        release.set()
        await controller.stop()


@pytest.mark.kubeloop(reconcile_failures=True)  # the bugs are the point
async def test_panics_are_the_exceptions_of_bugs_and_terminal_errors_are_errors() -> None:
    raised: dict[str, BaseException] = {
        "missing-key": KeyError("spec"),
        "none": AttributeError("'NoneType' object has no attribute 'spec'"),
        "assert": AssertionError("unreachable"),
        "failed": RuntimeError("backup failed"),
        "conflict": errors.Conflict("the object has been modified"),
        "refused": errors.Forbidden("configmaps is forbidden"),
        "for-good": TerminalError("cannot be fixed by retrying"),
    }
    attempts: Counter[str] = Counter()

    async def reconcile(request: Request) -> None:
        attempts[request.name] += 1
        if attempts[request.name] == 1:
            raise raised[request.name]

    controller = Controller(
        "outcomes", reconcile, rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01)
    )
    for name in raised:
        controller.queue.add(Request("ns", name))
    await controller.start()
    try:
        await eventually(
            lambda: (
                all(attempts[name] == 2 for name in raised if name != "for-good")
                and controller.active_workers == 0
            )
        )
    finally:
        await controller.stop()
    assert attempts["for-good"] == 1
    assert controller.panics == 3  # KeyError, AttributeError, AssertionError
    assert controller.terminal_errors == 1
    # Errors: the two plain ones, the bugs and the terminal one; a conflict is a quiet requeue.
    assert controller.results["error"] == 6
    assert controller.results["requeue"] == 1
    assert controller.timeouts == 0


async def test_graceful_stop_lets_an_inflight_reconcile_finish(client: APIClient, namespace: str) -> None:
    finished = asyncio.Event()
    started = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        await asyncio.sleep(0.3)
        finished.set()

    informer = Informer(client, CONFIGMAP, namespaces=[namespace])
    controller = Controller("slow", reconcile)
    controller.watch(Kind(informer, EnqueueRequestForObject()))
    await client.create(configmap("s", namespace))
    informer.start()
    await controller.start()
    await asyncio.wait_for(started.wait(), 10)
    await controller.stop(timeout=5)
    assert finished.is_set()
    await informer.stop()


async def test_owner_mapping_and_predicates(client: APIClient, namespace: str) -> None:
    owner = await client.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "owner", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        }
    )
    refs = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        },
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "not-controller", "uid": "x"},
        {"apiVersion": "v1", "kind": "Secret", "name": "other-kind", "uid": "y"},
    ]
    seen: list[Request] = []

    class Sink:
        def add(self, request: Request) -> None:
            seen.append(request)

    child = configmap("child", namespace, ownerReferences=refs, labels={"team": "a"})
    EnqueueRequestForOwner(DEPLOYMENT).create(child, Sink())
    assert seen == [Request(namespace, "owner")]
    seen.clear()
    EnqueueRequestForOwner(DEPLOYMENT, only_controller=False).create(child, Sink())
    assert sorted(r.name for r in seen) == ["not-controller", "owner"]
    seen.clear()
    EnqueueRequestsFromMapFunc(lambda o: [Request("x", o["metadata"]["name"].upper())]).delete(child, Sink())
    assert seen == [Request("x", "CHILD")]
    seen.clear()
    deletes_only = handler.Funcs(on_delete=lambda o, q: q.add(Request("deleted", o["metadata"]["name"])))
    deletes_only.create(child, Sink())
    deletes_only.update(child, child, Sink())
    deletes_only.generic(child, Sink())
    deletes_only.delete(child, Sink())
    assert seen == [Request("deleted", "child")]
    assert request_for(child) == Request(namespace, "child")

    relabelled = {**child, "metadata": {**child["metadata"], "labels": {"team": "b"}, "resourceVersion": "9"}}
    assert predicate.LabelsChanged().update(child, relabelled)
    assert not predicate.AnnotationsChanged().update(child, relabelled)
    assert predicate.ResourceVersionChanged().update(child, relabelled)
    assert not predicate.ResourceVersionChanged().update(child, child)  # a resync
    selector = predicate.LabelSelectorPredicate({"matchLabels": {"team": "a"}})
    assert selector.create(child) and not selector.update(child, relabelled)
    by_text = predicate.LabelSelectorPredicate("team in (a,c),!legacy")
    assert by_text.create(child) and not by_text.update(child, relabelled)
    expressions = predicate.LabelSelectorPredicate(
        {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}
    )
    assert not expressions.create(child) and expressions.update(child, relabelled)
    with pytest.raises(errors.InvalidSelector):
        predicate.LabelSelectorPredicate("team in (a")
    both = predicate.And(predicate.LabelsChanged(), predicate.Not(predicate.GenerationChanged()))
    assert both.update(child, relabelled)
    assert predicate.Or(predicate.GenerationChanged(), predicate.Funcs(on_update=lambda a, b: True)).update(
        child, child
    )
    assert not predicate.Funcs(on_create=lambda o: False).create(child)


def test_waiting_requests_share_their_namespace_and_carry_no_attribute_dict() -> None:
    # A busy controller's queue holds a request per waiting object: each event decodes its own
    # copy of the namespace, which the requests do not keep, and a request is two slots.
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app", "uid": "u", "controller": True}
    events = [
        orjson.loads(orjson.dumps(configmap(f"c-{n}", "team-a", ownerReferences=[owner]))) for n in range(3)
    ]
    assert events[0]["metadata"]["namespace"] is not events[1]["metadata"]["namespace"]
    queued: list[Request] = []

    class Queue:
        add = queued.append

    for event in events:
        EnqueueRequestForOwner(DEPLOYMENT).create(event, Queue())
    for first, second, third in ([request_for(event) for event in events], queued):
        assert first.namespace == "team-a"
        assert first.namespace is second.namespace is third.namespace
    assert not hasattr(request_for(events[0]), "__dict__")
    assert request_for({"metadata": {"name": "cluster-scoped"}}) == Request("", "cluster-scoped")


async def test_priority_queue_puts_changes_before_the_initial_list(client: APIClient, namespace: str) -> None:
    for i in range(5):
        await client.create(configmap(f"c{i}", namespace))
    order: list[str] = []
    release = asyncio.Event()

    async def reconcile(request: Request) -> None:
        order.append(request.name)
        if len(order) == 1:
            await release.wait()  # hold the only worker while a real change arrives

    informer = Informer(client, CONFIGMAP, namespaces=[namespace])
    controller = Controller("prio", reconcile, use_priority_queue=True)
    controller.watch(Kind(informer, EnqueueRequestForObject()))
    informer.start()
    await controller.start()
    try:
        await eventually(lambda: len(order) == 1)
        await client.patch(CONFIGMAP, "c4", {"data": {"changed": "yes"}}, namespace=namespace)
        await eventually(lambda: len(controller.queue) == 4 and informer.store.get(f"{namespace}/c4") is not None
                         and (informer.store.get(f"{namespace}/c4") or {}).get("data") == {"changed": "yes"})  # fmt: skip
        release.set()
        await eventually(lambda: len(order) == 5)
        assert order[1] == "c4"  # the change jumped the initial-list backlog
        assert sorted(order) == [f"c{i}" for i in range(5)]
    finally:
        await controller.stop()
        await informer.stop()


async def test_channel_source_reads_an_async_iterable_and_stops() -> None:
    release = asyncio.Event()

    async def events() -> AsyncIterator[dict[str, Any]]:
        for name in ("a", "b", "a"):
            yield {"metadata": {"name": name, "namespace": "ns"}}
        await release.wait()  # an open-ended stream: only stop() ends it
        yield {"metadata": {"name": "never", "namespace": "ns"}}

    queue: RateLimitingQueue[Request] = RateLimitingQueue()
    channel = Channel(events(), EnqueueRequestForObject())
    channel.start(queue)
    await eventually(lambda: len(queue) == 2)  # "a" twice is one request
    assert {await queue.get(), await queue.get()} == {Request("ns", "a"), Request("ns", "b")}
    await channel.stop()
    release.set()
    await asyncio.sleep(0.05)
    assert len(queue) == 0


async def test_async_map_functions_enqueue_when_they_return_and_stop_with_their_source() -> None:
    seen: list[Request] = []

    class Sink:
        def add(self, item: Request) -> None:
            seen.append(item)

    release = asyncio.Event()
    started: list[str] = []

    async def owners_of(obj: dict[str, Any]) -> list[Request]:
        started.append(obj["metadata"]["name"])
        await release.wait()  # a cached read would await here
        return [Request("ns", obj["metadata"]["name"] + "-owner")]

    mapped = EnqueueRequestsFromMapFunc(owners_of)
    old, new = configmap("old", "ns"), configmap("new", "ns")
    mapped.update(old, new, Sink())
    await eventually(lambda: started == ["old"])
    assert seen == []  # nothing until the function returns
    release.set()
    await eventually(lambda: sorted(r.name for r in seen) == ["new-owner", "old-owner"])

    # A function still running when its source stops is cancelled and awaited.
    release.clear()
    mapped.create(configmap("late", "ns"), Sink())
    await eventually(lambda: "late" in started)
    channel = Channel(asyncio.Queue(), mapped)
    await channel.stop()
    assert not mapped._tasks
    assert Request("ns", "late-owner") not in seen


def test_reconcile_ids_are_distinct_random_uuids_across_refills() -> None:
    drawn = [new_reconcile_id() for _ in range(1000)]  # several draws of 256 from the OS
    assert len(set(drawn)) == 1000
    for text in drawn:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text


async def test_workers_let_the_loop_run_between_reconciles_that_never_wait() -> None:
    """A reconciler answered from the cache never suspends: without a turn for the loop between
    requests, one worker would run the whole queue while every other task (in-flight requests'
    answers, watches, probes, lease renewals) waited for it to drain."""
    ticks = 0
    seen: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def reconcile(request: Request) -> None:
        seen.append(ticks)  # as from the cache: no await that suspends

    controller = Controller("busy", reconcile, max_concurrent_reconciles=2)
    for i in range(200):
        controller.queue.add(Request("ns", f"r{i}"))
    ticking = asyncio.create_task(ticker())
    try:
        await controller.start()
        await eventually(lambda: len(seen) == 200)
    finally:
        await controller.stop()
        ticking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticking
    # Two workers, one request each per pass of the loop: the ticker ran ~100 times meanwhile.
    assert seen[-1] - seen[0] >= 90
