"""The options of registry calls and what they return: write, delete and list options, results.

The HTTP layer parses query parameters and DeleteOptions bodies into these; in-process callers
(the controllers the server runs) build them directly. The checks upstream runs on the options
themselves, before any object is read, live here too: ValidatePatchOptions and the delete's
propagation policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubeloop import errors
from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.mediatypes import APPLY_PATCH
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.userinfo import UserInfo


@dataclass(frozen=True)
class WriteOptions:
    """Query parameters shared by create, update and patch."""

    dry_run: bool = False
    #: The ``fieldManager`` parameter (apply requires it).
    field_manager: str = ""
    #: The manager recorded when no ``fieldManager`` was given: the User-Agent up to its first "/".
    default_manager: str = "unknown"
    #: The ``force`` parameter of apply patches (None: not given).
    force: bool | None = None
    #: "Strict", "Warn" or "Ignore"; a request without the parameter gets Warn, as upstream
    #: (kubectl sends Strict itself).
    field_validation: str = "Warn"
    #: Dotted paths of fields the request body repeated (found only under Strict).
    duplicate_fields: tuple[str, ...] = ()
    #: Admission of the write (upstream's ``ValidateObjectFunc``): called with the object about to
    #: be written and the one it replaces (None on create), both as served, once they are valid;
    #: raises an APIError to refuse the write (RBAC's escalation check).
    admit: Callable[[Obj, Obj | None], None] | None = None
    #: Who asks (what admission webhooks are told; None: the server itself).
    user: UserInfo | None = None

    def admission_options(self, operation: str, *, patch: bool) -> Obj:
        """The CreateOptions, UpdateOptions or PatchOptions an AdmissionRequest carries."""
        kind = "PatchOptions" if patch else ("CreateOptions" if operation == "CREATE" else "UpdateOptions")
        options: Obj = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
        if self.dry_run:
            options["dryRun"] = ["All"]
        if patch and self.force is not None:
            options["force"] = self.force
        if self.field_manager:
            options["fieldManager"] = self.field_manager
        if self.field_validation != "Warn":
            options["fieldValidation"] = self.field_validation
        return options


@dataclass(frozen=True)
class DeleteOptions:
    """A DeleteOptions body or the delete's query parameters."""

    dry_run: bool = False
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    grace_period_seconds: int | None = None
    #: Who asks (what admission webhooks are told; None: the server itself).
    user: UserInfo | None = None

    def admission_options(self) -> Obj:
        """The DeleteOptions an AdmissionRequest carries."""
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period_seconds is not None:
            options["gracePeriodSeconds"] = self.grace_period_seconds
        preconditions = {
            key: value
            for key, value in (
                ("uid", self.precondition_uid),
                ("resourceVersion", self.precondition_resource_version),
            )
            if value is not None
        }
        if preconditions:
            options["preconditions"] = preconditions
        if self.orphan_dependents is not None:
            options["orphanDependents"] = self.orphan_dependents
        if self.propagation_policy is not None:
            options["propagationPolicy"] = self.propagation_policy
        if self.dry_run:
            options["dryRun"] = ["All"]
        return options


@dataclass(frozen=True)
class ListOptions:
    """The query parameters of a list: selectors, paging and which revision to read."""

    label_selector: LabelSelector | None = None
    field_selector: FieldSelector | None = None
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""


@dataclass
class ListResult:
    """One page of a list and the revision it was read at."""

    items: list[Obj]
    resource_version: int
    continue_token: str = ""
    remaining_item_count: int | None = None


@dataclass
class WriteResult:
    """The object as written (or as it would be, on dry run) and the warnings for the client."""

    obj: Obj
    warnings: list[str] = field(default_factory=list)
    created: bool = False
    #: ``obj`` as JSON when the store has encoded it already (it is served as stored).
    encoded: bytes | None = None


@dataclass
class DeleteResult:
    """The object deleted (or marked for deletion), whether it is gone now, and the warnings
    admission had for the client."""

    obj: Obj
    gone: bool
    warnings: list[str] = field(default_factory=list)


def check_patch_options(patch_type: str, options: WriteOptions) -> None:
    """ValidatePatchOptions: apply needs a field manager; only apply takes ``force``."""
    causes: list[errors.StatusCause] = []
    if patch_type == APPLY_PATCH and not options.field_manager:
        causes.append(
            errors.StatusCause(
                "FieldValueRequired", "Required value: is required for apply patch", "fieldManager"
            )
        )
    if patch_type != APPLY_PATCH and options.force is not None:
        causes.append(
            errors.StatusCause(
                "FieldValueForbidden", "Forbidden: may not be specified for non-apply patch", "force"
            )
        )
    if causes:
        raise errors.invalid("meta.k8s.io", "PatchOptions", "", causes)


def propagation_policy(resource: ResourceType, options: DeleteOptions) -> str | None:
    """The delete's propagation policy (``orphanDependents`` is its older spelling); 422 if unknown."""
    policy = options.propagation_policy
    if policy is None and options.orphan_dependents is not None:
        policy = "Orphan" if options.orphan_dependents else "Background"
    if policy is not None and policy not in ("Orphan", "Foreground", "Background"):
        raise errors.invalid(
            resource.group,
            "DeleteOptions",
            "",
            [
                errors.StatusCause(
                    "FieldValueNotSupported",
                    f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"',
                    "propagationPolicy",
                )
            ],
        )
    return policy
