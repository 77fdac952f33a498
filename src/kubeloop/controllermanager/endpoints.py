"""The endpoints controllers: what a Service's selector reaches, as Endpoints and EndpointSlices.

A reconciler of Services that owns EndpointSlices and watches Pods. For a Service with a
selector, the pods it matches that have an IP and are not being deleted are its endpoints, with
each service port's ``targetPort`` resolved against the pod (a named port is looked up in its
containers; a pod without it does not serve that port). Pods that resolve the ports alike form
one group: a subset of the Endpoints object named as the Service (ready pods as ``addresses``,
others as ``notReadyAddresses``, unless ``publishNotReadyAddresses``), and an IPv4 EndpointSlice
``<service>-<random>`` labelled ``kubernetes.io/service-name`` and managed by
``endpointslice-controller.k8s.io``, with ready/serving/terminating conditions. A Service with no
such pods keeps one empty slice, as upstream's. Services without a selector are left to whoever
writes their endpoints (the ``kubernetes`` Service's are the API server's).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.controller.handler import EnqueueRequestsFromMapFunc
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.podcontrol import ready
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllermanager.endpoints")

SERVICE = kinds.Service
ENDPOINTS = kinds.Endpoints
ENDPOINT_SLICE = kinds.EndpointSlice
POD = kinds.Pod
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"

Ports = tuple[tuple[str, int, str], ...]  # (name, port, protocol) per service port


def resolved_ports(service_spec: Obj, pod: Obj) -> Ports:
    """The service's ports as ``pod`` serves them; a named target port the pod lacks is left out."""
    named: dict[tuple[str, str], int] = {}
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in (container or {}).get("ports") or ():
            if isinstance(port, dict) and port.get("name"):
                named[(str(port["name"]), str(port.get("protocol") or "TCP"))] = int(
                    port.get("containerPort") or 0
                )
    out = []
    for port in service_spec.get("ports") or ():
        if not isinstance(port, dict):
            continue
        protocol = str(port.get("protocol") or "TCP")
        target = port.get("targetPort", port.get("port"))
        if isinstance(target, str) and not target.isdigit():
            number = named.get((target, protocol))
            if number is None:
                continue
        else:
            number = int(target or 0)
        out.append((str(port.get("name") or ""), number, protocol))
    return tuple(out)


class EndpointsController:
    """Registers its reconciler with ``manager`` (a controller named ``endpoints``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        Builder(manager).named("endpoints").for_(SERVICE).owns(ENDPOINT_SLICE).watches(
            POD, EnqueueRequestsFromMapFunc(self._services_of)
        ).with_options(max_concurrent_reconciles=4).complete(self.reconcile)

    def _services_of(self, pod: Obj) -> list[Request]:
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        labels = meta.get("labels") or {}
        store = self.manager.informer_for(SERVICE).store
        out = []
        for key in store.keys_in_namespace(namespace):
            service = store.get(key)
            selector = ((service or {}).get("spec") or {}).get("selector")
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                out.append(Request(namespace, key.split("/", 1)[-1]))
        return out

    async def reconcile(self, request: Request) -> Result | None:
        try:
            service = await self.manager.client.get(SERVICE, request.name, namespace=request.namespace)
        except errors.NotFound:
            # Its slices go with it (owner references); its Endpoints, named as it, go here.
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(ENDPOINTS, request.name, namespace=request.namespace)
            return None
        meta = service.get("metadata") or {}
        spec = service.get("spec") or {}
        selector = spec.get("selector")
        if meta.get("deletionTimestamp") or not selector:
            return None
        matches = LabelSelector.from_label_selector_dict({"matchLabels": selector})
        pods = [
            pod
            for pod in (await self.manager.client.list(POD, namespace=request.namespace)).items
            if matches.matches((pod.get("metadata") or {}).get("labels") or {})
            and (pod.get("status") or {}).get("podIP")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        groups: dict[Ports, list[Obj]] = {}
        for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name"))):
            groups.setdefault(resolved_ports(spec, pod), []).append(pod)
        await self._write_endpoints(service, groups)
        await self._write_slices(service, groups)
        return None

    async def _write_endpoints(self, service: Obj, groups: dict[Ports, list[Obj]]) -> None:
        meta = service.get("metadata") or {}
        publish_all = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
        subsets = []
        for ports, pods in groups.items():
            subset: dict[str, Any] = {}
            live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
            addresses = [_address(p) for p in live if publish_all or ready(p)]
            not_ready = [_address(p) for p in live if not (publish_all or ready(p))]
            if addresses:
                subset["addresses"] = addresses
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            if not subset:
                continue
            subset["ports"] = [_port(name, number, protocol) for name, number, protocol in ports]
            subsets.append(subset)
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "labels": meta.get("labels") or {},
            },
        }
        if subsets:
            body["subsets"] = subsets
        try:
            current = await self.manager.client.get(
                ENDPOINTS, str(meta.get("name")), namespace=meta.get("namespace")
            )
        except errors.NotFound:
            with contextlib.suppress(errors.AlreadyExists):
                await self.client.create(body)
            return
        if (
            current.get("subsets") == body.get("subsets")
            and ((current.get("metadata") or {}).get("labels") or {}) == body["metadata"]["labels"]
        ):
            return
        body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        with contextlib.suppress(errors.NotFound, errors.Conflict):  # a conflict: reconciled again
            await self.client.update(body)

    async def _write_slices(self, service: Obj, groups: dict[Ports, list[Obj]]) -> None:
        meta = service.get("metadata") or {}
        name, namespace = str(meta.get("name")), meta.get("namespace")
        existing = [
            s
            for s in (
                await self.manager.client.list(
                    ENDPOINT_SLICE,
                    namespace=namespace,
                    match_labels={SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
                )
            ).items
        ]
        wanted = {ports: [_endpoint(p) for p in pods] for ports, pods in groups.items()} or {(): []}
        labels = {**(meta.get("labels") or {}), SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY}
        unused = list(existing)
        for ports, endpoints in wanted.items():
            port_list = [_port(n, number, protocol) for n, number, protocol in ports]
            current = next((s for s in unused if (s.get("ports") or []) == port_list), None) or next(
                iter(unused), None
            )
            body: Obj = {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "generateName": f"{name}-",
                    "namespace": namespace,
                    "labels": labels,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Service",
                            "name": name,
                            "uid": meta.get("uid"),
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "addressType": "IPv4",
                "endpoints": endpoints or None,
                "ports": port_list or None,
            }
            if current is None:
                await self.client.create(body)
                continue
            unused.remove(current)
            if (
                current.get("endpoints") == body["endpoints"]
                and current.get("ports") == body["ports"]
                and ((current.get("metadata") or {}).get("labels") or {}) == labels
            ):
                continue
            current_meta = current.get("metadata") or {}
            body["metadata"].update(
                name=current_meta.get("name"), resourceVersion=current_meta.get("resourceVersion")
            )
            body["metadata"].pop("generateName")
            with contextlib.suppress(errors.NotFound, errors.Conflict):
                await self.client.update(body)
        for stale in unused:
            stale_meta = stale.get("metadata") or {}
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(ENDPOINT_SLICE, str(stale_meta.get("name")), namespace=namespace)


def _port(name: str, number: int, protocol: str) -> Obj:
    port: Obj = {"port": number, "protocol": protocol}
    if name:
        port["name"] = name
    return port


def _target(pod: Obj) -> Obj:
    meta = pod.get("metadata") or {}
    return {
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }


def _address(pod: Obj) -> Obj:
    address: Obj = {"ip": (pod.get("status") or {}).get("podIP"), "targetRef": _target(pod)}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        address["nodeName"] = node
    return address


def _endpoint(pod: Obj) -> Obj:
    terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    is_ready = ready(pod)
    endpoint: Obj = {
        "addresses": [(pod.get("status") or {}).get("podIP")],
        "conditions": {
            "ready": is_ready and not terminating,
            "serving": is_ready,
            "terminating": terminating,
        },
        "targetRef": _target(pod),
    }
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        endpoint["nodeName"] = node
    return endpoint
