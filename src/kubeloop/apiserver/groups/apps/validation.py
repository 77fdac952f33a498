"""The apps group's rules (``pkg/apis/apps/validation``): Deployments, ReplicaSets, StatefulSets and
DaemonSets (selector, template, strategy), their update rules, and ControllerRevisions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.apiserver.groups.core.validation import pod_template_spec_rules
from kubeloop.apiserver.registry.validation.causes import (
    GoStruct,
    as_dict,
    as_text,
    forbidden,
    immutable,
    invalid,
    nonnegative,
    not_supported,
    required,
)
from kubeloop.apiserver.registry.validation.intstr import (
    PERCENT,
    is_zero_int_or_percent,
    percent_over_100,
    positive_int_or_percent,
)
from kubeloop.apiserver.registry.validation.selectors import (
    Selector,
    go_label_selector,
    validate_label_selector,
)
from kubeloop.errors import StatusCause

__all__ = [
    "controller_revision_update_rules",
    "daemon_set_rules",
    "deployment_rules",
    "replica_set_rules",
    "selector_update_rules",
    "stateful_set_rules",
    "stateful_set_update_rules",
]


@dataclass(frozen=True)
class _Workload:
    noun: str  # in "empty selector is invalid for <noun>"
    selector_required: bool = True
    invalid_selector_detail: str = "invalid label selector"


def _workload_rules(workload: _Workload) -> Callable[[Mapping[str, Any]], list[StatusCause]]:
    def rules(obj: Mapping[str, Any]) -> list[StatusCause]:
        spec = as_dict(obj.get("spec"))
        causes = nonnegative(spec, "replicas", "spec") + nonnegative(spec, "minReadySeconds", "spec")
        raw_selector = spec.get("selector")
        if raw_selector is None:
            if workload.selector_required:
                causes.append(required("spec.selector"))
        else:
            selector_map = as_dict(raw_selector)
            causes.extend(validate_label_selector(selector_map, "spec.selector"))
            if not selector_map.get("matchLabels") and not selector_map.get("matchExpressions"):
                causes.append(
                    invalid("spec.selector", raw_selector, f"empty selector is invalid for {workload.noun}")
                )
        selector = Selector(raw_selector)
        if not selector.valid:
            causes.append(invalid("spec.selector", raw_selector, workload.invalid_selector_detail))
            return causes
        template = as_dict(spec.get("template"))
        labels = as_dict(template.get("metadata")).get("labels")
        if not selector.empty and not selector.matches(as_dict(labels)):
            causes.append(
                invalid(
                    "spec.template.metadata.labels",
                    labels if isinstance(labels, dict) else None,
                    "`selector` does not match template `labels`",
                )
            )
        causes.extend(pod_template_spec_rules(template, "spec.template"))
        restart = (
            template.get("spec", {}).get("restartPolicy") if isinstance(template.get("spec"), dict) else None
        )
        if isinstance(restart, str) and restart != "Always":
            causes.append(not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
        return causes

    return rules


def _deployment_strategy(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateDeploymentStrategy`` and ``ValidateRollingUpdateDeployment``."""
    strategy = as_dict(as_dict(obj.get("spec")).get("strategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    path = "spec.strategy.rollingUpdate"
    if kind == "Recreate":
        if rolling is not None:
            return [forbidden(path, "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate":
        rolling_shown = None
        if isinstance(rolling, dict):
            rolling_shown = GoStruct(
                MaxUnavailable=rolling.get("maxUnavailable"), MaxSurge=rolling.get("maxSurge")
            )
        shown = GoStruct(Type=as_text(kind), RollingUpdate=rolling_shown)
        return [not_supported("spec.strategy", shown, ("Recreate", "RollingUpdate"))]
    if not isinstance(rolling, dict):
        return [required(path, "this should be defaulted and never be nil")]
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    causes = positive_int_or_percent(unavailable, f"{path}.maxUnavailable", at_most_100=False)
    causes += positive_int_or_percent(surge, f"{path}.maxSurge", at_most_100=False)
    if is_zero_int_or_percent(unavailable) and is_zero_int_or_percent(surge):
        causes.append(invalid(f"{path}.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0"))
    if isinstance(unavailable, str) and PERCENT.fullmatch(unavailable) and percent_over_100(unavailable):
        causes.append(invalid(f"{path}.maxUnavailable", unavailable, "must not be greater than 100%"))
    return causes


def _daemon_set_spec(obj: Mapping[str, Any]) -> list[StatusCause]:
    """The rest of ``ValidateDaemonSetSpec``: activeDeadlineSeconds, templateGeneration, the
    update strategy (``ValidateDaemonSetUpdateStrategy``) and revisionHistoryLimit."""
    spec = as_dict(obj.get("spec"))
    causes = _no_active_deadline(spec, "DaemonSet") + nonnegative(spec, "templateGeneration", "spec")
    strategy = as_dict(spec.get("updateStrategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    path = "spec.updateStrategy"
    if kind == "RollingUpdate":
        if isinstance(rolling, dict):
            causes += _rolling_update_daemon_set(rolling, f"{path}.rollingUpdate")
        else:
            causes.append(required(f"{path}.rollingUpdate"))
    elif kind != "OnDelete":
        rolling_shown = None
        if isinstance(rolling, dict):  # Go's internal struct: absent values are zero
            rolling_shown = GoStruct(
                MaxUnavailable=rolling.get("maxUnavailable") or 0, MaxSurge=rolling.get("maxSurge") or 0
            )
        shown = GoStruct(Type=as_text(kind), RollingUpdate=rolling_shown)
        causes.append(not_supported(path, shown, ("RollingUpdate", "OnDelete")))
    causes += nonnegative(spec, "revisionHistoryLimit", "spec")
    return causes


def _rolling_update_daemon_set(rolling: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidateRollingUpdateDaemonSet``: both counts int-or-percent up to 100%, and exactly
    one of them non-zero (a surge replaces pods before it stops old ones, so not both)."""
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    causes = positive_int_or_percent(unavailable, f"{path}.maxUnavailable", at_most_100=False)
    causes += positive_int_or_percent(surge, f"{path}.maxSurge", at_most_100=False)
    for name, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
        if isinstance(value, str) and PERCENT.fullmatch(value) and percent_over_100(value):
            causes.append(invalid(f"{path}.{name}", value, "must not be greater than 100%"))
    has_unavailable, has_surge = not is_zero_int_or_percent(unavailable), not is_zero_int_or_percent(surge)
    if has_unavailable and has_surge:
        causes.append(invalid(f"{path}.maxSurge", surge, "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        causes.append(required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return causes


def _stateful_set_policies(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateStatefulSetSpec``'s first rules: podManagementPolicy and the update strategy
    (a RollingUpdate's partition). ``rollingUpdate.maxUnavailable`` is behind the alpha gate
    MaxUnavailableStatefulSet upstream (off by default) and is not judged here."""
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    policy = spec.get("podManagementPolicy")
    if not policy:
        causes.append(required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        causes.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = as_dict(spec.get("updateStrategy"))
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    path = "spec.updateStrategy"
    shown_rolling = None
    if isinstance(rolling, dict):  # Go's internal struct: a partition absent is 0
        shown_rolling = GoStruct(
            Partition=rolling.get("partition") or 0, MaxUnavailable=rolling.get("maxUnavailable")
        )
    if not kind:
        causes.append(required(path))
    elif kind == "OnDelete":
        if rolling is not None:
            causes.append(
                invalid(
                    f"{path}.rollingUpdate", shown_rolling, "only allowed for updateStrategy 'RollingUpdate'"
                )
            )
    elif kind == "RollingUpdate":
        if isinstance(rolling, dict):
            causes += nonnegative(rolling, "partition", f"{path}.rollingUpdate")
    else:
        shown = GoStruct(Type=as_text(kind), RollingUpdate=shown_rolling)
        causes.append(invalid(path, shown, "must be 'RollingUpdate' or 'OnDelete'"))
    return causes


def _stateful_set_template_limits(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateStatefulSetSpec``'s ordinals and activeDeadlineSeconds."""
    spec = as_dict(obj.get("spec"))
    return nonnegative(as_dict(spec.get("ordinals")), "start", "spec.ordinals") + _no_active_deadline(
        spec, "StatefulSet"
    )


def _no_active_deadline(spec: Mapping[str, Any], kind: str) -> list[StatusCause]:
    """A set's pods run for good: their template may not give them a deadline."""
    if as_dict(as_dict(spec.get("template")).get("spec")).get("activeDeadlineSeconds") is None:
        return []
    path = "spec.template.spec.activeDeadlineSeconds"
    return [forbidden(path, f"activeDeadlineSeconds in {kind} is not Supported")]


def selector_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """apps/v1 Deployments, ReplicaSets and DaemonSets: ``spec.selector`` is set once."""
    selector = as_dict(new.get("spec")).get("selector")
    return immutable(
        "spec.selector", selector, as_dict(old.get("spec")).get("selector"), go_label_selector(selector)
    )


_STATEFUL_SET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def stateful_set_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateStatefulSetUpdate``: only the listed spec fields change."""
    new_spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
    rest = {k: v for k, v in new_spec.items() if k not in _STATEFUL_SET_MUTABLE}
    if rest == {k: v for k, v in old_spec.items() if k not in _STATEFUL_SET_MUTABLE}:
        return []
    allowed = ", ".join(f"'{name}'" for name in _STATEFUL_SET_MUTABLE[:-1])
    return [
        forbidden(
            "spec",
            f"updates to statefulset spec for fields other than {allowed} and "
            f"'{_STATEFUL_SET_MUTABLE[-1]}' are forbidden",
        )
    ]


def controller_revision_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    return immutable("data", new.get("data"), old.get("data"))


# The rules of each kind, by the names the strategies bind them with.
_deployment_workload_rules = _workload_rules(_Workload("deployment"))


def deployment_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _deployment_workload_rules(obj) + _deployment_strategy(obj)


#: Upstream's ReplicaSet message really says "deployment".
replica_set_rules = _workload_rules(_Workload("deployment"))


_stateful_set_workload_rules = _workload_rules(_Workload("statefulset", invalid_selector_detail=""))


#: DaemonSet: no "Required" for a missing selector upstream, only the template mismatch.
_daemon_set_workload_rules = _workload_rules(_Workload("daemonset", selector_required=False))


def stateful_set_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return (
        _stateful_set_policies(obj) + _stateful_set_workload_rules(obj) + _stateful_set_template_limits(obj)
    )


def daemon_set_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _daemon_set_workload_rules(obj) + _daemon_set_spec(obj)
