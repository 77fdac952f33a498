"""The manager: what an operator process runs (controller-runtime's ``pkg/manager``). It owns the
client, the shared cache and the client reconcilers read through (``manager``, ``cachedclient``),
the controllers built on them (``builder``), other runnables (``runnable``), leader election,
metrics, health checks and the event recorder, and their lifecycle: caches start and sync
before controllers, everything stops in reverse order, in-flight reconciles get a grace period,
a second signal exits at once.

Operators use it through ``import kubeloop`` (``Manager``, ``Builder``,
``LeaderElectionConfig``, ``EventRecorder``); ``kubeloop run`` builds the manager from its flags.
"""
