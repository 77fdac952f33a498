"""The Kind source hands an update's old object only to handlers and predicates that read it:
with none of them reading it, the informer never decodes it (the for_ path); a predicate or
handler that reads it — or says nothing — gets the real old object. Against the shared server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import kubeloop
from kubeloop import kinds, predicate
from kubeloop.cache.informer import Informer
from kubeloop.controller.handler import EnqueueRequestForObject, RequestQueue
from kubeloop.controller.source import Kind
from tests.conftest import ServerThread, eventually


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[kubeloop.APIClient]:
    async with kubeloop.APIClient(kubeloop.load_config(str(shared_server.kubeconfig))) as c:
        yield c


class Recorder:
    """A handler that records what each update gave it."""

    def __init__(self, *, reads_old: bool | None) -> None:
        if reads_old is not None:
            self.reads_old_object = reads_old
        self.updates: list[tuple[str, str]] = []

    def create(self, obj: Any, queue: RequestQueue) -> None:
        pass

    def update(self, old: Any, new: Any, queue: RequestQueue) -> None:
        self.updates.append((old["data"]["v"], new["data"]["v"]))

    def delete(self, obj: Any, queue: RequestQueue) -> None:
        pass

    def generic(self, obj: Any, queue: RequestQueue) -> None:
        pass


class Queue:
    def __init__(self) -> None:
        self.added: list[kubeloop.Request] = []

    def add(self, item: kubeloop.Request) -> None:
        self.added.append(item)


async def test_the_old_object_goes_only_to_those_that_read_it(
    client: kubeloop.APIClient, namespace: str
) -> None:
    informer = Informer(client, kinds.ConfigMap, namespaces=[namespace])
    new_only = Recorder(reads_old=False)
    reads_old = Recorder(reads_old=True)
    says_nothing = Recorder(reads_old=None)
    filtered = Recorder(reads_old=False)  # behind a predicate that reads the old object
    for handler, predicates in (
        (new_only, ()),
        (reads_old, ()),
        (says_nothing, ()),
        (filtered, (predicate.LabelsChanged(),)),
    ):
        Kind(informer, handler, *predicates).start(Queue())
    queue = Queue()
    Kind(informer, EnqueueRequestForObject(), predicate.LabelSelectorPredicate("app=x")).start(queue)
    informer.start()
    try:
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": namespace, "labels": {"app": "x"}},
                "data": {"v": "1"},
            }
        )
        await eventually(lambda: informer.store.get(f"{namespace}/c") is not None)
        await client.patch(kinds.ConfigMap, "c", {"data": {"v": "2"}}, namespace=namespace)
        await eventually(lambda: len(new_only.updates) == 1)
        await client.patch(
            kinds.ConfigMap,
            "c",
            {"data": {"v": "3"}, "metadata": {"labels": {"app": "x", "b": "c"}}},
            namespace=namespace,
        )
        await eventually(lambda: len(new_only.updates) == 2 and len(says_nothing.updates) == 2)
        assert new_only.updates == [("2", "2"), ("3", "3")]  # never given the old object
        assert reads_old.updates == [("1", "2"), ("2", "3")]
        assert says_nothing.updates == [("1", "2"), ("2", "3")]  # unknown: assumed to read it
        assert filtered.updates == [("2", "3")]  # the predicate needed (and saw) the real old labels
        assert queue.added == [kubeloop.Request(namespace, "c")] * 3  # add, then both updates
    finally:
        await informer.stop()
