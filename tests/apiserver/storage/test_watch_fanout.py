"""The watch cache's fan-out: watchers with sinks are handed each tick's events as one batch per
prefix, shared by every sink of that prefix; watchers without are queued each event for their
stream's task. A watcher moving between the two, at any point of a tick, gets every event under
its prefix after its start once, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.storage.watchcache import Change, EventBatch, WatchCache, Watcher


class Keys:
    """Changes applied to a cache as a follower applies the store's (``WatchCache.apply``)."""

    def __init__(self, cache: WatchCache) -> None:
        self.cache = cache
        self.revision = 0
        self.present: set[str] = set()

    def write(self, key: str) -> int:
        self.revision += 1
        kind = "MODIFIED" if key in self.present else "ADDED"
        self.present.add(key)
        value = f'{{"kind":"ConfigMap","metadata":{{"name":"{key}","resourceVersion":"{self.revision}"}}}}'
        self.cache.apply(Change(self.revision, kind, key, value.encode(), None, self.revision))
        return self.revision


def recording_sink(calls: list[EventBatch]) -> Any:
    def sink(batch: EventBatch) -> bool:
        calls.append(batch)
        return True

    return sink


async def flushed(cache: WatchCache) -> None:
    """The flush the applied changes scheduled on the loop, run now (the loop's call of it
    finds nothing left to hand out): the tests decide where in a tick each step falls."""
    cache._flush_watchers()


async def test_sinks_of_one_prefix_are_handed_one_batch_and_others_their_own() -> None:
    cache = WatchCache()
    keys = Keys(cache)
    _, first = cache.watch("/configmaps/", 0)
    _, second = cache.watch("/configmaps/", 0)
    _, narrow = cache.watch("/configmaps/a/", 0)
    calls: dict[Watcher, list[EventBatch]] = {first: [], second: [], narrow: []}
    for watcher, batches in calls.items():
        watcher.sink = recording_sink(batches)
    keys.write("/configmaps/a/one")
    keys.write("/configmaps/b/two")
    keys.write("/secrets/a/three")
    await flushed(cache)
    assert [[event.revision for event in batch] for batch in calls[first]] == [[1, 2]]
    assert calls[second][0] is calls[first][0]  # encoded once for both: the batch's `encoded`
    assert [[event.key for event in batch] for batch in calls[narrow]] == [["/configmaps/a/one"]]
    assert not any(watcher.events for watcher in calls)  # nothing queued per watcher


async def test_a_sink_removed_before_the_flush_leaves_the_ticks_events_to_the_task() -> None:
    cache = WatchCache()
    keys = Keys(cache)
    _, watcher = cache.watch("/configmaps/", 0)
    batches: list[EventBatch] = []
    watcher.sink = recording_sink(batches)
    keys.write("/configmaps/a/one")
    watcher.sink = None  # the stream's task woke (a bookmark is due) before the flush ran
    assert [event.revision for event in watcher.events] == [1]  # queued for the task now
    keys.write("/configmaps/a/two")
    await flushed(cache)
    assert batches == []
    assert [event.revision for event in watcher.drain()] == [1, 2]


async def test_a_sink_set_mid_tick_is_not_handed_what_its_task_was_queued() -> None:
    cache = WatchCache()
    keys = Keys(cache)
    _, streaming = cache.watch("/configmaps/", 0)
    streaming.sink = recording_sink([])
    _, watcher = cache.watch("/configmaps/", 0)
    keys.write("/configmaps/a/one")  # queued for the watcher's task, and in the tick's batch
    assert [event.revision for event in watcher.drain()] == [1]
    batches: list[EventBatch] = []
    watcher.sink = recording_sink(batches)
    keys.write("/configmaps/a/two")
    await flushed(cache)
    assert [[event.revision for event in batch] for batch in batches] == [[2]]


async def test_a_sink_that_takes_nothing_leaves_the_batch_to_the_task_in_order() -> None:
    cache = WatchCache()
    keys = Keys(cache)
    _, watcher = cache.watch("/configmaps/", 0)
    watcher.sink = lambda batch: False
    keys.write("/configmaps/a/one")
    keys.write("/configmaps/a/two")
    await flushed(cache)
    assert watcher.sink is None
    keys.write("/configmaps/a/three")
    assert [event.revision for event in watcher.drain()] == [1, 2, 3]


PREFIXES = ("/configmaps/", "/configmaps/a/", "/configmaps/b/")
KEYS = ("/configmaps/a/one", "/configmaps/a/two", "/configmaps/b/one", "/secrets/a/one")

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(KEYS)),
        st.tuples(st.just("watch"), st.sampled_from(PREFIXES)),
        st.tuples(st.sampled_from(["attach", "refusing", "detach", "drain", "stop"]), st.integers(0, 5)),
        st.tuples(st.just("flush"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(operations)
def test_every_watcher_gets_each_event_under_its_prefix_once_in_order(ops: list[tuple[str, Any]]) -> None:
    """Watchers start, attach sinks (some that refuse), detach them, drain and stop at random
    points between writes and flushes; each receives, by its sink and its queue together, exactly
    the revisions under its prefix after its start, in order."""

    async def scenario() -> None:
        cache = WatchCache()
        keys = Keys(cache)
        watchers: list[tuple[Watcher, int]] = []
        received: dict[Watcher, list[int]] = {}
        stopped_at: dict[Watcher, int] = {}

        def sink_of(watcher: Watcher, *, refusing: bool) -> Any:
            def sink(batch: EventBatch) -> bool:
                if refusing:
                    return False
                received[watcher].extend(event.revision for event in batch)
                return True

            return sink

        def drain(watcher: Watcher) -> None:
            received[watcher].extend(event.revision for event in watcher.drain())

        for op, arg in ops:
            if op == "write":
                keys.write(arg)
            elif op == "watch":
                _, watcher = cache.watch(arg, keys.revision)
                watchers.append((watcher, keys.revision))
                received[watcher] = []
            elif op == "flush":
                await flushed(cache)
            elif open_watchers := [watcher for watcher, _ in watchers if not watcher.closed]:
                watcher = open_watchers[arg % len(open_watchers)]
                if op in ("attach", "refusing") and watcher.sink is None:
                    drain(watcher)  # as a stream's task: what is queued first, then the sink
                    watcher.sink = sink_of(watcher, refusing=op == "refusing")
                elif op == "detach":
                    watcher.sink = None
                elif op == "drain" and watcher.sink is None:  # as a stream's task drains
                    drain(watcher)
                elif op == "stop":
                    watcher.sink = None
                    drain(watcher)
                    cache.stop_watch(watcher)
                    stopped_at[watcher] = keys.revision
        await flushed(cache)
        written = list(enumerate(keys_written, start=1))
        for watcher, start in watchers:
            if not watcher.closed:
                watcher.sink = None
                drain(watcher)
                cache.stop_watch(watcher)
                stopped_at[watcher] = keys.revision
            expected = [
                revision
                for revision, key in written
                if start < revision <= stopped_at[watcher] and key.startswith(watcher.prefix)
            ]
            assert received[watcher] == expected, (watcher.prefix, start)

    keys_written = [arg for op, arg in ops if op == "write"]
    asyncio.run(scenario())
