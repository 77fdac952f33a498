"""``SkillPack``: named skills (text, and tools that run a command) → one owned ConfigMap that
agents mount."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PreserveUnknownFields, PrinterColumn, Rule

from .groupversion import AGE, CATEGORIES, GROUP, VERSION


class SkillTool(kubeloop.KubeModel):
    """A tool the skill gives the model: the runner runs ``command`` in the run's pod (no shell:
    name one, ``["sh", "-c", ...]``, to have one), the model's arguments as a JSON object on its
    stdin; what it prints is the tool's result, a non-zero exit or ``timeoutSeconds`` passing its
    failure (with the end of what it wrote to stderr)."""

    #: As the model calls it (Chat Completions' rule for a function's name).
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: Annotated[str, Field(max_length=4096)] = ""
    #: A JSON schema of its arguments (an object's).
    parameters: Annotated[
        dict[str, Any],
        PreserveUnknownFields(),
        Rule("!has(self.type) || self.type == 'object'", message="a tool's parameters are an object's JSON schema"),
    ] = {"type": "object", "properties": {}}
    command: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = 30


class Skill(kubeloop.KubeModel):
    #: A file of the pack's ConfigMap: not starting with "." (the pack's own files do).
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9][-._a-zA-Z0-9]*$", max_length=253)]
    text: str
    tools: Annotated[list[SkillTool], ListType("map", keys=("name",)), Field(max_length=32)] = []


class SkillPackSpec(kubeloop.KubeModel):
    skills: Annotated[list[Skill], ListType("map", keys=("name",))] = []


class SkillPackStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    config_map_name: str | None = None
    skills: int | None = None
    tools: int | None = None


class SkillPack(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("skp",),
    categories=CATEGORIES,
    printer_columns=(
        PrinterColumn("Skills", ".status.skills", type="integer"),
        PrinterColumn("Tools", ".status.tools", type="integer"),
        AGE,
    ),
):
    """Named skills, given to the agents that list the pack as one mounted ConfigMap: each one's
    text joins their instructions, and its tools (commands run in the pod) their tools."""

    spec: SkillPackSpec = SkillPackSpec()
    status: SkillPackStatus | None = None
