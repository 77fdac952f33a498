"""The registry's commit listeners (what keeps the server's caches of CRDs, webhook and policy
configurations current): told of every committed write of the objects stored under their
group and resource, with the new and the old object, whichever version or resource wrote them."""

from __future__ import annotations

from typing import Any

from tests.conftest import Client, ServerThread


def test_a_listener_is_told_of_each_write_with_the_new_and_the_old_object(module_server: ServerThread) -> None:
    api = Client(module_server)
    registry = module_server.server.registry
    assert registry is not None
    told: list[tuple[str | None, str | None]] = []

    def rv(obj: Any) -> str | None:
        return None if obj is None else str(obj["metadata"]["resourceVersion"])

    def listener(new: Any, old: Any) -> None:
        if (new or old)["metadata"]["namespace"] == "default":
            told.append((rv(new), rv(old)))

    async def register() -> None:  # on the server's loop, where listeners are called
        registry.add_commit_listener("", "events", listener)

    module_server.call(register())
    path = "/api/v1/namespaces/default/events"
    body = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Seen",
        "action": "Looked",
        "eventTime": "2026-11-29T00:00:00.000000Z",
        "reportingComponent": "test",
        "reportingInstance": "test-1",
    }
    assert api.post(path, body).status_code == 201
    created = api.get(f"{path}/e1").json()["metadata"]["resourceVersion"]
    # Written through events.k8s.io/v1, stored as core events: the same listener is told.
    patched = api.patch(
        "/apis/events.k8s.io/v1/namespaces/default/events/e1",
        {"note": "again"},
        "application/merge-patch+json",
    )
    assert patched.status_code == 200, patched.text
    updated = patched.json()["metadata"]["resourceVersion"]
    assert api.delete(f"{path}/e1").status_code == 200
    assert told == [(created, None), (updated, created), (None, updated)]
