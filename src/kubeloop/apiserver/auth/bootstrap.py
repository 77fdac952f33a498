"""The roles and bindings a cluster starts with (upstream's bootstrap policy, in its shape).

``cluster-admin`` may do everything and is bound to ``system:masters``. ``admin``, ``edit`` and
``view`` aggregate the ``system:aggregate-to-*`` roles (labels ``rbac.authorization.k8s.io/
aggregate-to-*``), so a CRD's own roles can join them as upstream's do. Every authenticated user
may read discovery and OpenAPI (``system:discovery``), ask what it may do and who it is
(``system:basic-user``) and read health and version (``system:public-info-viewer``). The
embedded control loops run as ``system:kube-controller-manager``; its role allows them every
kind, the garbage collector's reach (upstream splits it among one account per controller).
"""

from __future__ import annotations

from typing import Any

from kubeloop.api.clusterroles import aggregated_rules, aggregation_selectors
from kubeloop.api.object import Obj

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
BOOTSTRAPPING = {"kubernetes.io/bootstrapping": "rbac-defaults"}
CONTROLLER_MANAGER = "system:kube-controller-manager"


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _cluster_role(name: str, rules: list[Obj], *, labels: dict[str, str] | None = None, **extra: Any) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {**BOOTSTRAPPING, **(labels or {})},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
        **extra,
    }


def _aggregating(name: str, *, labels: dict[str, str] | None = None) -> Obj:
    selector = {"matchLabels": {f"{AGGREGATE}{name}": "true"}}
    return _cluster_role(name, [], labels=labels, aggregationRule={"clusterRoleSelectors": [selector]})


def _binding(name: str, role: str, subjects: list[Obj]) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": dict(BOOTSTRAPPING),
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    }


def _group(name: str) -> Obj:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name}


VIEW_RULES = [
    _rule(
        [""],
        [
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
        ],
        READ,
    ),
    _rule(
        [""],
        [
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
        READ,
    ),
    _rule([""], ["namespaces"], READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], READ),
    _rule(
        ["apps"],
        [
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], READ),
]

EDIT_RULES = [
    _rule(
        [""],
        ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"],
        READ,
    ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        [""],
        [
            "configmaps",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
        WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
        WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
    _rule(["coordination.k8s.io"], ["leases"], [*READ, *WRITE]),
]

ADMIN_RULES = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule(["rbac.authorization.k8s.io"], ["rolebindings", "roles"], [*READ, *WRITE]),
]


def cluster_roles() -> list[Obj]:
    everything = [
        _rule(["*"], ["*"], ["*"]),
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ]
    roles = [
        _cluster_role("cluster-admin", everything),
        _aggregating("admin"),
        _aggregating("edit", labels={f"{AGGREGATE}admin": "true"}),
        _aggregating("view", labels={f"{AGGREGATE}edit": "true"}),
        _cluster_role("system:aggregate-to-admin", ADMIN_RULES, labels={f"{AGGREGATE}admin": "true"}),
        _cluster_role(
            "system:aggregate-to-edit",
            EDIT_RULES,
            labels={f"{AGGREGATE}admin": "true", f"{AGGREGATE}edit": "true"},
        ),
        _cluster_role(
            "system:aggregate-to-view",
            VIEW_RULES,
            labels={f"{AGGREGATE}admin": "true", f"{AGGREGATE}edit": "true", f"{AGGREGATE}view": "true"},
        ),
        _cluster_role(
            "system:discovery",
            [
                {
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                _rule(
                    ["authorization.k8s.io"],
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ["create"],
                ),
                _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
            ],
        ),
        _cluster_role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(CONTROLLER_MANAGER, everything),
    ]
    # Stored as the aggregation controller leaves them (view within edit within admin), so they
    # grant what they should from the first request, controllers or not.
    for _ in range(3):
        for role in roles:
            if aggregation_selectors(role):
                role["rules"] = aggregated_rules(role, roles)
    return roles


def cluster_role_bindings() -> list[Obj]:
    authenticated = [_group("system:authenticated")]
    return [
        _binding("cluster-admin", "cluster-admin", [_group("system:masters")]),
        _binding("system:discovery", "system:discovery", authenticated),
        _binding("system:basic-user", "system:basic-user", authenticated),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            [*authenticated, _group("system:unauthenticated")],
        ),
        _binding(
            CONTROLLER_MANAGER,
            CONTROLLER_MANAGER,
            [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CONTROLLER_MANAGER}],
        ),
    ]


def priority_classes() -> list[Obj]:
    """The two PriorityClasses kube-apiserver creates for the cluster's own pods."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": description,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        for name, value, description in (
            (
                "system-node-critical",
                2000001000,
                "Used for system critical pods that must not be moved from their current node.",
            ),
            (
                "system-cluster-critical",
                2000000000,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
            ),
        )
    ]
