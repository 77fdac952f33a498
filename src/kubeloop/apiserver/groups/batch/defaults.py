"""The batch group's defaults (``pkg/apis/batch/v1/defaults.go``): Jobs and CronJobs."""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.core.defaults import pod_template_defaults

__all__ = ["cron_job", "job"]


def job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if "completions" not in spec and spec.get("parallelism") == 1:
        spec["completions"] = 1
    pod_template_defaults(spec)


def cron_job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
