"""Kind constants: the ``GroupVersionKind`` of every built-in kind, by its name::

    from kubeloop import kinds
    Builder(manager).for_(kinds.ConfigMap).owns(kinds.Deployment).complete(reconcile)

A constant is usable wherever a kind is (reads answer dicts); the model classes of
``kubeloop.models`` are usable there too (reads answer models) and carry the same GVK in
``__gvk__``. Custom resources declare their own.
"""

from __future__ import annotations

from kubeloop.api.gvk import GroupVersionKind

# core/v1
Binding = GroupVersionKind("", "v1", "Binding")
ConfigMap = GroupVersionKind("", "v1", "ConfigMap")
Endpoints = GroupVersionKind("", "v1", "Endpoints")
Event = GroupVersionKind("", "v1", "Event")
LimitRange = GroupVersionKind("", "v1", "LimitRange")
Namespace = GroupVersionKind("", "v1", "Namespace")
Node = GroupVersionKind("", "v1", "Node")
PersistentVolume = GroupVersionKind("", "v1", "PersistentVolume")
PersistentVolumeClaim = GroupVersionKind("", "v1", "PersistentVolumeClaim")
Pod = GroupVersionKind("", "v1", "Pod")
PodTemplate = GroupVersionKind("", "v1", "PodTemplate")
ReplicationController = GroupVersionKind("", "v1", "ReplicationController")
ResourceQuota = GroupVersionKind("", "v1", "ResourceQuota")
Secret = GroupVersionKind("", "v1", "Secret")
Service = GroupVersionKind("", "v1", "Service")
ServiceAccount = GroupVersionKind("", "v1", "ServiceAccount")

# apps/v1
ControllerRevision = GroupVersionKind("apps", "v1", "ControllerRevision")
DaemonSet = GroupVersionKind("apps", "v1", "DaemonSet")
Deployment = GroupVersionKind("apps", "v1", "Deployment")
ReplicaSet = GroupVersionKind("apps", "v1", "ReplicaSet")
StatefulSet = GroupVersionKind("apps", "v1", "StatefulSet")

# batch/v1
CronJob = GroupVersionKind("batch", "v1", "CronJob")
Job = GroupVersionKind("batch", "v1", "Job")

# coordination.k8s.io/v1
Lease = GroupVersionKind("coordination.k8s.io", "v1", "Lease")

# rbac.authorization.k8s.io/v1
ClusterRole = GroupVersionKind("rbac.authorization.k8s.io", "v1", "ClusterRole")
ClusterRoleBinding = GroupVersionKind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
Role = GroupVersionKind("rbac.authorization.k8s.io", "v1", "Role")
RoleBinding = GroupVersionKind("rbac.authorization.k8s.io", "v1", "RoleBinding")

# discovery.k8s.io/v1
EndpointSlice = GroupVersionKind("discovery.k8s.io", "v1", "EndpointSlice")

# networking.k8s.io/v1
Ingress = GroupVersionKind("networking.k8s.io", "v1", "Ingress")
IngressClass = GroupVersionKind("networking.k8s.io", "v1", "IngressClass")
NetworkPolicy = GroupVersionKind("networking.k8s.io", "v1", "NetworkPolicy")

# policy/v1
PodDisruptionBudget = GroupVersionKind("policy", "v1", "PodDisruptionBudget")
