"""The manager: what an operator process runs (controller-runtime's ``pkg/manager``). It owns the
client, one shared informer per kind (``manager``), the controllers built on them (``builder``),
and their lifecycle: caches start and sync before controllers, everything stops in reverse order,
in-flight reconciles get a grace period, a second signal exits at once.
"""
