"""``ServingRuntime`` (cluster-scoped, passive): how to run an agent — image, command, port,
resources. Nothing runs for it; Agents read it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn
from kubeloop.models import core_v1

from .groupversion import AGE, GROUP, PLATFORM, VERSION, Name


class ServingRuntimeSpec(kubeloop.KubeModel):
    image: Name
    command: list[str] | None = None
    args: list[str] | None = None
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    resources: core_v1.ResourceRequirements | None = None
    #: A disabled runtime starts nothing new; agents that use it keep what runs.
    disabled: bool = False


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
