"""``kubeloop run TARGET``: load an operator and run its manager until a signal.

TARGET is ``module:attribute``, a Python file, or a directory holding ``main.py`` (a name that
shadows no module of the standard library, as ``operator.py`` would); it exposes
a ``setup(manager)`` function (or the attribute named after the colon is one). The manager talks
to the cluster of ``--kubeconfig``/``--context`` (default: ``$KUBECONFIG``, ``~/.kube/config``,
in-cluster), or with ``--embedded`` to an embedded API server started in the same process.
The manager flags are those of a kubebuilder project's ``main.go``: ``--namespace`` (the cache's
scope), ``--metrics-bind-address``, ``--health-probe-bind-address`` ("0" or empty: off) and
``--leader-elect`` with ``--leader-election-id``/``--leader-election-namespace``.
``--install-crds`` first applies the CRDs of the custom resource models the target's module
defines or imports (and ``--crds FILE`` ones), waiting until they serve.

Webhooks the setup registers (``WebhookBuilder``) are served on ``--webhook-port`` (9443) with
the certificate in ``--webhook-cert-dir`` or a development one; with ``--embedded`` their
configurations are installed into the embedded server, by URL with the development CA, once the
manager has started.

``kubeloop crd TARGET`` prints those CRDs as YAML (``module_crds``). ``kubeloop rbac TARGET``
prints the ClusterRole the operator needs (``required_cluster_role``): its setup runs against an
embedded server holding its CRDs, and what the manager recorded (``manager.permissions``) is
resolved to resources by discovery, with Leases for leader election. ``kubeloop webhook TARGET``
prints the webhook configurations (``required_webhook_configurations``), found the same way,
calling a Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import pathlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kubeloop.api.crdgen import custom_resources_in, definitions
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import load_config
from kubeloop.client.crdinstall import install_crds
from kubeloop.client.rest import APIClient
from kubeloop.gcpause import tune_for_serving
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import Manager
from kubeloop.manager.permissions import LEASE, Resource
from kubeloop.manager.webhookconfigurations import (
    crd_conversion_patches,
    install_webhook_configurations,
    service_client_config,
    webhook_configurations,
)
from kubeloop.webhook.server import DEFAULT_PORT, WebhookServer

Setup = Callable[[Manager], Any]
#: The file `kubeloop run DIR` loads from DIR.
ENTRY_FILE = "main.py"


@dataclass(frozen=True)
class ManagerFlags:
    namespace: str | None = None
    metrics_bind_address: str | None = None
    health_probe_bind_address: str | None = None
    leader_elect: bool = False
    leader_election_id: str | None = None
    leader_election_namespace: str | None = None
    #: Install the CRDs of the target's models (and these files) before the manager starts.
    install_crds: bool = False
    crd_files: Sequence[str] = ()
    #: None: 9443, or a free port with an embedded server.
    webhook_port: int | None = None
    webhook_cert_dir: str | None = None

    def manager(self, client: APIClient, default_namespace: str, *, embedded: bool = False) -> Manager:
        election = None
        if self.leader_elect:
            if not self.leader_election_id:
                raise SystemExit("--leader-elect needs --leader-election-id")
            election = LeaderElectionConfig(
                self.leader_election_id,
                namespace=self.leader_election_namespace or self.namespace or default_namespace,
            )
        port = self.webhook_port if self.webhook_port is not None else 0 if embedded else DEFAULT_PORT
        return Manager(
            client,
            namespace=self.namespace,
            leader_election=election,
            metrics_bind_address=_address(self.metrics_bind_address),
            health_probe_bind_address=_address(self.health_probe_bind_address),
            webhook_server=WebhookServer(port=port, cert_dir=self.webhook_cert_dir),
        )


def _address(flag: str | None) -> str | None:
    """controller-runtime's convention: "0" (or nothing) turns a server off."""
    return None if not flag or flag == "0" else flag


def load_target(target: str) -> tuple[ModuleType, str]:
    """The module TARGET names and the attribute after its colon (default ``setup``). A file is
    loaded as ``python FILE`` runs it: its folder is on ``sys.path``, so it imports its siblings."""
    path = pathlib.Path(target)
    if path.is_dir():
        path = path / ENTRY_FILE
    if path.suffix == ".py" and path.exists():
        spec = importlib.util.spec_from_file_location(f"kubeloop_operator_{path.parent.name}", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {path}")
        folder = str(path.parent.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module, "setup"
    module_name, _, attribute = target.partition(":")
    return importlib.import_module(module_name), attribute or "setup"


def load_setup(target: str) -> Setup:
    """The ``setup(manager)`` callable TARGET names."""
    return _setup_of(target, *load_target(target))


def _setup_of(target: str, module: ModuleType, attribute: str) -> Setup:
    setup = getattr(module, attribute, None)
    if not callable(setup):
        raise SystemExit(f"{target} has no callable {attribute}(manager)")
    return setup  # type: ignore[no-any-return]


def module_crds(module: ModuleType) -> list[dict[str, Any]]:
    """The CRDs of the custom resource models ``module`` defines or imports."""
    return definitions(*custom_resources_in(vars(module).values()))


async def run(
    target: str,
    *,
    kubeconfig: str | None,
    context: str | None,
    embedded: bool,
    data_dir: pathlib.Path | None,
    flags: ManagerFlags | None = None,
    simulate: bool = False,
) -> int:
    flags = flags or ManagerFlags()
    module, attribute = load_target(target)
    setup = _setup_of(target, module, attribute)
    crds = module_crds(module) if flags.install_crds else []
    if embedded:
        from kubeloop.apiserver.server import APIServer, ServerOptions

        options = ServerOptions(memory=data_dir is None, data_dir=data_dir, port=0, simulate=simulate)
        async with APIServer(options) as server:
            print(
                f"kubeloop embedded apiserver ready at {server.url} kubeconfig={server.kubeconfig_path}",
                flush=True,
            )
            return await _run_manager(setup, crds, str(server.kubeconfig_path), None, flags, embedded=True)
    return await _run_manager(setup, crds, kubeconfig, context, flags)


async def _run_manager(
    setup: Setup,
    crds: list[dict[str, Any]],
    kubeconfig: str | None,
    context: str | None,
    flags: ManagerFlags,
    *,
    embedded: bool = False,
) -> int:
    config = load_config(kubeconfig, context=context)
    async with APIClient(config) as client:
        if crds or flags.crd_files:
            installed = await install_crds(client, *crds, *flags.crd_files)
            names = ", ".join(crd["metadata"]["name"] for crd in installed)
            print(f"kubeloop run: installed {len(installed)} CRD(s): {names}", flush=True)
        manager = flags.manager(client, config.namespace, embedded=embedded)
        setup(manager)
        if embedded and manager.webhook_server.webhooks:
            manager.add(
                _webhook_installer(client, manager), name="webhook configurations", need_leader_election=False
            )
        print(f"kubeloop run: {len(manager.controllers)} controller(s) starting", flush=True)
        tune_for_serving()
        await manager.run()
    return 0


def _webhook_installer(client: APIClient, manager: Manager) -> Callable[[asyncio.Event], Awaitable[None]]:
    """A runnable that installs the manager's webhook configurations once it serves them."""

    async def install(stop: asyncio.Event) -> None:
        installed = await install_webhook_configurations(client, manager.webhook_server)
        names = ", ".join(f"{c['kind']}/{c['metadata']['name']}" for c in installed)
        print(f"kubeloop run: webhooks at {manager.webhook_server.address} installed: {names}", flush=True)
        await stop.wait()

    return install


@contextlib.asynccontextmanager
async def _set_up_on_an_embedded_server(target: str) -> AsyncIterator[tuple[APIClient, Manager]]:
    """TARGET's setup run on a manager (not started) of an embedded server holding its CRDs:
    what ``kubeloop rbac`` and ``kubeloop webhook`` read what the operator registers from."""
    from kubeloop.apiserver.server import APIServer, ServerOptions

    module, attribute = load_target(target)
    setup = _setup_of(target, module, attribute)
    async with (
        APIServer(ServerOptions(memory=True, port=0, controllers=False)) as server,
        APIClient(load_config(str(server.kubeconfig_path))) as client,
    ):
        await install_crds(client, *module_crds(module))
        manager = Manager(client)
        setup(manager)
        yield client, manager


async def required_webhook_configurations(
    target: str, *, service: str, namespace: str, name_prefix: str = "", ca_bundle: bytes | None = None
) -> list[dict[str, Any]]:
    """The webhook configurations TARGET's operator needs, calling ``service`` in ``namespace``,
    then the patches of the CRDs it converts (``kubeloop webhook``)."""
    async with _set_up_on_an_embedded_server(target) as (client, manager):

        async def resolve(gvk: GroupVersionKind) -> str:
            return (await client.mapping(gvk)).resource

        client_config = service_client_config(service, namespace, ca_bundle=ca_bundle)
        configurations = await webhook_configurations(
            manager.webhook_server, resolve, client_config, name_prefix=name_prefix
        )
        return configurations + crd_conversion_patches(manager.webhook_server, client_config)


async def required_cluster_role(target: str, name: str) -> dict[str, Any]:
    """The ClusterRole TARGET's operator needs (``kubeloop rbac``)."""
    async with _set_up_on_an_embedded_server(target) as (client, manager):
        manager.permissions.allow(LEASE, "get", "create", "update")  # deployed with --leader-elect

        async def resolve(gvk: GroupVersionKind) -> Resource:
            mapping = await client.mapping(gvk)
            return Resource(gvk.group, mapping.resource, mapping.subresources)

        return await manager.permissions.cluster_role(name, resolve)
