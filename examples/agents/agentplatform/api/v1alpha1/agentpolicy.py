"""``AgentPolicy``: what a namespace's agents, runs and skill packs may use — runtimes, images,
model providers, skill packs, MCP servers, environment names, run timeouts. Every policy of a
namespace applies; a list left out allows anything."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType

from .groupversion import AGE, CATEGORIES, GROUP, VERSION


class AgentPolicySpec(kubeloop.KubeModel):
    #: ServingRuntimes agents may name.
    allowed_runtimes: Annotated[list[str] | None, ListType("set")] = None
    #: Image prefixes every image the platform runs for an agent must match — its runtime's, its
    #: channels', its MCP servers', its memory server's — and MCP servers' own: whole path
    #: segments ("ghcr.io/acme" admits ghcr.io/acme/tool:1 and ghcr.io/acme:1, not
    #: ghcr.io/acme-evil/tool).
    allowed_images: Annotated[list[str] | None, ListType("set")] = None
    model_providers: Annotated[list[str] | None, ListType("set")] = None
    max_timeout_seconds: Annotated[int | None, Field(ge=1)] = None
    #: The most model turns and tokens any run in the namespace takes (the smallest of the run's,
    #: its agent's and every policy's wins).
    max_turns: Annotated[int | None, Field(ge=1)] = None
    max_tokens: Annotated[int | None, Field(ge=1)] = None
    allowed_skill_packs: Annotated[list[str] | None, ListType("set")] = None
    allowed_mcp_servers: Annotated[list[str] | None, ListType("set")] = None
    #: Environment variable names an agent may not set.
    reserved_env_names: Annotated[list[str], ListType("set")] = []


class AgentPolicy(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("apol",),
    categories=CATEGORIES,
    printer_columns=(AGE,),
):
    """What a namespace's agents, runs and skill packs may use, enforced when they are written."""

    spec: AgentPolicySpec = AgentPolicySpec()
