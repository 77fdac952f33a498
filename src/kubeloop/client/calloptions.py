"""The options of client calls, said once for the protocol and every client that implements it.

controller-runtime gives each verb an options struct (``ListOptions``, ``CreateOptions``,
``PatchOptions``, ``DeleteOptions``…); here they are ``TypedDict``\\ s taken as keywords, so
``client.create(obj, dry_run=True, field_manager="me")`` reads as before and a type checker still
knows every name. The functions at the bottom turn them into what goes on the wire: query
parameters for create, update and patch, a ``DeleteOptions`` body for deletes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj


class ListOptions(TypedDict, total=False):
    """Which objects a list answers, on every client (controller-runtime's ``ListOptions``)."""

    #: Selector text (``"app=web,tier in (a,b)"``) or a ``LabelSelector``.
    label_selector: str | LabelSelector | None
    #: Labels that must all be equal (ANDed with ``label_selector``).
    match_labels: Mapping[str, str] | None
    #: ``"metadata.name=web"``; the cache answers only exact matches on names, namespaces and
    #: indexed fields.
    field_selector: str | FieldSelector | None


class ApplyOptions(TypedDict, total=False):
    """What server-side apply takes besides its field manager and ``force``."""

    #: Run admission and validation, answer what would be stored, store nothing (``dryRun=All``).
    dry_run: bool
    #: ``"Strict"`` (unknown or repeated fields are errors), ``"Warn"`` (the server's default:
    #: warnings) or ``"Ignore"``.
    field_validation: str


class WriteOptions(ApplyOptions, total=False):
    """What create and update take (controller-runtime's ``CreateOptions``, ``UpdateOptions``)."""

    #: The manager recorded in ``managedFields`` (the server's default: the client's User-Agent).
    field_manager: str


class PatchOptions(WriteOptions, total=False):
    """What patch takes: a write's options and ``force`` (apply patches only)."""

    #: Take fields another manager owns instead of answering ``Conflict``.
    force: bool


@dataclass(frozen=True)
class Preconditions:
    """Delete only if the object still has this uid / resourceVersion (409 otherwise)."""

    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(TypedDict, total=False):
    """What delete and delete_collection take (controller-runtime's ``DeleteOptions``)."""

    #: ``"Background"``, ``"Foreground"`` or ``"Orphan"``: what becomes of the dependents
    #: (without it, the kind's default: Jobs orphan their pods).
    propagation_policy: str
    #: Delete only the object with this uid / resourceVersion.
    preconditions: Preconditions
    #: Seconds a pod is given to stop (0: at once).
    grace_period_seconds: int
    dry_run: bool


def write_params(options: WriteOptions, force: bool | None = None) -> dict[str, str]:
    """The query parameters of a create, update or patch (and a patch's ``force``)."""
    params: dict[str, str] = {}
    if options.get("dry_run"):
        params["dryRun"] = "All"
    if field_manager := options.get("field_manager"):
        params["fieldManager"] = field_manager
    if field_validation := options.get("field_validation"):
        params["fieldValidation"] = field_validation
    if force is not None:
        params["force"] = "true" if force else "false"
    return params


def delete_body(options: DeleteOptions) -> Obj:
    """The ``DeleteOptions`` object a delete sends as its body."""
    body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if policy := options.get("propagation_policy"):
        body["propagationPolicy"] = policy
    if (preconditions := options.get("preconditions")) is not None:
        wanted = {"uid": preconditions.uid, "resourceVersion": preconditions.resource_version}
        body["preconditions"] = {k: v for k, v in wanted.items() if v is not None}
    if (grace := options.get("grace_period_seconds")) is not None:
        body["gracePeriodSeconds"] = grace
    if options.get("dry_run"):
        body["dryRun"] = ["All"]
    return body
