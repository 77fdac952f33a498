"""Blocking clients, for code that is not async: sync reconcilers, scripts and notebooks.

``BlockingClient`` is a blocking view of an async client (the API client or the manager's
cached client) bound to the event loop it runs on: each call is sent to that loop and waited for,
so the view shares the client's connections, cache, credentials and retries. Use it from another
thread — a sync reconciler runs in one (``manager.blocking_client``); from the loop's own thread
it refuses (the call could never finish: await the async client there). The calling thread's
context variables (the reconcile ID, a leader's write fence) travel with each call, and so does
the reconcile's deadline (``deadline``): past it, a call raises ``DeadlineExceeded`` rather than
being sent, and a call in flight is abandoned, as a Go client's call is when its context ends.

``SyncClient`` is a ``BlockingClient`` over an ``APIClient`` of its own, whose event loop runs in
a daemon thread; watches are iterated with ``for event in client.watch(...)``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar, Unpack

from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.client.calloptions import ApplyOptions, DeleteOptions, PatchOptions, WriteOptions
from kubeloop.client.config import ClientConfig
from kubeloop.client.deadline import current_deadline
from kubeloop.client.interface import ApplyRef, KindRef, ObjectList, ObjectRef
from kubeloop.client.rest import APIClient, PatchType
from kubeloop.client.watch import WatchEvent

T = TypeVar("T")


class BlockingClient:
    """A blocking view of an async client, for threads (a sync reconciler runs in one).

    Each call runs on the client's event loop and waits for it; ``manager.blocking_client`` is
    the manager's cached client seen this way. It has the calls of :class:`~kubeloop.Client`
    (``get``, ``list``, ``create``, ``update``, ``patch``, ``apply``, ``delete``,
    ``delete_collection``) with the same arguments, without ``await``.
    """

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop | None) -> None:
        """``client``: an ``APIClient`` or ``CachedClient`` (any implementation of ``Client``);
        ``loop``: the loop it runs on (None until it is known: the manager binds it when it starts)."""
        self.client = client
        self.loop = loop

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            call.close()
            if loop is None:
                raise RuntimeError("the blocking client is not bound to a running event loop yet")
            raise RuntimeError(
                "a blocking client cannot be used on its own event loop: await the async client"
            )
        deadline = current_deadline.get()
        if deadline is not None and deadline.remaining() <= 0:
            call.close()
            raise deadline.exceeded()
        future: Future[T] = asyncio.run_coroutine_threadsafe(call, loop)
        if deadline is None:
            return future.result()
        concurrent.futures.wait([future], timeout=max(0.0, deadline.remaining()))
        if not future.done():
            future.cancel()  # cancels the call's task on the loop
            raise deadline.exceeded()
        return future.result()

    def get(self, kind: KindRef, name: str, *, namespace: str | None = None, **options: Any) -> Any:
        """The object (a model when ``kind`` is a model class or a model, else a dict)."""
        return self._run(self.client.get(kind, name, namespace=namespace, **options))

    def list(self, kind: KindRef, *, namespace: str | None = None, **options: Any) -> ObjectList[Any]:
        """The objects of ``kind`` (models or dicts, as ``kind`` asks), every page read."""
        result: ObjectList[Any] = self._run(self.client.list(kind, namespace=namespace, **options))
        return result

    def create(self, obj: ObjectRef, *, namespace: str | None = None, **options: Unpack[WriteOptions]) -> Any:
        """Create ``obj``; the object as the server stored it."""
        return self._run(self.client.create(obj, namespace=namespace, **options))

    def update(
        self,
        obj: ObjectRef,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> Any:
        """Replace the object (or its ``subresource``) with ``obj``; a stale resourceVersion is a
        Conflict."""
        return self._run(self.client.update(obj, namespace=namespace, subresource=subresource, **options))

    def patch(
        self,
        kind: KindRef,
        name: str | None,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> Any:
        """Patch the object (merge patch unless ``patch_type`` says otherwise)."""
        return self._run(
            self.client.patch(
                kind,
                name,
                patch,
                patch_type=patch_type,
                namespace=namespace,
                subresource=subresource,
                **options,
            )
        )

    def apply(
        self,
        obj: ApplyRef,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> Any:
        """Server-side apply ``obj`` as ``field_manager`` (``force`` takes fields others own)."""
        call = self.client.apply(
            obj,
            field_manager=field_manager,
            force=force,
            namespace=namespace,
            subresource=subresource,
            **options,
        )
        return self._run(call)

    def delete(
        self,
        kind: KindRef,
        name: str | None = None,
        *,
        namespace: str | None = None,
        **options: Unpack[DeleteOptions],
    ) -> Obj:
        """Delete the object; the server's answer (the object, or a Status)."""
        result: Obj = self._run(self.client.delete(kind, name, namespace=namespace, **options))
        return result

    def delete_collection(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        **options: Unpack[DeleteOptions],
    ) -> Obj:
        """Delete every object of ``kind`` the selectors match."""
        call = self.client.delete_collection(
            kind, namespace=namespace, label_selector=label_selector, field_selector=field_selector, **options
        )
        result: Obj = self._run(call)
        return result


class SyncClient(BlockingClient):
    """A blocking client of its own, for scripts and notebooks::

        with kubeloop.SyncClient(kubeloop.load_config()) as client:
            for pod in client.list(kinds.Pod, namespace="default"):
                print(pod["metadata"]["name"])

    It runs an :class:`~kubeloop.APIClient` (``client_options`` are its options) on an event loop
    in a daemon thread; ``close()`` (or the end of the ``with`` block) stops both.
    """

    def __init__(self, config: ClientConfig, **client_options: Any) -> None:
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="kubeloop-client", daemon=True)
        self._thread.start()
        self._api = APIClient(config, **client_options)
        super().__init__(self._api, loop)

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the client's thread (a second call does nothing)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        self._run(self._api.close())
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)
        loop.close()

    def watch(self, kind: KindRef, **options: Any) -> Iterator[WatchEvent]:
        """Events one by one; closing the iterator (or leaving the ``for``) ends the watch."""
        watch = self._api.watch(kind, **options)
        events = watch.__aiter__()

        async def next_event() -> WatchEvent:
            return await events.__anext__()

        try:
            while True:
                try:
                    yield self._run(next_event())
                except StopAsyncIteration:
                    return
        finally:
            self._run(watch.close())
