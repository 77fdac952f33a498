"""The registry's foundation: the store and catalog it serves, each resource's strategy, the
served and stored forms (with conversion by webhook), reads, and what every write does first:
decode and validate a body, check its namespace, retry a read-modify-write that lost a race
(upstream's ``GuaranteedUpdate``), tell commit listeners.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kubeloop import errors
from kubeloop.api.fields import FieldSelector, object_fields
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.patch import fieldmanager
from kubeloop.apiserver.registry import listing
from kubeloop.apiserver.registry.admissionhooks import (
    Admission,
)
from kubeloop.apiserver.registry.serviceips import ServiceAllocator
from kubeloop.apiserver.registry.strategies import BuiltinStrategies, Strategy
from kubeloop.apiserver.registry.verboptions import (
    ListOptions,
    ListResult,
    WriteOptions,
    WriteResult,
)
from kubeloop.apiserver.registry.versionconversion import ConversionPending
from kubeloop.apiserver.storage.store import Store
from kubeloop.apiserver.storage.watchcache import Event

T = TypeVar("T")
#: Told of a committed write: ``(new, old)``, ``new`` None for a delete, ``old`` None for a create.
CommitListener = Callable[[Obj | None, Obj | None], None]

#: Read-modify-write attempts before a write that keeps losing races answers 409.
_MAX_ATTEMPTS = 64
#: Conversions one read may need before its objects are all converted (each round converts
#: every object the read is missing; more happen only when writes land meanwhile).
_CONVERSION_ROUNDS = 16
_NAMESPACES = ResourceType("", "v1", "namespaces", "namespace", "Namespace", False)


class StaleRead(Exception):
    """A read-modify-write read an object that another write replaced before it could write."""


def set_recorded_update(
    metadata: Obj, strategy: Strategy, old: Obj, new: Obj, options: WriteOptions, subresource: str
) -> None:
    """Set the managedFields of the object to store (``metadata`` is its) after this write of the
    stored ``old`` as ``new`` (their served forms), an Update operation of its manager."""
    managed = fieldmanager.record_stored_update(
        old,
        new,
        strategy.schema,
        manager=options.field_manager or options.default_manager,
        api_version=strategy.resource.api_version,
        subresource=subresource,
        has_status=strategy.resource.has_status,
        unstructured=strategy.unstructured,
    )
    if managed:
        metadata["managedFields"] = managed
    else:
        metadata.pop("managedFields", None)


def set_created_managed(strategy: Strategy, metadata: Obj, new: Obj, options: WriteOptions) -> None:
    """Set the managedFields of ``new`` (``metadata`` is the object's to store) as an Update
    operation by its manager creates it."""
    managed = fieldmanager.record_create(
        new,
        strategy.schema,
        manager=options.field_manager or options.default_manager,
        api_version=strategy.resource.api_version,
        has_status=strategy.resource.has_status,
        unstructured=strategy.unstructured,
    )
    if managed:
        metadata["managedFields"] = managed
    else:
        metadata.pop("managedFields", None)


def set_managed(metadata: Obj, entries: list[fieldmanager.ManagedEntry]) -> None:
    if entries:
        metadata["managedFields"] = fieldmanager.encode_entries(entries)
    else:
        metadata.pop("managedFields", None)


class RegistryBase:
    """Object semantics over a :class:`Store` for the resources of a catalog: the
    state and the steps every verb shares (:class:`~kubeloop.apiserver.registry.generic.Registry`
    adds the verbs)."""

    def __init__(self, store: Store, catalog: ResourceCatalog, builtin_strategy: BuiltinStrategies) -> None:
        self.store = store
        self.catalog = catalog
        #: Makes the strategy of a built-in resource (what the server's API groups declare).
        self._builtin_strategy = builtin_strategy
        self._strategies: dict[tuple[str, str, str], Strategy] = {}  # built-in ones, made on first use
        self._set_strategies: dict[tuple[str, str, str], Strategy] = {}  # custom resources' (set_strategy)
        self._strategy_of: dict[int, tuple[ResourceType, Strategy]] = {}  # strategy()'s answers by id
        #: Cluster IPs and node ports of Services.
        self.services = ServiceAllocator(store)
        #: The admission chain every write goes through (webhooks; None: none).
        self.admission: Admission | None = None
        #: Storage key prefix ("/registry/[group/]plural/") → what to call on its commits.
        self._commit_listeners: dict[str, list[CommitListener]] = {}
        store.add_commit_hook(self._applied)

    def add_commit_listener(self, group: str, plural: str, listener: CommitListener) -> None:
        """Call ``listener(new, old)`` for every committed write of the objects stored as
        ``group``/``plural`` (whichever version or resource sharing that storage wrote them;
        ``new`` None: deleted, ``old`` None: created), in revision order, before the write is
        answered: what keeps a cache of such objects current. It is the store's commit hook
        (:meth:`Store.add_commit_hook`): it runs on the store's loop, whoever wrote, and
        must neither block nor await."""
        prefix = f"/registry/{group}/{plural}/" if group else f"/registry/{plural}/"
        self._commit_listeners.setdefault(prefix, []).append(listener)

    def _applied(self, event: Event) -> None:
        listeners = self._commit_listeners
        if not listeners:
            return
        # "/registry/<group>/<plural>/…" or "/registry/<plural>/…": no built-in group is named
        # like a core resource, and a CRD's group has a dot.
        parts = event.key.split("/", 4)
        if len(parts) < 4:
            return
        found = listeners.get(f"/registry/{parts[2]}/{parts[3]}/") or listeners.get(f"/registry/{parts[2]}/")
        new = None if event.type == "DELETED" else event.obj
        for listener in found or ():
            listener(new, event.prev)

    def strategy(self, resource: ResourceType) -> Strategy:
        """The strategy of a resource: one set with :meth:`set_strategy`, else the built-in one.

        A set strategy answers for its group/version/plural even when asked with an older
        ``ResourceType`` of it: a watch or request that began before its CRD changed gets the
        current schema, and never puts a built-in strategy in its place.
        """
        # A write asks eight times: the answer is kept by the ResourceType object itself (its
        # dataclass hash would hash every field), for as long as no strategy is set or dropped.
        # It goes into the memo the lookup began with: one made on the worker loop's thread while
        # the serving loop set a strategy lands in the memo that change threw away.
        memo = self._strategy_of
        known = memo.get(id(resource))
        if known is not None and known[0] is resource:
            return known[1]
        key = (resource.group, resource.version, resource.plural)
        strategy = self._set_strategies.get(key)
        if strategy is None:
            strategy = self._strategies.get(key)
            if strategy is None or strategy.resource is not resource:
                strategy = self._strategies[key] = self._builtin_strategy(resource, self.services)
        if len(memo) >= 1024:  # more ResourceType objects than a catalog makes
            memo.clear()
        memo[id(resource)] = (resource, strategy)  # holds the resource, so that its id stays its own
        return strategy

    def set_strategy(self, strategy: Strategy) -> None:
        """Serve ``strategy.resource`` with ``strategy`` (custom resources; replaces any earlier)."""
        resource = strategy.resource
        self._set_strategies[(resource.group, resource.version, resource.plural)] = strategy
        self._forget_strategies()

    def drop_strategy(self, resource: ResourceType) -> None:
        key = (resource.group, resource.version, resource.plural)
        self._set_strategies.pop(key, None)
        self._strategies.pop(key, None)
        self._forget_strategies()

    def _forget_strategies(self) -> None:
        """After a strategy is set or dropped: what ``strategy`` answered before is not taken
        again. A new memo, made after the change itself: a lookup that began before it (on
        another thread) keeps writing to the old one, which nothing reads any more."""
        self._strategy_of = {}

    def to_served(self, resource: ResourceType, stored: Obj) -> Obj:
        """The stored form as the resource's group/version serves it."""
        return self.strategy(resource).to_served(stored)

    def _served_while_writing(self, resource: ResourceType, obj: Obj) -> Obj:
        """An object being written, defaulted on its way in, as its group/version serves it."""
        return self.strategy(resource).to_served(obj, defaulted=True)

    def to_stored(self, resource: ResourceType, served: Obj) -> Obj:
        return self.strategy(resource).to_stored(served)

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
        try:  # what every write does two to four times: no coroutine of read's for it
            return self.to_served(resource, stored)
        except ConversionPending:
            return await self.read(lambda: self.to_served(resource, stored))

    async def written(
        self, resource: ResourceType, event: Event, warnings: list[str], *, created: bool = False
    ) -> WriteResult:
        """The answer to a write the store committed: the object as served, and, when it is
        served as stored, the JSON the store encoded it to (the answer is not encoded again)."""
        served = await self.served(resource, event.obj)
        encoded = event.value if served is event.obj else None
        return WriteResult(served, warnings, created=created, encoded=encoded)

    async def _served_writing(self, resource: ResourceType, obj: Obj) -> Obj:
        try:
            return self._served_while_writing(resource, obj)
        except ConversionPending:
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
        try:
            return self.to_stored(resource, served)
        except ConversionPending:
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

    async def caught_up(self, resource_version: str, *, continued: bool = False) -> None:
        """Wait for what a read asks of the store before it is answered from the cache: without
        a resourceVersion (a consistent read), every write committed before it; with one newer
        than the cache, that one, for a while (the read then answers 504 if it is still ahead).
        A continued list reads at its token's revision, which it has seen already. A store
        that must not be read from (a front-end's, its store gone) answers 503."""
        self.store.unavailable()
        if continued:
            return
        if not resource_version:
            await self.store.sync()
        elif resource_version.isdigit():
            await self.store.fresh(int(resource_version))

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
        strategy = self.strategy(resource)
        if revision is None:
            revision = self.store.revision
            source: list[tuple[str, Obj]] | None = None
            if exact_name is not None and (namespace or not resource.namespaced):
                stored = self.store.get(prefix + exact_name)
                source = [(prefix + exact_name, stored.obj)] if stored is not None else []
            elif match is None and not options.limit and not start and type(strategy).to_served is Strategy.to_served:
                # Every object as stored: one list made in C, not a loop step per object (a
                # list of 20,000 ConfigMaps holds the serving loop while it is made).
                return ListResult(self.store.objects_under(prefix), revision)
            iterator = iter(source) if source is not None else self.store.items(prefix, start=start)
        else:
            iterator = iter(self.store.list_at(prefix, revision, start=start))
        pending: ConversionPending | None = None
        to_served = strategy.to_served  # once, not per object: lists run on the serving loop
        for key, stored_obj in iterator:
            try:
                obj = to_served(stored_obj)
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
    ) -> list[str]:
        """Refuse ``obj`` (Invalid) for what its kind's validation finds; the warnings for the
        client of what it reports without refusing."""
        strategy = self.strategy(resource)
        warnings: list[str] = []
        causes = strategy.validate_write(obj, old, warnings)
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
        return warnings

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

    async def _guaranteed(
        self, resource: ResourceType, namespace: str | None, name: str, attempt: Callable[[], Awaitable[T]]
    ) -> T:
        """Run a read-modify-write until its read was current when it wrote (GuaranteedUpdate).

        An attempt that read an object another write then replaced raises ``StaleRead``; it is
        tried again on the new object, where a precondition the client set (a resourceVersion in
        the body or a delete precondition) fails with 409 as it should.
        """
        key = resource.key(namespace, name)
        for _ in range(_MAX_ATTEMPTS):
            await self.store.settled(key)
            try:
                return await attempt()
            except StaleRead:
                continue
        raise errors.conflict(resource.group, resource.plural, name)  # it kept losing the race
