"""SkillPack → one owned ConfigMap, ``skillpack-<name>``, a key per skill."""

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

    def setup(self) -> None:
        builder = kubeloop.Builder(self.manager).named("skillpack").for_(SkillPack)
        builder.owns(kinds.ConfigMap).complete(self.reconcile)

    async def reconcile(self, request: kubeloop.Request) -> None:
        try:
            pack = await self.client.get(SkillPack, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return  # its ConfigMap goes with it
        name = config_map_name(request.name)

        def mutate(config: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(pack, config)
            config["metadata"]["labels"] = labels("skillpack", request.name)
            config["data"] = {skill.name: skill.text for skill in pack.spec.skills}

        await kubeloop.create_or_update(self.client, named(kinds.ConfigMap, name, request.namespace), mutate)
        status = {
            "observedGeneration": pack.metadata.generation,
            "configMapName": name,
            "skills": len(pack.spec.skills),
        }
        await write_status(self.client, pack, status)


def setup(manager: kubeloop.Manager) -> SkillPackReconciler:
    reconciler = SkillPackReconciler(manager)
    reconciler.setup()
    return reconciler
