"""A simulated node and its kubelet: pods are scheduled on it and go through a pod's life.

``SimulatedKubelet`` registers one Node (Ready, with capacity and system info) and reconciles
Pods: an unscheduled pod that fits the node (:mod:`.scheduling`) is bound to it (a Binding, as a
scheduler writes it; one that does not is marked Unschedulable), gets
an IP and its start time, runs after ``pod_start_seconds`` (containers running and ready,
condition Ready) — unless a volume cannot be mounted (a Secret or ConfigMap it names, or a key
its items name, does not exist): then its containers wait in ContainerCreating and a Warning
Event FailedMount says why, in the kubelet's words; or unless its environment names a Secret or
ConfigMap, or a key of one, that does not exist: then it waits with reason
CreateContainerConfigError; either way it is looked at again every ``config_retry_seconds`` —
and, unless its ``restartPolicy`` is
``Always``, ends Succeeded or Failed as its annotations say (``simulation``). Pods of other
nodes are left alone.

The scheduler's and the kubelet's Events say so as they do (``podevents``): Scheduled or
FailedScheduling, and for each container Pulled, Created and Started, Killing when it stops.

A pod all of whose images are local (``SimulationOptions.local_images``) is not simulated: its
containers run as processes (``processes``), its status is theirs, and it goes when they end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import pathlib
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.client.calloptions import Preconditions
from kubeloop.client.restclient import REQUEST_ERRORS
from kubeloop.controller.handler import EnqueueRequestForObject, EnqueueRequestsFromMapFunc
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controller.source import Channel
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager
from kubeloop.node.localimages import LocalImages
from kubeloop.node.podaddresses import PodAddresses
from kubeloop.node.podevents import KUBELET, SCHEDULER, KubeletEvents, SchedulerEvents
from kubeloop.node.podphases import ended_status, pod_condition, running_status, waiting_statuses
from kubeloop.node.podruns import containers_of
from kubeloop.node.podvolumes import CannotMount
from kubeloop.node.processes import ProcessRuntime
from kubeloop.node.scheduler import fits
from kubeloop.node.serviceproxy import ServiceProxy
from kubeloop.node.simulation import (
    DURATION_ANNOTATION,
    MESSAGE_ANNOTATION,
    NODE_NAME,
    OUTCOME_ANNOTATION,
    SimulationOptions,
)
from kubeloop.version import __version__

log = logging.getLogger("kubeloop.node.kubelet")

NODE = kinds.Node
POD = kinds.Pod
SERVICE_ACCOUNT = kinds.ServiceAccount
CONFIG_MAP = kinds.ConfigMap
SECRET = kinds.Secret
NODE_IP = "10.89.0.2"
KUBELET_VERSION = "v1.33.0"
#: What a pod's processes are given once its object is gone (a forced delete): the shortest
#: grace period upstream's container runtime gives.
FORCED_GRACE_SECONDS = 2.0


def node_object() -> Obj:
    """The simulated Node as it registers itself."""
    now = timestamps.now()

    def condition(kind: str, status: str, reason: str, message: str) -> Obj:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }

    resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/control-plane": "",
                "type": "kubeloop",
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition(
                    "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
                ),
                condition(
                    "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"
                ),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": NODE_IP},
                {"type": "Hostname", "address": NODE_NAME},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "kubeloop",
                "systemUUID": "kubeloop",
                "bootID": "kubeloop",
                "kernelVersion": "simulated",
                "osImage": f"kubeloop {__version__} (simulated)",
                "containerRuntimeVersion": "kubeloop://simulated",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "phase": "Running",
        },
    }


class SimulatedKubelet:
    """Registers the node (a runnable of ``manager``) and reconciles Pods (a controller)."""

    def __init__(self, manager: Manager, options: SimulationOptions) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self.options = options
        self._addresses = itertools.count(2)
        #: Pod uid → when (loop time) it was bound: timings finer than startTime's seconds.
        self._bound: dict[str, float] = {}
        #: Pod uid → why a volume cannot be mounted, as last said in an Event.
        self._unmounted: dict[str, str] = {}
        #: Pod uid → what its containers' environment names and cannot be found, as last said.
        self._unconfigured: dict[str, str] = {}
        #: (namespace, name) → the uid of the pod of that name last reconciled: how a pod that
        #: is gone at once (a forced delete) is forgotten by the maps above.
        self._uids: dict[tuple[str, str], str] = {}
        self.recorder = manager.event_recorder(KUBELET, host=NODE_NAME)
        #: What the kubelet and the scheduler say about pods and their containers.
        self.events = KubeletEvents(self.recorder.event)
        self.scheduler_events = SchedulerEvents(manager.events_v1_recorder(SCHEDULER))
        manager.add(self.register_node, name="simulated node", need_leader_election=False)
        #: (namespace, kind, name) of a ConfigMap or Secret → the local pods that name it.
        self._named_by: dict[tuple[str, str, str], set[str]] = {}
        #: The proxy through which local pods reach Services (None: no local images).
        self.proxy: ServiceProxy | None = None
        #: Local pods' own loopback addresses (127.244.x.y: many pods may listen on one port).
        self.addresses = PodAddresses()
        #: Runs the pods of local images as processes (None: every pod is simulated).
        self.processes: ProcessRuntime | None = None
        builder = (
            Builder(manager).named("simulated-kubelet").for_(POD).with_options(max_concurrent_reconciles=4)
        )
        images = LocalImages.parse(options.local_images)
        if options.installed_images:
            images = images.with_installed()
        if images:
            server = urlsplit(manager.api_reader.config.server)
            self.proxy = ServiceProxy(self._objects)
            self.processes = ProcessRuntime(
                options.pods_dir or pathlib.Path(tempfile.mkdtemp(prefix="kubeloop-pods-")),
                images,
                self._config_source,
                self._issue_token,
                api_host=server.hostname or "127.0.0.1",
                api_port=server.port or 443,
                backoff_seconds=options.crash_backoff_seconds,
                record=self.recorder.event,
                proxy=self.proxy,
                fork_server=options.fork_server,
            )
            # A process that ends is news about its pod; so is a change of a ConfigMap or Secret
            # one of its volumes or variables names (its files are written again at once).
            builder.watches_raw_source(Channel(self.processes.changed, EnqueueRequestForObject()))
            for kind in (CONFIG_MAP, SECRET):
                builder.watches(kind, EnqueueRequestsFromMapFunc(self._pods_naming(kind.kind)), only_metadata=True)
            manager.add(self._own_processes, name="process node", need_leader_election=False)
        builder.complete(self.reconcile)

    def _pods_naming(self, kind: str) -> Callable[[Obj], list[Request]]:
        """Maps a ConfigMap or Secret (``kind``) to the local pods that name it."""

        def requests(obj: Obj) -> list[Request]:
            meta = obj.get("metadata") or {}
            namespace = str(meta.get("namespace") or "")
            named = self._named_by.get((namespace, kind, str(meta.get("name"))), ())
            return [Request(namespace, pod) for pod in named]

        return requests

    def _remember_names(self, pod: Obj) -> None:
        """Note which ConfigMaps and Secrets the local pod names."""
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        for kind, referenced in _names(pod):
            self._named_by.setdefault((namespace, kind, referenced), set()).add(name)

    def _forget_names(self, namespace: str, name: str) -> None:
        for key, pods in list(self._named_by.items()):
            if key[0] == namespace:
                pods.discard(name)
                if not pods:
                    del self._named_by[key]

    async def _own_processes(self, stop: asyncio.Event) -> None:
        """Kill what an earlier server left running and remove the folders of its pods that are
        gone, then, when the server stops, stop its own."""
        assert self.processes is not None
        folders = self.processes.pod_folders()  # before any pod of this server could have made one
        killed = self.processes.clean_up_left_behind()
        if killed:
            log.warning("process node: killed %d process group(s) an earlier run left behind", len(killed))
        with contextlib.suppress(*REQUEST_ERRORS):
            pods = await self.client.list(POD)
            for kept in pods:
                if address := (kept.get("status") or {}).get("podIP"):
                    self.addresses.keep(str(address))
            live = {str((p.get("metadata") or {}).get("uid")) for p in pods}
            removed = self.processes.remove_folders(folders - live)
            if removed:
                log.info("process node: removed the folders of %d pod(s) deleted meanwhile", removed)
        try:
            await stop.wait()
        finally:
            await self.processes.close()
            if self.proxy is not None:
                await self.proxy.close()
            self.addresses.close()

    async def _objects(self, kind: str, namespace: str | None) -> list[Obj]:
        """Services or Endpoints (of ``namespace``, or all), as the cache has them."""
        found = await self.manager.client.list(GroupVersionKind("", "v1", kind), namespace=namespace)
        return list(found["items"] if isinstance(found, dict) else found.items)

    async def _issue_token(
        self, namespace: str, account: str, audiences: list[str], seconds: int, pod: str, pod_uid: str
    ) -> tuple[str, float]:
        """A token of the pod's account bound to the pod (a TokenRequest, as the kubelet asks
        for a projected token) and when it expires."""
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": audiences,
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid},
            },
        }
        try:
            issued = await self.client.create(
                request, of=SERVICE_ACCOUNT, name=account, subresource="token", namespace=namespace
            )
        except errors.NotFound:
            raise CannotMount(f'failed to fetch token: serviceaccounts "{account}" not found') from None
        except errors.APIError as refused:
            raise CannotMount(f"failed to fetch token: {refused}") from None
        status = issued.get("status") or {}
        expires = timestamps.parse_time(status.get("expirationTimestamp"))
        return str(status.get("token") or ""), expires.timestamp() if expires is not None else 0.0

    async def _config_source(self, kind: str, namespace: str, name: str) -> Obj | None:
        try:
            found: Obj = await self.client.get(GroupVersionKind("", "v1", kind), name, namespace=namespace)
        except errors.NotFound:
            return None
        return found

    async def register_node(self, stop: asyncio.Event) -> None:
        """Register the node, and again whenever it is found gone (checked every
        ``node_check_seconds``), as a kubelet does."""
        while not stop.is_set():
            try:
                await self.client.create(node_object())
            except errors.AlreadyExists:
                pass
            except REQUEST_ERRORS as exc:
                log.warning("simulated node: cannot register (%s); trying again", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.options.node_check_seconds)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            pod = await self.manager.client.get(POD, request.name, namespace=request.namespace)
        except errors.NotFound:
            if (gone := self._uids.pop((request.namespace, request.name), None)) is not None:
                self._forget(gone)
            if self.processes is not None:  # its processes go with it (forced: SIGKILL soon)
                self._forget_names(request.namespace, request.name)
                self.processes.stop(request.namespace, request.name, FORCED_GRACE_SECONDS)
            return None
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        if (seen := self._uids.get((request.namespace, request.name))) != uid:
            if seen is not None:  # deleted and made again under the same name
                self._forget(seen)
            self._uids[request.namespace, request.name] = uid
        if meta.get("deletionTimestamp"):
            return await self._finish_deletion(pod)
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            return await self._schedule(pod)
        if node != NODE_NAME:
            return None
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            self._bound.pop(uid, None)
            return None
        loop = asyncio.get_running_loop()
        bound = self._bound.get(uid)
        if bound is None:
            # Bound before this process started: count from the recorded start time.
            started = timestamps.parse_time(status.get("startTime"))
            elapsed = (datetime.now(UTC) - started).total_seconds() if started is not None else 0.0
            bound = self._bound[uid] = loop.time() - elapsed
        elapsed = loop.time() - bound
        if not status.get("startTime"):
            await self._write_status(pod, self._pending(pod))
            local = self.processes is not None and self.processes.handles(pod)
            return Result(requeue_after=0.0 if local else self.options.pod_start_seconds)
        if self.processes is not None and self.processes.handles(pod):
            return await self._run_locally(pod, self.processes)
        if elapsed < self.options.pod_start_seconds:
            return Result(requeue_after=self.options.pod_start_seconds - elapsed)
        restart = spec.get("restartPolicy") or "Always"
        if phase != "Running":
            blocked = await self._cannot_start(pod)
            if blocked is not None:
                return blocked
            await self._write_status(pod, running_status(pod))
            for container in containers_of(pod):
                self.events.started(pod, container)
        if restart == "Always":
            return None
        annotations = meta.get("annotations") or {}
        run = _seconds(annotations.get(DURATION_ANNOTATION), self.options.pod_run_seconds)
        left = self.options.pod_start_seconds + run - elapsed
        if left > 0:
            return Result(requeue_after=left)
        failed = str(annotations.get(OUTCOME_ANNOTATION, "")).lower() == "failed"
        await self._write_status(pod, ended_status(pod, failed, str(annotations.get(MESSAGE_ANNOTATION, ""))))
        self._bound.pop(uid, None)
        return None

    def _forget(self, uid: str) -> None:
        """Drop what the kubelet keeps of the pod ``uid``: its bind time, and the reasons it
        last gave in Events."""
        self._bound.pop(uid, None)
        self._unmounted.pop(uid, None)
        self._unconfigured.pop(uid, None)

    async def _finish_deletion(self, pod: Obj) -> Result | None:
        """A pod being deleted: its processes stopped within its deletionGracePeriodSeconds
        (SIGTERM, then SIGKILL), then the pod removed (grace 0, as a kubelet does once its
        containers are gone). A simulated pod's containers stop at once, on any node."""
        meta = pod.get("metadata") or {}
        namespace, name, uid = str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid"))
        self._forget(uid)
        if self.processes is None or not self.processes.handles(pod):  # simulated: stop at once
            for status in (pod.get("status") or {}).get("containerStatuses") or ():
                if isinstance(status, dict) and "running" in (status.get("state") or {}):
                    self.events.stopping(pod, str(status.get("name")))
        if self.processes is not None:
            self._forget_names(namespace, name)
            grace = meta.get("deletionGracePeriodSeconds")
            if self.processes.stop(namespace, name, None if grace is None else float(grace), pod=pod):
                return None  # the runtime names the pod again once they have ended
        if meta.get("deletionGracePeriodSeconds"):
            with contextlib.suppress(errors.NotFound, errors.Conflict):
                await self.manager.client.delete(
                    POD, name, namespace=namespace, grace_period_seconds=0, preconditions=Preconditions(uid=uid)
                )
        return None

    async def _run_locally(self, pod: Obj, processes: ProcessRuntime) -> Result | None:
        """A local pod: its volumes and configuration checked as for any pod, then its
        processes started (or again) and its status written as they have it."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        status = pod.get("status") or {}
        self._remember_names(pod)
        started = bool(processes.pod_run(pod).containers)
        try:
            remount = await processes.mount(pod)
        except CannotMount as failed:
            if not started:
                return await self._cannot_start(pod, volumes_made=True, unmounted=str(failed))
            log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), failed)
            remount = self.options.config_retry_seconds
        if not started:  # nothing started yet: what its environment needs must be there
            blocked = await self._cannot_start(pod, volumes_made=True)
            if blocked is not None:
                return blocked
        deadline = _deadline(pod)
        if deadline is not None and deadline <= 0:
            processes.halt(pod, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
        again = await processes.sync(pod)
        state = processes.status(pod)
        phase = state.phase
        wanted: Obj = {
            "phase": phase,
            "containerStatuses": state.containers,
            "conditions": _conditions(
                status, ready=state.ready, ended=phase in ("Succeeded", "Failed"), pending=state.pending
            ),
        }
        if state.init_containers:
            wanted["initContainerStatuses"] = state.init_containers
        if state.reason:
            wanted.update(reason=state.reason, message=state.message)
        if any(status.get(key) != value for key, value in wanted.items()):
            await self._write_status(pod, wanted)
        if deadline is not None and deadline > 0:
            again = deadline if again is None else min(again, deadline)
        if phase in ("Succeeded", "Failed"):
            self._bound.pop(uid, None)
            self._forget_names(str(meta.get("namespace")), str(meta.get("name")))
            return None
        return Result(requeue_after=min(again, remount) if again is not None else remount)

    async def _cannot_start(
        self, pod: Obj, *, volumes_made: bool = False, unmounted: str | None = None
    ) -> Result | None:
        """When the pod's containers cannot be made yet, say why as a kubelet does and look
        again in ``config_retry_seconds``: a volume that does not mount first (ContainerCreating,
        and a FailedMount Event once per reason), then the environment's references
        (CreateContainerConfigError); None when they can be. A local pod's volumes are made
        before (``volumes_made``; ``unmounted``: why one could not be); a simulated pod's are
        checked here."""
        uid = str((pod.get("metadata") or {}).get("uid"))
        if not volumes_made:
            unmounted = await self._unmountable(pod)
        unconfigured = await self._missing_config(pod) if unmounted is None else None
        missing = unconfigured[1] if unconfigured is not None else None
        if unmounted is None:
            self._unmounted.pop(uid, None)
        if unmounted is None and missing is None:
            return None
        if unmounted is not None and self._unmounted.get(uid) != unmounted:
            self._unmounted[uid] = unmounted
            self.events.mount_failed(pod, unmounted)
        if missing is None:
            self._unconfigured.pop(uid, None)
        elif unconfigured is not None and self._unconfigured.get(uid) != missing:
            self._unconfigured[uid] = missing
            self.events.failed(pod, *unconfigured)
        waiting = (
            {"reason": "ContainerCreating"}
            if unmounted is not None
            else {"reason": "CreateContainerConfigError", "message": missing}
        )
        statuses = (pod.get("status") or {}).get("containerStatuses") or ()
        if [c.get("state", {}).get("waiting") for c in statuses] != [waiting for _ in containers_of(pod)]:
            await self._write_status(pod, {"containerStatuses": waiting_statuses(pod, waiting)})
        return Result(requeue_after=self.options.config_retry_seconds)

    async def _unmountable(self, pod: Obj) -> str | None:
        """Why a volume of the pod cannot be mounted, as the kubelet's FailedMount says it
        (``MountVolume.SetUp failed for volume "v" : secret "x" not found``); None when every
        Secret and ConfigMap its volumes name (directly or projected) is there, with the keys
        their items name. Sources marked ``optional`` may be missing."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            if not isinstance(volume, dict):
                continue
            projected = volume.get("projected") or {}
            sources = [volume, *(s for s in projected.get("sources") or () if isinstance(s, dict))]
            for source in sources:
                for field, kind, name_field in (
                    ("secret", "Secret", "secretName"),
                    ("configMap", "ConfigMap", "name"),
                ):
                    ref = source.get(field)
                    if not isinstance(ref, dict) or ref.get("optional"):
                        continue
                    name = str(ref.get(name_field) or ref.get("name") or "")
                    try:
                        obj = await self.client.get(
                            GroupVersionKind("", "v1", kind), name, namespace=namespace
                        )
                    except errors.NotFound:
                        why = f'{kind.lower()} "{name}" not found'
                    else:
                        keys = {*(obj.get("data") or {}), *(obj.get("binaryData") or {})}
                        absent = [i.get("key") for i in ref.get("items") or () if i.get("key") not in keys]
                        if not absent:
                            continue
                        why = (  # the kubelet's two wordings
                            f"references non-existent secret key: {absent[0]}"
                            if kind == "Secret"
                            else f"configmap references non-existent config key: {absent[0]}"
                        )
                    return f'MountVolume.SetUp failed for volume "{volume.get("name")}" : {why}'
        return None

    async def _missing_config(self, pod: Obj) -> tuple[str, str] | None:
        """The first container whose environment names what does not exist, and what, in the
        kubelet's words (``secret "x" not found``, ``couldn't find key k in Secret ns/x``); None
        when all is there. References marked ``optional`` may be missing."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        found: dict[tuple[str, str], Obj | None] = {}

        async def lookup(kind: str, name: str) -> Obj | None:
            if (kind, name) not in found:
                try:
                    found[(kind, name)] = await self.client.get(
                        GroupVersionKind("", "v1", kind), name, namespace=namespace
                    )
                except errors.NotFound:
                    found[(kind, name)] = None
            return found[(kind, name)]

        containers = [*((pod.get("spec") or {}).get("initContainers") or ()), *containers_of(pod)]
        for container in containers:
            for source in container.get("envFrom") or ():
                for field, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                    ref = source.get(field)
                    if (
                        isinstance(ref, dict)
                        and not ref.get("optional")
                        and await lookup(kind, str(ref.get("name"))) is None
                    ):
                        return str(container.get("name")), f'{kind.lower()} "{ref.get("name")}" not found'
            for var in container.get("env") or ():
                value_from = var.get("valueFrom") or {}
                for field, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                    ref = value_from.get(field)
                    if not isinstance(ref, dict) or ref.get("optional"):
                        continue
                    obj = await lookup(kind, str(ref.get("name")))
                    if obj is None:
                        return str(container.get("name")), f'{kind.lower()} "{ref.get("name")}" not found'
                    keys = {
                        *(obj.get("data") or {}),
                        *(obj.get("stringData") or {}),
                        *(obj.get("binaryData") or {}),
                    }
                    if ref.get("key") not in keys:
                        why = f"couldn't find key {ref.get('key')} in {kind} {namespace}/{ref.get('name')}"
                        return str(container.get("name")), why
        return None

    async def _schedule(self, pod: Obj) -> Result | None:
        """Bind the pod to the node if it fits there (selector, affinity, taints); otherwise
        mark it unschedulable, as the scheduler does, and look again later."""
        try:
            node = await self.manager.client.get(NODE, NODE_NAME)
        except errors.NotFound:
            node = node_object()
        if fits(pod.get("spec") or {}, node):
            await self._bind(pod)
            return None
        message = (
            "0/1 nodes are available: 1 node(s) didn't match the pod's node affinity/selector or taints."
        )
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or () if isinstance(c, dict)]
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if scheduled is None or scheduled.get("reason") != "Unschedulable":
            now = timestamps.now()
            condition = pod_condition("PodScheduled", "False", now, "Unschedulable", message)
            kept = [c for c in conditions if c.get("type") != "PodScheduled"]
            await self._write_status(pod, {"conditions": [*kept, condition]})
            self.scheduler_events.unschedulable(pod, message)
        return Result(requeue_after=self.options.node_check_seconds)

    async def _bind(self, pod: Obj) -> None:
        """Bind the pod to the node as a scheduler does: a Binding (``bindings``)."""
        meta = pod.get("metadata") or {}
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME},
        }
        # NotFound: the pod is gone; Conflict: bound meanwhile (its next event shows where).
        with contextlib.suppress(errors.NotFound, errors.Conflict):
            await self.client.create(binding)
            self._bound[str(meta.get("uid"))] = asyncio.get_running_loop().time()
            self.scheduler_events.scheduled(pod, NODE_NAME)

    async def _write_status(self, pod: Obj, status: Obj) -> None:
        meta = pod.get("metadata") or {}
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
        with contextlib.suppress(errors.NotFound):
            await self.client.patch(
                POD, str(meta.get("name")), patch, namespace=meta.get("namespace"), subresource="status"
            )

    def _pending(self, pod: Obj) -> Obj:
        now = timestamps.now()
        if self.processes is not None and self.processes.handles(pod):
            ip = self.addresses.take()
        else:
            address = next(self._addresses)
            ip = f"10.244.{address // 250}.{address % 250 + 1}"
        return {
            "phase": "Pending",
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": [
                pod_condition("PodReadyToStartContainers", "False", now),
                pod_condition("Initialized", "True", now),
                pod_condition("Ready", "False", now, "ContainersNotReady", "containers with unready status"),
                pod_condition(
                    "ContainersReady", "False", now, "ContainersNotReady", "containers with unready status"
                ),
                pod_condition("PodScheduled", "True", now),
            ],
            "containerStatuses": waiting_statuses(pod, {"reason": "ContainerCreating"}),
        }


def _names(pod: Obj) -> set[tuple[str, str]]:
    """The (kind, name) of each ConfigMap and Secret the pod's volumes and variables name."""
    spec = pod.get("spec") or {}
    named: set[tuple[str, str]] = set()
    for volume in spec.get("volumes") or ():
        projected = (volume.get("projected") or {}).get("sources") or ()
        for source in [volume, *projected]:
            if isinstance(source.get("configMap"), dict):
                named.add(("ConfigMap", str(source["configMap"].get("name"))))
            if isinstance(source.get("secret"), dict):
                secret = source["secret"]
                named.add(("Secret", str(secret.get("secretName") or secret.get("name"))))
    for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        for source in container.get("envFrom") or ():
            for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                if isinstance(source.get(field), dict):
                    named.add((kind, str(source[field].get("name"))))
        for var in container.get("env") or ():
            value_from = var.get("valueFrom") or {}
            for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                if isinstance(value_from.get(field), dict):
                    named.add((kind, str(value_from[field].get("name"))))
    return named


def _deadline(pod: Obj) -> float | None:
    """Seconds left of the pod's ``activeDeadlineSeconds`` (from its start), if it has one."""
    seconds = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    started = timestamps.parse_time((pod.get("status") or {}).get("startTime"))
    if not isinstance(seconds, int) or started is None:
        return None
    return seconds - (datetime.now(UTC) - started).total_seconds()


def _conditions(status: Obj, *, ready: bool, ended: bool, pending: list[str] | None = None) -> list[Obj]:
    """A local pod's conditions, each keeping its transition time while its status holds
    (``pending``: the init containers that have not done their work)."""
    now = timestamps.now()
    before = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
    not_ready = ("ContainersNotReady", "containers with unready status") if not ready else ("", "")
    initializing = (
        ("ContainersNotInitialized", f"containers with incomplete status: [{' '.join(pending)}]")
        if pending
        else ("", "")
    )
    wanted = [
        ("PodReadyToStartContainers", "False" if ended else "True", "", ""),
        ("Initialized", "False" if pending else "True", *initializing),
        ("Ready", "True" if ready else "False", *not_ready),
        ("ContainersReady", "True" if ready else "False", *not_ready),
        ("PodScheduled", "True", "", ""),
    ]
    conditions = []
    for kind, value, reason, message in wanted:
        old = before.get(kind) or {}
        since = old.get("lastTransitionTime") if old.get("status") == value else now
        conditions.append(pod_condition(kind, value, str(since or now), reason, message))
    return conditions


def _seconds(value: Any, default: float) -> float:
    try:
        seconds = float(str(value).removesuffix("s")) if value is not None else default
    except ValueError:
        return default
    return seconds if seconds >= 0 else default
