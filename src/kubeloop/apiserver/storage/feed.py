"""The store's feed: committed changes carried to the watch caches of other processes.

The process that orders writes publishes (:class:`FeedPublisher`, a change listener of its
:class:`~kubeloop.apiserver.storage.objectstore.ObjectStore`); a front-end process's
:class:`~kubeloop.apiserver.storage.watchcache.WatchCache` follows it (:func:`follow`), as each
kube-apiserver's watch cache follows etcd. A follower is sent, on a stream of its own:

- a snapshot of the store's cache at one revision: the current objects, the history (with each
  change's previous value, which a watch needs to tell that an object left its selector) and
  the compacted revision;
- then every change committed after that revision, in revision order, every compaction of the
  history and every change of the storage's health (``readyz`` says when the storage refuses
  writes), in the order they happened: what one loop tick brought in one write.

Frames are the storage writer's (a 4-byte length and a pickle): both ends are processes of one
server, started by it. A follower more than ``max_unsent`` bytes behind (beyond its snapshot)
is cut off rather than let the store's memory grow without bound; :func:`follow` then fails with
:class:`FeedLost` (a 503 to whoever asked), as it does whenever the feed ends, since a cache no
longer fed must not serve reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kubeloop import errors
from kubeloop.apiserver.storage.kine import StorageErrorReason
from kubeloop.apiserver.storage.log import LoadedState, StorageError
from kubeloop.apiserver.storage.objectstore import ObjectStore
from kubeloop.apiserver.storage.watchcache import Change, WatchCache
from kubeloop.apiserver.storage.writer import FrameReader, frame

log = logging.getLogger("kubeloop.apiserver.storage.feed")

#: How far a follower may fall behind (bytes written to it and not yet taken) before it is cut off.
DEFAULT_MAX_UNSENT = 64 * 1024 * 1024


class FeedLost(errors.ServiceUnavailable):
    """The feed ended or could not be followed: the cache it fed is stale from here on (a 503
    for whoever asked the front-end it served)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"the store cannot be reached: {message}", retry_after_seconds=1)


class FeedPublisher:
    """Sends an :class:`ObjectStore`'s snapshot and committed changes to its followers."""

    def __init__(self, store: ObjectStore, *, max_unsent: int = DEFAULT_MAX_UNSENT) -> None:
        self._store = store
        self._max_unsent = max_unsent
        #: Each follower's stream, the revision of its snapshot (until its first flush) and how
        #: many bytes its snapshot was (which may wait unsent beyond ``max_unsent``).
        self._followers: list[tuple[asyncio.StreamWriter, int, int]] = []
        #: Messages since the last flush, in order: ("changes", [change tuples]), ("compact",
        #: revision) and ("health", None or (reason, message)).
        self._pending: list[tuple[Any, ...]] = []
        store.add_change_listener(self)

    @property
    def followers(self) -> int:
        return len(self._followers)

    def attach(self, writer: asyncio.StreamWriter) -> None:
        """Start feeding the follower at the other end of ``writer``: the snapshot now, then
        every change after it. Nothing is awaited in between, so no change falls in a gap; the
        changes of this tick already in the snapshot (it may be attached from a commit hook,
        between commits of one tick) are left out of its first flush."""
        state = self._store.snapshot()
        health = _health(self._store.storage_error)
        snapshot = frame(("snapshot", state.current, list(state.history), state.compacted, state.top, health))
        writer.write(snapshot)
        self._followers.append((writer, state.top, len(snapshot)))

    def committed(self, change: Change) -> None:
        pending = self._pending
        if not pending:
            asyncio.get_running_loop().call_soon(self._flush)
        if pending and pending[-1][0] == "changes":
            pending[-1][1].append(_as_tuple(change))
        else:
            pending.append(("changes", [_as_tuple(change)]))

    def compacted(self, revision: int) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(("compact", revision))

    def health(self, error: StorageError | None) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(("health", _health(error)))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending or not self._followers:
            return
        data = b"".join(frame(message) for message in pending)
        kept: list[tuple[asyncio.StreamWriter, int, int]] = []
        for writer, snapshot_revision, snapshot_bytes in self._followers:
            if writer.is_closing():
                continue
            if writer.transport.get_write_buffer_size() > self._max_unsent + snapshot_bytes:
                log.error("a watch cache fell more than %d bytes behind the store's feed: cut off", self._max_unsent)
                writer.transport.abort()  # what it has not taken is dropped now, not kept for it
                continue
            writer.write(data if not snapshot_revision else _after(pending, snapshot_revision))
            kept.append((writer, 0, snapshot_bytes))
        self._followers = kept

    async def close(self) -> None:
        """Flush what is pending, end every follower's stream and wait until each is closed."""
        self._flush()
        self._store.remove_change_listener(self)
        followers, self._followers = [writer for writer, _, _ in self._followers], []
        for writer in followers:
            writer.close()
        for writer in followers:
            with contextlib.suppress(ConnectionError, OSError):  # the follower went first
                await writer.wait_closed()


async def follow(
    cache: WatchCache,
    reader: asyncio.StreamReader,
    *,
    loaded: Callable[[], None] | None = None,
    other: Callable[[tuple[Any, ...]], None] | None = None,
) -> None:
    """Fill ``cache`` from the feed's snapshot (then call ``loaded``), then apply every change
    it sends, until the feed ends (:class:`FeedLost`) or the caller cancels. Messages that are
    not the feed's (a store's answers sharing the stream) go to ``other``. ``cache`` must be empty."""
    frames = FrameReader()
    snapshot_loaded = False
    while True:
        try:
            data = await reader.read(1 << 20)
        except (ConnectionError, OSError) as error:
            raise FeedLost(f"the store's feed broke: {error}") from error
        if not data:
            raise FeedLost("the store's feed ended")
        for message in frames.feed(data):
            if message[0] == "snapshot":
                if snapshot_loaded:
                    raise FeedLost("the store's feed sent a second snapshot")
                _, current, history, compacted, top, health = message
                cache.load_state(LoadedState(current, iter(history), compacted, top))
                cache.storage_error = _error(health)
                snapshot_loaded = True
                if loaded is not None:
                    loaded()
            elif other is not None and message[0] not in _FEED_MESSAGES:
                other(message)
            elif not snapshot_loaded:
                raise FeedLost(f"the store's feed sent {message[0]!r} before its snapshot")
            elif message[0] == "changes":
                for fields in message[1]:
                    cache.apply(Change(*fields))
            elif message[0] == "compact":
                cache.compact_history(message[1])
            elif message[0] == "health":
                cache.storage_error = _error(message[1])
            else:
                raise FeedLost(f"the store's feed sent an unknown message {message[0]!r}")


def _after(pending: list[tuple[Any, ...]], revision: int) -> bytes:
    """The frames of ``pending`` without the changes at or below ``revision`` (in a snapshot)."""
    kept: list[tuple[Any, ...]] = []
    for message in pending:
        if message[0] == "changes":
            changes = [fields for fields in message[1] if fields[0] > revision]
            if changes:
                kept.append(("changes", changes))
        else:
            kept.append(message)
    return b"".join(frame(message) for message in kept)


_FEED_MESSAGES = frozenset({"snapshot", "changes", "compact", "health"})


def _health(error: StorageError | None) -> tuple[str, str] | None:
    return (error.reason, error.message) if error is not None else None


def _error(health: tuple[StorageErrorReason, str] | None) -> StorageError | None:
    return StorageError(health[1], reason=health[0]) if health is not None else None


def _as_tuple(change: Change) -> tuple[Any, ...]:
    return (change.revision, change.type, change.key, change.value, change.prev_value, change.create_revision)
