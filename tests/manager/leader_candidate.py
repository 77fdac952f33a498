"""A manager competing for a Lease (run as a subprocess by test_leader_election.py): while it
leads, its controller logs "<time> <identity>" for every reconcile of the ConfigMaps it watches.
With a fifth argument ``write``, each reconcile also patches the ConfigMap with its identity.
Whoever it finds holding the lease, each time that changes, it logs to ``<log>.observed`` as
"<identity> <holder>"."""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys
import time

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import LeaderElectionLost, Manager

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def append(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line)


async def main(kubeconfig: str, namespace: str, identity: str, log_path: str, mode: str = "") -> int:
    election = LeaderElectionConfig(
        "candidates",
        namespace=namespace,
        identity=identity,
        lease_duration=3,
        renew_deadline=2,
        retry_period=0.5,
    )
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        manager = Manager(client, namespace=namespace, leader_election=election)

        def log_action() -> None:
            # "<time> <identity>", and " fenced" when the lease had already lapsed by this
            # process's own clock as the reconcile started (which must never happen).
            fenced = manager.fence is not None and not manager.fence.writes_allowed()
            with open(log_path, "a") as log:
                log.write(f"{time.time():.6f} {identity}{' fenced' if fenced else ''}\n")

        def reconcile(request: Request) -> Result:  # a plain function: it runs in a worker thread
            log_action()
            return Result(requeue_after=0.1)

        async def reconcile_and_write(request: Request) -> Result:
            log_action()  # when the reconcile starts
            patch = {"metadata": {"annotations": {"writer": identity, "at": f"{time.time():.6f}"}}}
            await client.patch(CONFIGMAP, request.name, patch, namespace=request.namespace)
            return Result(requeue_after=0.05)

        async def report_holders(stop: asyncio.Event) -> None:
            reported = None
            while not stop.is_set():
                holder = manager.elector.observed_holder if manager.elector is not None else None
                if holder is not None and holder != reported:
                    await asyncio.to_thread(append, log_path + ".observed", f"{identity} {holder}\n")
                    reported = holder
                await asyncio.sleep(0.02)

        manager.add(report_holders, need_leader_election=False)
        Builder(manager).for_(CONFIGMAP).complete(reconcile_and_write if mode == "write" else reconcile)
        try:
            await manager.run()
        except LeaderElectionLost:
            return 3
    return 0


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sys.exit(asyncio.run(main(*sys.argv[1:6])))
