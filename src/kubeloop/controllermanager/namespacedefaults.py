"""What every namespace holds in a real cluster, kept there: the ``default`` ServiceAccount
(kube-controller-manager's serviceaccount controller) and the ``kube-root-ca.crt`` ConfigMap with
the cluster's CA (its root-ca-cert-publisher). Deleted, either comes back; an edited CA bundle is
written back. Terminating namespaces are left alone.
"""

from __future__ import annotations

import contextlib

from kubeloop import errors, kinds
from kubeloop.api.object import Obj
from kubeloop.controller.handler import EnqueueRequestsFromMapFunc
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

NAMESPACE = kinds.Namespace
SERVICE_ACCOUNT = kinds.ServiceAccount
CONFIG_MAP = kinds.ConfigMap
DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def _namespace_of(name: str) -> EnqueueRequestsFromMapFunc:
    """Maps an object called ``name`` to its namespace's request."""

    def requests(obj: Obj) -> list[Request]:
        meta = obj.get("metadata") or {}
        if meta.get("name") != name or not meta.get("namespace"):
            return []
        return [Request("", str(meta["namespace"]))]

    return EnqueueRequestsFromMapFunc(requests)


class NamespaceDefaults:
    """Registers its reconciler with ``manager`` (a controller named ``namespace-defaults``);
    ``root_ca_pem`` is the CA bundle ``kube-root-ca.crt`` carries."""

    def __init__(self, manager: Manager, *, root_ca_pem: bytes) -> None:
        self.manager = manager
        self.ca_bundle = root_ca_pem.decode()
        (
            Builder(manager)
            .named("namespace-defaults")
            .for_(NAMESPACE)
            .watches(SERVICE_ACCOUNT, _namespace_of(DEFAULT_SERVICE_ACCOUNT), only_metadata=True)
            .watches(CONFIG_MAP, _namespace_of(ROOT_CA_CONFIG_MAP), only_metadata=True)
            .complete(self.reconcile)
        )

    async def reconcile(self, request: Request) -> Result | None:
        client = self.manager.client
        try:
            namespace = await client.get(NAMESPACE, request.name)
        except errors.NotFound:
            return None
        if (namespace.get("metadata") or {}).get("deletionTimestamp"):
            return None
        await self._ensure_service_account(request.name)
        await self._ensure_root_ca(request.name)
        return None

    async def _ensure_service_account(self, namespace: str) -> None:
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace},
        }
        with contextlib.suppress(errors.AlreadyExists, errors.Forbidden):  # Forbidden: terminating
            await self.manager.client.create(account)

    async def _ensure_root_ca(self, namespace: str) -> None:
        client = self.manager.api_reader  # read directly: no cache of every ConfigMap's data
        data = {"ca.crt": self.ca_bundle}
        try:
            current = await client.get(CONFIG_MAP, ROOT_CA_CONFIG_MAP, namespace=namespace)
        except errors.NotFound:
            config_map = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": ROOT_CA_CONFIG_MAP,
                    "namespace": namespace,
                    "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
                },
                "data": data,
            }
            # AlreadyExists: made meanwhile (its event looks again); Forbidden: the namespace is
            # terminating.
            with contextlib.suppress(errors.AlreadyExists, errors.Forbidden):
                await self.manager.client.create(config_map)
            return
        if current.get("data") != data or current.get("binaryData"):
            current["data"] = data
            current.pop("binaryData", None)
            await self.manager.client.update(current)
