"""Counts kept for the whole process, as controller-runtime keeps them in its global registry;
the manager's metrics report them. Apart from ``webhookmetrics`` so that counting loads no
Prometheus client: the certificate watcher counts here in a manager that serves no metrics."""

from __future__ import annotations


class ProcessCounts:
    """Admission and conversion webhooks whose code raised
    (``controller_runtime_webhook_panics_total``, ``controller_runtime_conversion_webhook_panics_total``),
    certificate reads by the certificate watchers and those that failed
    (``certwatcher_read_certificate_total``, ``certwatcher_read_certificate_errors_total``)."""

    def __init__(self) -> None:
        self.admission_panics = 0
        self.conversion_panics = 0
        self.certificate_reads = 0
        self.certificate_read_errors = 0


#: The process's counts (the manager's metrics report them).
process_counts = ProcessCounts()
