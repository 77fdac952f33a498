"""Leader election on a coordination.k8s.io/v1 Lease (client-go ``leaderelection``).

Candidates try to acquire the Lease every ``retry_period``; the holder renews it on the same
period. A candidate takes a Lease over only when its holder has not renewed it for
``lease_duration`` — measured on the candidate's own clock from when it last saw the record
change, so clocks need not agree. A leader that cannot renew within ``renew_deadline`` has lost:
``on_stopped_leading`` runs (the manager ends the process, as controller-runtime does). Every
write is an update at the read resourceVersion, so two candidates never both win one round.
Defaults are controller-runtime's: 15 s, 10 s, 2 s; identity ``hostname_uuid``. A leader renews
the Lease as it last wrote it (client-go's fast path: one update, its resourceVersion the proof
that nobody wrote since), and reads it first only when that fails (``slow_path`` counts those
renewals: ``leader_election_slowpath_total``).

With ``release_on_cancel`` (controller-runtime's ``LeaderElectionReleaseOnCancel``), a leader
that stops cleanly empties the Lease's holder once its controllers have stopped, so the next
candidate takes over at its next try rather than a lease duration later. A leader that is paused,
killed or cut off releases nothing: the others wait the lease out, as before.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop import errors, jitter, kinds
from kubeloop.api import timestamps
from kubeloop.client.rest import APIClient
from kubeloop.client.restclient import REQUEST_ERRORS

#: How many times a release that conflicts reads the lease again and tries once more.
RELEASE_ATTEMPTS = 3

log = logging.getLogger("kubeloop.leaderelection")

LEASE = kinds.Lease
#: A candidate's tries to acquire wait ``retry_period`` and up to this factor more (client-go's).
JITTER_FACTOR = 1.2


def default_identity() -> str:
    """This process's identity in a Lease: the host name and a random suffix."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Leader election on a coordination.k8s.io/v1 Lease (the manager's ``leader_election``).

    Only the replica holding the Lease runs the controllers; the others keep their caches warm
    and take over when the holder stops renewing. The durations are client-go's defaults.
    """

    #: The Lease's name (kubebuilder's ``--leader-election-id``).
    lease_name: str
    #: The Lease's namespace.
    namespace: str = "default"
    #: This replica's name in the Lease (default: the host name and a random suffix).
    identity: str = field(default_factory=default_identity)
    #: Seconds a Lease not renewed stays with its holder before others may take it.
    lease_duration: float = 15.0
    #: Seconds the holder keeps trying to renew before it gives up leading.
    renew_deadline: float = 10.0
    #: Seconds between tries to acquire or renew.
    retry_period: float = 2.0
    #: Empty the Lease's holder when the manager stops cleanly (after its controllers have
    #: stopped): safe only when the process ends with the manager, as ``kubeloop run`` does.
    release_on_cancel: bool = False
    #: Labels the Lease carries (controller-runtime's ``LeaderElectionLabels``).
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """client-go's checks (``NewLeaderElector``), in its words: a renewal must fit in the
        renew deadline after a jittered retry, and the deadline inside the lease."""
        if not self.lease_name:
            raise ValueError("leader election requires a lease name")
        if not self.identity:
            raise ValueError("Lock identity is empty")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renewDeadline must be greater than retryPeriod*JitterFactor({JITTER_FACTOR})")
        for name, value in (
            ("leaseDuration", self.lease_duration),
            ("renewDeadline", self.renew_deadline),
            ("retryPeriod", self.retry_period),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be greater than zero")


class LeaderElector:
    """Acquires and renews a Lease (client-go's ``leaderelection.LeaderElector``): tries every
    ``retry_period`` until it holds the lease, renews it within ``renew_deadline``, and counts
    as leader by its own monotonic clock only while a renewal is that recent."""

    def __init__(self, client: APIClient, config: LeaderElectionConfig) -> None:
        self.client = client
        self.config = config
        self.is_leader = False
        #: Monotonic time at which the last successful acquire or renew was *sent*: the lease is
        #: ours, by our own clock, until ``renew_deadline`` after it (see :meth:`lease_held`).
        self.renewed_at: float | None = None
        #: Set once leadership is lost: the fence stays shut for good.
        self.lost = False
        #: Set once ``run`` has ended (lost, or cancelled when the manager stops).
        self.stopped = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        #: The Lease as this replica last wrote it: a leader renews it as it is (client-go's fast
        #: path, one request), reading it again only when that fails.
        self._written: dict[str, Any] | None = None
        #: Renewals that needed the lease read first (leader_election_slowpath_total).
        self.slow_path = 0

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
    ) -> None:
        """Acquire, call ``on_started_leading``, renew until that fails, call ``on_stopped_leading``."""
        try:
            await self._run(on_started_leading, on_stopped_leading)
        finally:
            # Stopped (the manager shuts down) or lost: the lease is no longer renewed, so a fence
            # waiting for a renewal must stop waiting (writes stay allowed until it lapses).
            self.stopped = True

    async def _run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
    ) -> None:
        while True:
            sent = time.monotonic()
            if await self._try_acquire_or_renew():
                self.renewed_at = sent
                break
            # Jittered, as client-go's: candidates that started together do not try in step.
            await asyncio.sleep(self.config.retry_period * (1 + jitter.uniform(0, JITTER_FACTOR)))
        self.is_leader = True
        log.info("%s: became the leader of lease %s", self.config.identity, self.config.lease_name)
        await on_started_leading()
        while True:
            await asyncio.sleep(self.config.retry_period)
            sent = time.monotonic()
            if await self._try_acquire_or_renew():
                self.renewed_at = sent
            elif not self.lease_held():
                self.is_leader = False
                self.lost = True
                log.error("%s: lost lease %s", self.config.identity, self.config.lease_name)
                await on_stopped_leading()
                return

    @property
    def observed_holder(self) -> str | None:
        """Who held the lease when this replica last read it (None: not read yet)."""
        return self._observed[0] if self._observed is not None else None

    def lease_held(self) -> bool:
        """Whether this replica leads by its own monotonic clock: it is the leader and its last
        successful renewal was sent less than ``renew_deadline`` ago. A process paused past that
        (SIGSTOP, a suspended VM) finds it false the moment it resumes, before it learns anything
        from the server."""
        return (
            self.is_leader
            and self.renewed_at is not None
            and time.monotonic() - self.renewed_at < self.config.renew_deadline
        )

    async def _try_acquire_or_renew(self) -> bool:
        """One attempt, bounded by ``renew_deadline`` (the client's own retries included)."""
        try:
            async with asyncio.timeout(self.config.renew_deadline):  # never swallows a cancellation
                return await self._attempt()
        except TimeoutError:
            log.debug("lease attempt timed out")
            return False

    async def _attempt(self) -> bool:
        config = self.config
        now = timestamps.now(micro=True)
        renewable = self.is_leader and self._written is not None and self.lease_held()
        if renewable and await self._renew_as_written(now):  # else read, the slow path
            return True
        try:
            lease = await self.client.get(LEASE, config.lease_name, namespace=config.namespace)
        except errors.NotFound:
            try:
                metadata: dict[str, Any] = {"name": config.lease_name, "namespace": config.namespace}
                if config.labels:
                    metadata["labels"] = dict(config.labels)
                self._written = await self.client.create(
                    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                     "spec": self._spec(now, now, 0)}
                )  # fmt: skip
            except REQUEST_ERRORS as exc:
                log.debug("creating lease failed: %s", exc)
                return False
            return True
        except REQUEST_ERRORS as exc:
            log.debug("reading lease failed: %s", exc)
            return False
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed = record
            self._observed_at = time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or config.lease_duration)
        held_by_other = holder not in ("", config.identity)
        if held_by_other and time.monotonic() - self._observed_at < duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire_time = spec.get("acquireTime") or now
        if holder != config.identity:  # a new leader (after a lapse, or a release): one more
            transitions += 1
            acquire_time = now
        elif self.is_leader:
            self.slow_path += 1
        lease["spec"] = self._spec(str(acquire_time), now, transitions)
        if config.labels:  # kept on a Lease another made, or made before they were asked for
            lease["metadata"]["labels"] = {**(lease["metadata"].get("labels") or {}), **config.labels}
        try:
            self._written = await self.client.update(lease)
        except REQUEST_ERRORS as exc:
            log.debug("updating lease failed: %s", exc)
            return False
        self._observed = (config.identity, now)
        self._observed_at = time.monotonic()
        return True

    async def _renew_as_written(self, now: str) -> bool:
        """The fast path: update the Lease as this leader last wrote it (its resourceVersion
        proves nobody else wrote since); False when that fails (then it is read again)."""
        assert self._written is not None
        lease = copy.deepcopy(self._written)
        spec = lease.get("spec") or {}
        lease["spec"] = self._spec(str(spec.get("acquireTime") or now), now, int(spec.get("leaseTransitions") or 0))
        try:
            self._written = await self.client.update(lease)
        except REQUEST_ERRORS as exc:
            log.debug("renewing the lease as written failed (%s): reading it again", exc)
            self._written = None
            return False
        self._observed = (self.config.identity, now)
        self._observed_at = time.monotonic()
        return True

    async def release(self) -> bool:
        """Give the lease up, if this replica still holds it: its holder emptied, its duration one
        second (client-go's ``release``). Whether it was released; a failure is logged (the lease
        then runs out as it would have).

        A conflict is tried again with the lease read anew, while this replica still holds it: a
        renewal cancelled as the elector stopped may still reach the server after the read."""
        if not self.lease_held():
            return False
        config = self.config
        try:
            async with asyncio.timeout(config.renew_deadline):
                for attempt in range(RELEASE_ATTEMPTS):
                    lease = await self.client.get(LEASE, config.lease_name, namespace=config.namespace)
                    spec: dict[str, Any] = lease.get("spec") or {}
                    if spec.get("holderIdentity") != config.identity:
                        return False
                    now = timestamps.now(micro=True)
                    lease["spec"] = {
                        "leaseDurationSeconds": 1,
                        "acquireTime": now,
                        "renewTime": now,
                        "leaseTransitions": int(spec.get("leaseTransitions") or 0),
                    }
                    try:
                        await self.client.update(lease)
                        break
                    except errors.Conflict:
                        if attempt == RELEASE_ATTEMPTS - 1:
                            raise
        except (*REQUEST_ERRORS, TimeoutError) as exc:
            log.warning("%s: could not release lease %s: %s", config.identity, config.lease_name, exc)
            return False
        self.is_leader = False
        log.info("%s: released lease %s", config.identity, config.lease_name)
        return True

    def _spec(self, acquire_time: str, renew_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.config.identity,
            # Rounded up: a follower must never take over before this leader's fence has shut.
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }


class LeaderFence:
    """The write fence of a leader (see :mod:`kubeloop.client.fence`): open while
    :meth:`LeaderElector.lease_held`, shut for good once leadership is lost."""

    def __init__(self, elector: LeaderElector, *, poll_interval: float = 0.05) -> None:
        self.elector = elector
        self._poll = poll_interval

    def writes_allowed(self) -> bool:
        """Whether the lease is held, as this process's clock tells."""
        return self.elector.lease_held()

    def describe(self) -> str:
        """Why writes are held back: the lease is not held, or its last renewal is too old."""
        elector = self.elector
        if elector.lost or not elector.is_leader:
            return f"{elector.config.identity} does not hold lease {elector.config.lease_name}"
        since = time.monotonic() - (elector.renewed_at or 0.0)
        return (
            f"lease {elector.config.lease_name} was last renewed {since:.1f}s ago, past the "
            f"{elector.config.renew_deadline:g}s renew deadline: another replica may lead now"
        )

    async def wait_until_allowed(self) -> bool:
        """Wait until writes are allowed (True), or until leadership is lost (False)."""
        while not self.writes_allowed():
            if self.elector.lost or self.elector.stopped:
                return False
            await asyncio.sleep(self._poll)
        return True
