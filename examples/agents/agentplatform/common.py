"""What the platform's controllers share: labels, the config hash, workload shapes and status writes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import kubeloop

from .api import GROUP

MANAGED_BY = "kubeloop-agents"
CONFIG_HASH = f"{GROUP}/config-hash"


def labels(component: str, instance: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def config_hash(*parts: Any) -> str:
    """A short, stable digest of what a workload was built from (JSON with sorted keys)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def service_url(name: str, namespace: str, port: int) -> str:
    return f"http://{name}.{namespace}.svc.cluster.local:{port}"


def env_list(*layers: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Environment variables merged by name (a later layer overrides), sorted by name."""
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for var in layer:
            merged[str(var["name"])] = dict(var)
    return [merged[name] for name in sorted(merged)]


def named(kind: kubeloop.GroupVersionKind, name: str, namespace: str) -> kubeloop.Obj:
    """The skeleton ``create_or_update`` starts from."""
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace},
    }


def set_deployment(
    deployment: kubeloop.Obj,
    *,
    replicas: int,
    selector: dict[str, str],
    annotations: dict[str, str],
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
) -> None:
    """Set what the platform owns in a Deployment, leaving the server's defaults in place (so an
    unchanged Deployment is not written again)."""
    spec = deployment.setdefault("spec", {})
    spec["replicas"] = replicas
    spec["selector"] = {"matchLabels": selector}
    template = spec.setdefault("template", {})
    meta = template.setdefault("metadata", {})
    meta["labels"] = selector
    meta["annotations"] = annotations
    pod = template.setdefault("spec", {})
    # Left-out lists are absent on the server, and absent resources are {} (Go's empty struct).
    container = {key: value for key, value in container.items() if value not in (None, [], {})}
    container.setdefault("resources", {})
    containers = pod.get("containers") or []
    current: dict[str, Any] = next((c for c in containers if c.get("name") == container["name"]), {})
    for key in ("command", "args", "env", "volumeMounts"):
        if key not in container:
            current.pop(key, None)
    current.update(container)
    pod["containers"] = [current]
    if volumes:
        pod["volumes"] = volumes
    else:
        pod.pop("volumes", None)


def set_service(service: kubeloop.Obj, selector: dict[str, str], port: int) -> None:
    spec = service.setdefault("spec", {})
    spec["type"] = "ClusterIP"
    spec["selector"] = selector
    spec["ports"] = [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]


def config_map_volume(name: str, config_map: str) -> dict[str, Any]:
    return {"name": name, "configMap": {"name": config_map, "defaultMode": 420}}


def http_port(port: int) -> list[dict[str, Any]]:
    return [{"name": "http", "containerPort": port, "protocol": "TCP"}]


def deployment_ready(deployment: kubeloop.Obj | None) -> tuple[bool, int, str]:
    """Whether a Deployment has rolled out every replica; its ready count; why not."""
    if deployment is None:
        return False, 0, "no Deployment yet"
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted, ready = int(spec.get("replicas", 1)), int(status.get("readyReplicas") or 0)
    if int(status.get("observedGeneration") or 0) < int(deployment["metadata"].get("generation") or 0):
        return False, ready, "the Deployment's change is not observed yet"
    updated, available = int(status.get("updatedReplicas") or 0), int(status.get("availableReplicas") or 0)
    if updated < wanted or available < wanted or int(status.get("replicas") or 0) > wanted:
        return False, ready, f"{available} of {wanted} replicas available"
    return True, ready, f"{available} of {wanted} replicas available"


async def write_status(client: kubeloop.Client, obj: kubeloop.KubeObject, status: dict[str, Any]) -> bool:
    """Merge-patch ``status`` through /status if it differs from the object's; whether it did
    (not when the object is gone meanwhile: there is nothing left to report on)."""
    current = obj.to_dict().get("status") or {}
    if all(current.get(key) == value for key, value in status.items()):
        return False
    try:
        await client.patch(obj, None, {"status": status}, subresource="status")
    except kubeloop.errors.NotFound:
        return False
    return True
