"""kubeloop: Kubernetes' controller-runtime in Python, with an embedded API server.

The flow (see docs/architecture.md)::

    kubectl apply ─► apiserver ─► storage ─► watch ─► informer cache ─► handlers
        ─► work queue ─► Reconciler.reconcile(request) ─► client writes

Packages, bottom to top: ``kubeloop.apiserver`` (the embedded Kubernetes-compatible server)
and ``kubeloop.cli`` (the ``kubeloop`` command). The controller runtime (client, cache,
workqueue, controller, manager) is built on top in later releases.

Run a server for a test or a demo::

    from kubeloop.apiserver import APIServer, ServerOptions
    async with APIServer(ServerOptions(memory=True, port=0)) as server:
        print(server.url, server.kubeconfig_path)
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
