"""``ControllerManager``: the embedded server's kube-controller-manager.

It is an ordinary kubeloop ``Manager`` whose client reaches the server with an identity of its
own (``system:kube-controller-manager``), running the cluster's control loops. The server hands
it connections that never leave the process (``dial``: kube-apiserver's loopback client), so it
makes no TLS handshake; a manager given only a URL reaches the server over the network.
"""

from __future__ import annotations

import logging

from kubeloop.client.config import ClientConfig, Dial
from kubeloop.client.credentials import Credentials, StaticCredentials
from kubeloop.client.rest import APIClient
from kubeloop.controllermanager.clusterroleaggregation import ClusterRoleAggregation
from kubeloop.controllermanager.cronjobs import CronJobController
from kubeloop.controllermanager.daemonsets import DaemonSetController
from kubeloop.controllermanager.deployments import DeploymentController
from kubeloop.controllermanager.disruption import DisruptionController
from kubeloop.controllermanager.endpoints import EndpointsController
from kubeloop.controllermanager.garbagecollector import GarbageCollector
from kubeloop.controllermanager.jobs import JobController
from kubeloop.controllermanager.namespace import NamespaceController
from kubeloop.controllermanager.namespacedefaults import NamespaceDefaults
from kubeloop.controllermanager.replicasets import ReplicaSetController, ReplicationControllerController
from kubeloop.controllermanager.statefulsets import StatefulSetController
from kubeloop.controllermanager.ttlafterfinished import TTLAfterFinishedController
from kubeloop.manager.manager import Manager
from kubeloop.node.kubelet import SimulatedKubelet
from kubeloop.node.simulation import SimulationOptions

#: Who the controllers are to the server.


#: Where the cluster's own control loops log their reconciles: kept out of an operator's -v.
RECONCILE_LOGGER = "kubeloop.controllermanager.reconcile"


class ControllerManager:
    """Starts the control loops against the server at ``url`` (``ca_pem`` verifies it, None
    over plain HTTP; ``dial``: how to connect instead of over TCP to ``url``'s port, where the
    node's pods still reach the server; ``root_ca_pem`` is the CA every namespace's
    ``kube-root-ca.crt`` publishes, None: namespaces get no defaults);
    ``stop`` ends them. The garbage collector, the namespace, disruption, ClusterRole
    aggregation and TTL-after-finished controllers always run; with ``simulation``, workloads are simulated too: a node
    and its kubelet, the Job, CronJob, ReplicaSet, ReplicationController, Deployment, StatefulSet
    and DaemonSet controllers, and Services' endpoints."""

    def __init__(
        self,
        url: str,
        *,
        ca_pem: bytes | None,
        token: str,
        root_ca_pem: bytes | None,
        simulation: SimulationOptions | None = None,
        dial: Dial | None = None,
    ) -> None:
        config = ClientConfig(
            server=url,
            ca_pem=ca_pem,
            credentials=StaticCredentials(Credentials(token=token)),
            user_agent="kube-controller-manager (kubeloop)",
            dial=dial,
        )
        self.client = APIClient(config)
        self.manager = Manager(
            self.client,
            graceful_shutdown_timeout=5.0,
            logger=logging.getLogger("kubeloop.controllermanager"),
            reconcile_logger=logging.getLogger(RECONCILE_LOGGER),
        )
        self.garbage_collector = GarbageCollector(self.manager)
        self.manager.add(self.garbage_collector.run, name="garbage-collector", need_leader_election=False)
        self.namespaces = NamespaceController(self.manager)
        self.disruption = DisruptionController(self.manager)
        self.role_aggregation = ClusterRoleAggregation(self.manager)
        self.ttl_after_finished = TTLAfterFinishedController(self.manager)
        self.namespace_defaults: NamespaceDefaults | None = None
        if root_ca_pem is not None:
            self.namespace_defaults = NamespaceDefaults(self.manager, root_ca_pem=root_ca_pem)
        self.kubelet: SimulatedKubelet | None = None
        self.jobs: JobController | None = None
        self.replica_sets: ReplicaSetController | None = None
        self.replication_controllers: ReplicationControllerController | None = None
        self.deployments: DeploymentController | None = None
        self.stateful_sets: StatefulSetController | None = None
        self.daemon_sets: DaemonSetController | None = None
        self.endpoints: EndpointsController | None = None
        self.cron_jobs: CronJobController | None = None
        if simulation is not None:
            self.kubelet = SimulatedKubelet(self.manager, simulation)
            self.jobs = JobController(self.manager)
            self.replica_sets = ReplicaSetController(self.manager)
            self.replication_controllers = ReplicationControllerController(self.manager)
            self.deployments = DeploymentController(self.manager)
            self.stateful_sets = StatefulSetController(self.manager)
            self.daemon_sets = DaemonSetController(self.manager)
            self.endpoints = EndpointsController(self.manager)
            self.cron_jobs = CronJobController(self.manager)

    def busy(self) -> list[str]:
        """What the control loops have left to do now (empty: idle): the manager's controllers and
        events, and the garbage collector's queues."""
        return [*self.manager.busy(), *self.garbage_collector.busy()]

    async def start(self) -> None:
        await self.manager.start()

    async def stop(self) -> None:
        try:
            await self.manager.stop()
        finally:
            await self.client.close()
