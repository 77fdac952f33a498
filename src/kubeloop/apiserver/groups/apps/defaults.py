"""The apps group's defaults (``pkg/apis/apps/v1/defaults.go``): Deployments, ReplicaSets,
StatefulSets and DaemonSets, field by field (replicas, strategies, history limits).
"""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.core.defaults import pod_template_defaults

__all__ = ["daemon_set", "deployment", "replica_set", "stateful_set"]


def _apps_spec(obj: Obj, *, replicas: bool) -> Obj | None:
    """The spec of an apps/v1 workload, with what all of them default."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if replicas:
        spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    return spec


def deployment(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=True)
    if spec is None:
        return
    spec.setdefault("progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    pod_template_defaults(spec)


def replica_set(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=True)
    if spec is None:
        return
    spec.pop("revisionHistoryLimit", None)
    pod_template_defaults(spec)


def stateful_set(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=True)
    if spec is None:
        return
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = _strategy(spec, "updateStrategy")
    if strategy is not None:
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
        rolling = strategy.get("rollingUpdate")
        if (
            strategy["type"] == "RollingUpdate"
            and isinstance(rolling, dict)
            and rolling.get("partition") is None
        ):
            rolling["partition"] = 0
    pod_template_defaults(spec)


def daemon_set(obj: Obj) -> None:
    spec = _apps_spec(obj, replicas=False)
    if spec is None:
        return
    strategy = _strategy(spec, "updateStrategy")
    if strategy is not None:
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
            rolling = strategy["rollingUpdate"]
            if isinstance(rolling, dict):
                if rolling.get("maxUnavailable") is None:
                    rolling["maxUnavailable"] = 1
                if rolling.get("maxSurge") is None:
                    rolling["maxSurge"] = 0
    pod_template_defaults(spec)


def _strategy(spec: Obj, name: str) -> Obj | None:
    """``spec[name]`` to default field by field (a struct in Go: absent or null is empty)."""
    if spec.get(name) is None:
        spec[name] = {}
    strategy = spec[name]
    return strategy if isinstance(strategy, dict) else None
