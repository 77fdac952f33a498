"""``kubeloop.finalizer`` against the embedded server: a living object gets the finalizer before
its apply runs; one being deleted has its cleanup run, retried while it fails, and only then loses
the finalizer and goes; another finalizer is never lost to a concurrent change."""

from __future__ import annotations

import asyncio

import pytest

import kubeloop
from kubeloop.client.rest import APIClient
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import eventually, settled

FINALIZER = "example.com/cleanup"


def config_map(name: str, namespace: str) -> core_v1.ConfigMap:
    return core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name=name, namespace=namespace))


async def test_apply_then_a_failing_cleanup_retried_until_it_succeeds(
    kube_client: APIClient, kube_namespace: str
) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    applied: list[str] = []
    cleanups: list[str] = []
    allow_cleanup = asyncio.Event()

    def apply(obj: core_v1.ConfigMap) -> str:
        assert obj.metadata.finalizers == [FINALIZER]  # held before any work is done
        applied.append(obj.metadata.name or "")
        return "applied"

    async def cleanup(obj: core_v1.ConfigMap) -> str:
        cleanups.append(obj.metadata.name or "")
        if not allow_cleanup.is_set():
            raise RuntimeError("the DNS record is not gone yet")
        return "cleaned"

    async def reconcile(request: kubeloop.Request) -> None:
        try:
            found = await manager.client.get(core_v1.ConfigMap, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return
        await kubeloop.finalizer(manager.client, found, FINALIZER, apply=apply, cleanup=cleanup)

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
    async with manager:
        await kube_client.create(config_map("site", kube_namespace))
        await eventually(lambda: applied == ["site"] or applied[:1] == ["site"])
        stored = await kube_client.get(core_v1.ConfigMap, "site", namespace=kube_namespace)
        assert stored.metadata.finalizers == [FINALIZER]
        await kube_client.delete(core_v1.ConfigMap, "site", namespace=kube_namespace)
        await eventually(lambda: len(cleanups) >= 3)  # failing: retried with back-off
        held = await kube_client.get(core_v1.ConfigMap, "site", namespace=kube_namespace)
        assert held.metadata.deletion_timestamp is not None and held.metadata.finalizers == [FINALIZER]
        allow_cleanup.set()

        async def gone() -> None:
            try:
                await kube_client.get(core_v1.ConfigMap, "site", namespace=kube_namespace)
            except kubeloop.errors.NotFound:
                return
            raise AssertionError("still there")

        await eventually(gone)
        await settled(manager)


async def test_another_finalizer_is_kept_and_a_foreign_deletion_is_not_ours(
    kube_client: APIClient, kube_namespace: str
) -> None:
    other = "example.com/other"
    obj = config_map("shared", kube_namespace)
    obj.metadata.finalizers = [other]
    created = await kube_client.create(obj)
    result = await kubeloop.finalizer(kube_client, created, FINALIZER, apply=lambda o: "ok", cleanup=lambda o: "no")
    assert result == "ok"
    stored = await kube_client.get(core_v1.ConfigMap, "shared", namespace=kube_namespace)
    assert stored.metadata.finalizers == [other, FINALIZER]
    # A stale copy (the finalizer list changed since it was read) is refused, not overwritten.
    stale = created
    try:
        await kubeloop.finalizer(kube_client, stale.model_copy(update={"metadata": stale.metadata.model_copy(update={"finalizers": []})}), "example.com/third", apply=lambda o: "ok", cleanup=lambda o: "no")  # fmt: skip
    except kubeloop.errors.Conflict:
        pass
    else:
        raise AssertionError("a stale object's finalizer list overwrote the stored one")
    await kube_client.delete(core_v1.ConfigMap, "shared", namespace=kube_namespace)
    deleting = await kube_client.get(core_v1.ConfigMap, "shared", namespace=kube_namespace)
    assert await kubeloop.finalizer(kube_client, deleting, FINALIZER, apply=lambda o: "ok", cleanup=lambda o: "cleaned") == "cleaned"
    after = await kube_client.get(core_v1.ConfigMap, "shared", namespace=kube_namespace)
    assert after.metadata.finalizers == [other]  # ours removed, the other kept: it stays
    assert await kubeloop.finalizer(kube_client, after, FINALIZER, apply=lambda o: "ok", cleanup=lambda o: "again") is None


async def test_removing_the_finalizer_from_a_stale_copy_is_a_conflict(
    kube_client: APIClient, kube_namespace: str
) -> None:
    """The removal names the resourceVersion the reconcile read: after a concurrent update it is
    a Conflict (the controller reads again), never a patch written from an older object."""
    obj = config_map("racing", kube_namespace)
    obj.metadata.finalizers = [FINALIZER, "example.com/other"]
    await kube_client.create(obj)
    await kube_client.delete(core_v1.ConfigMap, "racing", namespace=kube_namespace)
    read = await kube_client.get(core_v1.ConfigMap, "racing", namespace=kube_namespace)
    # Someone else changes the object after this reconcile read it.
    await kube_client.patch(
        core_v1.ConfigMap, "racing", {"metadata": {"labels": {"touched": "yes"}}}, namespace=kube_namespace
    )
    cleaned: list[str] = []
    try:
        await kubeloop.finalizer(kube_client, read, FINALIZER, apply=lambda o: "ok", cleanup=cleaned.append)
    except kubeloop.errors.Conflict:
        pass
    else:
        raise AssertionError("the finalizer was removed from a copy older than the stored object")
    stored = await kube_client.get(core_v1.ConfigMap, "racing", namespace=kube_namespace)
    assert stored.metadata.finalizers == [FINALIZER, "example.com/other"]
    assert len(cleaned) == 1  # the cleanup ran; the retry, with the fresh object, removes ours
    await kubeloop.finalizer(kube_client, stored, FINALIZER, apply=lambda o: "ok", cleanup=cleaned.append)
    after = await kube_client.get(core_v1.ConfigMap, "racing", namespace=kube_namespace)
    assert after.metadata.finalizers == ["example.com/other"]


async def test_a_registry_of_finalizers_adds_runs_and_removes_each(
    kube_client: APIClient, kube_namespace: str
) -> None:
    """``kubeloop.Finalizers`` (controller-runtime's finalizer registry): a living object gets
    every registered finalizer; deleted, each finalizer's function runs in turn and its finalizer
    goes, except one that fails (it stays, its error reported, the others still run), until it
    succeeds and the object goes. What the functions change is reported for the caller to write."""
    finalizers = kubeloop.Finalizers()
    ran: list[str] = []
    failing = {"bucket": True}

    async def unpublish(obj: core_v1.ConfigMap) -> None:
        ran.append("dns")

    def empty_bucket(obj: core_v1.ConfigMap) -> kubeloop.FinalizerResult:
        ran.append("bucket")
        if failing["bucket"]:
            raise RuntimeError("the bucket is not empty yet")
        return kubeloop.FinalizerResult(status_updated=True)

    finalizers.register("example.com/dns", unpublish)
    finalizers.register("example.com/bucket", empty_bucket)
    with pytest.raises(ValueError, match=r"'example\.com/dns' is registered already"):
        finalizers.register("example.com/dns", unpublish)
    obj = await kube_client.create(config_map("site", kube_namespace))
    result = await finalizers.finalize(obj)
    assert (result.updated, result.status_updated, result.errors, ran) == (True, False, (), [])
    obj = await kube_client.update(obj)
    assert obj.metadata.finalizers == ["example.com/dns", "example.com/bucket"]
    assert not (await finalizers.finalize(obj)).updated  # all there: nothing to write

    await kube_client.delete(obj)
    obj = await kube_client.get(core_v1.ConfigMap, "site", namespace=kube_namespace)
    result = await finalizers.finalize(obj)
    assert ran == ["dns", "bucket"] and result.updated and [str(e) for e in result.errors] == ["the bucket is not empty yet"]
    with pytest.raises(ExceptionGroup, match="1 finalizer"):
        result.raise_errors()
    obj = await kube_client.update(obj)
    assert obj.metadata.finalizers == ["example.com/bucket"]  # the failed one stays

    failing["bucket"] = False
    result = await finalizers.finalize(obj)
    assert (result.updated, result.status_updated, result.errors) == (True, True, ())
    assert ran == ["dns", "bucket", "bucket"]  # dns's finalizer had gone: not run again
    result.raise_errors()
    await kube_client.update(obj)
    with pytest.raises(kubeloop.errors.NotFound):
        await kube_client.get(core_v1.ConfigMap, "site", namespace=kube_namespace)
