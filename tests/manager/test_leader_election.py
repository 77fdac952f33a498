"""Leader election with three manager processes: one leads; SIGKILL it and another takes over
within LeaseDuration + RetryPeriod; never two act at once."""

from __future__ import annotations

import functools
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tests.conftest import Client, ServerThread

CANDIDATE = pathlib.Path(__file__).with_name("leader_candidate.py")
LEASE_DURATION = 3.0


def actors(log: pathlib.Path) -> list[tuple[float, str]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        stamp, identity = line.split()[:2]
        out.append((float(stamp), identity))
    return out


def fenced_starts(log: pathlib.Path) -> list[str]:
    """Reconciles that started after their process's lease had lapsed by its own clock."""
    return [line for line in log.read_text().splitlines() if line.endswith(" fenced")] if log.exists() else []


def micro_time(stamp: str) -> float:
    """A Lease's MicroTime (``2026-11-26T10:00:00.123456Z``) as seconds since the epoch."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def wait_until(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def start_candidates(
    kubeconfig: pathlib.Path, namespace: str, log: pathlib.Path, count: int, *mode: str
) -> dict[str, subprocess.Popen[str]]:
    """``count`` manager processes competing for the Lease "candidates" (leader_candidate.py)."""
    env = {**os.environ, "PYTHONPATH": str(CANDIDATE.parents[2])}
    return {
        f"candidate-{i}": subprocess.Popen(
            [sys.executable, str(CANDIDATE), str(kubeconfig), namespace, f"candidate-{i}", str(log), *mode],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=pathlib.Path(f"{log}.candidate-{i}.stderr").open("w"),  # a pipe nobody reads fills
            text=True,
        )
        for i in range(count)
    }


def stop_candidates(processes: dict[str, subprocess.Popen[str]]) -> None:
    for process in processes.values():
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            process.send_signal(signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def test_one_leader_and_takeover_after_sigkill(
    shared_server: ServerThread, api: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    api.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "work"}})
    log = tmp_path / "actions.log"
    processes = start_candidates(shared_server.kubeconfig, namespace, log, 3)
    try:
        wait_until(lambda: len(actors(log)) >= 5, timeout=30)
        (leader,) = {identity for _, identity in actors(log)}
        followers = set(processes) - {leader}
        # Each follower has read the lease and found the leader holding it, and the leader has
        # acted since: the others tried to lead meanwhile, and did not.
        observed = pathlib.Path(f"{log}.observed")
        wait_until(
            lambda: (
                observed.exists()
                and followers
                <= {
                    line.split()[0] for line in observed.read_text().splitlines() if line.split()[1] == leader
                }
            ),
            timeout=30,
        )
        acted = len(actors(log))
        wait_until(lambda: len(actors(log)) > acted, timeout=30)
        leaders = {identity for _, identity in actors(log)}
        assert len(leaders) == 1, leaders
        (leader,) = leaders
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/candidates"
        assert api.get(lease_path).json()["spec"]["holderIdentity"] == leader

        processes[leader].send_signal(signal.SIGKILL)
        processes[leader].wait(10)
        killed_at = time.time()
        last_renewal = api.get(lease_path).json()["spec"]["renewTime"]  # the dead leader's last

        def new_holder() -> bool:
            holder = api.get(lease_path).json()["spec"]["holderIdentity"]
            return holder != leader

        wait_until(new_holder, timeout=30)  # how soon is bench material; here: taken over at all
        taken = api.get(lease_path).json()["spec"]
        # Never before the lease lapsed: a follower takes over at least a lease duration after
        # the last renewal it saw (both times written by this machine's clock).
        assert micro_time(taken["acquireTime"]) >= micro_time(last_renewal) + LEASE_DURATION
        successor = taken["holderIdentity"]
        assert api.get(lease_path).json()["spec"]["leaseTransitions"] == 1
        wait_until(lambda: any(identity == successor for _, identity in actors(log)), timeout=10)

        # Never two at once: the old leader's actions all precede the kill, the successor's follow
        # it, and the third candidate never acted.
        timeline = actors(log)
        assert {identity for _, identity in timeline} == {leader, successor}
        assert all(stamp <= killed_at for stamp, identity in timeline if identity == leader)
        assert all(stamp >= killed_at for stamp, identity in timeline if identity == successor)
    finally:
        stop_candidates(processes)


async def test_a_leader_that_cannot_renew_stops() -> None:
    import asyncio

    from kubeloop.api.gvk import GroupVersionKind
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient as AsyncClient
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


def test_a_paused_leader_resumes_fenced_and_writes_nothing(
    shared_server: ServerThread, api: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    """SIGSTOP the leader past its lease: another takes over; once resumed, the old leader starts
    no reconcile and sends no write (its own monotonic clock tells it the lease may be gone),
    then notices it lost and exits."""
    import threading

    import orjson

    api.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "work"}})
    start_rv = api.get(f"/api/v1/namespaces/{namespace}/configmaps").json()["metadata"]["resourceVersion"]
    writes: list[tuple[int, str]] = []  # (resourceVersion, writer) in order, from a watch
    built: list[tuple[int, float]] = []  # (resourceVersion, when its writer built the patch)
    stop_watching = threading.Event()

    def watch() -> None:
        with api.session.get(
            f"{api.server.url}/api/v1/namespaces/{namespace}/configmaps",
            params={"watch": "1", "resourceVersion": start_rv, "timeoutSeconds": "60"},
            stream=True,
            timeout=70,
        ) as response:
            for line in response.iter_lines():
                if stop_watching.is_set():
                    return
                if line:
                    obj = orjson.loads(line)["object"]
                    annotations = obj["metadata"].get("annotations") or {}
                    if writer := annotations.get("writer"):
                        built_at = float(annotations.get("at", "inf"))
                        writes.append((int(obj["metadata"]["resourceVersion"]), writer))
                        built.append((int(obj["metadata"]["resourceVersion"]), built_at))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    log = tmp_path / "actions.log"
    processes = start_candidates(shared_server.kubeconfig, namespace, log, 2, "write")
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/candidates"
    try:
        wait_until(lambda: len(writes) >= 10, timeout=30)
        leader = writes[-1][1]
        (successor,) = set(processes) - {leader}
        processes[leader].send_signal(signal.SIGSTOP)
        wait_until(lambda: api.get(lease_path).json()["spec"]["holderIdentity"] == successor, timeout=30)
        # The successor keeps writing while the old leader is still stopped.
        wait_until(lambda: sum(writer == successor for _, writer in writes) >= 5, timeout=30)
        resumed_at = time.time()
        processes[leader].send_signal(signal.SIGCONT)
        # The old leader notices it lost (its renewal fails) and exits, as controller-runtime does.
        try:
            code = processes[leader].wait(20)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 3, (code, pathlib.Path(f"{log}.{leader}.stderr").read_text()[-3000:])
        # A marker written after the old leader exited: once the watch has shown it, it has shown
        # every write before it (events come in resourceVersion order).
        api.patch(
            f"/api/v1/namespaces/{namespace}/configmaps/work",
            {"metadata": {"annotations": {"writer": "marker"}}},
            "application/merge-patch+json",
        )
        wait_until(lambda: any(writer == "marker" for _, writer in writes), timeout=30)
        first_successor_write = min(rv for rv, writer in writes if writer == successor)
        stale = [(rv, writer) for rv, writer in writes if writer == leader and rv > first_successor_write]
        # The one write the pause may catch between the fence's last check and the socket (a few
        # instructions): built before the pause, it goes out as the process resumes. No write
        # built after resuming may land.
        built_at = dict(built)
        assert len(stale) <= 1, f"the old leader wrote after its successor took over: {stale[:5]}"
        assert all(built_at[rv] < resumed_at for rv, _ in stale), (stale, built_at, resumed_at)
        # The one worker's reconcile the pause caught mid-way may log after resuming — fenced,
        # when the pause fell between the controller's fence check and the reconcile's first
        # line. No other reconcile starts after resuming, and none anywhere starts fenced.
        # (Stamps have microseconds: at milliseconds, the caught reconcile, logged as the process
        # wakes, could round down to before resumed_at and pass for a fenced start while leading.)
        late = [stamp for stamp, who in actors(log) if who == leader and stamp >= resumed_at]
        assert len(late) <= 1, f"{len(late)} reconciles started after resuming"
        caught_by_the_pause = [f"{stamp:.6f} {leader} fenced" for stamp in late]
        unexpected = [line for line in fenced_starts(log) if line not in caught_by_the_pause]
        assert not unexpected, (unexpected, f"{leader} paused, resumed at {resumed_at:.6f}")
        assert any(writer == successor and rv > first_successor_write for rv, writer in writes)
    finally:
        stop_watching.set()
        stop_candidates(processes)


async def test_a_controller_that_needs_no_lease_runs_on_every_replica() -> None:
    """controller-runtime's NeedLeaderElection: false. Two managers compete for one Lease: the
    leader-only controller reconciles in the leader alone, the other in both — the follower's
    before any lease is held by it, and with its writes unfenced."""
    from kubeloop.api.gvk import GroupVersionKind
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient as AsyncClient
    from kubeloop.manager.builder import Builder
    from kubeloop.manager.leaderelection import LeaderElectionConfig
    from kubeloop.manager.manager import Manager
    from kubeloop.testing import eventually
    from tests.conftest import start_server

    config_map = GroupVersionKind("", "v1", "ConfigMap")
    server = start_server()
    seen: dict[tuple[str, str], set[str]] = {}

    def recorder(replica: str, controller: str) -> object:
        async def reconcile(request: object) -> None:
            seen.setdefault((replica, controller), set()).add(str(getattr(request, "name", "")))
            if controller == "everywhere":  # a write: refused if it were fenced on the follower
                await managers[replica].client.patch(
                    config_map, "shared", {"metadata": {"annotations": {f"seen-by-{replica}": "yes"}}},
                    namespace="default",
                )  # fmt: skip

        return reconcile

    managers: dict[str, Manager] = {}
    try:
        async with AsyncClient(load_kubeconfig(server.kubeconfig)) as client:
            await client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "shared", "namespace": "default"},
                }
            )
            for replica in ("first", "second"):
                election = LeaderElectionConfig(
                    "shared-lease", identity=replica, lease_duration=15, retry_period=0.2
                )
                manager = Manager(client, leader_election=election, namespace="default")
                Builder(manager).named("leader-only").for_(config_map).complete(
                    recorder(replica, "leader-only")
                )
                (Builder(manager).named("everywhere").for_(config_map).with_options(need_leader_election=False)
                 .complete(recorder(replica, "everywhere")))  # fmt: skip
                managers[replica] = manager
                await manager.start()
                if replica == "first":
                    await eventually(functools.partial(_leads, manager))

            async def reconciled_and_written() -> None:
                assert {("first", "leader-only"), ("first", "everywhere"), ("second", "everywhere")} <= set(
                    seen
                )
                found = await client.get(config_map, "shared", namespace="default")
                assert "seen-by-second" in (found["metadata"].get("annotations") or {})

            await eventually(reconciled_and_written)
            assert ("second", "leader-only") not in seen  # the follower runs no leader-only controller
            assert managers["second"].elector is not None and not managers["second"].elector.is_leader
    finally:
        for manager in managers.values():
            await manager.stop()
        server.stop()


def _leads(manager: object) -> None:
    elector = getattr(manager, "elector", None)
    assert elector is not None and elector.is_leader


async def test_a_leader_that_stops_releases_its_lease_to_the_next_at_once(
    shared_server: ServerThread, namespace: str
) -> None:
    """``release_on_cancel``: a leader stopped cleanly empties the Lease's holder once its
    controllers have stopped, and the next candidate takes over at its next try, long before
    the sixty-second lease would have run out (the Lease's own times say so: no clock in the
    test). A leader that stops without it leaves the lease to run out."""
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient as AsyncClient
    from kubeloop.manager.leaderelection import LEASE, LeaderElectionConfig
    from kubeloop.manager.manager import Manager
    from kubeloop.testing import eventually

    def election(identity: str, lease: str, release: bool) -> LeaderElectionConfig:
        return LeaderElectionConfig(lease, namespace=namespace, identity=identity, lease_duration=60,
                                    renew_deadline=40, retry_period=0.2, release_on_cancel=release)  # fmt: skip

    async def hand_over(client: AsyncClient, lease: str, release: bool) -> None:
        first = Manager(client, leader_election=election("first", lease, release))
        second = Manager(client, leader_election=election("second", lease, release))
        assert first.elector is not None and second.elector is not None
        leader, candidate = first.elector, second.elector
        await first.start()
        await eventually(lambda: leader.is_leader)
        await second.start()
        try:
            # The second has read the lease and found the first holding it.
            await eventually(lambda: candidate.observed_holder == "first")
            last = (await client.get(LEASE, lease, namespace=namespace))["spec"]["renewTime"]
            await first.stop()
            stopped = (await client.get(LEASE, lease, namespace=namespace))["spec"]
            if not release:
                assert stopped["holderIdentity"] == "first"  # the lease stays until it runs out
                assert not candidate.is_leader
                return
            assert "holderIdentity" not in stopped or stopped["holderIdentity"] == "second", stopped
            await eventually(lambda: candidate.is_leader)
            taken = (await client.get(LEASE, lease, namespace=namespace))["spec"]
            assert taken["holderIdentity"] == "second" and taken["leaseTransitions"] == 1
            assert micro_time(taken["acquireTime"]) < micro_time(last) + 60
        finally:
            await second.stop()

    async with AsyncClient(load_kubeconfig(shared_server.kubeconfig)) as client:
        await hand_over(client, "handover", release=True)
        await hand_over(client, "kept", release=False)


async def test_a_release_overtaken_by_a_late_renewal_reads_the_lease_again(
    shared_server: ServerThread, namespace: str
) -> None:
    """A renewal cancelled as the elector stopped may still reach the server after ``release``
    read the lease: the release's update then conflicts, and it reads the lease again (still
    held by this replica) and releases it, instead of leaving it to run out."""
    import asyncio

    from kubeloop.api import timestamps
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient as AsyncClient
    from kubeloop.manager.leaderelection import LEASE, LeaderElectionConfig, LeaderElector
    from kubeloop.testing import eventually

    class LateRenewal(AsyncClient):
        """A client whose first read of the lease is overtaken by a renewal in flight."""

        overtaken = False

        async def get(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            found = await super().get(*args, **kwargs)  # type: ignore[arg-type]
            if not self.overtaken:
                self.overtaken = True
                renewed = {**found, "spec": {**found["spec"], "renewTime": timestamps.now(micro=True)}}
                await self.update(renewed)
            return found

    config = LeaderElectionConfig("overtaken", namespace=namespace, identity="leader", lease_duration=60,
                                  renew_deadline=40, retry_period=0.2, release_on_cancel=True)  # fmt: skip
    async with LateRenewal(load_kubeconfig(shared_server.kubeconfig)) as client:
        elector = LeaderElector(client, config)
        client.overtaken = True  # acquiring reads as usual
        async def nothing() -> None:
            return None

        election = asyncio.create_task(elector.run(nothing, nothing))
        try:
            await eventually(lambda: elector.is_leader)
        finally:
            election.cancel()
            await asyncio.gather(election, return_exceptions=True)
        client.overtaken = False
        assert await elector.release()
        released = (await client.get(LEASE, "overtaken", namespace=namespace))["spec"]
        assert "holderIdentity" not in released and released["leaseDurationSeconds"] == 1


def test_leader_election_timings_are_checked_as_client_go_checks_them() -> None:
    import pytest

    from kubeloop.manager.leaderelection import LeaderElectionConfig

    refused = [
        ({"lease_duration": 10, "renew_deadline": 10}, "leaseDuration must be greater than renewDeadline"),
        ({"renew_deadline": 9, "retry_period": 7.5}, r"renewDeadline must be greater than retryPeriod\*JitterFactor\(1.2\)"),
        ({"lease_duration": 60, "renew_deadline": 10, "retry_period": 9}, r"retryPeriod\*JitterFactor"),  # 9 × 1.2 > 10
        ({"retry_period": 0}, "retryPeriod must be greater than zero"),
        ({"identity": ""}, "Lock identity is empty"),
    ]
    for timings, message in refused:
        with pytest.raises(ValueError, match=message):
            LeaderElectionConfig("lease", **timings)
    LeaderElectionConfig("lease", lease_duration=60, renew_deadline=11, retry_period=9)  # 11 > 10.8: room enough


async def test_the_lease_carries_its_labels_and_lives_where_its_client_points() -> None:
    """controller-runtime's LeaderElectionLabels and LeaderElectionConfig (a rest.Config of its
    own): the Lease is made with the labels, through the election's client (another server
    here), and the manager's own cluster holds none."""
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient as AsyncClient
    from kubeloop.manager.leaderelection import LEASE, LeaderElectionConfig
    from kubeloop.manager.manager import Manager
    from kubeloop.testing import eventually
    from tests.conftest import start_server

    workloads, elections = start_server(), start_server()
    try:
        async with (
            AsyncClient(load_kubeconfig(workloads.kubeconfig)) as client,
            AsyncClient(load_kubeconfig(elections.kubeconfig)) as election_client,
        ):
            election = LeaderElectionConfig("elsewhere", identity="me", retry_period=0.2, labels={"team": "platform"})
            manager = Manager(client, leader_election=election, leader_election_client=election_client)
            assert manager.elector is not None
            leader = manager.elector
            async with manager:
                await eventually(lambda: leader.is_leader)
                lease = await election_client.get(LEASE, "elsewhere", namespace="default")
                assert lease["metadata"]["labels"] == {"team": "platform"} and lease["spec"]["holderIdentity"] == "me"
                assert not (await client.list(LEASE, namespace="default")).items
    finally:
        workloads.stop()
        elections.stop()


async def test_a_leader_renews_as_it_wrote_and_reads_again_only_when_that_fails(
    shared_server: ServerThread, namespace: str
) -> None:
    """client-go's fast path: a leader renews the Lease as it last wrote it (one update, no read);
    once someone else has written it (a label, here), that update conflicts, the leader reads it
    again (the slow path, counted: leader_election_slowpath_total) and keeps leading."""
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient as AsyncClient
    from kubeloop.manager.leaderelection import LEASE, LeaderElectionConfig
    from kubeloop.manager.manager import Manager
    from kubeloop.testing import eventually

    async with AsyncClient(load_kubeconfig(shared_server.kubeconfig)) as client:
        manager = Manager(client, leader_election=LeaderElectionConfig("fast", namespace=namespace, retry_period=0.1))
        assert manager.elector is not None
        leader = manager.elector
        async with manager:
            await eventually(lambda: leader.is_leader)
            first = (await client.get(LEASE, "fast", namespace=namespace))["metadata"]["resourceVersion"]
            await eventually(lambda: _renewed_since(client, namespace, first), timeout=5)
            assert leader.slow_path == 0  # renewed, never read first
            await client.patch(LEASE, "fast", {"metadata": {"labels": {"touched": "yes"}}}, namespace=namespace)
            await eventually(lambda: leader.slow_path == 1)
            touched = (await client.get(LEASE, "fast", namespace=namespace))["metadata"]
            await eventually(lambda: _renewed_since(client, namespace, touched["resourceVersion"]), timeout=5)
            assert leader.is_leader and leader.slow_path == 1  # back on the fast path


async def _renewed_since(client: object, namespace: str, version: str) -> bool:
    from kubeloop.manager.leaderelection import LEASE

    lease = await client.get(LEASE, "fast", namespace=namespace)  # type: ignore[attr-defined]
    return int(lease["metadata"]["resourceVersion"]) > int(version)
