"""Runs in a Sandbox of kubernetes-sigs/agent-sandbox (``agents.x-k8s.io/v1alpha1``), for
``AgentRun.spec.backend: sandbox``: an isolated singleton pod with a stable identity, which the
agent-sandbox controller makes from ``spec.podTemplate`` (the pod is named after the Sandbox)
and whose Ready condition mirrors the pod's.

The run's Sandbox holds the pod its Job would have run (the same container, volumes, security
context and ServiceAccount). The run follows it: Running once the Sandbox is Ready, then
Succeeded or Failed as its pod ends, the result from the pod's termination message; the Sandbox
is deleted when the run ends, releasing the pod. Whether the kind is served is asked of
discovery when a run needs it: a cluster without agent-sandbox fails such a run at once, with
reason BackendUnavailable and what to install. The Sandbox watch starts with the first sandboxed
run, so an operator runs the same on clusters with and without agent-sandbox.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import kubeloop
from kubeloop import kinds

SANDBOX_GROUP = "agents.x-k8s.io"
SANDBOX = kubeloop.GroupVersionKind(SANDBOX_GROUP, "v1alpha1", "Sandbox")
UNAVAILABLE = (
    f"this cluster does not serve {SANDBOX.kind} ({SANDBOX.api_version}): install "
    "kubernetes-sigs/agent-sandbox (its CRDs and controller), or run with backend: job"
)


def sandbox_of(
    name: str, namespace: str, pod_labels: dict[str, str], template: dict[str, Any]
) -> kubeloop.Obj:
    """The run's Sandbox: one replica of ``template`` (a pod template, metadata and spec)."""
    return {
        "apiVersion": SANDBOX.api_version,
        "kind": SANDBOX.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
        "spec": {"podTemplate": template, "replicas": 1},
    }


def _ready(sandbox: kubeloop.Obj) -> dict[str, Any]:
    for condition in (sandbox.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


class SandboxBackend:
    """Makes and follows runs' Sandboxes for the run controller."""

    #: The Sandboxes' owners: the runs.
    owner = kubeloop.GroupVersionKind("agents.kubeloop.dev", "v1alpha1", "AgentRun")

    def __init__(self, manager: kubeloop.Manager) -> None:
        self.manager = manager
        self.client = manager.client
        self.reader = manager.api_reader
        self.controller: kubeloop.Controller | None = None
        permissions = manager.permissions
        permissions.allow_resource(SANDBOX_GROUP, "sandboxes", "get", "list", "watch", "create", "delete")
        permissions.allow(kinds.Pod, "get")

    async def served(self) -> bool:
        """Whether the cluster serves Sandboxes (asked of discovery each time it is not yet)."""
        try:
            await self.reader.mapping(SANDBOX)
        except LookupError:  # NoKindMatch
            return False
        if self.controller is not None and not self._watching():
            informer = self.manager.informer_for(SANDBOX)  # started at once: the manager runs
            self.controller.watch(
                kubeloop.source.Kind(informer, kubeloop.handler.EnqueueRequestForOwner(self.owner))
            )
        return True

    def _watching(self) -> bool:
        assert self.controller is not None
        return any(
            isinstance(source, kubeloop.source.Kind) and source.informer.kind == SANDBOX
            for source in self.controller.sources
        )

    async def sandbox(self, name: str, namespace: str) -> kubeloop.Obj | None:
        try:
            return await self.client.get(SANDBOX, name, namespace=namespace)
        except kubeloop.errors.NotFound:
            return None

    async def phase(
        self, sandbox: kubeloop.Obj | None, termination: Callable[[kubeloop.Obj], str]
    ) -> dict[str, Any]:
        """Phase, reason and message as the Sandbox and its pod say; ``termination(pod)`` is the
        pod's termination message (the result)."""
        if sandbox is None:
            return {"phase": "Pending", "reason": "SandboxCreated", "message": "waiting for the Sandbox"}
        meta = sandbox["metadata"]
        try:
            pod = await self.reader.get(kinds.Pod, meta["name"], namespace=meta["namespace"])
        except kubeloop.errors.NotFound:
            pod = None
        pod_phase = ((pod or {}).get("status") or {}).get("phase")
        if pod is not None and pod_phase == "Succeeded":
            return {"phase": "Succeeded", "reason": "Completed", "message": "", "result": termination(pod)}
        if pod is not None and pod_phase == "Failed":
            failed: dict[str, Any] = {"phase": "Failed", "reason": "SandboxFailed"}
            failed["message"] = (
                f"the Sandbox's pod failed: {(pod.get('status') or {}).get('reason') or 'Error'}"
            )
            result = termination(pod)
            if result:
                failed["result"] = result
            return failed
        ready = _ready(sandbox)
        if ready.get("status") == "True":
            return {"phase": "Running", "reason": "SandboxReady", "message": ""}
        message = str(ready.get("message") or "waiting for the Sandbox to be Ready")
        return {"phase": "Pending", "reason": "SandboxStarting", "message": message}

    async def release(self, name: str, namespace: str) -> None:
        """Delete the run's Sandbox (and with it its pod)."""
        with contextlib.suppress(kubeloop.errors.NotFound):
            await self.client.delete(SANDBOX, name, namespace=namespace, propagation_policy="Background")
