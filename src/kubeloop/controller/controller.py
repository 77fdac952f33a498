"""The controller: workers reconciling requests from a rate-limited queue.

Each worker takes a request (a key is never with two workers at once: the queue guarantees it),
calls the reconciler — async ones on the event loop, plain functions in a thread so they cannot
block it — optionally under a timeout, and acts on the outcome as controller-runtime does:

- an exception: requeued with the rate limiter's back-off (counted as an error, and as a panic
  when it is one of the exceptions a bug raises — ``PANICS``; logged with its traceback the
  first time the request fails that way, one line after);
- a reconcile that runs past ``reconcile_timeout`` (controller-runtime's
  ``ReconciliationTimeout``): an async one is cancelled, a sync one (a thread, which cannot be
  stopped) has its blocking client refuse further calls (``client.deadline``). Either way the worker
  waits until the call has returned before it lets the key go — one key is never reconciled twice
  at once — then counts a timeout and an error and requeues it with back-off;
- ``Conflict``: requeued with back-off, quietly (counted as a requeue); so is an
  ``AlreadyExists`` the first time in a row (a create from a cache that had not seen the
  object made a moment before); a second one in a row is an error;
- ``TerminalError``: logged and counted (as an error and a terminal error), not requeued, the
  back-off forgotten;
- ``Result(requeue_after=t)``: the back-off forgotten, requeued after ``t``;
- ``Result(requeue=True)``: requeued with back-off;
- anything else: success, the back-off forgotten.

A worker gives the loop a turn between requests, so reconciles that never wait (answered from
the cache) cannot hold it for a whole queue.

Every reconcile gets an ID, bound into ``reconcile_id`` (a context variable) for logging, and
ends in one line on ``kubeloop.reconcile`` (``reconcilelog``).
``stop()`` stops its sources, stops taking new requests, lets in-flight reconciles finish (up to
a timeout), then cancels and awaits the workers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import inspect
import logging
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from kubeloop import errors
from kubeloop.client import writejournal
from kubeloop.client.deadline import Deadline, DeadlineExceeded, current_deadline
from kubeloop.client.fence import WriteFence, current_write_fence
from kubeloop.controller.reconcile import ReconcileFunc, Request, Result, TerminalError
from kubeloop.controller.reconcilelog import (
    RECONCILE_LOG,
    ReconcileRecord,
    ReconcileScope,
    current_reconcile,
    milliseconds,
)
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.uuids import random_uuid
from kubeloop.workqueue.priority import PriorityQueue
from kubeloop.workqueue.queue import NO_METRICS, QueueMetrics, ShutDown
from kubeloop.workqueue.ratelimiter import RateLimiter
from kubeloop.workqueue.ratelimiting import RateLimitingQueue

log = logging.getLogger("kubeloop.controller")

#: How many finished reconciles a controller keeps for views (``Controller.recent``).
RECENT_RECONCILES = 100
#: What ``_failing`` holds for a request whose last reconcile met AlreadyExists.
_RACED = "AlreadyExists after a stale read"
#: The exceptions counted as panics (controller_runtime_reconcile_panics_total): those the
#: language raises for a bug, as Go's runtime panics on a nil dereference, an index out of range,
#: a failed type assertion or a division by zero. Any other exception is an error the reconciler
#: returned: a failed call, a timeout, a ``RuntimeError("backup failed")``.
PANICS: tuple[type[BaseException], ...] = (
    AssertionError,
    AttributeError,
    LookupError,
    NameError,
    TypeError,
    ArithmeticError,
    RecursionError,
)

#: Told of each reconcile that raised (other than a conflict or a TerminalError): the
#: controller's name, the request and the exception. The test kit listens, to fail a test in
#: which a reconcile failed an ``assert`` or hit a bug.
failure_listeners: list[Callable[[str, Request, BaseException], None]] = []

#: The ID of the reconcile running in this context ("" outside one).
reconcile_id: contextvars.ContextVar[str] = contextvars.ContextVar("reconcile_id", default="")


def new_reconcile_id() -> str:
    """A random (version 4) UUID naming one reconcile, as controller-runtime's reconcileID."""
    return random_uuid()


class Source(Protocol):
    """What a controller watches (controller-runtime's ``source.Source``): started with the
    controller's queue, it adds requests to it until stopped (``source.Kind``, ``source.Channel``)."""

    def start(self, queue: RateLimitingQueue[Request] | PriorityQueue[Request]) -> None:
        """Begin adding requests to ``queue``."""
        ...

    async def stop(self) -> None:
        """Stop adding requests, and end what runs for it."""
        ...


class Controller:
    """A work queue of requests and the workers that reconcile them (controller-runtime's
    ``controller.Controller``): events from its sources put requests on the queue (duplicates
    merged), ``max_concurrent_reconciles`` workers take them one at a time per request, and a
    failed or requeued request comes back after the rate limiter's back-off. A manager starts
    it; most code makes one with ``Builder``::

        controller = Builder(manager).for_(Widget).owns(kinds.ConfigMap).complete(reconcile)
    """

    def __init__(
        self,
        name: str,
        reconcile: ReconcileFunc,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter | None = None,
        reconcile_timeout: float | None = None,
        queue_metrics: QueueMetrics = NO_METRICS,
        on_reconciled: Callable[[float], None] | None = None,
        use_priority_queue: bool = True,
        reconcile_logger: logging.Logger = RECONCILE_LOG,
        need_leader_election: bool = True,
    ) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.name = name
        #: With a manager that elects a leader: run only on the leader (the default), or on
        #: every replica (controller-runtime's ``NeedLeaderElection: false``), unfenced.
        self.need_leader_election = need_leader_election
        self.reconcile = reconcile
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.reconcile_timeout = reconcile_timeout
        #: Where a line per reconcile goes (``reconcilelog``).
        self.reconcile_logger = reconcile_logger
        self.queue: RateLimitingQueue[Request] | PriorityQueue[Request] = (
            PriorityQueue(rate_limiter, queue_metrics)
            if use_priority_queue
            else RateLimitingQueue(rate_limiter, queue_metrics)
        )
        #: Called with each reconcile's duration in seconds (controller_runtime_reconcile_time_seconds).
        self.on_reconciled = on_reconciled
        #: controller_runtime_reconcile_total by result: success, error, requeue, requeue_after.
        self.results: Counter[str] = Counter()
        self.terminal_errors = 0
        #: Exceptions a bug raises (``PANICS``): controller_runtime_reconcile_panics_total.
        self.panics = 0
        #: Reconciles that ran past ``reconcile_timeout``: controller_runtime_reconcile_timeouts_total.
        self.timeouts = 0
        #: How each failing request failed last (its traceback is logged once per way).
        self._failing: dict[Request, str] = {}
        #: The latest reconciles, newest last (for live views).
        self.recent: collections.deque[ReconcileRecord] = collections.deque(maxlen=RECENT_RECONCILES)
        self.active_workers = 0
        #: With leader election: no reconcile starts, and no write is sent, while the lease may
        #: have passed to another replica (set by the manager).
        self.fence: WriteFence | None = None
        self._sources: list[Source] = []
        self._workers: list[asyncio.Task[None]] = []

    @property
    def sources(self) -> tuple[Source, ...]:
        """What the controller watches (``Kind`` sources carry their informer)."""
        return tuple(self._sources)

    def busy(self) -> list[str]:
        """What the controller has left to do now, one phrase each; empty when it is idle:
        requests queued and due, reconciles running, events whose requests are still being
        worked out. Requests due later (``requeue_after``, a back-off) do not count."""
        reasons = []
        ready = self.queue.ready_count()
        if ready:
            reasons.append(f"controller {self.name}: {ready} requests queued")
        if self.active_workers:
            reasons.append(f"controller {self.name}: {self.active_workers} reconciles running")
        mapping = sum(int(getattr(source, "pending", 0)) for source in self._sources)
        if mapping:
            reasons.append(f"controller {self.name}: {mapping} events being mapped to requests")
        return reasons

    def watch(self, source: Source) -> None:
        """Watch ``source`` too (started at once when the controller already runs)."""
        self._sources.append(source)
        if self._workers:
            source.start(self.queue)

    async def start(self) -> None:
        """Start the sources and the workers (a manager does, once its caches have synced)."""
        if self._workers:
            raise RuntimeError(f"controller {self.name} already started")
        for source in self._sources:
            source.start(self.queue)
        self._workers = [
            asyncio.create_task(self._work(), name=f"{self.name} worker {i}")
            for i in range(self.max_concurrent_reconciles)
        ]

    async def stop(self, timeout: float = 30.0) -> None:
        """No new requests; in-flight reconciles get ``timeout`` seconds to finish."""
        for source in self._sources:
            await source.stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.queue.shut_down_with_drain(), timeout)
        workers, self._workers = self._workers, []
        await cancel_and_wait(workers)

    async def _work(self) -> None:
        fence = self.fence
        current_write_fence.set(fence)  # this worker's task: its reconciles' writes are fenced
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            if fence is not None and not fence.writes_allowed():
                log.warning("%s: not reconciling %s: %s", self.name, request, fence.describe())
                if not await fence.wait_until_allowed():
                    # Leadership is lost and the manager is stopping: let the queue drain unread.
                    self.queue.done(request)
                    continue
            self.active_workers += 1
            try:
                await self._reconcile_one(request)
            finally:
                self.active_workers -= 1
                self.queue.done(request)
            # A turn for the rest of the loop before the next request. A reconcile answered from
            # the cache never suspends, and the queue hands out a ready request without waiting:
            # one worker would otherwise run the whole queue while in-flight requests' answers,
            # watches, probes and lease renewals waited (goroutines are preempted; tasks are not).
            await asyncio.sleep(0)

    async def _reconcile_one(self, request: Request) -> None:
        token = reconcile_id.set(new_reconcile_id())
        scope = current_reconcile.set(ReconcileScope(self.name, request, reconcile_id.get()))
        started = time.perf_counter()
        try:
            with writejournal.journal() as writes:
                try:
                    result = await self._call(request)
                finally:
                    elapsed = time.perf_counter() - started
                    took = milliseconds(elapsed)
                    wrote = f" ({', '.join(writes)})" if writes else ""
        except TerminalError as exc:
            self._record(request, "failed for good", elapsed, writes, f"{type(exc).__name__}: {exc}")
            self.terminal_errors += 1
            self.results["error"] += 1
            self._failing.pop(request, None)
            self.queue.forget(request)
            log.error(
                "%s: reconcile %s failed for good (%s) [reconcileID=%s]",
                self.name,
                request,
                exc,
                reconcile_id.get(),
            )
            return
        except (errors.Conflict, errors.AlreadyExists) as exc:
            if isinstance(exc, errors.AlreadyExists) and request in self._failing:
                # Not the first failure in a row: not a cache that lagged behind its own create.
                self._failed(request, exc, elapsed, writes)
                return
            if isinstance(exc, errors.AlreadyExists):
                self._failing[request] = _RACED
            self._record(request, "conflict", elapsed, writes)
            # Someone wrote the object first: read it again, quietly (controller-runtime's
            # reconcilers requeue on Conflict; it is not news).
            self.results["requeue"] += 1
            self.queue.add_rate_limited(request)
            self.reconcile_logger.info(
                "%s: reconcile %s conflict %s%s: %s; requeued", self.name, request, took, wrote, exc
            )
            return
        except Exception as exc:
            self._failed(request, exc, elapsed, writes)
            return
        except BaseException as exc:
            # pytest.fail and its kin are BaseExceptions: a failed reconcile, not the worker's end.
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            self._failed(request, exc, elapsed, writes)
            return
        finally:
            current_reconcile.reset(scope)
            reconcile_id.reset(token)
            if self.on_reconciled is not None:
                self.on_reconciled(time.perf_counter() - started)
        self._failing.pop(request, None)
        if result is not None and result.requeue_after:
            self.results["requeue_after"] += 1
            self.queue.forget(request)
            self.queue.add_after(request, result.requeue_after)
            outcome = f"requeue after {result.requeue_after:g}s"
        elif result is not None and result.requeue:
            self.results["requeue"] += 1
            self.queue.add_rate_limited(request)
            outcome = "requeue"
        else:
            self.results["success"] += 1
            self.queue.forget(request)
            outcome = "ok"
        self._record(request, outcome, elapsed, writes)
        self.reconcile_logger.info("%s: reconcile %s %s %s%s", self.name, request, outcome, took, wrote)

    def _failed(self, request: Request, exc: BaseException, elapsed: float, writes: list[str]) -> None:
        """A reconcile that raised: counted, requeued with back-off, logged, and told to the
        ``failure_listeners``."""
        for listener in tuple(failure_listeners):
            listener(self.name, request, exc)
        self._record(request, "error", elapsed, writes, f"{type(exc).__name__}: {exc}")
        self.results["error"] += 1
        if isinstance(exc, PANICS) and not isinstance(exc, errors.APIError):
            self.panics += 1
        self.queue.add_rate_limited(request)
        # The traceback the first time a request fails this way; later retries are one line.
        signature = f"{type(exc).__name__}: {exc}"
        again = self._failing.get(request) == signature
        self._failing[request] = signature
        log.error(
            "%s: reconcile %s failed; retrying [reconcileID=%s]: %s",
            self.name,
            request,
            reconcile_id.get(),
            signature,
            exc_info=exc if not again or self.reconcile_logger.isEnabledFor(logging.DEBUG) else None,
        )

    def _record(
        self, request: Request, outcome: str, elapsed: float, writes: list[str], error: str = ""
    ) -> None:
        self.recent.append(
            ReconcileRecord(datetime.now(UTC), request, outcome, elapsed * 1000, tuple(writes), error)
        )

    async def reconcile_once(self, request: Request) -> Result | None:
        """Reconcile ``request`` now, outside the queue, as a worker would (with a reconcile ID
        and the reconcile's logging scope); its exception is raised. For checks such as
        ``testing.assert_converged``."""
        token = reconcile_id.set(new_reconcile_id())
        scope = current_reconcile.set(ReconcileScope(self.name, request, reconcile_id.get()))
        try:
            return await self._call(request)
        finally:
            current_reconcile.reset(scope)
            reconcile_id.reset(token)

    async def _call(self, request: Request) -> Result | None:
        """The reconciler's answer, under the timeout if there is one. Returns only once the call
        has: a timed-out reconcile (cancelled if async, told by its deadline if in a thread) is
        waited for, then raises ``DeadlineExceeded``."""
        timeout = self.reconcile_timeout
        is_async = inspect.iscoroutinefunction(self.reconcile) or inspect.iscoroutinefunction(
            getattr(self.reconcile, "__call__", None)  # noqa: B004  (callable objects)
        )
        if timeout:
            deadline = Deadline.after(timeout, f"reconcile {request}")
            outcome = await self._call_with_deadline(request, deadline, is_async)
        elif is_async:
            outcome = await self.reconcile(request)  # type: ignore[misc]
        else:
            outcome = await asyncio.to_thread(self.reconcile, request)
        if outcome is not None and not isinstance(outcome, Result):
            raise TypeError(f"reconcile returned {outcome!r}, not a Result or None")
        return outcome

    async def _call_with_deadline(self, request: Request, deadline: Deadline, is_async: bool) -> Any:
        """The reconcile as a task (async) or in a thread (sync), with ``deadline`` in its context.
        Past the deadline it is counted as a timeout at once; a task is cancelled (a thread, which
        cannot be, is told through its blocking client); either is waited for, however long that
        takes, and then raises ``DeadlineExceeded``."""
        context = contextvars.copy_context()
        context.run(current_deadline.set, deadline)
        loop = asyncio.get_running_loop()
        call: asyncio.Future[Any] = (
            loop.create_task(self.reconcile(request), context=context)  # type: ignore[arg-type]
            if is_async
            else loop.run_in_executor(None, context.run, self.reconcile, request)
        )
        try:
            done, _ = await asyncio.wait({call}, timeout=max(0.0, deadline.remaining()))
            if done:
                return call.result()
            self.timeouts += 1
            log.warning(
                "%s: %s; %s before reconciling %s again",
                self.name,
                deadline.exceeded(),
                "cancelled, waiting for it to end"
                if is_async
                else "waiting for its thread to return (its blocking client now refuses calls)",
                request,
            )
            if is_async:
                call.cancel()
            await asyncio.wait({call})
        except asyncio.CancelledError:
            # The worker is stopping: an async reconcile is cancelled and awaited; a thread cannot
            # be stopped, and the controller is going away.
            if is_async:
                call.cancel()
                await asyncio.wait({call})
            raise
        try:
            call.result()
        except asyncio.CancelledError:
            pass
        except TerminalError:
            raise
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                raise deadline.exceeded() from exc
            raise DeadlineExceeded(f"{deadline.exceeded()} ({type(exc).__name__}: {exc})") from exc
        raise deadline.exceeded()
