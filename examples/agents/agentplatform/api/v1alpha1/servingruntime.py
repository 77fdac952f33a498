"""``ServingRuntime`` (cluster-scoped, passive): how to run an agent — image, command, port,
resources, pull secrets, and any loosening of the restricted security context. Nothing runs for
it; Agents read it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn
from kubeloop.models import core_v1

from .groupversion import AGE, GROUP, PLATFORM, VERSION, Name


class TokenPricing(kubeloop.KubeModel):
    """What the model costs, per million tokens (decimal text, as ``"2.50"``): a finished run's
    ``status.costEstimate`` is counted from its usage with these."""

    input_per_million: Annotated[str, Field(pattern=r"^[0-9]{1,9}(\.[0-9]{1,9})?$")]
    output_per_million: Annotated[str, Field(pattern=r"^[0-9]{1,9}(\.[0-9]{1,9})?$")]
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")] = "USD"


class ServingRuntimeSpec(kubeloop.KubeModel):
    image: Name
    command: list[str] | None = None
    args: list[str] | None = None
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    resources: core_v1.ResourceRequirements | None = None
    #: A disabled runtime starts nothing new; agents that use it keep what runs.
    disabled: bool = False
    #: Given to the agents' and runs' pods, to pull a private image.
    image_pull_secrets: Annotated[
        list[core_v1.LocalObjectReference] | None, ListType("map", keys=("name",))
    ] = None
    #: Replace the platform's restricted security contexts (Kubernetes' "restricted" standard,
    #: uid 1000, a read-only root filesystem): a runtime that needs more says so here.
    pod_security_context: core_v1.PodSecurityContext | None = None
    security_context: core_v1.SecurityContext | None = None
    #: Prices of the model the runtime's agents call, for runs' cost estimates.
    pricing: TokenPricing | None = None


class ServingRuntime(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    scope="Cluster",
    short_names=("sr",),
    categories=(PLATFORM,),
    printer_columns=(
        PrinterColumn("Image", ".spec.image"),
        PrinterColumn("Port", ".spec.port", type="integer"),
        PrinterColumn("Disabled", ".spec.disabled", type="boolean"),
        AGE,
    ),
):
    """A reusable blueprint for running agents: nothing runs for it, Agents refer to it."""

    spec: ServingRuntimeSpec
