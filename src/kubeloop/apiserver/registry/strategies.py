"""Per-kind strategies: everything about a kind that the generic store does not decide.

Upstream's ``RESTCreateStrategy``, ``RESTUpdateStrategy`` and ``RESTDeleteStrategy`` in one
object per resource: how a body is decoded (Go's typed decoding for built-in kinds, a compiled
schema for custom resources), the form served versus stored, what a create resets and seeds,
what an update of the main resource or of a subresource may change, defaults, validation,
when the generation moves, what deleting means (a Namespace terminates first) and the Scale
view. :data:`BUILTIN_STRATEGIES` binds each built-in kind to its defaults, its status at create
and its rules — the one place to read what is particular to a kind; a CustomResourceDefinition
version gets a strategy built from its schema (``customresources``).
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
from kubeloop.apiserver.catalog import eventconversion, hpaconversion, mediatypes, schemas
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.patch.mergepatch import copy_json
from kubeloop.apiserver.registry import defaults, validation
from kubeloop.apiserver.registry.serviceips import ServiceAllocator
from kubeloop.apiserver.registry.versionconversion import VersionConverter
from kubeloop.errors import StatusCause

Rules = Callable[[Mapping[str, Any]], list[StatusCause]]
UpdateRules = Callable[[Mapping[str, Any], Mapping[str, Any]], list[StatusCause]]
Mutation = Callable[[Obj], None]

#: Namespaces that exist from the start and may not be deleted.
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
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

    def __init__(self, resource: ResourceType) -> None:
        self.resource = resource

    @property
    def schema(self) -> schemas.Schema | None:
        """The kind's OpenAPI schema (list types, merge keys, required fields), if it has one."""
        return None

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

    def validate_write(self, obj: Obj, old: Obj | None) -> list[StatusCause]:
        """Everything a write of ``obj`` (replacing ``old``, None on create) is refused for:
        ``validate``, and for kinds that have them, rules about the change itself (a custom
        resource's transition rules; its ratcheting of errors at unchanged values)."""
        return self.validate(obj)

    def finish(self, obj: Obj, old: Obj | None) -> None:
        """Complete a valid object just before it is written (what a controller would otherwise
        set moments later: a CRD's established status)."""

    def after_commit(self, obj: Obj | None, old: Obj | None) -> None:
        """Called once a write is durable, before it is answered (``obj`` None: deleted)."""

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


def _required_zeros(schema: schemas.Schema | None, field: str) -> dict[str, Any]:
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


class BuiltinStrategy(Strategy):
    """A built-in kind: Go's typed decoding against upstream's schema, then the kind's rules."""

    def __init__(self, resource: ResourceType, kind: KindRules) -> None:
        super().__init__(resource)
        self.kind = kind
        self._schema = schemas.kind_schema(resource.group, resource.version, resource.kind)
        self._status_zeros = _required_zeros(self._schema, "status")

    @property
    def schema(self) -> schemas.Schema | None:
        return self._schema

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

    def validate_write(self, obj: Obj, old: Obj | None) -> list[StatusCause]:
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


class NamespaceStrategy(BuiltinStrategy):
    """Namespaces: status and spec (its finalizers) change only through /status and /finalize;
    deleting one makes it Terminating until the namespace controller has emptied it."""

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str) -> Obj:
        if subresource == "finalize":
            finalizers = (new.get("spec") or {}).get("finalizers")
            kept = copy.deepcopy(old)
            kept.setdefault("spec", {})["finalizers"] = finalizers or []
            return kept
        if subresource == "":
            new["status"] = old.get("status", {"phase": "Active"})
            new["spec"] = old.get("spec", {})
            return new
        return super().prepare_for_update(new, old, subresource)

    def check_delete(self, name: str) -> None:
        if name in PROTECTED_NAMESPACES:
            raise errors.Forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                name=name,
                kind="namespaces",
            )

    def begin_deletion(self, obj: Obj) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"

    def holds_deletion(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))


class PodStrategy(BuiltinStrategy):
    """Pods are deleted gracefully, as upstream's pod strategy does: a pod on a node is marked
    (deletionTimestamp in the future, deletionGracePeriodSeconds) and its node removes it once
    its containers have stopped; one on no node, or already ended, goes at once."""

    def deletion_grace_seconds(self, obj: Obj, requested: int | None) -> int | None:
        spec = obj.get("spec") or {}
        if requested is not None:
            period = requested
        else:
            period = int(spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            period = 0
        return 1 if period < 0 else period


class JobStrategy(BuiltinStrategy):
    """Jobs: unless ``manualSelector``, a create labels the template with the Job's uid and name
    and selects the uid (upstream's ``generateSelector``), so a Job's selector (``kubectl logs
    job/x``, the controller) finds its own pods and never another's of the same labels."""

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        meta = obj.get("metadata") or {}
        uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
        template = spec.get("template")
        if not isinstance(template, dict):
            return
        template_meta = template.setdefault("metadata", {})
        if not isinstance(template_meta, dict):
            return
        labels = template_meta.get("labels")
        labels = dict(labels) if isinstance(labels, dict) else {}
        for key in validation.batch.JOB_NAME_LABELS:
            labels.setdefault(key, name)
        for key in validation.batch.CONTROLLER_UID_LABELS:
            labels.setdefault(key, uid)
        template_meta["labels"] = labels
        selector = spec.get("selector")
        selector = dict(selector) if isinstance(selector, dict) else {}
        match_labels = selector.get("matchLabels")
        match_labels = dict(match_labels) if isinstance(match_labels, dict) else {}
        match_labels.setdefault(validation.batch.CONTROLLER_UID_LABELS[0], uid)
        selector["matchLabels"] = match_labels
        spec["selector"] = selector


class NodeStrategy(BuiltinStrategy):
    """Nodes: a create may set status too (a kubelet registers its node with it), as upstream."""

    def prepare_for_create(self, obj: Obj) -> None:
        status = obj.get("status")
        super().prepare_for_create(obj)
        if status is not None:
            obj["status"] = status


class ServiceStrategy(BuiltinStrategy):
    """Services: a cluster IP and node ports allocated on create, kept by updates."""

    allocator: ServiceAllocator | None = None

    def finish(self, obj: Obj, old: Obj | None) -> None:
        super().finish(obj, old)
        if self.allocator is not None:
            self.allocator.allocate(obj, old)


class ReplicationControllerStrategy(BuiltinStrategy):
    """ReplicationControllers: their selector is a plain label map, not a LabelSelector."""

    def selector_of(self, selector: Any) -> LabelSelector:
        return LabelSelector.from_set(selector)


class EventsV1Strategy(BuiltinStrategy):
    """events.k8s.io/v1 Events: the core/v1 Events' storage, converted on the way in and out."""

    def to_served(self, stored: Obj, *, defaulted: bool = False) -> Obj:
        return eventconversion.core_to_events_v1(stored)

    def to_stored(self, served: Obj) -> Obj:
        return eventconversion.events_v1_to_core(served)


class HorizontalPodAutoscalerV1Strategy(BuiltinStrategy):
    """autoscaling/v1 HorizontalPodAutoscalers: the v2 objects' storage, converted on the way in
    and out; the rules (upstream's, which see the internal form) run on the v2 form."""

    def __init__(self, resource: ResourceType, kind: KindRules) -> None:
        super().__init__(resource, kind)
        self._stored_schema = schemas.kind_schema(resource.group, resource.stored_version, resource.kind)
        # finish() completes the stored form: v2's required status fields.
        self._status_zeros = _required_zeros(self._stored_schema, "status")

    def to_served(self, stored: Obj, *, defaulted: bool = False) -> Obj:
        return hpaconversion.v2_to_v1(stored)

    def to_stored(self, served: Obj) -> Obj:
        """The v2 object, decoded as Go decodes v2: what the round-trip annotations carried is
        typed like any body (a string for a number is a 400 naming the field), as upstream's
        conversion unmarshals them into typed structs."""
        converted = hpaconversion.v1_to_v2(served)
        if self._stored_schema is None:
            return converted
        decoded, _warnings = decoding.decode_against_schema(
            converted,
            self._stored_schema,
            kind=self.resource.kind,
            version=self.resource.stored_version,
            mode="Ignore",
        )
        return decoded

    def kind_rules(self, obj: Mapping[str, Any]) -> list[StatusCause]:
        return super().kind_rules(hpaconversion.v1_to_v2(obj))


#: Each built-in resource's rules, by (group, plural).
BUILTIN_STRATEGIES: Mapping[tuple[str, str], tuple[type[BuiltinStrategy], KindRules]] = {
    ("", "namespaces"): (
        NamespaceStrategy,
        KindRules(defaults.core.namespace, initial_status=defaults.core.namespace_status),
    ),
    ("", "nodes"): (NodeStrategy, KindRules()),
    ("", "pods"): (
        PodStrategy,
        KindRules(defaults.core.pod, defaults.core.pod_status, validation.core.pod_rules),
    ),
    ("", "services"): (
        ServiceStrategy,
        KindRules(defaults.core.service, defaults.core.service_status, validation.core.service_rules),
    ),
    ("", "configmaps"): (
        BuiltinStrategy,
        KindRules(
            rules=validation.core.config_map_rules, update_rules=validation.core.config_map_update_rules
        ),
    ),
    ("", "secrets"): (
        BuiltinStrategy,
        KindRules(
            defaults.core.secret,
            rules=validation.core.secret_rules,
            update_rules=validation.core.secret_update_rules,
        ),
    ),
    ("apps", "deployments"): (
        BuiltinStrategy,
        KindRules(
            defaults.apps.deployment,
            defaults.empty_status,
            validation.apps.deployment_rules,
            validation.apps.selector_update_rules,
        ),
    ),
    ("apps", "replicasets"): (
        BuiltinStrategy,
        KindRules(
            defaults.apps.replica_set,
            defaults.empty_status,
            validation.apps.replica_set_rules,
            validation.apps.selector_update_rules,
        ),
    ),
    ("apps", "statefulsets"): (
        BuiltinStrategy,
        KindRules(
            defaults.apps.stateful_set,
            defaults.empty_status,
            validation.apps.stateful_set_rules,
            validation.apps.stateful_set_update_rules,
        ),
    ),
    ("apps", "daemonsets"): (
        BuiltinStrategy,
        KindRules(
            defaults.apps.daemon_set,
            defaults.empty_status,
            validation.apps.daemon_set_rules,
            validation.apps.selector_update_rules,
        ),
    ),
    ("batch", "jobs"): (
        JobStrategy,
        KindRules(
            defaults.batch.job,
            defaults.empty_status,
            validation.batch.job_rules,
            validation.batch.job_update_rules,
        ),
    ),
    ("batch", "cronjobs"): (
        BuiltinStrategy,
        KindRules(defaults.batch.cron_job, defaults.empty_status, validation.batch.cron_job_rules),
    ),
    ("coordination.k8s.io", "leases"): (
        BuiltinStrategy,
        KindRules(rules=validation.coordination.lease_rules),
    ),
    ("events.k8s.io", "events"): (EventsV1Strategy, KindRules()),
    ("", "persistentvolumeclaims"): (
        BuiltinStrategy,
        KindRules(defaults.core.persistent_volume_claim, defaults.core.pending_status),
    ),
    ("", "persistentvolumes"): (
        BuiltinStrategy,
        KindRules(defaults.core.persistent_volume, defaults.core.pending_status),
    ),
    ("", "replicationcontrollers"): (
        ReplicationControllerStrategy,
        KindRules(defaults.core.replication_controller, defaults.empty_status),
    ),
    ("", "podtemplates"): (BuiltinStrategy, KindRules(defaults.core.pod_template)),
    ("autoscaling", "horizontalpodautoscalers"): (
        BuiltinStrategy,
        KindRules(
            defaults.autoscaling.horizontal_pod_autoscaler,
            defaults.empty_status,
            validation.autoscaling.horizontal_pod_autoscaler_rules,
        ),
    ),
    ("apps", "controllerrevisions"): (
        BuiltinStrategy,
        KindRules(update_rules=validation.apps.controller_revision_update_rules),
    ),
    ("policy", "poddisruptionbudgets"): (
        BuiltinStrategy,
        KindRules(rules=validation.policy.pod_disruption_budget_rules),
    ),
    ("rbac.authorization.k8s.io", "roles"): (BuiltinStrategy, KindRules(rules=validation.rbac.role_rules)),
    ("rbac.authorization.k8s.io", "clusterroles"): (
        BuiltinStrategy,
        KindRules(rules=validation.rbac.cluster_role_rules),
    ),
    ("rbac.authorization.k8s.io", "rolebindings"): (
        BuiltinStrategy,
        KindRules(
            defaults.rbac.role_binding,
            None,
            validation.rbac.role_binding_rules,
            validation.rbac.binding_update_rules,
        ),
    ),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): (
        BuiltinStrategy,
        KindRules(
            defaults.rbac.role_binding,
            None,
            validation.rbac.cluster_role_binding_rules,
            validation.rbac.binding_update_rules,
        ),
    ),
    ("networking.k8s.io", "networkpolicies"): (
        BuiltinStrategy,
        KindRules(defaults.networking.network_policy),
    ),
    ("discovery.k8s.io", "endpointslices"): (BuiltinStrategy, KindRules(defaults.discovery.endpoint_slice)),
    ("storage.k8s.io", "storageclasses"): (BuiltinStrategy, KindRules(defaults.storage.storage_class)),
    ("storage.k8s.io", "csidrivers"): (BuiltinStrategy, KindRules(defaults.storage.csi_driver)),
    ("scheduling.k8s.io", "priorityclasses"): (
        BuiltinStrategy,
        KindRules(defaults.scheduling.priority_class),
    ),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): (
        BuiltinStrategy,
        KindRules(defaults.flowcontrol.flow_schema),
    ),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): (
        BuiltinStrategy,
        KindRules(defaults.flowcontrol.priority_level_configuration),
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): (
        BuiltinStrategy,
        KindRules(
            defaults.admissionregistration.webhook_configuration,
            rules=validation.admissionregistration.validating_webhook_configuration_rules,
        ),
    ),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): (
        BuiltinStrategy,
        KindRules(
            defaults.admissionregistration.webhook_configuration,
            rules=validation.admissionregistration.mutating_webhook_configuration_rules,
        ),
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): (
        BuiltinStrategy,
        KindRules(
            defaults.admissionregistration.admission_policy,
            rules=validation.admissionregistration.validating_admission_policy_rules,
        ),
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): (
        BuiltinStrategy,
        KindRules(
            defaults.admissionregistration.admission_policy_binding,
            rules=validation.admissionregistration.validating_admission_policy_binding_rules,
        ),
    ),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"): (
        BuiltinStrategy,
        KindRules(defaults.admissionregistration.admission_policy),
    ),
    ("resource.k8s.io", "resourceclaims"): (BuiltinStrategy, KindRules(defaults.resource.resource_claim)),
    ("resource.k8s.io", "resourceclaimtemplates"): (
        BuiltinStrategy,
        KindRules(defaults.resource.resource_claim_template),
    ),
}


#: Resources served as a view of another version's storage: their strategy, by (group, version,
#: plural). The kind's rules stay those of its (group, plural).
VERSION_VIEWS: Mapping[tuple[str, str, str], type[BuiltinStrategy]] = {
    ("autoscaling", "v1", "horizontalpodautoscalers"): HorizontalPodAutoscalerV1Strategy,
}


def builtin_strategy(resource: ResourceType, services: ServiceAllocator | None = None) -> BuiltinStrategy:
    """The strategy of a built-in resource (kinds without rules of their own get an empty set);
    Services take their cluster IPs and node ports from ``services``."""
    cls, kind = BUILTIN_STRATEGIES.get((resource.group, resource.plural), (BuiltinStrategy, KindRules()))
    cls = VERSION_VIEWS.get((resource.group, resource.version, resource.plural), cls)
    strategy = cls(resource, kind)
    if isinstance(strategy, ServiceStrategy):
        strategy.allocator = services
    return strategy
