"""Installing CustomResourceDefinitions from models or files and waiting until they serve
(envtest's ``InstallCRDs``): one call for tests, and what ``kubeloop run --install-crds`` does."""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from kubeloop import kinds
from kubeloop.api.crdgen import definitions
from kubeloop.api.customresource import CustomResource
from kubeloop.api.object import Obj
from kubeloop.client.interface import Client

CRD_KIND = kinds.CustomResourceDefinition
FILE_SUFFIXES = (".yaml", ".yml", ".json")

#: What ``install_crds`` takes: a model class, a file or folder of manifests, or a CRD as a dict.
CRDSource = type[CustomResource] | str | os.PathLike[str] | Mapping[str, Any]


async def install_crds(
    client: Client, *sources: CRDSource, field_manager: str = "kubeloop", timeout: float = 30.0
) -> list[Obj]:
    """Apply the CRDs of ``sources`` (server-side, taking over their fields) and wait until each
    is Established; returns them as the server has them. Files and folders may hold other
    objects too; only CustomResourceDefinitions are installed."""
    crds = crds_of(sources)
    for crd in crds:
        await client.apply(crd, field_manager=field_manager, force=True)
    return await asyncio.wait_for(
        asyncio.gather(*(_established(client, crd["metadata"]["name"]) for crd in crds)), timeout
    )


def crds_of(sources: Iterable[CRDSource]) -> list[dict[str, Any]]:
    """The CRD dicts ``sources`` hold, models of one kind joined into one CRD."""
    models: list[type[CustomResource]] = []
    crds: list[dict[str, Any]] = []
    for source in sources:
        if isinstance(source, type) and issubclass(source, CustomResource):
            models.append(source)
        elif isinstance(source, Mapping):
            crds.append(dict(source))
        elif isinstance(source, (str, os.PathLike)):
            crds.extend(_crds_in(pathlib.Path(source)))
        else:
            raise TypeError(f"a CustomResource model, a path or a CRD dict is needed, not {source!r}")
    return definitions(*models) + crds


def _crds_in(path: pathlib.Path) -> list[dict[str, Any]]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in FILE_SUFFIXES)
        return [crd for file in files for crd in _crds_in(file)]
    found = []
    with path.open(encoding="utf-8") as stream:
        for document in yaml.safe_load_all(stream):
            if not isinstance(document, dict):
                continue
            items = document.get("items") if document.get("kind") == "List" else [document]
            for item in items or ():
                if isinstance(item, dict) and item.get("kind") == CRD_KIND.kind:
                    found.append(item)
    return found


class CRDNotServed(Exception):
    """The server refused a CRD's names (another CRD holds them): it will not be served."""


async def _established(client: Client, name: str) -> Obj:
    while True:
        crd = await client.get(CRD_KIND, name)
        conditions = {c.get("type"): c for c in crd.get("status", {}).get("conditions") or ()}
        if conditions.get("Established", {}).get("status") == "True":
            return crd
        refused = conditions.get("NamesAccepted", {})
        if refused.get("status") == "False":
            raise CRDNotServed(f"{name}: {refused.get('reason')}: {refused.get('message')}")
        await asyncio.sleep(0.05)
