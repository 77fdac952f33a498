"""Reading Kubernetes for an agent, as the pod's ServiceAccount (what RBAC grants that account is
all it can read): the work behind ``mcp-kubernetes``'s tools and the runner's own Kubernetes
tools. Kinds are named as kubectl takes them (``pods``, ``pod``, ``po``, ``Deployment``...)
among the common built-in kinds; Secrets are never read. Answers are text for a model: a list
is a line per object with its phase or readiness, an object is JSON without managedFields.
What the API server refuses is a :class:`ReadRefused` in the server's words."""

from __future__ import annotations

import json

import kubeloop


class ReadRefused(Exception):
    """The read cannot be done (an unknown kind, a Secret, the API server's refusal)."""


#: The kinds read: (group, version, kind) by every name kubectl takes for them.
KINDS: dict[str, tuple[str, str, str]] = {}
for _group, _version, _kind, _names in (
    ("", "v1", "Pod", ("pods", "pod", "po")),
    ("", "v1", "Service", ("services", "service", "svc")),
    ("", "v1", "ConfigMap", ("configmaps", "configmap", "cm")),
    ("", "v1", "Event", ("events", "event", "ev")),
    ("", "v1", "Namespace", ("namespaces", "namespace", "ns")),
    ("", "v1", "Node", ("nodes", "node", "no")),
    ("", "v1", "ServiceAccount", ("serviceaccounts", "serviceaccount", "sa")),
    ("", "v1", "PersistentVolumeClaim", ("persistentvolumeclaims", "persistentvolumeclaim", "pvc")),
    ("apps", "v1", "Deployment", ("deployments", "deployment", "deploy")),
    ("apps", "v1", "ReplicaSet", ("replicasets", "replicaset", "rs")),
    ("apps", "v1", "StatefulSet", ("statefulsets", "statefulset", "sts")),
    ("apps", "v1", "DaemonSet", ("daemonsets", "daemonset", "ds")),
    ("batch", "v1", "Job", ("jobs", "job")),
    ("batch", "v1", "CronJob", ("cronjobs", "cronjob", "cj")),
):
    for _name in (*_names, _kind.lower()):
        KINDS[_name] = (_group, _version, _kind)
_SECRETS = {"secret", "secrets"}


def kind_of(name: str) -> kubeloop.GroupVersionKind:
    wanted = name.strip().lower()
    if wanted in _SECRETS:
        raise ReadRefused("Secrets are not read")
    found = KINDS.get(wanted)
    if found is None:
        raise ReadRefused(f"unknown kind {name!r}: one of {', '.join(sorted({k[2] for k in KINDS.values()}))}")
    return kubeloop.GroupVersionKind(*found)


def _summary(obj: kubeloop.Obj) -> str:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    line = str(meta.get("name"))
    if status.get("phase"):
        line += f" ({status['phase']})"
    elif "replicas" in (obj.get("spec") or {}):
        line += f" ({status.get('readyReplicas', 0)}/{obj['spec']['replicas']} ready)"
    return line


async def list_objects(client: kubeloop.APIClient, kind: str, namespace: str = "") -> str:
    try:
        found = await client.list(kind_of(kind), namespace=namespace or None)
    except kubeloop.errors.APIError as refused:
        raise ReadRefused(f"the API server answered {refused.code}: {refused}") from None
    return "\n".join(_summary(obj) for obj in found.items) or f"no {kind} in {namespace or 'the cluster'}"


async def get_object(client: kubeloop.APIClient, kind: str, name: str, namespace: str = "") -> str:
    try:
        obj = await client.get(kind_of(kind), name, namespace=namespace or None)
    except kubeloop.errors.APIError as refused:
        raise ReadRefused(f"the API server answered {refused.code}: {refused}") from None
    obj.get("metadata", {}).pop("managedFields", None)
    return json.dumps(obj, indent=1, sort_keys=True)


async def namespace_events(client: kubeloop.APIClient, namespace: str, limit: int = 20) -> str:
    try:
        found = await client.list(kind_of("events"), namespace=namespace)
    except kubeloop.errors.APIError as refused:
        raise ReadRefused(f"the API server answered {refused.code}: {refused}") from None

    def when(event: kubeloop.Obj) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or "")

    events = sorted(found.items, key=when, reverse=True)[: max(1, min(limit, 200))]
    return "\n".join(
        f"{when(e)} {e.get('type', '')} {e.get('reason', '')} "
        f"{(e.get('involvedObject') or {}).get('kind', '')}/{(e.get('involvedObject') or {}).get('name', '')}: "
        f"{e.get('message', '')}"
        for e in events
    ) or f"no events in {namespace}"
