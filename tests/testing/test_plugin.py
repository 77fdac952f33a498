"""The kubeloop pytest plugin's fixtures, used the way an operator's own tests would use them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import kubeloop
from kubeloop.api.models import core_v1, meta_v1
from kubeloop.client.rest import APIClient
from kubeloop.testing import eventually, settled
from kubeloop.testing.serverthread import ServerThread


async def test_plugin_fixtures(
    kube_apiserver: ServerThread, kube_client: APIClient, kube_namespace: str
) -> None:
    assert kube_apiserver.url.startswith("https://127.0.0.1:")
    namespace = await kube_client.get(core_v1.Namespace, kube_namespace)
    assert namespace.status is not None and namespace.status.phase == "Active"
    created = await kube_client.create(
        core_v1.ConfigMap(
            metadata=meta_v1.ObjectMeta(name="from-plugin", namespace=kube_namespace), data={"a": "1"}
        )
    )
    assert created.metadata.namespace == kube_namespace


async def test_each_test_gets_its_own_namespace(kube_namespace: str, kube_client: APIClient) -> None:
    listed = await kube_client.list(core_v1.ConfigMap, namespace=kube_namespace)
    assert listed.items == []  # nothing from the previous test's namespace


async def test_settled_waits_for_the_reconcile_a_write_causes(
    kube_client: APIClient, kube_namespace: str
) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    release = asyncio.Event()
    reconciled: list[str] = []

    async def reconcile(request: kubeloop.Request) -> None:
        await release.wait()
        reconciled.append(request.name)

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
    async with manager:
        await settled(manager)  # synced, nothing to do yet
        await kube_client.create(
            core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="a", namespace=kube_namespace))
        )
        # The write's event may not have reached the cache yet; settled waits for it, then for
        # the reconcile it causes, which is held: settled names it when it gives up.
        settling = asyncio.create_task(settled(manager))
        await eventually(lambda: manager.controllers["configmap"].active_workers == 1)
        with pytest.raises(AssertionError, match="1 reconciles running"):
            await settled(manager, timeout=0.2)
        assert not settling.done()
        release.set()
        await settling
        assert reconciled == ["a"]
        assert manager.busy() == []

        # An idle manager whose cache is behind the server has not settled: its informer is
        # stopped here, so it never hears of this write.
        await manager.informer_for(core_v1.ConfigMap).stop()
        await kube_client.create(
            core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="b", namespace=kube_namespace))
        )
        with pytest.raises(AssertionError, match=f"not yet cached: {kube_namespace}/b"):
            await settled(manager, timeout=0.3)


async def test_eventually_retries_falsy_values_and_passes_on_truthy_ones_or_none() -> None:
    tries = {"n": 0}

    def counted(values: list[Any]) -> Any:
        value = values[min(tries["n"], len(values) - 1)]
        tries["n"] += 1
        return value

    for falsy in ([], 0, "", False):  # a condition not met yet: retried
        tries["n"] = 0
        assert await eventually(lambda falsy=falsy: counted([falsy, falsy, [1]]), interval=0) == [1]
        assert tries["n"] == 3
    tries["n"] = 0
    assert await eventually(lambda: counted([0, None, [1]]), interval=0) is None  # None passes
    assert tries["n"] == 2
    queue: list[int] = []
    asyncio.get_running_loop().call_later(0.05, queue.append, 7)
    assert await eventually(lambda: len(queue), interval=0.01) == 1  # what a user means by it

    def asserts_hold() -> None:
        tries["n"] += 1
        assert tries["n"] >= 3

    tries["n"] = 0
    assert await eventually(asserts_hold, interval=0) is None  # a def's None: its asserts held
    assert tries["n"] == 3

    async def async_asserts() -> None:
        tries["n"] += 1
        assert tries["n"] >= 2

    tries["n"] = 0
    assert await eventually(async_asserts, interval=0) is None and tries["n"] == 2
    with pytest.raises(AssertionError, match=r"still \[\] after 0.05 s"):
        await eventually(lambda: [], timeout=0.05, interval=0.01)


async def test_eventually_retries_pytests_failures_too() -> None:
    """``pytest.fail`` and a ``pytest.raises`` block that raised nothing are ``Failed``, a
    ``BaseException``: retried like an ``AssertionError``, raised when the time is up."""
    tries = {"n": 0}

    def raises_on_the_third_try() -> None:
        tries["n"] += 1
        with pytest.raises(KeyError):
            if tries["n"] >= 3:
                raise KeyError("now")

    await eventually(raises_on_the_third_try, interval=0)
    assert tries["n"] == 3

    def never() -> None:
        pytest.fail("not yet")

    with pytest.raises(pytest.fail.Exception, match="not yet"):
        await eventually(never, timeout=0.05, interval=0.01)


def test_the_plugin_loads_nothing_of_kubeloop_until_a_test_asks(tmp_path: Any) -> None:
    """The plugin loads with every pytest run where kubeloop is installed, whether its tests use
    kubeloop or not: a run of tests that use none of it loads neither the server, the client nor
    the manager (they took ~1 s of CPU at every start), and the kit's names still import."""
    import subprocess
    import sys

    (tmp_path / "test_plain.py").write_text(
        "import sys\n\n\n"
        "def test_plain():\n"
        "    loaded = [m for m in ('kubeloop.apiserver.server', 'kubeloop.client.rest', 'kubeloop.manager.manager',"
        " 'kubeloop.testing.serverthread') if m in sys.modules]\n"
        "    assert loaded == []\n\n\n"
        "def test_the_kits_names():\n"
        "    from kubeloop.testing import ServerThread, eventually, fake_client\n\n"
        "    assert callable(eventually) and callable(fake_client) and ServerThread.__name__ == 'ServerThread'\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout
