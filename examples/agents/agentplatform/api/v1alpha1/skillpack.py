"""``SkillPack``: named skills (text) → one owned ConfigMap that agents mount."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn

from .groupversion import AGE, CATEGORIES, GROUP, VERSION


class Skill(kubeloop.KubeModel):
    name: Annotated[str, Field(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)]
    text: str


class SkillPackSpec(kubeloop.KubeModel):
    skills: Annotated[list[Skill], ListType("map", keys=("name",))] = []


class SkillPackStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    config_map_name: str | None = None
    skills: int | None = None


class SkillPack(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("skp",),
    categories=CATEGORIES,
    printer_columns=(PrinterColumn("Skills", ".status.skills", type="integer"), AGE),
):
    """Named skills, given to the agents that list the pack as one mounted ConfigMap."""

    spec: SkillPackSpec = SkillPackSpec()
    status: SkillPackStatus | None = None
