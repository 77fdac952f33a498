"""A client for unit tests with no server to run beside them: controller-runtime's fake client
(``fake.NewClientBuilder().WithObjects(...).Build()``), without its shortcuts.

controller-runtime's fake client is an object tracker: it skips defaulting, validation,
admission and most of the API server's rules, so a reconciler can pass against it and fail on a
cluster. :func:`fake_client` answers with the embedded API server itself, started in this
process for the test (about 20 ms), without its control loops (no garbage collector, no
simulated workloads) and reached through socket pairs (``APIServer.dial``): no port, no TLS, no
thread. Everything a cluster would refuse or change is refused or changed here too — conflicts
on stale resourceVersions, the status subresource, defaults, CRD schemas, patches.

    async with kubeloop.testing.fake_client(config_map, website) as client:
        ...

:func:`fake_manager` is the same for a reconciler: a manager of such a client with the
operator's ``setup`` run, never started, so that a test reconciles one object at a time
(``Controller.reconcile_once``) as controller-runtime's tests call ``Reconcile``; reads through
``manager.client`` start the informers they need, and the block's end stops them::

    async with kubeloop.testing.fake_manager(setup, config_map) as manager:
        await manager.controllers["configmap"].reconcile_once(kubeloop.Request("shop", "web"))
        deployment = await manager.api_reader.get(kinds.Deployment, "web", namespace="shop")

Objects are created in the order given, each namespace they name first, and the CRDs of the
custom resource models among them (and of ``crds``) installed before them; an object carrying a
status gets it through the status subresource, as ``WithStatusSubresource`` objects are seeded.
Wrap the client with :func:`kubeloop.testing.intercepted` to inject errors and conflicts.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api.customresource import CustomResource
from kubeloop.api.model import KubeObject, as_dict
from kubeloop.api.object import Obj
from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.crdinstall import CRDSource, install_crds
from kubeloop.client.rest import APIClient
from kubeloop.manager.manager import Manager


@contextlib.asynccontextmanager
async def fake_client(
    *objects: KubeObject | Mapping[str, Any], crds: Iterable[CRDSource] = ()
) -> AsyncIterator[APIClient]:
    """An ``APIClient`` of an API server of its own holding ``objects``, for the block's length."""
    options = ServerOptions(memory=True, host="127.0.0.1", port=0, controllers=False, insecure_http=True)
    async with APIServer(options) as server:
        assert server.credentials is not None
        # The admin's token, which a kubeconfig gives only over TLS (as client-go's).
        config = load_kubeconfig(server.kubeconfig_path).with_token(server.credentials.admin_token)
        config = dataclasses.replace(config, dial=server.dial)
        async with APIClient(config) as client:
            models = [type(obj) for obj in objects if isinstance(obj, CustomResource)]
            if models or crds:
                await install_crds(client, *dict.fromkeys([*models, *crds]))
            for obj in objects:
                await _seed(client, obj)
            yield client


@contextlib.asynccontextmanager
async def fake_manager(
    setup: Callable[[Manager], object] | None,
    *objects: KubeObject | Mapping[str, Any],
    crds: Iterable[CRDSource] = (),
    namespace: str | None = None,
) -> AsyncIterator[Manager]:
    """A manager (not started) of a :func:`fake_client` holding ``objects``, with ``setup``
    run on it: its controllers are there to reconcile one request at a time."""
    async with fake_client(*objects, crds=crds) as client:
        manager = Manager(client, namespace=namespace)
        try:
            if setup is not None:
                setup(manager)
            yield manager
        finally:
            await manager.stop()  # the informers reads started


async def _seed(client: APIClient, given: KubeObject | Mapping[str, Any]) -> None:
    obj: Obj = as_dict(given)
    namespace = (obj.get("metadata") or {}).get("namespace")
    if namespace and obj.get("kind") != "Namespace":
        with contextlib.suppress(errors.AlreadyExists):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    created = await client.create(obj)
    status = obj.get("status")
    if status and "status" in (await client.mapping(obj)).subresources:
        await client.update({**created, "status": status}, subresource="status")
