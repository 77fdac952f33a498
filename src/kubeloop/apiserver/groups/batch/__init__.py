"""The batch API group: Jobs and CronJobs."""

from __future__ import annotations

from types import MappingProxyType

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.batch import columns, defaults, validation
from kubeloop.apiserver.groups.batch.strategies import JobStrategy
from kubeloop.apiserver.groups.declaration import BuiltinKind
from kubeloop.apiserver.groups.defaulting import empty_status

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType(
            "batch",
            "v1",
            "jobs",
            "job",
            "Job",
            True,
            categories=("all",),
            subresources=("status",),
            field_selectors=MappingProxyType({"status.successful": "status.succeeded"}),
            tracks_generation=True,
        ),
        strategy=JobStrategy,
        defaults=defaults.job,
        initial_status=empty_status,
        rules=validation.job_rules,
        update_rules=validation.job_update_rules,
        columns=columns.job_columns,
    ),
    BuiltinKind(
        ResourceType(
            "batch",
            "v1",
            "cronjobs",
            "cronjob",
            "CronJob",
            True,
            short_names=("cj",),
            categories=("all",),
            subresources=("status",),
            tracks_generation=True,
        ),
        defaults=defaults.cron_job,
        initial_status=empty_status,
        rules=validation.cron_job_rules,
        columns=columns.cronjob_columns,
    ),
)
