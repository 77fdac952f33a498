"""Values one object holds alone (a Service's cluster IP and node ports), decided by the store as
it takes a write: a value held by another key, stored or in a write still in flight, refuses the
write; a failed write lets its values go, a committed one the values it gave up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeloop.apiserver.storage.claims import Claims, ClaimTaken
from kubeloop.apiserver.storage.log import MemoryLog, StorageError
from kubeloop.apiserver.storage.objectstore import ObjectStore
from kubeloop.testing import eventually
from tests.apiserver.storage.test_store import HeldLog


def service(ip: str, *ports: int) -> dict[str, Any]:
    return {"spec": {"clusterIPs": [ip], "ports": [{"nodePort": port} for port in ports]}}


def claims_of(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"]
    return [f"ip/{ip}" for ip in spec["clusterIPs"]] + [f"nodeport/{p['nodePort']}" for p in spec["ports"]]


def test_a_replicas_index_records_committed_changes_as_they_come() -> None:
    """A front-end's index (``Claims.record``): what a key claims follows its committed changes,
    values it gave up are free, a delete frees all, and keys no rule covers are ignored."""
    claims = Claims()
    claims.add_rule("/s/", claims_of, [])
    claims.record("/s/a", service("10.0.0.1", 30001, 30002))
    claims.record("/other/x", service("10.0.0.9"))
    assert claims.holder("ip/10.0.0.1") == "/s/a" and claims.holder("ip/10.0.0.9") is None
    claims.record("/s/a", service("10.0.0.1", 30003))  # an update giving two ports up, taking one
    assert [claims.holder(f"nodeport/{port}") for port in (30001, 30002, 30003)] == [None, None, "/s/a"]
    claims.record("/s/b", service("10.0.0.2", 30001))  # the freed port, taken by another
    assert claims.holder("nodeport/30001") == "/s/b"
    claims.record("/s/a", None)
    assert claims.holder("ip/10.0.0.1") is None and claims.holder("nodeport/30003") is None
    assert claims.holder("ip/10.0.0.2") == "/s/b"


def test_a_value_is_held_by_one_key_until_its_write_fails_or_gives_it_up() -> None:
    claims = Claims()
    claims.add_rule("/s/", claims_of, [("/s/a", service("10.0.0.1", 30001))])
    assert claims.holder("ip/10.0.0.1") == "/s/a" and claims.holder("nodeport/30001") == "/s/a"
    assert claims.reserve("/other/x", service("10.0.0.1")) is None  # no rule: nothing claimed

    with pytest.raises(ClaimTaken) as taken:
        claims.reserve("/s/b", service("10.0.0.2", 30001))
    assert (taken.value.claim, taken.value.holder) == ("nodeport/30001", "/s/a")
    assert claims.holder("ip/10.0.0.2") is None  # a refused write holds nothing

    in_flight = claims.reserve("/s/b", service("10.0.0.2", 30002))
    assert in_flight is not None and claims.holder("ip/10.0.0.2") == "/s/b"
    with pytest.raises(ClaimTaken):  # held by a write not yet durable
        claims.reserve("/s/c", service("10.0.0.2"))
    claims.settle(in_flight, committed=False)
    assert claims.holder("ip/10.0.0.2") is None and claims.holder("nodeport/30002") is None

    # An update keeps what it still claims and frees the rest once committed.
    update = claims.reserve("/s/a", service("10.0.0.1", 30003))
    assert update is not None
    assert claims.holder("nodeport/30001") == "/s/a"  # not given up before the update commits
    claims.settle(update, committed=True)
    assert claims.holder("nodeport/30001") is None and claims.holder("nodeport/30003") == "/s/a"
    delete = claims.reserve("/s/a", None)
    assert delete is not None
    claims.settle(delete, committed=True)
    assert claims.holder("ip/10.0.0.1") is None and claims.holder("nodeport/30003") is None


async def test_the_store_refuses_a_write_claiming_what_a_write_in_flight_claims() -> None:
    log = HeldLog()
    store = ObjectStore(log)
    store.load()
    store.add_claims("/s/", claims_of)
    first = asyncio.ensure_future(store.write("/s/a", service("10.0.0.1"), expected_revision=0))
    await eventually(lambda: len(log.held) == 1)
    with pytest.raises(ClaimTaken):
        await store.write("/s/b", service("10.0.0.1"), expected_revision=0)
    assert store.revision == 0 and len(log.held) == 1  # nothing of the refused write was taken
    # The first write fails in the storage: its address is free again.
    held, log.held = log.held, []
    for _record, done in held:
        done(StorageError("disk gone", reason="io"))
    with pytest.raises(Exception, match="disk gone"):
        await first
    second = asyncio.ensure_future(store.write("/s/b", service("10.0.0.1"), expected_revision=0))
    await eventually(lambda: len(log.held) == 1)
    log.release()
    await second
    assert store.get("/s/b") is not None and store.claim_holder("ip/10.0.0.1") == "/s/b"


async def test_claims_are_rebuilt_from_what_is_stored() -> None:
    store = ObjectStore(MemoryLog())
    store.load()
    await store.write("/s/a", service("10.0.0.1", 30001), expected_revision=0)
    store.add_claims("/s/", claims_of)  # as the registry does once the store is loaded
    assert store.claim_holder("nodeport/30001") == "/s/a"
    with pytest.raises(ClaimTaken):
        await store.write("/s/b", service("10.0.0.9", 30001), expected_revision=0)
