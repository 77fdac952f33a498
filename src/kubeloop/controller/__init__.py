"""Controllers, as controller-runtime's ``pkg/controller`` and friends: a reconciler is called with
a ``Request`` (namespace/name) whenever something about that object may have changed, reads the
current state and makes the world match it — level-triggered. Sources (``source``) turn informer
events into requests through event handlers (``handler``) after predicates (``predicate``) filter
them; the controller (``controller``) runs workers over a rate-limited work queue and turns each
``Result`` or error into the next step (``reconcile``).

Operators use it through ``import kubeloop`` (``Request``, ``Result``, ``TerminalError``, the
``controllerutil`` helpers, ``kubeloop.predicate``, ``kubeloop.handler``, ``kubeloop.source``).
"""
