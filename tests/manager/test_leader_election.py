"""Leader election with three manager processes: one leads; SIGKILL it and another takes over
within LeaseDuration + RetryPeriod; never two act at once."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from tests.conftest import Client, ServerThread

CANDIDATE = pathlib.Path(__file__).with_name("leader_candidate.py")
LEASE_DURATION = 3.0
RETRY_PERIOD = 0.5


def actors(log: pathlib.Path) -> list[tuple[float, str]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        stamp, identity = line.split()
        out.append((float(stamp), identity))
    return out


def wait_until(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_one_leader_and_takeover_after_sigkill(
    shared_server: ServerThread, api: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    api.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "work"}})
    log = tmp_path / "actions.log"
    env = {**os.environ, "PYTHONPATH": str(CANDIDATE.parents[2])}
    processes = {
        f"candidate-{i}": subprocess.Popen(
            [
                sys.executable,
                str(CANDIDATE),
                str(shared_server.kubeconfig),
                namespace,
                f"candidate-{i}",
                str(log),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    }
    try:
        wait_until(lambda: len(actors(log)) >= 5, timeout=30)
        time.sleep(1.5)  # let the others try (and fail) to take over meanwhile
        leaders = {identity for _, identity in actors(log)}
        assert len(leaders) == 1, leaders
        (leader,) = leaders
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/candidates"
        assert api.get(lease_path).json()["spec"]["holderIdentity"] == leader

        processes[leader].send_signal(signal.SIGKILL)
        processes[leader].wait(10)
        killed_at = time.time()

        def new_holder() -> bool:
            holder = api.get(lease_path).json()["spec"]["holderIdentity"]
            return holder != leader

        wait_until(new_holder, timeout=30)
        took_over_after = time.time() - killed_at
        assert took_over_after <= LEASE_DURATION + RETRY_PERIOD + 1.0, took_over_after  # 1 s for polling
        successor = api.get(lease_path).json()["spec"]["holderIdentity"]
        assert api.get(lease_path).json()["spec"]["leaseTransitions"] == 1
        wait_until(lambda: any(identity == successor for _, identity in actors(log)), timeout=10)

        # Never two at once: the old leader's actions all precede the kill, the successor's follow
        # it, and the third candidate never acted.
        timeline = actors(log)
        assert {identity for _, identity in timeline} == {leader, successor}
        assert all(stamp <= killed_at for stamp, identity in timeline if identity == leader)
        assert all(stamp >= killed_at for stamp, identity in timeline if identity == successor)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


async def test_a_leader_that_cannot_renew_stops() -> None:
    import asyncio

    from kubeloop.api.gvk import GroupVersionKind
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import Client as AsyncClient
    from kubeloop.manager.builder import Builder
    from kubeloop.manager.leaderelection import LeaderElectionConfig
    from kubeloop.manager.manager import LeaderElectionLost, Manager
    from tests.conftest import start_server

    server = start_server()
    election = LeaderElectionConfig(
        "solo", identity="me", lease_duration=3, renew_deadline=1, retry_period=0.2
    )
    async with AsyncClient(load_kubeconfig(server.kubeconfig)) as client:
        manager = Manager(client, leader_election=election)
        Builder(manager).for_(GroupVersionKind("", "v1", "ConfigMap")).complete(lambda request: None)
        running = asyncio.ensure_future(manager.run())
        deadline = time.monotonic() + 10
        while not (manager.elector and manager.elector.is_leader):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.to_thread(server.stop)  # renewals now fail
        try:
            await asyncio.wait_for(running, 15)
        except LeaderElectionLost:
            pass
        else:
            raise AssertionError("run() should end with LeaderElectionLost")
        assert manager.lost_leadership
