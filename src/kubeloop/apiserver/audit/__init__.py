"""Auditing, as kube-apiserver's ``--audit-policy-file`` and ``--audit-log-path`` do it: a
chronological record of the requests the server served, one audit.k8s.io/v1 ``Event`` per line.

An :class:`~.policy.AuditPolicy` says at which level each request is recorded (None, Metadata,
Request, RequestResponse) and which stages are left out; a :class:`~.requestaudit.RequestAudit`
gathers one request's event as it is served, and what admission adds to it (a policy's audit
annotations, a mutating webhook's mark); an :class:`~.logwriter.AuditLogWriter` appends the
events to the log off the serving loop. The HTTP layer drives them (``http.auditing``).
"""
