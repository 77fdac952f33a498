"""Testing kit: envtest without binaries.

An operator is tested against the embedded API server over real HTTPS, with the same client it
uses against a cluster:

- the pytest plugin (``plugin``, registered as ``kubeloop`` when kubeloop is installed) gives a
  test ``kube_apiserver`` (one server per session), ``kube_client`` (an async ``APIClient``
  for it) and ``kube_namespace`` (a fresh namespace per test);
- :func:`start_server` / :class:`ServerThread` run the server outside pytest fixtures (on its
  own loop in a thread, so kubectl and blocking clients can use it too);
  ``start_server(simulate=True, simulation=SimulationOptions(...))`` adds a node whose pods run
  and end, and workload controllers (:class:`SimulationOptions`: their timings);
- :func:`settled` waits until the operator has nothing left to do (caches current, queues
  empty, no reconcile running), so that a test can show something did *not* happen;
- :func:`assert_converged` checks that, once settled, reconciling every object again writes
  nothing (a reconciler that writes on every pass never converges);
- :func:`intercepted` wraps a client so that chosen verbs pass through the test's functions
  first (injected errors, :func:`conflict`, :func:`unavailable`), controller-runtime's
  ``interceptor.Funcs``;
- :func:`fake_client` and :func:`fake_manager`: unit tests without a server beside them — a
  client (or a manager, not started, with the operator's setup run) of an API server in the
  test's own process, seeded with objects, controller-runtime's fake client with the server's
  real rules;
- :func:`webhooks_installed` makes the server call the operator's webhooks while a block runs
  (envtest's WebhookInstallOptions);
- :func:`write_serving_certificate` writes a serving certificate, signed by a fresh CA, for a
  test's own HTTPS server (a webhook's or any other the operator serves);
- :func:`pod_processes` lists the processes a process node's pods still run (the node runs the
  images installed packages declare as processes): a test shows with it that none outlives its
  pod;
- :func:`eventually` waits until what the operator does can be seen::

      manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
      setup(manager)
      async with manager:
          await kube_client.create(config_map)
          await eventually(lambda: kube_client.get(kinds.Deployment, "web", namespace=kube_namespace))
"""

# The pytest plugin (``kubeloop.testing.plugin``) loads with every pytest run where kubeloop is
# installed, and this package with it: what it exports loads when first used.
from kubeloop.lazyexports import lazy_exports

TYPE_CHECKING = False

#: Public name → its module.
_EXPORTS: dict[str, str] = {
    "SimulationOptions": "kubeloop.node.simulation",
    "assert_converged": "kubeloop.testing.converge",
    "fake_client": "kubeloop.testing.fakeclient",
    "fake_manager": "kubeloop.testing.fakeclient",
    "webhooks_installed": "kubeloop.testing.installedwebhooks",
    "conflict": "kubeloop.testing.interceptor",
    "intercepted": "kubeloop.testing.interceptor",
    "unavailable": "kubeloop.testing.interceptor",
    "pod_processes": "kubeloop.testing.podprocesses",
    "eventually": "kubeloop.testing.polling",
    "ServerThread": "kubeloop.testing.serverthread",
    "start_server": "kubeloop.testing.serverthread",
    "write_serving_certificate": "kubeloop.testing.servingcerts",
    "settled": "kubeloop.testing.settle",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load lazily
    from kubeloop.node.simulation import SimulationOptions
    from kubeloop.testing.converge import assert_converged
    from kubeloop.testing.fakeclient import fake_client, fake_manager
    from kubeloop.testing.installedwebhooks import webhooks_installed
    from kubeloop.testing.interceptor import conflict, intercepted, unavailable
    from kubeloop.testing.podprocesses import pod_processes
    from kubeloop.testing.polling import eventually
    from kubeloop.testing.serverthread import ServerThread, start_server
    from kubeloop.testing.servingcerts import write_serving_certificate
    from kubeloop.testing.settle import settled

__all__ = [
    "ServerThread",
    "SimulationOptions",
    "assert_converged",
    "conflict",
    "eventually",
    "fake_client",
    "fake_manager",
    "intercepted",
    "pod_processes",
    "settled",
    "start_server",
    "unavailable",
    "webhooks_installed",
    "write_serving_certificate",
]
