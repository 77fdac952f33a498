"""``PersonaPack``: a bundle of agents and schedules, created and pruned as the pack changes."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType

from .agent import AgentSpec
from .agentschedule import AgentScheduleSpec
from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name


class PersonaAgent(kubeloop.KubeModel):
    name: Name
    spec: AgentSpec
    #: Written once into the agent's memory (``spec.memory``) when it is made.
    memory_seed: Annotated[str | None, Field(max_length=64 * 1024)] = None


class PersonaSchedule(kubeloop.KubeModel):
    name: Name
    spec: AgentScheduleSpec


class PersonaPackSpec(kubeloop.KubeModel):
    agents: Annotated[list[PersonaAgent], ListType("map", keys=("name",))] = []
    schedules: Annotated[list[PersonaSchedule], ListType("map", keys=("name",))] = []


class PersonaPackStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    agents: list[str] | None = None
    schedules: list[str] | None = None
    #: The API server's message for each entry it refused to make.
    refused: list[str] | None = None


class PersonaPack(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("pp",),
    categories=CATEGORIES,
    printer_columns=(AGE,),
):
    """A bundle of agents and schedules, created and pruned as the pack changes."""

    spec: PersonaPackSpec = PersonaPackSpec()
    status: PersonaPackStatus | None = None
