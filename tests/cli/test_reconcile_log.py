"""What an operator's log says of its reconciles, at each verbosity of ``kubeloop run``: a line per
reconcile at -v with what it wrote, a Conflict as a quiet requeue, a failure's traceback once
and then one line per retry (every time at -vv), ``kubeloop.logger()`` bound to the reconcile,
and none of the embedded cluster's own reconciles or the libraries' connection chatter."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator

import pytest

import kubeloop
from kubeloop.cli.logs import configure
from kubeloop.client.rest import APIClient
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import eventually, settled


@pytest.fixture
def output() -> Iterator[tuple[io.StringIO, list[int]]]:
    """The log's text, and a way to set the verbosity (``levels.append(n)``)."""
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    names = ("kubeloop.reconcile", "kubeloop.controllermanager.reconcile", "aiohttp", "asyncio")
    levels = {name: logging.getLogger(name).level for name in names}
    yield stream, []
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def config_map(name: str, namespace: str) -> core_v1.ConfigMap:
    return core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name=name, namespace=namespace))


async def test_a_line_per_reconcile_with_its_writes_at_v(
    kube_client: APIClient, kube_namespace: str, output: tuple[io.StringIO, list[int]]
) -> None:
    stream, _ = output
    configure(verbose=1, json_format=False, stream=stream)
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    log = kubeloop.logger("my.operator")

    async def reconcile(request: kubeloop.Request) -> None:
        log.info("copying")
        copy = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{request.name}-copy", "namespace": request.namespace},
        }

        def mutate(obj: kubeloop.Obj) -> None:
            obj["data"] = {"from": request.name}

        await kubeloop.create_or_update(manager.client, copy, mutate)

    source = kubeloop.predicate.LabelSelectorPredicate("copy-me")
    kubeloop.Builder(manager).named("copier").for_(core_v1.ConfigMap, source).complete(reconcile)
    async with manager:
        original = config_map("a", kube_namespace)
        original.metadata.labels = {"copy-me": "yes"}
        await kube_client.create(original)
        await eventually(lambda: kube_client.get(core_v1.ConfigMap, "a-copy", namespace=kube_namespace))
        await settled(manager)
    lines = stream.getvalue().splitlines()
    mine = [line for line in lines if "reconcile" in line and " copier: " in line]
    assert mine[0].endswith(
        f"INFO kubeloop.reconcile: copier: reconcile {kube_namespace}/a ok " + mine[0].rsplit(" ok ", 1)[1]
    )
    assert mine[0].split(" ok ", 1)[1].split(" ", 1)[1] == "(ConfigMap/a-copy created)"
    assert any(line.endswith(f"INFO my.operator: copying [copier {kube_namespace}/a]") for line in lines)
    # The embedded cluster's reconciles (its namespace controller's, ...) are not shown.
    assert not [line for line in lines if "kubeloop.controllermanager.reconcile" in line]


async def test_default_verbosity_has_no_reconcile_lines(
    kube_client: APIClient, kube_namespace: str, output: tuple[io.StringIO, list[int]]
) -> None:
    stream, _ = output
    configure(verbose=0, json_format=False, stream=stream)
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(lambda request: None)
    async with manager:
        await kube_client.create(config_map("quiet", kube_namespace))
        await eventually(lambda: manager.controllers["configmap"].results["success"] >= 1)
    assert "kubeloop.reconcile" not in stream.getvalue()
    assert logging.getLogger("aiohttp").getEffectiveLevel() == logging.WARNING


@pytest.mark.parametrize("verbose", [1, 2])
async def test_a_conflict_is_a_quiet_requeue_and_a_failure_is_told_once(
    kube_client: APIClient, kube_namespace: str, output: tuple[io.StringIO, list[int]], verbose: int
) -> None:
    stream, _ = output
    configure(verbose=verbose, json_format=False, stream=stream)
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    calls: dict[str, int] = {}

    async def reconcile(request: kubeloop.Request) -> None:
        calls[request.name] = calls.get(request.name, 0) + 1
        if request.name == "stale":
            if calls["stale"] == 1:  # written with an old resourceVersion: Conflict, once
                stale = await kube_client.get(core_v1.ConfigMap, "stale", namespace=request.namespace)
                await kube_client.update(stale.model_copy(update={"data": {"changed": "1"}}))
                await kube_client.update(stale.model_copy(update={"data": {"changed": "2"}}))
        elif calls[request.name] <= 3:
            raise ValueError("not yet")

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
    async with manager:
        await kube_client.create(config_map("stale", kube_namespace))
        await kube_client.create(config_map("broken", kube_namespace))
        await eventually(lambda: calls.get("stale", 0) >= 2 and calls.get("broken", 0) >= 4)
        await settled(manager)
    text = stream.getvalue()
    results = manager.controllers["configmap"].results
    assert results["requeue"] == 1 and results["error"] == 3
    conflict = [
        line for line in text.splitlines() if "conflict" in line and f"{kube_namespace}/stale" in line
    ]
    assert len(conflict) == 1 and conflict[0].split(" INFO ", 1)[1].startswith(
        f"kubeloop.reconcile: configmap: reconcile {kube_namespace}/stale conflict "
    )
    assert conflict[0].endswith("; requeued")
    failed = [
        line for line in text.splitlines() if f"reconcile {kube_namespace}/broken failed; retrying" in line
    ]
    assert len(failed) == 3 and all(line.endswith("ValueError: not yet") for line in failed)
    assert text.count("Traceback (most recent call last)") == (1 if verbose == 1 else 3)


async def test_already_exists_once_is_a_stale_cache_twice_is_an_error(
    kube_client: APIClient, kube_namespace: str, output: tuple[io.StringIO, list[int]]
) -> None:
    """A create the cache had not seen the object of is requeued quietly, as a Conflict; the
    same AlreadyExists on the next try is not a lagging cache and is an error."""
    stream, _ = output
    configure(verbose=1, json_format=False, stream=stream)
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    calls = 0

    async def reconcile(request: kubeloop.Request) -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:  # a name that is taken, twice in a row
            await kube_client.create(config_map(request.name, request.namespace))

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
    async with manager:
        await kube_client.create(config_map("taken", kube_namespace))
        await eventually(lambda: calls >= 3)
        await settled(manager)
    results = manager.controllers["configmap"].results
    assert (results["requeue"], results["error"], results["success"]) == (1, 1, 1)
    lines = [line for line in stream.getvalue().splitlines() if f"{kube_namespace}/taken" in line]
    assert "conflict" in lines[0] and lines[0].endswith("; requeued")
    assert "failed; retrying" in lines[1] and "AlreadyExists" in lines[1]


async def test_json_lines_carry_the_controller_and_the_object(
    kube_client: APIClient, kube_namespace: str, output: tuple[io.StringIO, list[int]]
) -> None:
    import json

    stream, _ = output
    configure(verbose=1, json_format=True, stream=stream)
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    log = kubeloop.logger()
    seen = asyncio.Event()

    async def reconcile(request: kubeloop.Request) -> None:
        log.warning("looked", extra={"size": 1})
        seen.set()

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
    async with manager:
        await kube_client.create(config_map("j", kube_namespace))
        await seen.wait()
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    looked = next(r for r in records if r["msg"] == "looked")
    assert (looked["controller"], looked["object"], looked["size"]) == ("configmap", f"{kube_namespace}/j", 1)
    assert looked["reconcileID"]
