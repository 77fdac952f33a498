"""kubernetes-sigs/agent-sandbox's Sandbox controller (``agents.x-k8s.io/v1alpha1``), in kubeloop:
a Sandbox is one isolated, stateful pod with a stable identity, for an AI agent's code to run in.

For each Sandbox the controller keeps
- a headless Service of the Sandbox's name, selecting its pod by the label
  ``agents.x-k8s.io/sandbox-name-hash`` (``status.service``, ``status.serviceFQDN``);
- with ``spec.replicas`` 1 (the default), the pod of the Sandbox's name, made from
  ``spec.podTemplate`` (its labels and annotations, and the hash label); with 0, none;
- ``status.replicas``, ``status.selector`` (the scale subresource's: ``kubectl scale sandbox``)
  and the condition Ready: True (DependenciesReady) while the pod is ready, False
  (DependenciesNotReady) with the pod's phase otherwise.
At ``spec.shutdownTime`` the Sandbox expires: its pod and Service are deleted, and then the
Sandbox too (``shutdownPolicy: Delete``) or it stays with Ready False, SandboxExpired (Retain,
the default). A pod or Service of the Sandbox's name that it did not make is not touched, and a
pod or Service the server refuses (Pod Security admission, say) is not retried at once: Ready
says why, and the Sandbox looks again every few seconds.

This follows upstream's v1alpha1 API and controller; the pod template's spec is kept as given
(the server validates the pod when it is made) rather than schema-checked in the CRD, and
volume claim templates are not supported. The agent platform (``examples/agents``) runs its
``backend: sandbox`` runs in these; ``kubeloop demo`` runs both.

    kubeloop run examples/agent_sandbox --embedded --simulate --install-crds
"""

from __future__ import annotations

import contextlib
import zlib
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field

import kubeloop
from kubeloop import kinds
from kubeloop.crd import PreserveUnknownFields, PrinterColumn, Scale

HASH_LABEL = "agents.x-k8s.io/sandbox-name-hash"
#: How often a Sandbox that cannot have its pod or Service looks again.
RECHECK_SECONDS = 5.0
CLUSTER_DOMAIN = "cluster.local"


class PodMetadata(kubeloop.KubeModel):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplate(kubeloop.KubeModel):
    #: The pod's spec, as a Pod's.
    spec: Annotated[dict[str, Any], PreserveUnknownFields()]
    #: Only labels and annotations are used.
    metadata: PodMetadata | None = None


class SandboxSpec(kubeloop.KubeModel):
    pod_template: PodTemplate
    #: 0 or 1.
    replicas: Annotated[int, Field(ge=0, le=1)] = 1
    #: When the Sandbox expires (RFC 3339).
    shutdown_time: datetime | None = None
    #: Whether the Sandbox itself is deleted when it expires (its pod and Service always are).
    shutdown_policy: Literal["Delete", "Retain"] = "Retain"


class SandboxStatus(kubeloop.KubeModel):
    service_fqdn: Annotated[str | None, Field(alias="serviceFQDN")] = None
    service: str | None = None
    conditions: list[kubeloop.models.meta_v1.Condition] | None = None
    replicas: int = 0
    selector: str | None = None


class Sandbox(
    kubeloop.CustomResource,
    group="agents.x-k8s.io",
    version="v1alpha1",
    short_names=("sandbox",),
    scale=Scale(label_selector_path=".status.selector"),
    printer_columns=(
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        PrinterColumn("Reason", '.status.conditions[?(@.type=="Ready")].reason'),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
):
    """One isolated pod with a stable identity (its name, and a headless Service)."""

    spec: SandboxSpec
    status: SandboxStatus | None = None


def name_hash(name: str) -> str:
    """The value of the label that ties a Sandbox's pod to its Service (a hash: names may be
    longer than a label value)."""
    return f"{zlib.crc32(name.encode()):08x}"


def setup(manager: kubeloop.Manager) -> None:
    client = manager.client

    async def reconcile(request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            sandbox = await client.get(Sandbox, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # deleted: its pod and Service go with it (owner references)
        if sandbox.metadata.deletion_timestamp is not None:
            return None
        spec = sandbox.spec
        selector = {HASH_LABEL: name_hash(request.name)}
        now = datetime.now(UTC)
        if spec.shutdown_time is not None and spec.shutdown_time <= now:
            await delete_owned(request, sandbox, kinds.Pod)
            await delete_owned(request, sandbox, kinds.Service)
            if spec.shutdown_policy == "Delete":
                await client.delete(sandbox, None, namespace=request.namespace)
                return None
            await write_status(
                sandbox, 0, selector, None, ("False", "SandboxExpired", "the Sandbox has expired")
            )
            return None

        service, service_problem = await keep_service(request, sandbox, selector)
        pod, pod_problem = await keep_pod(request, sandbox, selector)
        problem = service_problem or pod_problem
        if problem:
            # Nothing of this Sandbox's changes when the obstacle goes (another's pod deleted, a
            # namespace's Pod Security relaxed): look again.
            ready = ("False", "DependenciesNotReady", problem)
        elif pod is None:
            ready = ("False", "DependenciesNotReady", "no pod: replicas is 0")
        elif pod_is_ready(pod):
            ready = ("True", "DependenciesReady", "Pod is Ready; Service exists")
        else:
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            ready = ("False", "DependenciesNotReady", f"Pod is {phase}, not Ready")
        await write_status(sandbox, 0 if pod is None else 1, selector, service, ready)
        if problem:
            return kubeloop.Result(requeue_after=RECHECK_SECONDS)
        if spec.shutdown_time is not None:
            return kubeloop.Result(requeue_after=(spec.shutdown_time - now).total_seconds())
        return None

    async def keep_service(
        request: kubeloop.Request, sandbox: Sandbox, selector: dict[str, str]
    ) -> tuple[str | None, str]:
        """The headless Service's name, or why there is none."""
        name = request.name
        try:
            found = await client.get(kinds.Service, name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            found = None
        if found is not None and not kubeloop.is_controlled_by(found, sandbox):
            return None, f"Service {name} exists and is not this Sandbox's"

        def mutate(service: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(sandbox, service)
            service.setdefault("metadata", {}).setdefault("labels", {}).update(selector)
            service_spec = service.setdefault("spec", {})
            service_spec["clusterIP"] = "None"
            service_spec["selector"] = selector

        wanted: kubeloop.Obj = {"apiVersion": "v1", "kind": "Service",
                                "metadata": {"name": name, "namespace": request.namespace}}  # fmt: skip
        try:
            await kubeloop.create_or_update(client, wanted, mutate)
        except (kubeloop.errors.Invalid, kubeloop.errors.Forbidden) as refused:
            return None, f"the Service is refused: {refused.message}"
        return name, ""

    async def keep_pod(
        request: kubeloop.Request, sandbox: Sandbox, selector: dict[str, str]
    ) -> tuple[kubeloop.Obj | None, str]:
        """The Sandbox's pod (None with replicas 0), or why it cannot have it."""
        name, namespace = request.name, request.namespace
        try:
            pod: kubeloop.Obj | None = await client.get(kinds.Pod, name, namespace=namespace)
        except kubeloop.errors.NotFound:
            pod = None
        if pod is not None and not kubeloop.is_controlled_by(pod, sandbox):
            return None, f"Pod {name} exists and is not this Sandbox's"
        if sandbox.spec.replicas == 0:
            if pod is not None:
                await client.delete(pod, None, namespace=namespace)
            return None, ""
        if pod is not None:
            return pod, ""
        template = sandbox.spec.pod_template
        metadata = template.metadata or PodMetadata()
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {**(metadata.labels or {}), **selector},
                "annotations": dict(metadata.annotations or {}),
            },
            "spec": template.spec,
        }
        kubeloop.set_controller_reference(sandbox, pod)
        try:
            return await client.create(pod), ""
        except (kubeloop.errors.Invalid, kubeloop.errors.Forbidden) as refused:  # Pod Security, say
            return None, f"the pod is refused: {refused.message}"

    async def delete_owned(
        request: kubeloop.Request, sandbox: Sandbox, kind: kubeloop.GroupVersionKind
    ) -> None:
        namespace = request.namespace
        try:
            found = await client.get(kind, request.name, namespace=namespace)
        except kubeloop.errors.NotFound:
            return
        if kubeloop.is_controlled_by(found, sandbox):
            with contextlib.suppress(kubeloop.errors.NotFound):
                await client.delete(found, None, namespace=namespace)

    async def write_status(
        sandbox: Sandbox,
        replicas: int,
        selector: dict[str, str],
        service: str | None,
        ready: tuple[str, str, str],
    ) -> None:
        """The status the Sandbox should have, written only when it differs."""
        old = sandbox.status or SandboxStatus()
        conditions = [c.to_dict() for c in old.conditions or ()]
        kubeloop.set_status_condition(
            conditions, "Ready", *ready, observed_generation=sandbox.metadata.generation
        )
        namespace = sandbox.metadata.namespace
        status: dict[str, Any] = {
            "replicas": replicas,
            "selector": ",".join(f"{key}={value}" for key, value in selector.items()),
            "service": service,
            "serviceFQDN": f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}" if service else None,
            "conditions": conditions,
        }
        current = {**old.to_dict(), "conditions": [c.to_dict() for c in old.conditions or ()]}
        if all(current.get(key) == value for key, value in status.items()):
            return
        await client.patch(sandbox, None, {"status": status}, namespace=namespace, subresource="status")

    (kubeloop.Builder(manager).for_(Sandbox).owns(kinds.Pod).owns(kinds.Service).complete(reconcile))


def pod_is_ready(pod: kubeloop.Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
