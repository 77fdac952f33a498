"""``kubeloop run TARGET``: load an operator and run its manager until a signal.

TARGET is ``module:attribute``, a Python file, or a directory holding ``operator.py``; it exposes
a ``setup(manager)`` function (or the attribute named after the colon is one). The manager talks
to the cluster of ``--kubeconfig``/``--context`` (default: ``$KUBECONFIG``, ``~/.kube/config``,
in-cluster), or with ``--embedded`` to an embedded API server started in the same process.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import sys
from collections.abc import Callable
from typing import Any

from kubeloop.client.config import load_config
from kubeloop.client.rest import Client
from kubeloop.manager.manager import Manager

Setup = Callable[[Manager], Any]


def load_setup(target: str) -> Setup:
    """The ``setup(manager)`` callable TARGET names."""
    path = pathlib.Path(target)
    if path.is_dir():
        path = path / "operator.py"
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
    target: str, *, kubeconfig: str | None, context: str | None, embedded: bool, data_dir: pathlib.Path | None
) -> int:
    setup = load_setup(target)
    if embedded:
        from kubeloop.apiserver.server import APIServer, ServerOptions

        async with APIServer(ServerOptions(memory=data_dir is None, data_dir=data_dir, port=0)) as server:
            print(
                f"kubeloop embedded apiserver ready at {server.url} kubeconfig={server.kubeconfig_path}",
                flush=True,
            )
            return await _run_manager(setup, str(server.kubeconfig_path), None)
    return await _run_manager(setup, kubeconfig, context)


async def _run_manager(setup: Setup, kubeconfig: str | None, context: str | None) -> int:
    async with Client(load_config(kubeconfig, context=context)) as client:
        manager = Manager(client)
        setup(manager)
        print(f"kubeloop run: {len(manager.controllers)} controller(s) starting", flush=True)
        await manager.run()
    return 0
