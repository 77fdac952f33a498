"""What the registry needs of a store: a watch cache's reads and watches, writes, and freshness.

Two stores are this: the :class:`~kubeloop.apiserver.storage.objectstore.ObjectStore` of the
process that orders writes and owns the log, and a front-end process's
:class:`~kubeloop.apiserver.storage.remotestore.RemoteStore` over it. Reads answer from the
cache at once; :meth:`Store.sync` and :meth:`Store.fresh` are what a read waits for first, as
kube-apiserver's reads from its watch cache wait for it to catch up with etcd.
"""

from __future__ import annotations

import abc
import asyncio

from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.claims import ClaimsOf
from kubeloop.apiserver.storage.watchcache import Event, WatchCache

#: How long a read of a resourceVersion newer than the cache waits for it (kube-apiserver's
#: watch cache blocks 3 s before it answers "Too large resource version").
FRESH_WAIT_SECONDS = 3.0


class Store(WatchCache, abc.ABC):
    """A watch cache that takes writes."""

    @abc.abstractmethod
    async def write(self, key: str, obj: Obj | None, *, expected_revision: int) -> Event:
        """Create (expected 0), update (expected = the committed revision) or delete (obj None)
        a key; returns once the write is durable and applied to this cache."""

    @abc.abstractmethod
    async def settled(self, key: str) -> None:
        """Wait until no write of ``key`` made through this store is in flight."""

    @abc.abstractmethod
    async def sync(self) -> None:
        """Wait until the cache holds every write committed before the call: a consistent read's
        wait (a get, or a list, without a resourceVersion)."""

    @abc.abstractmethod
    def add_claims(self, prefix: str, claims_of: ClaimsOf) -> None:
        """Objects under ``prefix`` hold the values ``claims_of(obj)`` alone."""

    @abc.abstractmethod
    def claim_holder(self, claim: str) -> str | None:
        """The key holding ``claim``, or None."""

    def unavailable(self) -> None:
        """Raise the Status error for reads this cache must not answer (a front-end whose store
        cannot be reached); nothing when it may serve."""

    async def fresh(self, revision: int) -> None:
        """Wait, up to :data:`FRESH_WAIT_SECONDS`, for the cache to reach ``revision`` (a read
        "not older than" it); the read then answers from where the cache is."""
        if revision <= self._committed or not self._may_reach(revision):
            return
        if (home := self._home()) is not None:
            return await self._at_home(self.fresh(revision), home)
        try:
            await asyncio.wait_for(self.wait_for_revision(revision), FRESH_WAIT_SECONDS)
        except TimeoutError:
            return

    def _may_reach(self, revision: int) -> bool:
        """Whether waiting could bring the cache to ``revision``."""
        return True
