"""Per-kind strategies: everything about a kind that the generic store does not decide.

Upstream's ``RESTCreateStrategy``, ``RESTUpdateStrategy`` and ``RESTDeleteStrategy`` in one
object per resource: how a body is decoded (Go's typed decoding for built-in kinds, a compiled
schema for custom resources), the form served versus stored, what a create resets and seeds,
what an update of the main resource or of a subresource may change, defaults, validation,
when the generation moves, what deleting means (a Namespace terminates first) and the Scale
view. A built-in kind's :class:`BuiltinStrategy` is made from what its API group declares
(``apiserver.groups``: its defaults, status at create, rules and printer); a
CustomResourceDefinition version gets a strategy built from its schema (``apiextensions``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop import errors
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog import mediatypes, schemas
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.patch.mergepatch import copy_json
from kubeloop.apiserver.printing.tables import KindPrinter
from kubeloop.apiserver.registry import validation
from kubeloop.apiserver.registry.serviceips import ServiceAllocator
from kubeloop.apiserver.registry.versionconversion import VersionConverter
from kubeloop.apiserver.storage.claims import ClaimTaken
from kubeloop.errors import StatusCause

Rules = Callable[[Mapping[str, Any]], list[StatusCause]]
UpdateRules = Callable[[Mapping[str, Any], Mapping[str, Any]], list[StatusCause]]
Mutation = Callable[[Obj], None]

_NOT_SPEC = frozenset({"metadata", "status", "apiVersion", "kind"})


class Strategy:
    """A kind with no rules of its own beyond ObjectMeta's; built-in and custom kinds refine it."""

    #: The patch media types the kind accepts.
    patch_types: tuple[str, ...] = mediatypes.BUILTIN_PATCH_TYPES
    #: Whether an update (PUT) may leave out metadata.resourceVersion (then it is not a
    #: precondition); upstream's ``AllowUnconditionalUpdate``.
    allow_unconditional_update = True
    #: Converts between the kind's versions out of process (a CRD's conversion webhook); None:
    #: ``to_served``/``to_stored`` convert in process.
    converter: VersionConverter | None = None
    #: Whether the kind's objects are unstructured (a custom resource's): to structured-merge-diff
    #: every object in them is a map, so an Update that creates one owns it whole ("." in
    #: FieldsV1), where a built-in kind's zero value already holds its structs.
    unstructured = False

    def __init__(self, resource: ResourceType) -> None:
        self.resource = resource

    @property
    def schema(self) -> schemas.Schema | None:
        """The kind's OpenAPI schema (list types, merge keys, required fields), if it has one."""
        return None

    @property
    def printer(self) -> KindPrinter | None:
        """How ``kubectl get`` prints the kind; None: a CRD's columns, or the generic ones."""
        return None

    def attach_services(self, services: ServiceAllocator | None) -> None:
        """Given the server's allocator of cluster IPs and node ports when the strategy is made;
        the kinds that allocate them (Services) keep it."""

    # ---------------------------------------------------------------- forms

    def decode(
        self,
        body: Obj,
        *,
        field_validation: str,
        duplicates: tuple[str, ...],
        owned: bool = False,
        converter: bool = False,
    ) -> tuple[Obj, list[str]]:
        """The request body as the kind's type: (an object the caller owns, warnings). ``owned``:
        the body is the caller's to give away (a patch's result), so it is not copied;
        ``converter``: type errors worded as the unstructured converter words them (a strategic
        merge patch's result)."""
        return (body if owned else copy_json(body)), []

    def to_served(self, stored: Obj, *, defaulted: bool = False) -> Obj:
        """The stored form as this resource's group/version serves it. ``defaulted``: the object
        is being written and was defaulted on its way in (nothing to add on read). A strategy
        with a ``converter`` raises ``ConversionPending`` for what it has not converted yet."""
        return stored

    def to_stored(self, served: Obj) -> Obj:
        return served

    # ---------------------------------------------------------------- writes

    def prepare_for_create(self, obj: Obj) -> None:
        """Reset what a create may not set: status behind a status subresource."""
        if self.resource.has_status:
            obj.pop("status", None)

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str) -> Obj:
        """What of ``new`` an update through ``subresource`` ("" for the main resource) keeps.

        With a status subresource, the main resource cannot change status and ``/status`` can
        change nothing else.
        """
        if subresource == "status":
            status = new.get("status")
            # Stored objects are never changed in place (the store shares their parts between
            # versions too), so the new version may share the old one's spec; only its metadata's
            # top level is written to (resourceVersion, managedFields).
            kept = {**old, "metadata": dict(old.get("metadata") or {})}
            if status is None:
                kept.pop("status", None)
            else:
                kept["status"] = status
            return kept
        if subresource == "" and self.resource.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        return new

    def default(self, obj: Obj) -> None:
        """Fill defaults in place (on create and on updates of the main resource)."""

    def validate(self, obj: Obj) -> list[StatusCause]:
        """Every rule the object breaks, one cause each."""
        return validation.validate_object_meta(
            obj, namespaced=self.resource.namespaced, name_rule=self.resource.name_rule
        )

    def validate_write(
        self, obj: Obj, old: Obj | None, warnings: list[str] | None = None
    ) -> list[StatusCause]:
        """Everything a write of ``obj`` (replacing ``old``, None on create) is refused for:
        ``validate``, and for kinds that have them, rules about the change itself (a custom
        resource's transition rules; its ratcheting of errors at unchanged values). What is
        reported without refusing the write goes to ``warnings`` (a custom resource's rule that
        fails where the update changed nothing)."""
        return self.validate(obj)

    def finish(self, obj: Obj, old: Obj | None) -> None:
        """Complete a valid object just before it is written (what a controller would otherwise
        set moments later: a CRD's established status)."""

    def claims_requested(self, obj: Obj) -> frozenset[str] | None:
        """The values ``obj``, as it was asked for (before ``finish``), claims itself; None when
        the kind claims none. A value ``finish`` chose that another process's write took
        meanwhile is chosen again; one the client asked for is refused (``claim_taken``)."""
        return None

    def claim_taken(self, obj: Obj, taken: ClaimTaken) -> errors.APIError:
        """The error for ``obj``, which the store refused: another object holds a value it claims
        (``ObjectStore.add_claims``)."""
        return errors.Conflict(f"{taken.claim.partition('/')[2] or taken.claim} is already in use")

    def generation_changed(self, old: Obj, new: Obj) -> bool:
        """Whether an update of the main resource bumps metadata.generation: the spec (all but
        metadata and status) changed, or annotations for kinds declared to count them."""
        keys = (set(old) | set(new)) - _NOT_SPEC
        if any(old.get(k) != new.get(k) for k in keys):
            return True
        if self.resource.annotations_bump_generation:
            return (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get(
                "annotations"
            )
        return False

    # ---------------------------------------------------------------- deletes

    def check_delete(self, name: str) -> None:
        """Raise when the object may never be deleted."""

    def begin_deletion(self, obj: Obj) -> None:
        """Change a copy of the object as its deletionTimestamp is set."""

    def holds_deletion(self, obj: Obj) -> bool:
        """Whether something other than metadata.finalizers keeps a deleted object."""
        return False

    def deletion_grace_seconds(self, obj: Obj, requested: int | None) -> int | None:
        """For a kind deleted gracefully (pods), the grace period a delete gives the object
        (``requested``: the DeleteOptions' gracePeriodSeconds); None for every other kind, which
        goes at once (or waits only on its finalizers)."""
        return None

    # ---------------------------------------------------------------- scale

    def scale_of(self, obj: Obj) -> Obj:
        """The autoscaling/v1 Scale view of the object."""
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        selector = spec.get("selector") or {}
        scale_status: Obj = {"replicas": int(status.get("replicas") or 0)}
        if selector:
            scale_status["selector"] = str(self.selector_of(selector))
        return scale_document(obj, int(spec.get("replicas") or 0), scale_status)

    def selector_of(self, selector: Any) -> LabelSelector:
        """``spec.selector`` as a selector (a LabelSelector's form; ReplicationControllers differ)."""
        return LabelSelector.from_label_selector_dict(selector)

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        """A copy of the object with the Scale's spec.replicas written back."""
        updated = copy.deepcopy(obj)
        updated.setdefault("spec", {})["replicas"] = replicas
        return updated


_ZERO_OF_TYPE: dict[str, Any] = {"integer": 0, "number": 0, "boolean": False}


def required_zeros(schema: schemas.Schema | None, field: str) -> dict[str, Any]:
    """The zero value of each required scalar field of ``schema``'s ``field`` object."""
    node = schemas.property_schema(schema, field) if schema is not None else None
    if node is None:
        return {}
    zeros: dict[str, Any] = {}
    for name in node.get("required") or ():
        types = schemas.node_types(schemas.property_schema(node, name) or {})
        if len(types) == 1 and types[0] in _ZERO_OF_TYPE:
            zeros[name] = _ZERO_OF_TYPE[types[0]]
    return zeros


def scale_document(obj: Obj, replicas: int, status: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            key: meta[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in meta
        },
        "spec": {"replicas": replicas},
        "status": status,
    }


@dataclass(frozen=True)
class KindRules:
    """What is particular to one built-in kind."""

    #: Fills the kind's defaults (SetDefaults_*).
    defaults: Mutation | None = None
    #: Seeds the status of a new object (after a status the client sent was dropped).
    initial_status: Mutation | None = None
    #: Hand-written upstream validation (pkg/apis/<group>/validation) beyond the schema's required fields.
    rules: Rules | None = None
    #: Upstream's rules about a change (``Validate<Kind>Update``): fields that may not change.
    update_rules: UpdateRules | None = None
    #: How ``kubectl get`` prints the kind (None: the generic columns).
    printer: KindPrinter | None = None


class BuiltinStrategy(Strategy):
    """A built-in kind: Go's typed decoding against upstream's schema, then the kind's rules."""

    def __init__(self, resource: ResourceType, kind: KindRules) -> None:
        super().__init__(resource)
        self.kind = kind
        self._schema = schemas.kind_schema(resource.group, resource.version, resource.kind)
        self._status_zeros = required_zeros(self._schema, "status")

    @property
    def schema(self) -> schemas.Schema | None:
        return self._schema

    @property
    def printer(self) -> KindPrinter | None:
        return self.kind.printer

    def finish(self, obj: Obj, old: Obj | None) -> None:
        """Go's encoding: a status's required numbers and booleans (fields without ``omitempty``,
        e.g. a DaemonSet's counters) are written even when zero."""
        if not self._status_zeros:
            return
        status = obj.get("status")
        if status is not None and not isinstance(status, dict):
            return
        missing = {key: zero for key, zero in self._status_zeros.items() if key not in (status or {})}
        if missing:
            # A new dict: the status may be shared with the stored version it came from.
            obj["status"] = {**(status or {}), **missing}

    def decode(
        self,
        body: Obj,
        *,
        field_validation: str,
        duplicates: tuple[str, ...],
        owned: bool = False,
        converter: bool = False,
    ) -> tuple[Obj, list[str]]:
        if self._schema is None:
            return super().decode(body, field_validation=field_validation, duplicates=duplicates, owned=owned)
        return decoding.decode_against_schema(
            body,
            self._schema,
            kind=self.resource.kind,
            version=self.resource.version,
            mode=field_validation,
            duplicates=list(duplicates),
            converter=converter,
        )

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        if self.kind.initial_status is not None:
            self.kind.initial_status(obj)

    def default(self, obj: Obj) -> None:
        if self.kind.defaults is not None:
            self.kind.defaults(obj)

    def kind_rules(self, obj: Mapping[str, Any]) -> list[StatusCause]:
        """The kind's own rules alone."""
        if self.kind.rules is None or not isinstance(obj, Mapping):
            return []
        return self.kind.rules(obj)

    def validate_write(
        self, obj: Obj, old: Obj | None, warnings: list[str] | None = None
    ) -> list[StatusCause]:
        causes = self.validate(obj)
        if old is not None and self.kind.update_rules is not None:
            causes.extend(self.kind.update_rules(obj, old))
        return causes

    def validate(self, obj: Obj) -> list[StatusCause]:
        causes = super().validate(obj)
        kind_causes = self.kind_rules(obj)
        causes.extend(kind_causes)
        if self._schema is not None:
            # Where the kind's rules say a field is required in their own words, those stand.
            worded = {cause.field for cause in kind_causes if cause.type == validation.causes.REQUIRED}
            causes.extend(c for c in validation.validate_required(obj, self._schema) if c.field not in worded)
        return validation.deduplicated(causes)


#: Makes the strategy of a built-in resource, given the server's Service allocator (the server's
#: API groups declare what it is made of: ``apiserver.groups.builtin_strategy``).
BuiltinStrategies = Callable[[ResourceType, ServiceAllocator | None], BuiltinStrategy]
