"""The cluster's own control loops, run in-process beside the embedded API server.

What kube-controller-manager does for a real cluster — the garbage collector first — written with
kubeloop's public runtime (a ``Manager``, its informers and client, work queues) and talking to
the server over HTTPS like any other client, with an identity of its own. They never reach into
the server's storage, so they are also examples of the runtime and a steady test of it.
``ControllerManager`` builds the manager and owns the loops' lifetime.
"""
