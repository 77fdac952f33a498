"""The embedded cluster's control loops: what kube-controller-manager does for a real cluster.

The garbage collector, namespace deletion and defaults, disruption budgets, ClusterRole
aggregation, finished Jobs' TTLs and the workload controllers (Deployments, ReplicaSets,
StatefulSets, DaemonSets, Jobs, CronJobs, Endpoints), written with kubeloop's public runtime (a
``Manager``, its informers and client, work queues) and talking to the server over HTTPS like any
other client, with an identity of its own. They never reach into the server (an import contract
holds them to it), so they are also examples of the runtime and a steady test of it.
``ControllerManager`` builds the manager, with the node's kubelet (:mod:`kubeloop.node`) when
workloads are simulated, and owns the loops' lifetime.
"""

#: Who the controllers are to the server (kube-controller-manager's user): here, so that a server
#: that runs none names it without loading them.
USER = "system:kube-controller-manager"
