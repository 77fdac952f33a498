"""PersonaPack → owned Agents and AgentSchedules, one per entry of the pack, pruned when an entry
is removed.

An entry ``name`` of pack ``pack`` becomes the object ``<pack>-<name>``, labelled with the
pack's name and controlled by it; its spec is the entry's. A schedule's ``agentRef`` that names
an agent of the same pack is pointed at that agent's object. Objects the pack made whose entry
is gone are deleted (found by the label, and only if the pack controls them). Status: the
observed generation, the names of the agents and schedules the pack made, and the API server's
message for each entry it refused (a name too long for its kind, say; a Warning Event too). An
agent entry's ``memorySeed`` is given to its Agent as an annotation, which the agent's memory
is made with, once.
"""

from __future__ import annotations

import contextlib
from typing import Any

import kubeloop

from ..api.v1alpha1 import GROUP, VERSION, Agent, AgentSchedule, PersonaPack
from .builders import write_status
from .memory import SEED_ANNOTATION

PACK_LABEL = f"{GROUP}/persona-pack"


def member_name(pack: str, entry: str) -> str:
    return f"{pack}-{entry}"


class PersonaPackReconciler:
    """Reconciles PersonaPacks."""

    def __init__(self, manager: kubeloop.Manager) -> None:
        self.manager = manager
        self.client = manager.client
        self.recorder = manager.event_recorder("personapack")

    def setup(self) -> None:
        builder = kubeloop.Builder(self.manager).named("personapack").for_(PersonaPack)
        builder.owns(Agent).owns(AgentSchedule).complete(self.reconcile)

    async def reconcile(self, request: kubeloop.Request) -> None:
        try:
            pack = await self.client.get(PersonaPack, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return  # its agents and schedules go with it
        if pack.metadata.deletion_timestamp is not None:
            return
        spec = pack.to_dict().get("spec") or {}
        agents = {
            member_name(request.name, entry["name"]): entry["spec"] for entry in spec.get("agents") or ()
        }
        seeds = {
            member_name(request.name, entry["name"]): entry["memorySeed"]
            for entry in spec.get("agents") or ()
            if entry.get("memorySeed")
        }
        schedules = {}
        for entry in spec.get("schedules") or ():
            schedule_spec = dict(entry["spec"])
            if any(agent["name"] == schedule_spec["agentRef"] for agent in spec.get("agents") or ()):
                schedule_spec["agentRef"] = member_name(request.name, schedule_spec["agentRef"])
            schedules[member_name(request.name, entry["name"])] = schedule_spec
        refused: dict[str, str] = {}
        for kind, wanted in ((Agent, agents), (AgentSchedule, schedules)):
            for name, member_spec in wanted.items():
                try:
                    await self._member(pack, kind.__name__, name, member_spec, seeds.get(name))
                except (kubeloop.errors.Invalid, kubeloop.NotControlledError) as error:
                    refused[name] = str(error)  # the pack's to fix: reported, not retried
            await self._prune(pack, kind, set(wanted))
        before = set((pack.status.refused if pack.status else None) or ())
        for message in sorted(set(refused.values()) - before):
            self.recorder.event(pack, kubeloop.WARNING, "Invalid", message)
        status = {
            "observedGeneration": pack.metadata.generation,
            "agents": sorted(set(agents) - set(refused)),
            "schedules": sorted(set(schedules) - set(refused)),
            "refused": sorted(refused.values()) or None,
        }
        await write_status(self.client, pack, status)

    async def _member(
        self, pack: PersonaPack, kind: str, name: str, spec: dict[str, Any], seed: str | None = None
    ) -> None:
        def mutate(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(pack, obj)
            obj["metadata"].setdefault("labels", {})[PACK_LABEL] = pack.metadata.name
            if seed is not None:  # read once, when the agent's memory is made
                obj["metadata"].setdefault("annotations", {})[SEED_ANNOTATION] = seed
            obj["spec"] = spec  # the server defaults both alike: the same schema

        skeleton = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, "namespace": pack.metadata.namespace},
        }
        await kubeloop.create_or_update(self.client, skeleton, mutate, controlled_by=pack)

    async def _prune(
        self, pack: PersonaPack, kind: type[Agent] | type[AgentSchedule], keep: set[str]
    ) -> None:
        made = await self.client.list(
            kind, namespace=pack.metadata.namespace, label_selector=f"{PACK_LABEL}={pack.metadata.name}"
        )
        for obj in made:
            refs = obj.metadata.owner_references or ()
            ours = any(ref.controller and ref.uid == pack.metadata.uid for ref in refs)
            if ours and obj.metadata.name not in keep and obj.metadata.deletion_timestamp is None:
                with contextlib.suppress(kubeloop.errors.NotFound):
                    await self.client.delete(obj)


def setup(manager: kubeloop.Manager) -> PersonaPackReconciler:
    reconciler = PersonaPackReconciler(manager)
    reconciler.setup()
    return reconciler
