"""What a cache holds: controller-runtime's ``cache.Options`` and ``cache.ByObject``.

Defaults apply to every kind; ``by_object`` overrides them for one kind. An informer sees only
what its scope selects on the server (namespaces, label and field selectors), so a controller of
a few labelled objects in one namespace does not cache the whole cluster. Namespaces may be
given as a mapping to a :class:`NamespaceConfig` each, with selectors of their own (upstream's
``DefaultNamespaces map[string]Config``): ``{"prod": NamespaceConfig(label_selector="tier=web"),
"dev": NamespaceConfig()}``. ``watch_error_handler`` is told of every failed list or watch
(client-go's ``WatchErrorHandler``), beside the informer's own log line and retry. ``metadata.managedFields``
is stripped before objects are stored unless ``strip_managed_fields`` is off (it is most of an
object's size and controllers never read it); a ``transform`` then runs on every object (a
``ByObject`` transform replaces the default one, as in controller-runtime).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.cache.informer import Transform, strip_managed_fields
from kubeloop.client.interface import gvk_of

#: controller-runtime's default SyncPeriod: every object is re-reported this often (jittered).
DEFAULT_SYNC_PERIOD = 10 * 60 * 60.0


#: Told of a failed list or watch: the kind and the error (the informer retries after it).
WatchErrorHandler = Callable[[GroupVersionKind, BaseException], None]


@dataclass(frozen=True)
class NamespaceConfig:
    """The selectors of one namespace of a cache's (controller-runtime's ``cache.Config``); a
    selector left None takes the kind's or the cache's default."""

    label_selector: str | None = None
    field_selector: str | None = None


#: Namespaces: their names, or each with its own selectors.
Namespaces = Collection[str] | Mapping[str, NamespaceConfig]


@dataclass(frozen=True)
class ByObject:
    """The cache scope of one kind; a field left None takes the cache's default."""

    namespaces: Namespaces | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    transform: Transform | None = None
    strip_managed_fields: bool | None = None
    #: Seconds between this kind's resyncs (None: the cache's ``sync_period``).
    sync_period: float | None = None


@dataclass(frozen=True)
class CacheOptions:
    """What the manager's cache holds (controller-runtime's ``cache.Options``).

    The defaults apply to every kind; ``by_object`` overrides them for one kind.
    """

    #: Namespaces every namespaced kind is cached in (None: all namespaces), as names or each
    #: with its own selectors (a mapping to :class:`NamespaceConfig`).
    default_namespaces: Namespaces | None = None
    #: Only objects matching this label selector are cached (None: all).
    default_label_selector: str | None = None
    #: Only objects matching this field selector are cached (None: all).
    default_field_selector: str | None = None
    #: A function applied to each object before it is cached (to drop what is never read).
    default_transform: Transform | None = None
    #: Drop ``metadata.managedFields`` before caching (on, as controller-runtime's default).
    strip_managed_fields: bool = True
    #: Per-kind scopes, keyed by GroupVersionKind or model class.
    by_object: Mapping[Any, ByObject] = field(default_factory=dict)
    #: Seconds between resyncs, which hand every cached object to the handlers again
    #: (10 hours, controller-runtime's default; None: never).
    sync_period: float | None = DEFAULT_SYNC_PERIOD
    #: Reading a kind no informer was created for fails instead of creating one.
    reader_fails_on_missing_informer: bool = False
    #: Kinds the manager's client reads straight from the API server, never cached
    #: (controller-runtime's client ``Cache.DisableFor``): Secrets, say, of which a controller
    #: reads a few by name, rather than every Secret of the cluster held in memory.
    disable_for: Collection[Any] = ()
    #: Told of every failed list or watch of every informer (client-go's ``WatchErrorHandler``,
    #: controller-runtime's ``DefaultWatchErrorHandler``): to count them, or to alert.
    watch_error_handler: WatchErrorHandler | None = None


@dataclass(frozen=True)
class Scope:
    """The resolved scope of one kind: defaults merged with its ``ByObject``."""

    namespaces: Collection[str] | None
    label_selector: str | None
    field_selector: str | None
    transform: Transform | None
    sync_period: float | None = None
    #: Each namespace's own (label, field) selectors, where it has them.
    namespace_selectors: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)

    @classmethod
    def of(cls, options: CacheOptions, by_object: ByObject | None) -> Scope:
        """``options``' defaults merged with ``by_object`` (a field it leaves None takes the default)."""
        by_object = by_object or ByObject()
        namespaces = by_object.namespaces if by_object.namespaces is not None else options.default_namespaces
        transform = by_object.transform if by_object.transform is not None else options.default_transform
        strip = (
            by_object.strip_managed_fields
            if by_object.strip_managed_fields is not None
            else options.strip_managed_fields
        )
        label_selector = by_object.label_selector or options.default_label_selector
        field_selector = by_object.field_selector or options.default_field_selector
        selectors: dict[str, tuple[str | None, str | None]] = {}
        if isinstance(namespaces, Mapping):
            for namespace, config in namespaces.items():
                if not isinstance(config, NamespaceConfig):
                    raise TypeError(f"namespace {namespace}: a NamespaceConfig is needed, not {config!r}")
                selectors[namespace] = (
                    config.label_selector or label_selector,
                    config.field_selector or field_selector,
                )
        return cls(
            namespaces=list(namespaces) or None if namespaces is not None else None,
            label_selector=label_selector,
            field_selector=field_selector,
            transform=_compose(strip_managed_fields, transform) if strip else transform,
            sync_period=by_object.sync_period if by_object.sync_period is not None else options.sync_period,
            namespace_selectors=selectors,
        )


def _compose(first: Transform, then: Transform | None) -> Transform:
    if then is None:
        return first

    def both(obj: dict[str, Any]) -> dict[str, Any]:
        return then(first(obj))

    return both


def by_object_scopes(options: CacheOptions) -> dict[GroupVersionKind, ByObject]:
    """``options.by_object`` keyed by GroupVersionKind, whatever named each kind."""
    return {gvk_of(kind): scope for kind, scope in options.by_object.items()}
