"""Writes and watches leave no reference cycles behind, on the server's side or the client's.

Garbage that only the cyclic GC can free makes every write dearer: it counts towards the next
young-generation pass, and each pass walks every object a write keeps (stored objects among
them). A recursive closure in the managedFields encoder left one cycle per write: a quarter of
the server's collections in ``bench/b2_custom_resources.py``, ~8 % of its CPU.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Iterator

import pytest

import kubeloop
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from tests.conftest import ServerThread, eventually

WRITES = 200


def not_of_closed_connections(garbage: list[object]) -> list[object]:
    """``garbage`` without the parts of connections that closed meanwhile: asyncio's selector
    transport keeps a bound method of its own (a cycle per connection, whoever opened it), and a
    connection another test left idle on the shared server may be closed at any moment."""
    in_garbage = {id(obj) for obj in garbage}
    connection_parts: set[int] = set()
    stack = [obj for obj in garbage if isinstance(obj, asyncio.BaseTransport | socket.socket)]
    while stack:
        obj = stack.pop()
        if id(obj) not in connection_parts:
            connection_parts.add(id(obj))
            stack.extend(part for part in gc.get_referents(obj) if id(part) in in_garbage)
    return [obj for obj in garbage if id(obj) not in connection_parts]


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """What the cyclic GC finds from here on, kept in a list instead of freed."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.garbage.clear()
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def test_writes_and_their_watch_events_make_no_cyclic_garbage(
    shared_server: ServerThread, namespace: str, saved_garbage: list[object]
) -> None:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as client:
        events = 0
        watch = client.watch(kubeloop.kinds.ConfigMap, namespace=namespace)

        async def count() -> None:
            nonlocal events
            async for _ in watch:
                events += 1

        counting = asyncio.create_task(count())
        warm_up = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "warm-up"}}
        await client.create(warm_up, namespace=namespace)
        await eventually(lambda: events >= 1)  # the watch is open: it sees every write below
        gc.collect()
        saved_garbage.clear()
        for index in range(WRITES // 2):
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"c{index}", "namespace": namespace},
                "data": {"n": str(index)},
            }
            await client.create(body)
            await client.patch(body, None, {"data": {"n": f"{index}!"}})
        await eventually(lambda: events >= WRITES + 1, timeout=30)
        gc.collect()
        found = not_of_closed_connections(saved_garbage)
        counting.cancel()
        await asyncio.gather(counting, return_exceptions=True)
    # The process holds the server, its control loops and this client; a cycle per write would
    # leave at least WRITES * 4 objects (a closure, its cells and what they hold).
    assert len(found) < WRITES // 4, sorted({type(o).__name__ for o in found})
