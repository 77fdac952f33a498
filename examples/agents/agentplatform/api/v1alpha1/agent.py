"""``Agent`` (active): a runtime, a model and a prompt → an owned ConfigMap, Deployment and Service."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn
from kubeloop.models import core_v1, meta_v1

from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name, name_rule


class SecretKeyRef(kubeloop.KubeModel):
    name: Name
    key: Name


class ModelSpec(kubeloop.KubeModel):
    provider: Name
    name: Name
    base_url: str | None = Field(default=None, alias="baseURL")
    auth_secret_ref: SecretKeyRef | None = None


class AgentSpec(kubeloop.KubeModel):
    runtime_ref: Name
    model: ModelSpec
    system_prompt: str = ""
    replicas: Annotated[int, Field(ge=0)] = 1
    #: Overrides the runtime's variables of the same name.
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    skill_pack_refs: Annotated[list[str], ListType("set")] = []
    mcp_server_refs: Annotated[list[str], ListType("set")] = []


class AgentStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    runtime_name: str | None = None
    config_hash: str | None = None
    url: str | None = None
    ready_replicas: int | None = None
    conditions: Annotated[list[meta_v1.Condition] | None, ListType("map", keys=("type",))] = None


class Agent(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("ag",),
    categories=CATEGORIES,
    rules=(name_rule("Agent", 63, "the agent's Service"),),
    printer_columns=(
        PrinterColumn("Runtime", ".spec.runtimeRef"),
        PrinterColumn("Model", ".spec.model.name"),
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        PrinterColumn("Replicas", ".status.readyReplicas", type="integer"),
        AGE,
    ),
):
    """An agent: a model and a prompt served with a ServingRuntime, its skills and tool servers."""

    spec: AgentSpec
    status: AgentStatus | None = None
