"""``kubeloop run TARGET``: load an operator and run its manager until a signal.

TARGET is ``module:attribute``, a Python file, or a directory holding ``main.py`` (a name that
shadows no module of the standard library, as ``operator.py`` would); it exposes
a ``setup(manager)`` function (or the attribute named after the colon is one). The manager talks
to the cluster of ``--kubeconfig``/``--context`` (default: ``$KUBECONFIG``, ``~/.kube/config``,
in-cluster), or with ``--embedded`` to an embedded API server started in the same process.
The manager flags are those of a kubebuilder project's ``main.go``: ``--namespace`` (the cache's
scope), ``--metrics-bind-address``, ``--health-probe-bind-address`` ("0" or empty: off) and
``--leader-elect`` with ``--leader-election-id``/``--leader-election-namespace``.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubeloop.client.config import load_config
from kubeloop.client.rest import APIClient
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import Manager

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

    def manager(self, client: APIClient, default_namespace: str) -> Manager:
        election = None
        if self.leader_elect:
            if not self.leader_election_id:
                raise SystemExit("--leader-elect needs --leader-election-id")
            election = LeaderElectionConfig(
                self.leader_election_id,
                namespace=self.leader_election_namespace or self.namespace or default_namespace,
            )
        return Manager(
            client,
            namespace=self.namespace,
            leader_election=election,
            metrics_bind_address=_address(self.metrics_bind_address),
            health_probe_bind_address=_address(self.health_probe_bind_address),
        )


def _address(flag: str | None) -> str | None:
    """controller-runtime's convention: "0" (or nothing) turns a server off."""
    return None if not flag or flag == "0" else flag


def load_setup(target: str) -> Setup:
    """The ``setup(manager)`` callable TARGET names."""
    path = pathlib.Path(target)
    if path.is_dir():
        path = path / ENTRY_FILE
    if path.suffix == ".py" and path.exists():
        spec = importlib.util.spec_from_file_location(f"kubeloop_operator_{path.parent.name}", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        attribute = "setup"
    else:
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        attribute = attribute or "setup"
    setup = getattr(module, attribute, None)
    if not callable(setup):
        raise SystemExit(f"{target} has no callable {attribute}(manager)")
    return setup  # type: ignore[no-any-return]


async def run(
    target: str,
    *,
    kubeconfig: str | None,
    context: str | None,
    embedded: bool,
    data_dir: pathlib.Path | None,
    flags: ManagerFlags | None = None,
) -> int:
    flags = flags or ManagerFlags()
    setup = load_setup(target)
    if embedded:
        from kubeloop.apiserver.server import APIServer, ServerOptions

        async with APIServer(ServerOptions(memory=data_dir is None, data_dir=data_dir, port=0)) as server:
            print(
                f"kubeloop embedded apiserver ready at {server.url} kubeconfig={server.kubeconfig_path}",
                flush=True,
            )
            return await _run_manager(setup, str(server.kubeconfig_path), None, flags)
    return await _run_manager(setup, kubeconfig, context, flags)


async def _run_manager(setup: Setup, kubeconfig: str | None, context: str | None, flags: ManagerFlags) -> int:
    config = load_config(kubeconfig, context=context)
    async with APIClient(config) as client:
        manager = flags.manager(client, config.namespace)
        setup(manager)
        print(f"kubeloop run: {len(manager.controllers)} controller(s) starting", flush=True)
        await manager.run()
    return 0
