"""SkillPack → one owned ConfigMap, ``skillpack-<name>``, a key per skill (its text), and the
tools its skills declare in ``.tools.json`` (a list, each with its skill's name). A ConfigMap of
that name it does not control is left alone: a Warning Event (NameConflict) says so, and the
pack is looked at again every 10 s."""

from __future__ import annotations

import json

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import SkillPack
from .builders import config_map_name, labels, named, write_status

#: The key of a pack's ConfigMap that lists its skills' tools (a file the runner does not take
#: for a skill: skills' names do not start with ".").
TOOLS_KEY = ".tools.json"


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
        tools = [{"skill": skill.name, **tool.to_dict()} for skill in pack.spec.skills for tool in skill.tools]

        def mutate(config: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(pack, config)
            config["metadata"]["labels"] = labels("skillpack", request.name)
            config["data"] = {skill.name: skill.text for skill in pack.spec.skills}
            if tools:
                config["data"][TOOLS_KEY] = json.dumps(tools, sort_keys=True)

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
            "tools": len(tools),
        }
        await write_status(self.client, pack, status)
        return None


def setup(manager: kubeloop.Manager) -> SkillPackReconciler:
    reconciler = SkillPackReconciler(manager)
    reconciler.setup()
    return reconciler
