"""A blocking facade over the async client, for scripts and notebooks.

``SyncClient`` runs one event loop in a daemon thread and forwards each call to the async
``Client`` on it, so the same connection pool, retries and credentials serve both. Watches are
iterated with ``for event in client.watch(...)``. Do not use it from inside a running event loop
(await the async client there).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from kubeloop.client.config import ClientConfig
from kubeloop.client.rest import Client, KindRef, ObjectRef, PatchType, Preconditions
from kubeloop.client.watch import WatchEvent

T = TypeVar("T")


class SyncClient:
    def __init__(self, config: ClientConfig, **client_options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubeloop-client", daemon=True)
        self._thread.start()
        self._client = Client(config, **client_options)
        self._any: Any = self._client  # calls are forwarded with whatever kind the caller gave

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(call, self._loop)
        return future.result()

    def get(
        self, kind: KindRef, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> Any:
        return self._run(self._any.get(kind, name, namespace=namespace, subresource=subresource))

    def list(self, kind: KindRef, **options: Any) -> Any:
        return self._run(self._any.list(kind, **options))

    def create(self, obj: ObjectRef, **options: Any) -> Any:
        return self._run(self._any.create(obj, **options))

    def update(self, obj: ObjectRef, **options: Any) -> Any:
        return self._run(self._any.update(obj, **options))

    def patch(
        self,
        kind: KindRef,
        name: str | None,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        **options: Any,
    ) -> Any:
        return self._run(self._any.patch(kind, name, patch, patch_type=patch_type, **options))

    def apply(self, obj: ObjectRef, *, field_manager: str, **options: Any) -> Any:
        return self._run(self._any.apply(obj, field_manager=field_manager, **options))

    def delete(
        self,
        kind: KindRef,
        name: str | None = None,
        *,
        preconditions: Preconditions | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        return self._run(self._any.delete(kind, name, preconditions=preconditions, **options))

    def delete_collection(self, kind: KindRef, **options: Any) -> dict[str, Any]:
        return self._run(self._any.delete_collection(kind, **options))

    def watch(self, kind: KindRef, **options: Any) -> Iterator[WatchEvent]:
        """Events one by one; closing the iterator (or leaving the ``for``) ends the watch."""
        watch = self._client.watch(kind, **options)
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
