"""The batch group's rules (``pkg/apis/batch/validation``): Jobs, CronJobs, and what a Job's
update may change of its template.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubeloop.api import cronschedule
from kubeloop.apiserver.groups.core.validation import pod_template_spec_rules
from kubeloop.apiserver.registry.validation.causes import (
    as_dict,
    immutable,
    invalid,
    is_int,
    not_supported,
    required,
)
from kubeloop.apiserver.registry.validation.selectors import (
    Selector,
    go_label_selector,
    validate_label_selector,
)
from kubeloop.errors import StatusCause

__all__ = ["cron_job_rules", "job_rules", "job_update_rules"]


#: The labels a Job's generated selector rests on (``batch.ControllerUidLabel`` and its legacy
#: form), and those naming the Job on its pods.
CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


def job_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateJob``: the selector (required, valid, matching the template's labels), the
    labels a generated selector rests on, and the pod template."""
    spec = as_dict(obj.get("spec"))
    template = as_dict(spec.get("template"))
    labels = as_dict(as_dict(template.get("metadata")).get("labels"))
    causes: list[StatusCause] = []
    raw_selector = spec.get("selector")
    if raw_selector is None:
        causes.append(required("spec.selector"))
    else:
        causes.extend(validate_label_selector(as_dict(raw_selector), "spec.selector"))
        selector = Selector(raw_selector)
        if selector.valid and not selector.empty and not selector.matches(labels):
            causes.append(
                invalid(
                    "spec.template.metadata.labels", labels, "`selector` does not match template `labels`"
                )
            )
    if spec.get("manualSelector") is not True:
        causes.extend(_generated_selector_rules(obj, labels))
    return causes + pod_template_spec_rules(template, "spec.template")


def _generated_selector_rules(obj: Mapping[str, Any], labels: Mapping[str, Any]) -> list[StatusCause]:
    """``validateGeneratedSelector``: without ``manualSelector``, the template carries the Job's
    uid and name and the selector picks the uid, so no other Job's pods can match."""
    meta = as_dict(obj.get("metadata"))
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    expected = {**dict.fromkeys(CONTROLLER_UID_LABELS, uid), **dict.fromkeys(JOB_NAME_LABELS, name)}
    causes = [
        _has_label(labels, "spec.template.metadata.labels", key, value) for key, value in expected.items()
    ]
    match_labels = as_dict(as_dict(obj.get("spec")).get("selector")).get("matchLabels")
    causes.append(
        _has_label(as_dict(match_labels), "spec.selector.matchLabels", CONTROLLER_UID_LABELS[0], uid)
    )
    return [cause for cause in causes if cause is not None]


def _has_label(labels: Mapping[str, Any], path: str, key: str, value: str) -> StatusCause | None:
    """``ValidateHasLabel``."""
    if key not in labels:
        return required(f"{path}[{key}]", f"must be '{value}'")
    if labels[key] != value:
        return invalid(f"{path}[{key}]", labels[key], f"must be '{value}'")
    return None


def cron_job_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateCronJobSpec``: the schedule and time zone, the policies, and the job's template."""
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    schedule = spec.get("schedule")
    if isinstance(schedule, str):
        if not schedule:
            causes.append(required("spec.schedule"))
        else:
            try:
                cronschedule.parse(schedule)
            except cronschedule.ScheduleError as exc:
                causes.append(invalid("spec.schedule", schedule, str(exc)))
            if "TZ" in schedule:
                detail = (
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule"
                    if spec.get("timeZone") is not None
                    else "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
                )
                causes.append(invalid("spec.schedule", schedule, detail))
    zone = spec.get("timeZone")
    if isinstance(zone, str):
        if not zone:
            causes.append(invalid("spec.timeZone", zone, "timeZone must be nil or non-empty string"))
        elif zone.lower() == "local":
            causes.append(
                invalid(
                    "spec.timeZone",
                    zone,
                    "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                )
            )
        else:
            try:
                cronschedule.time_zone(zone)
            except cronschedule.ScheduleError as exc:
                causes.append(invalid("spec.timeZone", zone, str(exc)))
    policy = spec.get("concurrencyPolicy")
    if isinstance(policy, str) and policy not in _CONCURRENCY_POLICIES:
        causes.append(not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY_POLICIES))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        value = spec.get(key)
        if is_int(value) and value < 0:
            causes.append(invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    job_spec = as_dict(as_dict(spec.get("jobTemplate")).get("spec"))
    causes.extend(
        pod_template_spec_rules(as_dict(job_spec.get("template")), "spec.jobTemplate.spec.template")
    )
    return causes


_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


#: What a suspended Job that never started may still change in its pod template
#: (``AllowMutableSchedulingDirectives``).
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def _job_template_for_comparison(template: Any, new_template: Any, mutable: bool) -> Any:
    """The old template with the scheduling directives of the new one when they may change."""
    if not mutable or not isinstance(template, dict) or not isinstance(new_template, dict):
        return template
    merged = copy.deepcopy(template)
    new_meta = as_dict(new_template.get("metadata"))
    meta = merged.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if key in new_meta:
            meta[key] = new_meta[key]
        else:
            meta.pop(key, None)
    new_pod, pod = as_dict(new_template.get("spec")), merged.setdefault("spec", {})
    for key in _SCHEDULING_DIRECTIVES:
        if key in new_pod:
            pod[key] = new_pod[key]
        else:
            pod.pop(key, None)
    new_affinity = new_pod.get("affinity")
    if isinstance(new_affinity, dict):
        affinity = dict(as_dict(pod.get("affinity")))
        if "nodeAffinity" in new_affinity:
            affinity["nodeAffinity"] = new_affinity["nodeAffinity"]
        else:
            affinity.pop("nodeAffinity", None)
        pod["affinity"] = affinity
    elif isinstance(pod.get("affinity"), dict):
        rest = {k: v for k, v in pod["affinity"].items() if k != "nodeAffinity"}
        if rest:
            pod["affinity"] = rest
        else:
            pod.pop("affinity")
    if not meta:
        merged.pop("metadata")
    return merged


def job_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateJobSpecUpdate``: completions (non-indexed), selector, pod template (bar the
    scheduling directives of a suspended Job that never started) and the policies are fixed."""
    spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
    causes: list[StatusCause] = []
    if spec.get("completionMode") == "Indexed":
        completions = spec.get("completions")
        changed = completions != old_spec.get("completions") and completions is not None
        if changed and completions != spec.get("parallelism"):
            detail = "can only be modified in tandem with spec.parallelism"
            causes.append(invalid("spec.completions", completions, detail))
    else:
        causes += immutable("spec.completions", spec.get("completions"), old_spec.get("completions"))
    selector = spec.get("selector")
    causes += immutable("spec.selector", selector, old_spec.get("selector"), go_label_selector(selector))
    mutable = old_spec.get("suspend") is True and not as_dict(old.get("status")).get("startTime")
    template = spec.get("template")
    old_template = _job_template_for_comparison(old_spec.get("template"), template, mutable)
    causes += immutable("spec.template", template, old_template)
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        causes += immutable(f"spec.{key}", spec.get(key), old_spec.get(key))
    return causes
