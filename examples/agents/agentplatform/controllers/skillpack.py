"""SkillPack → one owned ConfigMap, ``skillpack-<name>``, a key per skill. A ConfigMap of that name
it does not control is left alone: a Warning Event (NameConflict) says so, and the pack is
looked at again every 10 s."""

from __future__ import annotations

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import SkillPack
from .builders import config_map_name, labels, named, write_status


class SkillPackReconciler:
    """Reconciles SkillPacks."""

    def __init__(self, manager: kubeloop.Manager) -> None:
        self.manager = manager
        self.client = manager.client
        self.recorder = manager.event_recorder("skillpack")

    def setup(self) -> None:
        builder = kubeloop.Builder(self.manager).named("skillpack").for_(SkillPack)
        builder.owns(kinds.ConfigMap).complete(self.reconcile)

    async def reconcile(self, request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            pack = await self.client.get(SkillPack, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # its ConfigMap goes with it
        name = config_map_name(request.name)

        def mutate(config: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(pack, config)
            config["metadata"]["labels"] = labels("skillpack", request.name)
            config["data"] = {skill.name: skill.text for skill in pack.spec.skills}

        try:
            await kubeloop.create_or_update(
                self.client, named(kinds.ConfigMap, name, request.namespace), mutate, controlled_by=pack
            )
        except kubeloop.NotControlledError as conflict:
            self.recorder.event(pack, kubeloop.WARNING, "NameConflict", str(conflict))
            return kubeloop.Result(requeue_after=10)  # no watch says when it goes
        status = {
            "observedGeneration": pack.metadata.generation,
            "configMapName": name,
            "skills": len(pack.spec.skills),
        }
        await write_status(self.client, pack, status)
        return None


def setup(manager: kubeloop.Manager) -> SkillPackReconciler:
    reconciler = SkillPackReconciler(manager)
    reconciler.setup()
    return reconciler
