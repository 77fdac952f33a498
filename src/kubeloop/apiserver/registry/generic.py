"""Registry semantics: what create, get, list, update, patch and delete mean for an object.

This is kube-apiserver's generic registry store plus the built-in kinds' strategies, applied to
plain dicts: create-time metadata (uid, creationTimestamp, generation, generateName), optimistic
concurrency on resourceVersion, the status subresource, generation rules, finalizers and
deletionTimestamp, delete preconditions and propagation policies (recorded as finalizers),
dry-run, field validation, and namespace lifecycle checks. The HTTP layer parses requests into
calls on :class:`Registry`; the store underneath keeps objects and serves watches.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from kubeloop import errors
from kubeloop.api import naming, timestamps
from kubeloop.api.fields import FieldSelector, object_fields
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.mediatypes import APPLY_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.patch import fieldmanager
from kubeloop.apiserver.registry import listing, patching
from kubeloop.apiserver.registry.admissionhooks import (
    CREATE,
    DELETE,
    UPDATE,
    Admission,
    AdmissionAttributes,
)
from kubeloop.apiserver.registry.serviceips import ServiceAllocator
from kubeloop.apiserver.registry.strategies import Strategy, builtin_strategy
from kubeloop.apiserver.registry.verboptions import (
    DeleteOptions,
    DeleteResult,
    ListOptions,
    ListResult,
    WriteOptions,
    WriteResult,
    check_patch_options,
    propagation_policy,
)
from kubeloop.apiserver.registry.versionconversion import ConversionPending
from kubeloop.apiserver.storage.watchcache import ObjectStore, PreconditionFailed
from kubeloop.apiserver.userinfo import UserInfo
from kubeloop.uuids import random_uuid

T = TypeVar("T")

#: Read-modify-write attempts before a write that keeps losing races answers 409.
_MAX_ATTEMPTS = 64
#: Conversions one read may need before its objects are all converted (each round converts
#: every object the read is missing; more happen only when writes land meanwhile).
_CONVERSION_ROUNDS = 16
_NAMESPACES = ResourceType("", "v1", "namespaces", "namespace", "Namespace", False)


class Registry:
    """Object semantics over an :class:`ObjectStore` for the resources of a catalog."""

    def __init__(self, store: ObjectStore, catalog: ResourceCatalog) -> None:
        self.store = store
        self.catalog = catalog
        self._strategies: dict[tuple[str, str, str], Strategy] = {}  # built-in ones, made on first use
        self._set_strategies: dict[tuple[str, str, str], Strategy] = {}  # custom resources' (set_strategy)
        #: Cluster IPs and node ports of Services.
        self.services = ServiceAllocator(store)
        #: The admission chain every write goes through (webhooks; None: none).
        self.admission: Admission | None = None
        self._commit_listeners: dict[tuple[str, str], list[Callable[[], None]]] = {}

    def add_commit_listener(self, group: str, plural: str, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever a write of the resource ``group``/``plural`` (any version)
        has committed, before it is answered: what keeps a cache of such objects current."""
        self._commit_listeners.setdefault((group, plural), []).append(listener)

    def _committed(self, strategy: Strategy, obj: Obj | None, old: Obj | None) -> None:
        strategy.after_commit(obj, old)
        for listener in self._commit_listeners.get((strategy.resource.group, strategy.resource.plural), ()):
            listener()

    # ------------------------------------------------------------ strategies

    def strategy(self, resource: ResourceType) -> Strategy:
        """The strategy of a resource: one set with :meth:`set_strategy`, else the built-in one.

        A set strategy answers for its group/version/plural even when asked with an older
        ``ResourceType`` of it: a watch or request that began before its CRD changed gets the
        current schema, and never puts a built-in strategy in its place.
        """
        key = (resource.group, resource.version, resource.plural)
        strategy = self._set_strategies.get(key)
        if strategy is not None:
            return strategy
        strategy = self._strategies.get(key)
        if strategy is None or strategy.resource is not resource:
            strategy = self._strategies[key] = builtin_strategy(resource, self.services)
        return strategy

    def set_strategy(self, strategy: Strategy) -> None:
        """Serve ``strategy.resource`` with ``strategy`` (custom resources; replaces any earlier)."""
        resource = strategy.resource
        self._set_strategies[(resource.group, resource.version, resource.plural)] = strategy

    def drop_strategy(self, resource: ResourceType) -> None:
        key = (resource.group, resource.version, resource.plural)
        self._set_strategies.pop(key, None)
        self._strategies.pop(key, None)

    def to_served(self, resource: ResourceType, stored: Obj) -> Obj:
        """The stored form as the resource's group/version serves it."""
        return self.strategy(resource).to_served(stored)

    def _served_while_writing(self, resource: ResourceType, obj: Obj) -> Obj:
        """An object being written, defaulted on its way in, as its group/version serves it."""
        return self.strategy(resource).to_served(obj, defaulted=True)

    def to_stored(self, resource: ResourceType, served: Obj) -> Obj:
        return self.strategy(resource).to_stored(served)

    # ------------------------------------------------------------ conversion by webhook

    async def read(self, read: Callable[[], T]) -> T:
        """``read()`` (a get, list or scale read), after converting by webhook what its objects
        need (``ConversionPending``): reads are synchronous, conversion webhooks are not."""
        for _ in range(_CONVERSION_ROUNDS):
            try:
                return read()
            except ConversionPending as pending:
                await pending.convert()
        raise errors.internal_error("the objects' conversion did not settle")

    async def served(self, resource: ResourceType, stored: Obj) -> Obj:
        """``to_served``, converting by webhook first when the kind needs it."""
        return await self.read(lambda: self.to_served(resource, stored))

    async def _served_writing(self, resource: ResourceType, obj: Obj) -> Obj:
        return await self.read(lambda: self._served_while_writing(resource, obj))

    async def prepare_served(self, resource: ResourceType, stored: list[Obj]) -> None:
        """Convert by webhook, in one call, what ``to_served`` of these objects needs; nothing
        for a kind converted in process."""
        if self.strategy(resource).converter is None:
            return

        def served_all() -> None:
            pending: ConversionPending | None = None
            for obj in stored:
                try:
                    self.to_served(resource, obj)
                except ConversionPending as missing:
                    pending = missing if pending is None else pending.merged(missing)
            if pending is not None:
                raise pending

        await self.read(served_all)

    async def stored(self, resource: ResourceType, served: Obj) -> Obj:
        """``to_stored``, converting by webhook first when the kind needs it."""
        return await self.read(lambda: self.to_stored(resource, served))

    def supported_fields(self, resource: ResourceType) -> list[str]:
        fields = ["metadata.name"]
        if resource.namespaced:
            fields.append("metadata.namespace")
        fields.extend(resource.field_selectors)
        return fields

    def matcher(
        self,
        resource: ResourceType,
        label_selector: LabelSelector | None,
        field_selector: FieldSelector | None,
    ) -> Callable[[Obj], bool] | None:
        """A predicate over served objects for the selectors, or None when nothing is filtered."""
        labels = label_selector if label_selector is not None and not label_selector.is_empty else None
        fields = field_selector if field_selector is not None and field_selector.requirements else None
        if fields is not None:
            fields.check_supported(self.supported_fields(resource))
        if labels is None and fields is None:
            return None

        def matches(obj: Obj) -> bool:
            if labels is not None and not labels.matches((obj.get("metadata") or {}).get("labels") or {}):
                return False
            if fields is not None:
                values = object_fields(obj, resource.namespaced, resource.field_selectors)
                if not fields.matches(values):
                    return False
            return True

        return matches

    # ------------------------------------------------------------ reads

    def get(
        self, resource: ResourceType, namespace: str | None, name: str, resource_version: str = ""
    ) -> Obj:
        """The current object; a ``resource_version`` (not older than) ahead of the store is a 504."""
        if resource_version:
            revision = listing.parse_resource_version(resource_version)
            if revision > self.store.revision:
                raise listing.too_large(revision, self.store.revision)
        stored = self.store.get(resource.key(namespace, name))
        if stored is None:
            raise errors.not_found(resource.group, resource.plural, name)
        return self.to_served(resource, stored.obj)

    def list_objects(self, resource: ResourceType, namespace: str | None, options: ListOptions) -> ListResult:
        prefix = resource.key_prefix(namespace)
        match = self.matcher(resource, options.label_selector, options.field_selector)
        revision, start_suffix = listing.list_start(
            options, self.store.revision, self.store.compacted_revision
        )
        start = prefix + start_suffix if start_suffix else ""
        if options.limit < 0:
            raise errors.BadRequest("limit: Invalid value: must be a non-negative integer")
        exact_name = options.field_selector.exact_value("metadata.name") if options.field_selector else None
        items: list[Obj] = []
        next_key = ""
        remaining: int | None = None
        if revision is None:
            revision = self.store.revision
            source: list[tuple[str, Obj]] | None = None
            if exact_name is not None and (namespace or not resource.namespaced):
                stored = self.store.get(prefix + exact_name)
                source = [(prefix + exact_name, stored.obj)] if stored is not None else []
            iterator = iter(source) if source is not None else self.store.items(prefix, start=start)
        else:
            iterator = iter(self.store.list_at(prefix, revision, start=start))
        pending: ConversionPending | None = None
        for key, stored_obj in iterator:
            try:
                obj = self.to_served(resource, stored_obj)
            except ConversionPending as missing:  # every object's, then one conversion for all
                pending = missing if pending is None else pending.merged(missing)
                continue
            if match is not None and not match(obj):
                continue
            if options.limit and len(items) >= options.limit:
                next_key = key
                break
            items.append(obj)
        if pending is not None:
            raise pending
        if next_key:
            if match is None:
                remaining = (
                    self.store.count_with_prefix(prefix, next_key)
                    if revision == self.store.revision
                    else None
                )
            token = listing.encode_continue(revision, next_key[len(prefix) :])
            return ListResult(items, revision, token, remaining)
        return ListResult(items, revision)

    # ------------------------------------------------------------ writes

    def _decode(
        self,
        resource: ResourceType,
        body: Any,
        options: WriteOptions,
        *,
        subresource: str = "",
        owned: bool = False,
        shallow: bool = False,
        converter: bool = False,
    ) -> tuple[Obj, list[str]]:
        """The body as the kind's stored type, checked and pruned; ``owned``: the body is a value
        made for this write (a patch's result), which may become the object, not a copy of it;
        ``shallow``: the body is known to nest no deeper than the limit; ``converter``: type errors
        worded as a strategic merge patch's are upstream."""
        if not isinstance(body, dict):
            raise errors.BadRequest(
                f"the body of the request was in an unknown format: expected a {resource.kind} object"
            )
        if not shallow:
            decoding.check_depth(body, "the object")  # a JSON patch can nest what its body did not
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if kind is not None and kind != resource.kind:
            raise errors.BadRequest(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({resource.api_version})"
                if api_version != resource.api_version
                else f'kind: Invalid value: "{kind}": must be {resource.kind}'
            )
        if api_version is not None and api_version != resource.api_version:
            raise errors.BadRequest(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({resource.api_version})"
            )
        body, warnings = self.strategy(resource).decode(
            body,
            field_validation=options.field_validation,
            duplicates=options.duplicate_fields,
            owned=owned,
            converter=converter,
        )
        body["apiVersion"] = resource.api_version
        body["kind"] = resource.kind
        metadata = body.get("metadata")
        if metadata is None:
            body["metadata"] = {}
        return body, warnings

    def _validate(
        self, resource: ResourceType, obj: Obj, old: Obj | None = None, subresource: str = ""
    ) -> None:
        strategy = self.strategy(resource)
        causes = strategy.validate_write(obj, old)
        if causes and old is not None and subresource in ("status", "binding"):
            # A status write carries the stored spec: as upstream's status strategies (which check
            # metadata and status only), it is not refused for what the stored object already
            # broke — an object kept from before a rule existed, say, whose controllers must
            # still report on it. A binding likewise (upstream assigns the node in storage,
            # checking nothing of the pod): such a pod is still scheduled. Only in the rare
            # refused case is the old object checked.
            before = {(cause.field, cause.message) for cause in strategy.validate_write(old, None)}
            causes = [cause for cause in causes if (cause.field, cause.message) not in before]
        if causes:
            name = (obj.get("metadata") or {}).get("name") or ""
            raise errors.invalid(resource.group, resource.kind, name, causes)

    def _check_namespace(
        self, resource: ResourceType, namespace: str | None, obj: Obj, *, creating: bool
    ) -> None:
        if not resource.namespaced:
            return
        metadata = obj["metadata"]
        body_namespace = metadata.get("namespace")
        if body_namespace and namespace and body_namespace != namespace:
            raise errors.BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if namespace:
            metadata["namespace"] = namespace
        if not metadata.get("namespace"):
            raise errors.BadRequest(
                "the server could not find the requested resource: a namespace is required"
            )
        if creating:
            ns_obj = self.store.get(_NAMESPACES.key(None, metadata["namespace"]))
            if ns_obj is None:
                raise errors.not_found("", "namespaces", metadata["namespace"])
            if (ns_obj.obj.get("metadata") or {}).get("deletionTimestamp"):
                raise errors.Forbidden(
                    f'{resource.plural} "{metadata.get("name") or metadata.get("generateName", "")}" is forbidden: '
                    f"unable to create new content in namespace {metadata['namespace']} because it is being terminated",
                    name=metadata.get("name", ""),
                    group=resource.group,
                    kind=resource.plural,
                    causes=[
                        errors.StatusCause(
                            "NamespaceTerminating",
                            f"namespace {metadata['namespace']} is being terminated",
                            "metadata.namespace",
                        )
                    ],
                )

    # ------------------------------------------------------------ admission

    def _admits(self, resource: ResourceType, user: UserInfo | None) -> bool:
        """Whether a write of ``resource`` by ``user`` goes through admission: requests a client
        made do, when anything is configured for the resource."""
        return self.admission is not None and user is not None and self.admission.covers(resource)

    def _attributes(
        self,
        resource: ResourceType,
        operation: str,
        obj: Obj,
        options: WriteOptions,
        *,
        subresource: str,
        patch: bool,
    ) -> AdmissionAttributes:
        metadata = obj.get("metadata") or {}
        return AdmissionAttributes(
            resource=resource,
            subresource=subresource,
            operation=operation,
            name=str(metadata.get("name") or ""),
            namespace=str(metadata.get("namespace") or "") if resource.namespaced else "",
            user=options.user,
            dry_run=options.dry_run,
            options=options.admission_options(operation, patch=patch),
        )

    async def _mutated(
        self,
        resource: ResourceType,
        operation: str,
        obj: Obj,
        old: Obj | None,
        options: WriteOptions,
        *,
        subresource: str,
        patch: bool,
    ) -> tuple[Obj, list[str]]:
        """``obj`` (stored form) as mutating admission leaves it, and the warnings it gave.

        A changed object is decoded again as the kind's type (what a webhook added that the
        type does not have is dropped, a value of the wrong type is an internal error, as
        upstream's decoding of a webhook's patch) and defaulted again; its managedFields stay as
        recorded before admission."""
        assert self.admission is not None
        served = await self._served_writing(resource, obj)
        served_old = await self.served(resource, old) if old is not None else None
        attributes = self._attributes(resource, operation, obj, options, subresource=subresource, patch=patch)
        mutated, warnings = await self.admission.mutate(attributes, served, served_old)
        if mutated is None or mutated is served:
            return obj, warnings
        managed = (obj.get("metadata") or {}).get("managedFields")
        lenient = replace(options, field_validation="Ignore", duplicate_fields=())
        try:
            decoded, _ = self._decode(resource, mutated, lenient, subresource=subresource, owned=True)
        except errors.BadRequest as error:
            raise errors.internal_error(error.message) from None
        changed = await self.stored(resource, decoded)
        if managed is None:
            changed["metadata"].pop("managedFields", None)
        else:
            changed["metadata"]["managedFields"] = managed
        self.strategy(resource).default(changed)
        return changed, warnings

    async def _validated(
        self,
        resource: ResourceType,
        operation: str,
        served: Obj,
        served_old: Obj | None,
        options: WriteOptions,
        *,
        subresource: str,
        patch: bool,
    ) -> list[str]:
        """Validating admission of the object about to be written: the warnings it gave."""
        assert self.admission is not None
        attributes = self._attributes(
            resource, operation, served, options, subresource=subresource, patch=patch
        )
        return await self.admission.validate(attributes, served, served_old)

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Any,
        options: WriteOptions,
        *,
        managed: list[fieldmanager.ManagedEntry] | None = None,
        patch: bool = False,
    ) -> WriteResult:
        """Create an object. ``managed``: its managedFields as an apply recorded them;
        ``patch``: the create is an apply's (admission is told of PatchOptions)."""
        obj, warnings = self._decode(resource, body, options)
        obj = await self.stored(resource, obj)
        metadata: Obj = obj["metadata"]
        if metadata.get("resourceVersion"):
            raise errors.BadRequest("resourceVersion should not be set on objects to be created")
        self._check_namespace(resource, namespace, obj, creating=True)
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            metadata.pop(key, None)
        strategy = self.strategy(resource)
        if self._admits(resource, options.user):
            # Mutating admission sees the decoded, defaulted object, before the strategy
            # prepares it, its name is generated and its uid set (upstream's order).
            strategy.default(obj)
            obj, admitted = await self._mutated(
                resource, CREATE, obj, None, options, subresource="", patch=patch
            )
            warnings = warnings + admitted
            metadata = obj["metadata"]
            self._check_namespace(resource, namespace, obj, creating=True)
        generate_name = metadata.get("generateName")
        if not metadata.get("name") and not generate_name:
            raise errors.invalid(
                resource.group,
                resource.kind,
                "",
                [
                    errors.StatusCause(
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                        "metadata.name",
                    )
                ],
            )
        metadata["uid"] = random_uuid()
        metadata["creationTimestamp"] = timestamps.now()
        if resource.tracks_generation:
            metadata["generation"] = 1
        strategy.prepare_for_create(obj)
        strategy.default(obj)
        if managed is None:
            managed = _recorded_update(strategy, None, await self._served_writing(resource, obj), options, "")
        _set_managed(metadata, managed)
        attempts = 0
        while True:
            if (generate_name and not metadata.get("name")) or attempts:
                metadata["name"] = (generate_name or "") + naming.generate_name_suffix()
            served = await self._served_writing(resource, obj)
            self._validate(resource, served)
            if options.admit is not None:
                options.admit(served, None)
            key = resource.key(metadata.get("namespace"), metadata["name"])
            if self.store.get(key) is not None:
                if generate_name and attempts < 8 and not body.get("metadata", {}).get("name"):
                    attempts += 1
                    continue
                raise errors.already_exists(resource.group, resource.plural, metadata["name"])
            break
        if self._admits(resource, options.user):
            warnings = warnings + await self._validated(
                resource, CREATE, served, None, options, subresource="", patch=patch
            )
        strategy.finish(obj, None)
        if options.dry_run:
            return WriteResult(await self.served(resource, obj), warnings, created=True)
        try:
            event = await self.store.write(key, obj, expected_revision=0)
        except PreconditionFailed:
            raise errors.already_exists(resource.group, resource.plural, metadata["name"]) from None
        self._committed(strategy, event.obj, None)
        return WriteResult(await self.served(resource, event.obj), warnings, created=True)

    async def _guaranteed(
        self, resource: ResourceType, namespace: str | None, name: str, attempt: Callable[[], Awaitable[T]]
    ) -> T:
        """Run a read-modify-write until its read was current when it wrote (GuaranteedUpdate).

        An attempt that read an object another write then replaced raises ``_StaleRead``; it is
        tried again on the new object, where a precondition the client set (a resourceVersion in
        the body or a delete precondition) fails with 409 as it should.
        """
        key = resource.key(namespace, name)
        for _ in range(_MAX_ATTEMPTS):
            await self.store.settled(key)
            try:
                return await attempt()
            except _StaleRead:
                continue
        raise errors.conflict(resource.group, resource.plural, name)  # it kept losing the race

    async def update(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        options: WriteOptions,
        *,
        subresource: str = "",
    ) -> WriteResult:
        return await self._guaranteed(
            resource,
            namespace,
            name,
            lambda: self._update_once(resource, namespace, name, body, options, subresource),
        )

    async def _update_once(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        options: WriteOptions,
        subresource: str,
    ) -> WriteResult:
        obj, warnings = self._decode(resource, body, options, subresource=subresource)
        obj = await self.stored(resource, obj)
        body_name = obj["metadata"].get("name")
        if body_name and body_name != name:
            raise errors.BadRequest(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        obj["metadata"]["name"] = name
        self._check_namespace(resource, namespace, obj, creating=False)
        key = resource.key(namespace, name)
        current = self.store.get(key)
        if current is None:
            raise errors.not_found(resource.group, resource.plural, name)
        rv = obj["metadata"].get("resourceVersion")
        if rv and listing.parse_resource_version(rv) != current.revision:
            raise errors.conflict(resource.group, resource.plural, name)
        if not rv and not self.strategy(resource).allow_unconditional_update:
            cause = errors.StatusCause(
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion",
            )
            raise errors.invalid(resource.group, resource.kind, name, [cause])
        return await self._finish_update(
            resource, key, current.obj, current.revision, obj, options, warnings, subresource
        )

    async def patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: bytes,
        options: WriteOptions,
        *,
        subresource: str = "",
    ) -> WriteResult:
        check_patch_options(patch_type, options)
        accepted = self.strategy(resource).patch_types
        if patch_type not in accepted:
            raise patching.unsupported_patch_type(accepted)
        return await self._guaranteed(
            resource,
            namespace,
            name,
            lambda: self._patch_once(resource, namespace, name, patch_type, patch, options, subresource),
        )

    async def _patch_once(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: bytes,
        options: WriteOptions,
        subresource: str,
    ) -> WriteResult:
        if patch_type == APPLY_PATCH:
            return await self._apply(resource, namespace, name, patch, options, subresource)
        key = resource.key(namespace, name)
        current = self.store.get(key)
        if current is None:
            raise errors.not_found(resource.group, resource.plural, name)
        served = await self.served(resource, current.obj)
        patched = patching.apply_patch(served, patch_type, patch, self.strategy(resource).schema)
        if not isinstance(patched, dict):
            raise errors.BadRequest("the patched object is not a JSON object")
        # A merge patch's result (strategic or not) is made of the stored object's parts and the
        # patch's, each within the depth limit, at the paths they had: it nests no deeper.
        shallow = patch_type != JSON_PATCH
        try:
            obj, warnings = self._decode(
                resource,
                patched,
                options,
                subresource=subresource,
                # A strict error shows the patched object as it was, before pruning.
                owned=options.field_validation != "Strict",
                shallow=shallow,
                converter=patch_type == STRATEGIC_MERGE_PATCH,
            )
        except decoding.DecodingError as failed:
            raise patching.undecodable(patch_type, patch, patched, failed.detail) from None
        obj = await self.stored(resource, obj)
        metadata = obj["metadata"]
        if metadata.get("name") != name:
            raise errors.BadRequest(
                f'metadata.name: Invalid value: "{metadata.get("name")}": field is immutable'
            )
        if resource.namespaced and metadata.get("namespace") != namespace:
            raise errors.BadRequest(
                f'metadata.namespace: Invalid value: "{metadata.get("namespace")}": field is immutable'
            )
        rv = metadata.get("resourceVersion")
        if rv and listing.parse_resource_version(rv) != current.revision:
            raise errors.conflict(resource.group, resource.plural, name)
        return await self._finish_update(
            resource, key, current.obj, current.revision, obj, options, warnings, subresource, patch=True
        )

    async def _apply(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: bytes,
        options: WriteOptions,
        subresource: str,
    ) -> WriteResult:
        """Server-side apply: merge the applied configuration, track ownership, create if absent."""
        document = decoding.decode_yaml(patch, "the apply patch")
        applied, warnings = self._decode(resource, document, options, subresource=subresource)
        metadata: Obj = applied["metadata"]
        if metadata.get("name") not in (None, "", name):
            raise errors.BadRequest(
                f"the name of the object ({metadata.get('name')}) does not match the name on the URL ({name})"
            )
        metadata["name"] = name
        if resource.namespaced and metadata.get("namespace") not in (None, "", namespace):
            raise errors.BadRequest(
                f"the namespace of the object ({metadata.get('namespace')}) does not match the namespace on "
                f"the URL ({namespace})"
            )
        if "managedFields" in metadata:
            raise errors.BadRequest("metadata.managedFields must be nil in an apply configuration")
        schema = self.strategy(resource).schema
        key = resource.key(namespace, name)
        current = self.store.get(key)
        live = await self.served(resource, current.obj) if current is not None else None
        if live is None and subresource:
            raise errors.not_found(resource.group, resource.plural, name)
        entries = fieldmanager.starting_entries(live, {})
        result = fieldmanager.apply(
            live,
            applied,
            entries,
            schema,
            manager=options.field_manager,
            api_version=resource.api_version,
            subresource=subresource,
            has_status=resource.has_status,
            force=bool(options.force),
            group=resource.group,
            kind=resource.plural,
            name=name,
        )
        if current is None:
            result.obj.setdefault("metadata", {})["namespace"] = namespace
            try:
                created = await self.create(
                    resource, namespace, result.obj, options, managed=result.entries, patch=True
                )
            except errors.AlreadyExists:
                raise _StaleRead from None  # created meanwhile: apply to it
            return WriteResult(created.obj, warnings + created.warnings, created=True)
        merged = await self.stored(resource, result.obj)
        merged["metadata"]["resourceVersion"] = str(current.revision)
        return await self._finish_update(
            resource,
            key,
            current.obj,
            current.revision,
            merged,
            options,
            warnings,
            subresource,
            managed=result.entries,
            patch=True,
        )

    def _prepared_update(
        self, resource: ResourceType, strategy: Strategy, new: Obj, old: Obj, subresource: str
    ) -> Obj:
        """``new`` as an update through ``subresource`` may leave it: what the strategy keeps,
        the metadata no update may change taken from ``old``, defaulted."""
        old_meta: Obj = old.get("metadata") or {}
        new = strategy.prepare_for_update(new, old, subresource)
        meta: Obj = new["metadata"]
        for immutable in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["namespace"] = old_meta.get("namespace") if resource.namespaced else meta.pop("namespace", None)
        if not resource.namespaced:
            meta.pop("namespace", None)
        meta.pop("resourceVersion", None)
        # Every write is defaulted, a subresource's too: upstream decodes the patched or sent
        # object with the kind's defaults (a status field's default included) whatever the path.
        strategy.default(new)
        return new

    async def _finish_update(
        self,
        resource: ResourceType,
        key: str,
        old: Obj,
        old_revision: int,
        new: Obj,
        options: WriteOptions,
        warnings: list[str],
        subresource: str,
        *,
        managed: list[fieldmanager.ManagedEntry] | None = None,
        patch: bool = False,
    ) -> WriteResult:
        old_meta: Obj = old.get("metadata") or {}
        sent_managed = (new.get("metadata") or {}).get("managedFields")
        strategy = self.strategy(resource)
        new = self._prepared_update(resource, strategy, new, old, subresource)
        if self._admits(resource, options.user):
            new, admitted = await self._mutated(
                resource, UPDATE, new, old, options, subresource=subresource, patch=patch
            )
            warnings = warnings + admitted
            # What admission changed is held to the same rules as the request (status through
            # /status only, the fields no update may change).
            new = self._prepared_update(resource, strategy, new, old, subresource)
        meta: Obj = new["metadata"]
        if resource.tracks_generation and subresource == "" and strategy.generation_changed(old, new):
            meta["generation"] = int(old_meta.get("generation", 0)) + 1
        served_old = await self.served(resource, old)
        if managed is None:
            meta["managedFields"] = sent_managed
            # Field sets are of the version the manager wrote (autoscaling/v1 fields for a v1 client).
            managed = _recorded_update(
                strategy, served_old, await self._served_writing(resource, new), options, subresource
            )
        _set_managed(meta, managed)
        if old_meta.get("deletionTimestamp"):
            old_finalizers = set(old_meta.get("finalizers") or ())
            added = [f for f in meta.get("finalizers") or () if f not in old_finalizers]
            if added:
                raise errors.invalid(
                    resource.group,
                    resource.kind,
                    meta.get("name", ""),
                    [
                        errors.StatusCause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being deleted",
                            "metadata.finalizers",
                        )
                    ],
                )
        served_new = await self._served_writing(resource, new)  # again: managedFields and more were set since
        self._validate(resource, served_new, served_old, subresource)
        if options.admit is not None:
            options.admit(served_new, served_old)
        if self._admits(resource, options.user):
            warnings = warnings + await self._validated(
                resource, UPDATE, served_new, served_old, options, subresource=subresource, patch=patch
            )
        strategy.finish(new, old)
        if not meta.get("finalizers"):
            meta.pop("finalizers", None)
        if _same_object(old, new):
            # A no-op update does not write (and keeps the resourceVersion), like upstream.
            return WriteResult(await self.served(resource, old), warnings)
        deleting = (
            bool(old_meta.get("deletionTimestamp"))
            and not meta.get("finalizers")
            and not strategy.holds_deletion(new)
            and not meta.get("deletionGracePeriodSeconds")  # a grace period runs: its node removes it
        )
        if options.dry_run:
            out = copy.deepcopy(new)
            out["metadata"]["resourceVersion"] = str(old_revision)
            return WriteResult(await self.served(resource, out), warnings)
        try:
            if deleting:
                event = await self.store.write(key, None, expected_revision=old_revision)
                self._committed(strategy, None, old)
                return WriteResult(await self.served(resource, _merge_final(event.obj, new)), warnings)
            event = await self.store.write(key, new, expected_revision=old_revision)
        except PreconditionFailed:
            raise _StaleRead from None
        self._committed(strategy, event.obj, old)
        return WriteResult(await self.served(resource, event.obj), warnings)

    # ------------------------------------------------------------ subresources with objects of their own

    async def admit_subresource(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str,
        obj: Obj,
        object_kind: tuple[str, str, str],
        options: WriteOptions,
    ) -> tuple[Obj, list[str]]:
        """Admission of a CREATE through a subresource that takes an object of another kind (a
        pod's ``binding`` a Binding, its ``eviction`` an Eviction), as upstream admits them:
        the object as mutating admission leaves it, and the warnings."""
        return await self._admitted_as(
            resource, namespace, name, subresource, CREATE, obj, None, object_kind, options
        )

    async def _admitted_as(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str,
        operation: str,
        obj: Obj,
        old: Obj | None,
        object_kind: tuple[str, str, str],
        options: WriteOptions,
    ) -> tuple[Obj, list[str]]:
        """Both admission phases of a subresource write whose objects are of ``object_kind``:
        the object as mutating admission leaves it, and the warnings."""
        if self.admission is None or not self._admits(resource, options.user):
            return obj, []
        attributes = AdmissionAttributes(
            resource=resource,
            subresource=subresource,
            operation=operation,
            name=name,
            namespace=(namespace or "") if resource.namespaced else "",
            user=options.user,
            dry_run=options.dry_run,
            options=options.admission_options(operation, patch=False),
            object_kind=object_kind,
        )
        mutated, warnings = await self.admission.mutate(attributes, obj, old)
        admitted = mutated if isinstance(mutated, dict) else obj
        warnings = warnings + await self.admission.validate(attributes, admitted, old)
        return admitted, warnings

    # ------------------------------------------------------------ scale subresource

    def get_scale(self, resource: ResourceType, namespace: str | None, name: str) -> Obj:
        """The autoscaling/v1 Scale view of a Deployment, ReplicaSet or StatefulSet."""
        return self.strategy(resource).scale_of(self.get(resource, namespace, name))

    async def update_scale(
        self, resource: ResourceType, namespace: str | None, name: str, body: Any, options: WriteOptions
    ) -> WriteResult:
        async def attempt() -> WriteResult:
            current = await self.read(lambda: self.get(resource, namespace, name))
            return await self._write_scale(resource, namespace, name, current, body, options)

        return await self._guaranteed(resource, namespace, name, attempt)

    async def patch_scale(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: bytes,
        options: WriteOptions,
    ) -> WriteResult:
        async def attempt() -> WriteResult:
            current = await self.read(lambda: self.get(resource, namespace, name))
            scale = self.strategy(resource).scale_of(current)
            patched = patching.apply_patch(
                scale, patch_type, patch, schemas.kind_schema("autoscaling", "v1", "Scale")
            )
            return await self._write_scale(resource, namespace, name, current, patched, options)

        return await self._guaranteed(resource, namespace, name, attempt)

    async def _write_scale(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        current: Obj,
        body: Any,
        options: WriteOptions,
    ) -> WriteResult:
        """Write a Scale: admission sees ``<resource>/scale`` with the Scale (upstream's), and the
        workload is then updated without being admitted again."""
        if not isinstance(body, dict):
            raise errors.BadRequest("the body of the request must be an autoscaling/v1 Scale object")
        spec = body.get("spec") or {}
        replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise errors.BadRequest("spec.replicas: Invalid value: must be an integer")
        if replicas < 0:
            raise errors.invalid(
                "autoscaling",
                "Scale",
                name,
                [
                    errors.StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                        "spec.replicas",
                    )
                ],
            )
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(resource.group, resource.plural, name)
        strategy = self.strategy(resource)
        warnings: list[str] = []
        if self.admission is not None and self._admits(resource, options.user):
            old_scale = strategy.scale_of(current)
            new_scale = copy.deepcopy(old_scale)
            new_scale["spec"] = {"replicas": replicas}
            admitted, warnings = await self._admitted_as(
                resource, namespace, name, "scale", UPDATE, new_scale, old_scale, _SCALE_KIND, options
            )
            if admitted is not new_scale:
                replicas = _scale_replicas(admitted, name)
            options = replace(options, user=None)  # the workload's write is not admitted again
            latest = self.store.get(resource.key(namespace, name))
            if latest is None or str(latest.revision) != current["metadata"]["resourceVersion"]:
                raise _StaleRead  # written meanwhile: scale the new object (GuaranteedUpdate)
        updated = strategy.with_replicas(current, replicas)
        updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        result = await self._update_once(resource, namespace, name, updated, options, "")
        return WriteResult(strategy.scale_of(result.obj), warnings + result.warnings)

    async def delete(
        self, resource: ResourceType, namespace: str | None, name: str, options: DeleteOptions
    ) -> DeleteResult:
        """Delete or mark for deletion: the object, whether it is gone now, admission's warnings."""
        propagation_policy(resource, options)  # invalid options are refused before any lookup
        return await self._guaranteed(
            resource, namespace, name, lambda: self._delete_once(resource, namespace, name, options)
        )

    async def _delete_once(
        self, resource: ResourceType, namespace: str | None, name: str, options: DeleteOptions
    ) -> DeleteResult:
        key = resource.key(namespace, name)
        current = self.store.get(key)
        if current is None:
            raise errors.not_found(resource.group, resource.plural, name)
        obj = current.obj
        meta: Obj = obj.get("metadata") or {}
        if options.precondition_uid is not None and options.precondition_uid != meta.get("uid"):
            raise errors.Conflict(
                f'Operation cannot be fulfilled on {errors.resource_label(resource.group, resource.plural)} "{name}": '
                f"Precondition failed: UID in precondition: {options.precondition_uid}, UID in object meta: {meta.get('uid')}",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )
        if (
            options.precondition_resource_version is not None
            and options.precondition_resource_version != meta.get("resourceVersion")
        ):
            raise errors.Conflict(
                f'Operation cannot be fulfilled on {errors.resource_label(resource.group, resource.plural)} "{name}": '
                f"Precondition failed: ResourceVersion in precondition: {options.precondition_resource_version}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )
        strategy = self.strategy(resource)
        strategy.check_delete(name)
        policy = propagation_policy(resource, options)
        if self.admission is not None and self._admits(resource, options.user):
            served = await self.served(resource, obj)
            attributes = AdmissionAttributes(
                resource=resource,
                subresource="",
                operation=DELETE,
                name=name,
                namespace=(namespace or "") if resource.namespaced else "",
                user=options.user,
                dry_run=options.dry_run,
                options=options.admission_options(),
            )
            _, warnings = await self.admission.mutate(attributes, None, served)
            warnings = warnings + await self.admission.validate(attributes, None, served)
        else:
            warnings = []
        finalizers = list(meta.get("finalizers") or ())
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
            finalizers = [f for f in finalizers if f != "foregroundDeletion"]
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
            finalizers = [f for f in finalizers if f != "orphan"]
        elif policy == "Background":
            finalizers = (
                [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
                if meta.get("deletionTimestamp")
                else finalizers
            )
        grace = strategy.deletion_grace_seconds(obj, options.grace_period_seconds)
        marked = _graceful_marks(meta, grace, options.grace_period_seconds)
        if marked is None and grace is not None and meta.get("deletionGracePeriodSeconds"):
            # Its grace period runs already and is not shortened: finalizers stay as they are.
            return DeleteResult(await self.served(resource, obj), False, warnings)
        graceful = bool(finalizers) or strategy.holds_deletion(obj) or bool(marked and marked[1])
        if not graceful:
            if options.dry_run:
                return DeleteResult(await self.served(resource, obj), True, warnings)
            try:
                event = await self.store.write(key, None, expected_revision=current.revision)
            except PreconditionFailed:
                raise _StaleRead from None
            self._committed(strategy, None, obj)
            return DeleteResult(await self.served(resource, event.obj), True, warnings)
        new = copy.deepcopy(obj)
        new_meta: Obj = new["metadata"]
        new_meta.pop("resourceVersion", None)
        changed = False
        if marked is not None:
            first = not new_meta.get("deletionTimestamp")
            new_meta["deletionTimestamp"], new_meta["deletionGracePeriodSeconds"] = marked
            if first:
                if resource.tracks_generation:
                    new_meta["generation"] = int(new_meta.get("generation", 0)) + 1
                strategy.begin_deletion(new)
            changed = True
        elif not new_meta.get("deletionTimestamp"):
            new_meta["deletionTimestamp"] = timestamps.now()
            new_meta["deletionGracePeriodSeconds"] = 0
            if resource.tracks_generation:
                new_meta["generation"] = int(new_meta.get("generation", 0)) + 1
            strategy.begin_deletion(new)
            changed = True
        if finalizers != list(meta.get("finalizers") or ()):
            new_meta["finalizers"] = finalizers
            changed = True
        if not changed or options.dry_run:
            return DeleteResult(await self.served(resource, obj if not changed else new), False, warnings)
        try:
            event = await self.store.write(key, new, expected_revision=current.revision)
        except PreconditionFailed:
            raise _StaleRead from None
        self._committed(strategy, event.obj, obj)
        return DeleteResult(await self.served(resource, event.obj), False, warnings)

    async def delete_collection(
        self, resource: ResourceType, namespace: str | None, list_options: ListOptions, options: DeleteOptions
    ) -> list[Obj]:
        listed = await self.read(
            lambda: self.list_objects(
                resource,
                namespace,
                ListOptions(
                    label_selector=list_options.label_selector, field_selector=list_options.field_selector
                ),
            )
        )
        deleted: list[Obj] = []
        for item in listed.items:
            meta = item.get("metadata") or {}
            try:
                result = await self.delete(resource, meta.get("namespace"), meta.get("name", ""), options)
            except errors.NotFound:
                continue
            deleted.append(result.obj)
        return deleted


_SCALE_KIND = ("autoscaling", "v1", "Scale")


def _scale_replicas(scale: Obj, name: str) -> int:
    """The replicas of a Scale a mutating webhook answered with (a 500 when it broke them)."""
    spec = scale.get("spec")
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.internal_error(
            f"admission changed the Scale of {name} to invalid replicas: {replicas!r}"
        )
    return replicas


class _StaleRead(Exception):
    """A read-modify-write read an object that another write replaced before it could write."""


def _same_object(old: Obj, new: Obj) -> bool:
    old_cmp = dict(old)
    old_meta = dict(old_cmp.get("metadata") or {})
    old_meta.pop("resourceVersion", None)
    old_cmp["metadata"] = old_meta
    return old_cmp == new


def _merge_final(final: Obj, new: Obj) -> Obj:
    out = copy.deepcopy(new)
    out["metadata"]["resourceVersion"] = (final.get("metadata") or {}).get("resourceVersion")
    return out


def _recorded_update(
    strategy: Strategy, old: Obj | None, new: Obj, options: WriteOptions, subresource: str
) -> list[fieldmanager.ManagedEntry]:
    """The managedFields after this write, as an Update operation of its manager."""
    return fieldmanager.record_update(
        fieldmanager.starting_entries(old, new),
        old,
        new,
        strategy.schema,
        manager=options.field_manager or options.default_manager,
        api_version=strategy.resource.api_version,
        subresource=subresource,
        has_status=strategy.resource.has_status,
    )


def _set_managed(metadata: Obj, entries: list[fieldmanager.ManagedEntry]) -> None:
    if entries:
        metadata["managedFields"] = fieldmanager.encode_entries(entries)
    else:
        metadata.pop("managedFields", None)


def _graceful_marks(meta: Obj, grace: int | None, requested: int | None) -> tuple[str, int] | None:
    """The deletionTimestamp and deletionGracePeriodSeconds a graceful delete writes (None: it
    writes none), as upstream's ``rest.BeforeDelete``: a first delete marks the object ``grace``
    seconds ahead; a later one may only shorten the period, counted from the first."""
    if grace is None:
        return None
    running = meta.get("deletionGracePeriodSeconds")
    if not meta.get("deletionTimestamp"):
        moment = datetime.now(UTC) + timedelta(seconds=grace)
        return timestamps.format_time(moment), grace
    if not running or requested is None or requested >= int(running):
        return None
    marked_at = timestamps.parse_time(meta["deletionTimestamp"]) or datetime.now(UTC)
    moment = marked_at - timedelta(seconds=int(running)) + timedelta(seconds=max(requested, 0))
    return timestamps.format_time(moment), max(requested, 0)
