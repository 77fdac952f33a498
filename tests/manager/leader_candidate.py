"""A manager competing for a Lease (run as a subprocess by test_leader_election.py): while it
leads, its controller logs "<time> <identity>" for every reconcile of the ConfigMaps it watches."""

from __future__ import annotations

import asyncio
import sys
import time

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import Client
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import LeaderElectionLost, Manager


async def main(kubeconfig: str, namespace: str, identity: str, log_path: str) -> int:
    election = LeaderElectionConfig(
        "candidates",
        namespace=namespace,
        identity=identity,
        lease_duration=3,
        renew_deadline=2,
        retry_period=0.5,
    )
    async with Client(load_kubeconfig(kubeconfig)) as client:
        manager = Manager(client, namespace=namespace, leader_election=election)

        def reconcile(request: Request) -> Result:  # a plain function: it runs in a worker thread
            with open(log_path, "a") as log:
                log.write(f"{time.time():.3f} {identity}\n")
            return Result(requeue_after=0.1)

        Builder(manager).for_(GroupVersionKind("", "v1", "ConfigMap")).complete(reconcile)
        try:
            await manager.run()
        except LeaderElectionLost:
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:5])))
