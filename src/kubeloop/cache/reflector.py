"""The reflector: list, then watch from the list's resourceVersion, for ever.

Each (re)list hands the complete state to the sink page by page (``list_page``, then
``list_done``), every watch event after it (``event``). The client's watch already reconnects by
itself after a dropped or silent stream;
the reflector relists when the resourceVersion it holds is gone (410), and retries a failed list
with jittered exponential backoff. It runs until cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.client.interface import KindRef, gvk_of
from kubeloop.client.rest import APIClient
from kubeloop.client.restclient import REQUEST_ERRORS
from kubeloop.client.watch import WatchEvent
from kubeloop.jitter import uniform

log = logging.getLogger("kubeloop.cache.reflector")


class Sink(Protocol):
    """Where a reflector puts what it lists and watches (the informer)."""

    def list_page(self, items: list[Obj], namespace: str | None) -> None:
        """One page of a (re)list of ``namespace`` (None: everything in scope)."""

    def list_done(self, resource_version: str, namespace: str | None) -> None:
        """The (re)list of ``namespace`` is complete at ``resource_version``."""

    def event(self, event: WatchEvent) -> None:
        """One watch event, in order."""


@dataclass(frozen=True)
class ListWatchOptions:
    """What one reflector lists and watches: a namespace, selectors, the page size, how long a
    silent watch is trusted, the longest back-off, and whether it asks for metadata only.
    """

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    #: Half client-go's 500: a page is held decoded while it is stored, and Python dicts cost
    #: ~5x the JSON — smaller pages keep the cache's memory high-water mark low (bench B3).
    page_size: int = 250
    inactivity_timeout: float = 90.0
    max_backoff: float = 30.0
    metadata_only: bool = False


class Reflector:
    """client-go's ``Reflector``: list ``kind`` (in pages), then watch from the list's
    resourceVersion; relist when the watch expires (410), back off and retry when it fails.
    """

    def __init__(self, client: APIClient, kind: KindRef, sink: Sink, options: ListWatchOptions) -> None:
        self.client = client
        self.kind: GroupVersionKind = gvk_of(kind)
        self.sink = sink
        self.options = options
        self.lists = 0  # how many times the state was listed (1 + relists)
        self.last_resource_version = ""
        #: Told of each failed list or watch before it is retried (the informer's refusals).
        self.on_failure: Callable[[BaseException], None] | None = None

    async def run(self) -> None:
        """List and watch until cancelled, relisting and retrying as client-go's reflector does."""
        failures = 0
        while True:
            try:
                await self._list_and_watch()
            except errors.ResourceExpired as expired:
                log.info("%s: resourceVersion %s expired; relisting", self.kind, self.last_resource_version)
                failures = 0
                if self.on_failure is not None:
                    self.on_failure(expired)
            except REQUEST_ERRORS as exc:
                delay = min(self.options.max_backoff, 0.5 * 2**failures) * uniform(0.5, 1.0)
                failures += 1
                log.warning("%s: list/watch failed (%s); retrying in %.1fs", self.kind, exc, delay)
                if self.on_failure is not None:
                    self.on_failure(exc)
                await asyncio.sleep(delay)

    async def _list_and_watch(self) -> None:
        options = self.options
        resource_version = ""
        first = True
        async for page in self.client.list_pages(
            self.kind,
            namespace=options.namespace,
            label_selector=options.label_selector,
            field_selector=options.field_selector,
            page_size=options.page_size,
            metadata_only=options.metadata_only,
        ):
            if first:
                # Every page belongs to the first one's snapshot.
                resource_version = str((page.get("metadata") or {}).get("resourceVersion") or "")
                first = False
            self.sink.list_page(list(page.get("items") or ()), options.namespace)
        self.lists += 1
        self.last_resource_version = resource_version
        self.sink.list_done(resource_version, options.namespace)
        watch = self.client.watch(
            self.kind,
            namespace=options.namespace,
            label_selector=options.label_selector,
            field_selector=options.field_selector,
            resource_version=resource_version,
            inactivity_timeout=options.inactivity_timeout,
            metadata_only=options.metadata_only,
        )
        try:
            async for event in watch:
                self.sink.event(event)
                self.last_resource_version = watch.resource_version or self.last_resource_version
        finally:
            await watch.close()
