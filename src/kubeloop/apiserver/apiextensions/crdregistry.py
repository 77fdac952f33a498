"""CustomResourceDefinitions and the custom resources they define.

:class:`CRDStrategy` validates a CustomResourceDefinition as upstream's
``ValidateCustomResourceDefinition`` does (names, scope, versions with exactly one storage
version, structural schemas, subresources, printer columns) and, in the same write, does what
upstream's establishing controllers do later: ``acceptedNames``, ``NamesAccepted`` and
``Established`` conditions and ``storedVersions``. Once the write is durable the registry tells
:class:`CustomResourceDefinitions`, which serves each served version as a resource with a
:class:`CustomResourceStrategy` built from its compiled schema — before the answer goes out, so
a custom resource sent right after its CRD is served. A deleted CRD keeps the
``customresourcecleanup`` finalizer until its objects are gone (``crdcleanup``).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api import fielderrors, naming, timestamps
from kubeloop.api.labels import LabelSelector
from kubeloop.api.naming import go_quote
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.apiextensions import structural
from kubeloop.apiserver.catalog import mediatypes
from kubeloop.apiserver.catalog.resources import PrinterColumn, ResourceCatalog, ResourceType
from kubeloop.apiserver.cel import rules as celrules
from kubeloop.apiserver.groups.admissionregistration import validation as admissionregistration
from kubeloop.apiserver.patch.mergepatch import copy_json
from kubeloop.apiserver.registry import validation
from kubeloop.apiserver.registry.strategies import BuiltinStrategy, KindRules, Strategy, scale_document
from kubeloop.apiserver.registry.versionconversion import ConversionPending, VersionConverter
from kubeloop.errors import StatusCause

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_SCOPES = ("Cluster", "Namespaced")
_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_KIND_FORMAT = re.compile(r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$")


def _get_path(obj: Any, dotted: str) -> Any:
    """The value at a ``.a.b`` path, or None."""
    current = obj
    for part in dotted.strip(".").split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _set_path(obj: Obj, dotted: str, value: Any) -> None:
    parts = dotted.strip(".").split(".")
    current = obj
    for part in parts[:-1]:
        nxt = current.get(part)
        if not isinstance(nxt, dict):
            nxt = current[part] = {}
        current = nxt
    current[parts[-1]] = value


class CustomResourceStrategy(Strategy):
    """One served version of a CRD: pruning, nulls, defaults and validation by its compiled
    schema; status and scale subresources as the CRD declares them."""

    patch_types = mediatypes.CUSTOM_PATCH_TYPES
    #: A custom resource's update names the version it replaces (upstream's default for them).
    allow_unconditional_update = False
    unstructured = True

    def __init__(
        self,
        resource: ResourceType,
        schema: structural.Node,
        scale: Mapping[str, Any] | None,
        *,
        storage_version: str,
        schema_revision: int = 0,
    ) -> None:
        super().__init__(resource)
        self.root = schema
        self.scale = dict(scale) if scale is not None else None
        #: Set while the CRD is being deleted: no new objects.
        self.terminating = False
        self._defaults = _has_defaults(schema)
        #: The CRD revision this schema came with: objects written after it already carry its defaults.
        self._schema_revision = schema_revision
        self._storage_api_version = f"{resource.group}/{storage_version}"
        # What validation walks: the root without apiVersion, kind and metadata (ObjectMeta's rules
        # and the schema's metadata node check those).
        skipped = ("apiVersion", "kind", "metadata")
        self._body_root = dataclasses.replace(
            schema,
            properties={k: v for k, v in schema.properties.items() if k not in skipped},
            required=tuple(r for r in schema.required if r not in skipped),
        )

    @property
    def schema(self) -> Mapping[str, Any]:
        """The CRD's own schema: list types and map keys for server-side apply."""
        return self.root.source

    def decode(
        self,
        body: Obj,
        *,
        field_validation: str,
        duplicates: tuple[str, ...],
        owned: bool = False,
        converter: bool = False,
    ) -> tuple[Obj, list[str]]:
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            # As upstream's coercion of a custom resource's metadata (objectmeta.GetObjectMeta).
            raise errors.BadRequest(f"invalid metadata: expected object, got {fielderrors.go_type(metadata)}")
        obj = body if owned else copy_json(body)  # pruning changes it
        unknown = [f'unknown field "{path}"' for path in structural.prune(obj, self.root)]
        unknown.extend(f'duplicate field "{path}"' for path in duplicates)
        if unknown and field_validation == "Strict":
            kind = self.resource.kind
            raise decoding.StrictDecodingError(
                f'{kind} in version "{self.resource.version}" cannot be handled as a {kind}: '
                f"strict decoding error: {', '.join(unknown)}",
                unknown,
            )
        return obj, unknown if field_validation == "Warn" else []

    def to_served(self, stored: Obj, *, defaulted: bool = False) -> Obj:
        """The stored object in this version — with conversion None only apiVersion changes, else
        as the conversion webhook answered — with defaults applied on read too (a schema may
        have gained them since it was written)."""
        converting = stored.get("apiVersion") != self.resource.api_version
        if converting and self.converter is not None:
            served = self._converted(stored, self.resource.api_version)
            structural.default(served, self.root)
            return served
        lacking = not defaulted and self._lacks_defaults(stored)
        if not converting and not lacking:
            return stored
        served = copy.deepcopy(stored)
        served["apiVersion"] = self.resource.api_version
        if lacking:
            structural.default(served, self.root)
        return served

    def _converted(self, obj: Obj, api_version: str) -> Obj:
        assert self.converter is not None
        converted = self.converter.cached(obj, api_version)
        if converted is None:
            raise ConversionPending(self.converter, [obj], api_version)
        return converted

    def _lacks_defaults(self, stored: Obj) -> bool:
        """Whether a stored object misses defaults of the schema: only one that may predate the
        schema can (objects written since were defaulted on their way in)."""
        revision = (stored.get("metadata") or {}).get("resourceVersion")
        newer = isinstance(revision, str) and revision.isdigit() and int(revision) > self._schema_revision
        return self._defaults and not newer and _needs_defaults(stored, self.root)

    def to_stored(self, served: Obj) -> Obj:
        """Objects are stored in the storage version (converted by the webhook if there is one)."""
        if served.get("apiVersion") == self._storage_api_version:
            return served
        if self.converter is not None:
            return self._converted(served, self._storage_api_version)
        served["apiVersion"] = self._storage_api_version
        return served

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str) -> Obj:
        """As every kind's; a write through a subresource keeps the stored object's other parts
        defaulted by the current schema, as upstream, which decodes the stored object with its
        defaults before the write: stored afterwards, newer than the schema, it is no longer
        defaulted on read."""
        if subresource and self._lacks_defaults(old):
            old = copy.deepcopy(old)  # stored objects are never changed in place
            structural.default(old, self.root)
        return super().prepare_for_update(new, old, subresource)

    def prepare_for_create(self, obj: Obj) -> None:
        if self.terminating:
            raise errors.MethodNotAllowed(
                "create not allowed while custom resource definition is terminating",
                group=self.resource.group,
                kind=self.resource.plural,
            )
        super().prepare_for_create(obj)

    def default(self, obj: Obj) -> None:
        structural.default(obj, self.root)

    def validate(self, obj: Obj, budget: celrules.Budget | None = None) -> list[StatusCause]:
        """The schema's judgement of ``obj`` and its rules that do not read oldSelf."""
        causes = self._schema_causes(obj)
        causes.extend(structural.check_rules(_as_rules_see_it(obj), self.root, budget=budget))
        return validation.deduplicated(causes)

    def _schema_causes(self, obj: Obj) -> list[StatusCause]:
        """The schema's judgement of ``obj`` (and its metadata's), its rules aside."""
        causes = super().validate(obj)
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        metadata = obj.get("metadata") or {}
        meta_node = self.root.properties.get("metadata")
        if meta_node is not None:
            checked = {k: metadata[k] for k in ("name", "generateName") if k in metadata}
            causes.extend(structural.validate(checked, meta_node, "metadata"))
        causes.extend(structural.validate(body, self._body_root, ""))
        return causes

    def validate_write(
        self, obj: Obj, old: Obj | None, warnings: list[str] | None = None
    ) -> list[StatusCause]:
        """``validate``, ratcheted on updates, then the transition rules (those reading oldSelf)
        against the correlated old values, and on creates those with optionalOldSelf; all rules
        of the write share one runtime budget, as upstream's.

        Ratcheting (upstream's CRDValidationRatcheting, on since 1.30): the schema's errors at
        values the update leaves unchanged are dropped; a rule that does not read oldSelf and
        fails where its value is unchanged is a warning (``field: message``), as upstream's CEL
        validator adds it, not an error; a rule that cannot be evaluated is an error always."""
        if not self.root.rules_below:  # no rules to run or ratchet (most CRDs)
            causes = self._schema_causes(obj)
            return validation.deduplicated(causes if old is None else self.ratchet(causes, obj, old))
        budget = celrules.Budget()
        if old is None:
            causes = self.validate(obj, budget)
        else:
            causes = self.ratchet(self._schema_causes(obj), obj, old)
            ratcheted: list[StatusCause] = []
            causes.extend(
                structural.check_rules(
                    _as_rules_see_it(obj),
                    self.root,
                    old=_as_rules_see_it(old),
                    budget=budget,
                    ratcheted=ratcheted,
                    # Upstream correlates the whole objects: a root rule's failure is ratcheted
                    # only when nothing of the object changed.
                    unchanged=structural.unchanged_under(obj, old, self.root) if self.root.rules_below else None,
                )
            )
            causes = validation.deduplicated(causes)
            if warnings is not None:
                warnings.extend(
                    f"{cause.field}: {cause.message}" if cause.field else cause.message
                    for cause in validation.deduplicated(ratcheted)
                )
        causes.extend(
            structural.check_rules(
                _as_rules_see_it(obj),
                self.root,
                old=None if old is None else _as_rules_see_it(old),
                transition_only=True,
                budget=budget,
            )
        )
        return causes

    def ratchet(self, causes: list[StatusCause], new: Obj, old: Obj) -> list[StatusCause]:
        """The schema's ratcheting, as upstream's ratcheting validator: an error is not reported
        when a value on its path (the root, then each step down it while the step correlates
        with the old object: a member the schema describes and the old map has, a map list's
        item with the same keys; not an atomic list's item) is unchanged
        (:func:`structural.unchanged_under`), so objects written before a schema was tightened
        can still be updated elsewhere. (Rules are ratcheted as they are evaluated:
        ``validate_write``.)"""
        return [cause for cause in causes if not _ratcheted(cause.field, new, old, self.root)]

    def generation_changed(self, old: Obj, new: Obj) -> bool:
        """With a status subresource, spec changes bump the generation; without one, any change
        but metadata does (upstream's customresource strategy)."""
        if self.resource.has_status:
            return super().generation_changed(old, new)
        keys = (set(old) | set(new)) - {"metadata", "apiVersion", "kind"}
        return any(old.get(k) != new.get(k) for k in keys)

    def scale_of(self, obj: Obj) -> Obj:
        assert self.scale is not None
        replicas = _get_path(obj, self.scale.get("specReplicasPath", ".spec.replicas"))
        status: Obj = {"replicas": 0}
        status_replicas = _get_path(obj, self.scale.get("statusReplicasPath", ".status.replicas"))
        if isinstance(status_replicas, int):
            status["replicas"] = status_replicas
        selector_path = self.scale.get("labelSelectorPath")
        if selector_path:
            selector = _get_path(obj, selector_path)
            if isinstance(selector, str):
                status["selector"] = selector
            elif isinstance(selector, Mapping):
                status["selector"] = str(LabelSelector.from_label_selector_dict(selector))
        return scale_document(obj, replicas if isinstance(replicas, int) else 0, status)

    def with_replicas(self, obj: Obj, replicas: int) -> Obj:
        assert self.scale is not None
        updated = copy.deepcopy(obj)
        _set_path(updated, self.scale.get("specReplicasPath", ".spec.replicas"), replicas)
        return updated


_PATH_STEP = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")


def _as_rules_see_it(obj: Obj) -> Obj:
    """The object as CEL rules see it: of its metadata, only the name and generateName."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return obj
    return {**obj, "metadata": {k: metadata[k] for k in celrules.ROOT_METADATA_FIELDS if k in metadata}}


def _ratcheted(field_path: str, new: Any, old: Any, node: structural.Node) -> bool:
    """Whether the error at ``field_path`` (``spec.ports[0].port``, ``spec.labels[a.b]``) is
    dropped: a value on its path, reached from the root through correlated steps, is unchanged."""
    if structural.unchanged_under(new, old, node):
        return True
    if not field_path or field_path == "<root>":
        return False
    for name, bracketed in _PATH_STEP.findall(field_path):
        key = name or bracketed
        if isinstance(new, dict) and isinstance(old, dict):
            sub = node.properties.get(key) or node.additional
            if sub is None or key not in new or key not in old:
                return False
            new, old, node = new[key], old[key], sub
        elif isinstance(new, list) and isinstance(old, list):
            if node.list_type != "map" or node.items is None or not key.isdigit() or int(key) >= len(new):
                return False  # an atomic list's or a set's items correlate with nothing
            index = int(key)
            was = structural.correlated_items(new, old, node)[index]
            if was is structural._MISSING:
                return False
            new, old, node = new[index], was, node.items
        else:
            return False
        if structural.unchanged_under(new, old, node):
            return True
    return False


def _has_defaults(node: structural.Node) -> bool:
    if node.has_default:
        return True
    children = [*node.properties.values(), node.additional, node.items]
    return any(child is not None and _has_defaults(child) for child in children)


def _needs_defaults(value: Any, node: structural.Node) -> bool:
    if isinstance(value, dict):
        for key, sub in node.properties.items():
            current = value.get(key, None) if key in value else structural._MISSING
            if current is structural._MISSING and sub.has_default:
                return True
        for key, item in value.items():
            child = node.properties.get(key) or node.additional
            if child is not None and _needs_defaults(item, child):
                return True
    elif isinstance(value, list) and node.items is not None:
        return any(_needs_defaults(item, node.items) for item in value)
    return False


# --------------------------------------------------------------------------- the CRD kind


class CRDStrategy(BuiltinStrategy):
    """apiextensions.k8s.io/v1 CustomResourceDefinition."""

    #: An update names the version it replaces (upstream's CRD strategy, unlike most built-in
    #: kinds'): a PUT of a manifest without a resourceVersion is refused. (``kubectl replace``
    #: fills in the server's resourceVersion first, so it is not refused.)
    allow_unconditional_update = False

    def __init__(self, resource: ResourceType, catalog: ResourceCatalog) -> None:
        super().__init__(resource, KindRules())
        self.catalog = catalog

    def default(self, obj: Obj) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        names = spec.get("names")
        if isinstance(names, dict) and isinstance(names.get("kind"), str):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        conversion = spec.setdefault("conversion", {"strategy": "None"})
        if isinstance(conversion, dict):
            service = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("service")
            if isinstance(service, dict):
                service.setdefault("port", 443)

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        metadata = obj.setdefault("metadata", {})
        finalizers = list(metadata.get("finalizers") or ())
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        metadata["finalizers"] = finalizers

    def finish(self, obj: Obj, old: Obj | None) -> None:
        self.establish(obj, old)

    def begin_deletion(self, obj: Obj) -> None:
        self.establish(obj, obj)

    def validate(self, obj: Obj) -> list[StatusCause]:
        causes = super().validate(obj)
        causes.extend(validate_crd(obj))
        return validation.deduplicated(causes)

    def establish(self, obj: Obj, old: Obj | None) -> None:
        """Set the status the establishing controllers would: accepted names, conditions, stored versions."""
        spec = obj.get("spec") or {}
        names = dict(spec.get("names") or {})
        status = dict(old.get("status") or {}) if old is not None else {}
        now = timestamps.now()
        conflict = self._name_conflict(obj)
        conditions: list[Obj] = []
        previous = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}

        def condition(type_: str, value: str, reason: str, message: str) -> Obj:
            before = previous.get(type_)
            since = before.get("lastTransitionTime") if before and before.get("status") == value else now
            return {
                "type": type_,
                "status": value,
                "lastTransitionTime": since,
                "reason": reason,
                "message": message,
            }

        if conflict:
            conditions.append(condition("NamesAccepted", "False", "KindConflict", conflict))
            conditions.append(condition("Established", "False", "NotAccepted", "not all names are accepted"))
        else:
            status["acceptedNames"] = names
            conditions.append(condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"))
            conditions.append(
                condition(
                    "Established", "True", "InitialNamesAccepted", "the initial names have been accepted"
                )
            )
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            conditions.append(
                condition(
                    "Terminating",
                    "True",
                    "InstanceDeletionInProgress",
                    "CustomResource deletion is in progress",
                )
            )
        status["conditions"] = conditions
        stored = list(status.get("storedVersions") or ())
        for version in spec.get("versions") or ():
            if isinstance(version, dict) and version.get("storage") and version.get("name") not in stored:
                stored.append(version["name"])
        status["storedVersions"] = stored
        status.setdefault("acceptedNames", {"plural": "", "kind": ""})
        obj["status"] = status

    def _name_conflict(self, obj: Obj) -> str:
        spec = obj.get("spec") or {}
        group = spec.get("group")
        names = spec.get("names") or {}
        own = (obj.get("metadata") or {}).get("name")
        for resource in self.catalog.all():
            if resource.group != group or resource.definition == own:
                continue
            if resource.kind == names.get("kind"):
                return f'"{names.get("kind")}" is already in use'
            if resource.plural == names.get("plural"):
                return f'"{names.get("plural")}" is already in use'
        return ""


def validate_crd(obj: Obj) -> list[StatusCause]:
    """ValidateCustomResourceDefinition's rules, one cause per problem."""
    causes: list[StatusCause] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [StatusCause("FieldValueRequired", "Required value", "spec")]
    group = spec.get("group")
    raw_names = spec.get("names")
    names: Mapping[str, Any] = raw_names if isinstance(raw_names, dict) else {}
    plural = names.get("plural")
    name = (obj.get("metadata") or {}).get("name")
    if not group:
        causes.append(StatusCause("FieldValueRequired", "Required value", "spec.group"))
    elif isinstance(group, str):
        for problem in naming.dns1123_subdomain_errors(group):
            causes.append(
                StatusCause("FieldValueInvalid", f"Invalid value: {go_quote(group)}: {problem}", "spec.group")
            )
        if "." not in group:
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(group)}: should be a domain with at least one dot",
                    "spec.group",
                )
            )
    if plural and group and name != f"{plural}.{group}":
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                f'Invalid value: {go_quote(str(name))}: must be spec.names.plural+"."+spec.group',
                "metadata.name",
            )
        )
    scope = spec.get("scope")
    if not scope:
        causes.append(StatusCause("FieldValueRequired", "Required value", "spec.scope"))
    elif scope not in _SCOPES:
        causes.append(
            StatusCause(
                "FieldValueNotSupported",
                f'Unsupported value: {go_quote(str(scope))}: supported values: "Cluster", "Namespaced"',
                "spec.scope",
            )
        )
    causes.extend(_validate_names(names))
    causes.extend(_validate_versions(spec))
    causes.extend(_validate_conversion(spec))
    return causes


def _validate_conversion(spec: Mapping[str, Any]) -> list[StatusCause]:
    """``validateCustomResourceConversion``, with upstream's internal field names
    (``webhookClientConfig``, ``conversionReviewVersions`` directly under ``spec.conversion``)."""
    conversion = spec.get("conversion")
    if not isinstance(conversion, dict):
        return []
    path = "spec.conversion"
    strategy = conversion.get("strategy")
    webhook = conversion.get("webhook")
    webhook = webhook if isinstance(webhook, dict) else None
    if strategy not in ("None", "Webhook"):
        return [fielderrors.not_supported(f"{path}.strategy", strategy or "", ("None", "Webhook"))]
    if strategy == "None":
        causes = []
        if webhook is not None and webhook.get("clientConfig") is not None:
            causes.append(
                fielderrors.forbidden(
                    f"{path}.webhookClientConfig", "should not be set when strategy is not set to Webhook"
                )
            )
        if webhook is not None and webhook.get("conversionReviewVersions"):
            causes.append(
                fielderrors.forbidden(
                    f"{path}.conversionReviewVersions",
                    "should not be set when strategy is not set to Webhook",
                )
            )
        return causes
    causes = []
    if spec.get("preserveUnknownFields") is True:
        causes.append(
            fielderrors.invalid(
                f"{path}.strategy", strategy, "must be None if spec.preserveUnknownFields is true"
            )
        )
    config = webhook.get("clientConfig") if webhook is not None else None
    if not isinstance(config, dict):
        causes.append(
            fielderrors.required(f"{path}.webhookClientConfig", "required when strategy is set to Webhook")
        )
    else:
        causes.extend(admissionregistration.client_config(config, f"{path}.webhookClientConfig"))
    versions = webhook.get("conversionReviewVersions") if webhook is not None else None
    causes.extend(admissionregistration.review_versions(versions, f"{path}.conversionReviewVersions"))
    return causes


def _validate_names(names: Mapping[str, Any]) -> list[StatusCause]:
    causes: list[StatusCause] = []
    for key in ("plural", "singular"):
        value = names.get(key)
        path = f"spec.names.{key}"
        if not value:
            if key == "plural":
                causes.append(StatusCause("FieldValueRequired", "Required value", path))
            continue
        for problem in naming.dns1123_label_errors(str(value)):
            causes.append(
                StatusCause("FieldValueInvalid", f"Invalid value: {go_quote(str(value))}: {problem}", path)
            )
    for key in ("kind", "listKind"):
        value = names.get(key)
        path = f"spec.names.{key}"
        if not value:
            if key == "kind":
                causes.append(StatusCause("FieldValueRequired", "Required value", path))
            continue
        if not isinstance(value, str) or not _KIND_FORMAT.match(value):
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(str(value))}: may have mixed case, but should otherwise match: "
                    "[a-z]([-a-z0-9]*[a-z0-9])?",
                    path,
                )
            )
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                f"Invalid value: {go_quote(str(names.get('listKind')))}: kind and listKind may not be the same",
                "spec.names.listKind",
            )
        )
    for key in ("shortNames", "categories"):
        for index, value in enumerate(names.get(key) or ()):
            if not isinstance(value, str) or naming.dns1123_label_errors(value):
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(str(value))}: must be a lowercase RFC 1123 label",
                        f"spec.names.{key}[{index}]",
                    )
                )
    return causes


def _validate_versions(spec: Mapping[str, Any]) -> list[StatusCause]:
    causes: list[StatusCause] = []
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        return [
            StatusCause(
                "FieldValueInvalid",
                "Invalid value: must have exactly one version marked as storage version",
                "spec.versions",
            )
        ]
    storage = 0
    seen: set[str] = set()
    for index, version in enumerate(versions):
        path = f"spec.versions[{index}]"
        if not isinstance(version, dict):
            continue
        name = version.get("name")
        if not name:
            causes.append(StatusCause("FieldValueRequired", "Required value", f"{path}.name"))
        elif isinstance(name, str):
            for problem in naming.dns1035_label_errors(name):
                causes.append(
                    StatusCause(
                        "FieldValueInvalid", f"Invalid value: {go_quote(name)}: {problem}", f"{path}.name"
                    )
                )
            if name in seen:
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(name)}: must be unique",
                        f"{path}.name",
                    )
                )
            seen.add(name)
        if version.get("storage"):
            storage += 1
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        try:
            structural.compile_schema(schema, f"{path}.schema.openAPIV3Schema")
        except structural.SchemaError as exc:
            causes.extend(exc.causes)
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale") if isinstance(subresources, dict) else None
        if isinstance(scale, dict):
            spec_path = scale.get("specReplicasPath")
            if not isinstance(spec_path, str) or not spec_path.startswith(".spec."):
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(str(spec_path or ''))}: should be a json path under .spec",
                        f"{path}.subresources.scale.specReplicasPath",
                    )
                )
            status_path = scale.get("statusReplicasPath")
            if not isinstance(status_path, str) or not status_path.startswith(".status."):
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(str(status_path or ''))}: should be a json path under .status",
                        f"{path}.subresources.scale.statusReplicasPath",
                    )
                )
        for column_index, column in enumerate(version.get("additionalPrinterColumns") or ()):
            column_path = f"{path}.additionalPrinterColumns[{column_index}]"
            if not isinstance(column, dict):
                continue
            for key in ("name", "jsonPath", "type"):
                if not column.get(key):
                    causes.append(StatusCause("FieldValueRequired", "Required value", f"{column_path}.{key}"))
            if column.get("type") and column["type"] not in _COLUMN_TYPES:
                causes.append(
                    StatusCause(
                        "FieldValueNotSupported",
                        f"Unsupported value: {go_quote(str(column['type']))}: supported values: "
                        '"boolean", "date", "integer", "number", "string"',
                        f"{column_path}.type",
                    )
                )
    if storage != 1:
        causes.append(
            StatusCause(
                "FieldValueInvalid",
                f"Invalid value: {_versions_text(versions)}: must have exactly one version marked as storage version",
                "spec.versions",
            )
        )
    return causes


def _versions_text(versions: list[Any]) -> str:
    return "[" + " ".join(str(v.get("name")) for v in versions if isinstance(v, dict)) + "]"


def served_resources(
    crd: Obj, converter: VersionConverter | None = None
) -> list[tuple[ResourceType, CustomResourceStrategy]]:
    """The resources (one per served version) an established CRD serves, with their strategies;
    ``converter`` converts between its versions when its conversion strategy is Webhook."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec["group"]
    definition = crd["metadata"]["name"]
    storage_version = next(
        (v["name"] for v in spec.get("versions") or () if isinstance(v, dict) and v.get("storage")), ""
    )
    revision = str((crd.get("metadata") or {}).get("resourceVersion") or "0")
    schema_revision = int(revision) if revision.isdigit() else 0
    out: list[tuple[ResourceType, CustomResourceStrategy]] = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        sub: list[str] = []
        if "status" in subresources:
            sub.append("status")
        if "scale" in subresources:
            sub.append("scale")
        columns = tuple(
            PrinterColumn(
                name=str(c.get("name")),
                type=str(c.get("type")),
                json_path=str(c.get("jsonPath")),
                description=str(c.get("description") or ""),
                priority=int(c.get("priority") or 0),
                format=str(c.get("format") or ""),
            )
            for c in version.get("additionalPrinterColumns") or ()
        )
        selectable = {
            str(f["jsonPath"]).lstrip("."): str(f["jsonPath"]).lstrip(".")
            for f in version.get("selectableFields") or ()
            if isinstance(f, dict) and f.get("jsonPath")
        }
        resource = ResourceType(
            group,
            version["name"],
            names["plural"],
            names.get("singular") or names["kind"].lower(),
            names["kind"],
            spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=tuple(sub),
            field_selectors=selectable,
            tracks_generation=True,
            returns_deleted_object=True,
            printer_columns=columns,
            definition=definition,
        )
        schema = structural.compile_schema(
            (version.get("schema") or {}).get("openAPIV3Schema"), "openAPIV3Schema", check_rule_types=False
        )
        strategy = CustomResourceStrategy(
            resource,
            schema,
            subresources.get("scale"),
            storage_version=storage_version,
            schema_revision=schema_revision,
        )
        strategy.converter = converter
        out.append((resource, strategy))
    return out
