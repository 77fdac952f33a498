"""How an API group declares one of its kinds: the resource served and everything particular to
it, side by side (upstream spreads this over ``pkg/apis/<group>``, ``pkg/registry/<group>`` and
the printers; here a group's package holds it all and its ``__init__`` binds it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.printing.cells import Column
from kubeloop.apiserver.printing.tables import KindPrinter, PrintedForm, RowConditions
from kubeloop.apiserver.registry.serviceips import ServiceAllocator
from kubeloop.apiserver.registry.strategies import BuiltinStrategy, KindRules, Mutation, Rules, UpdateRules

#: The category of the kinds that extend the API (``kubectl get api-extensions``).
API_EXTENSIONS = ("api-extensions",)


@dataclass(frozen=True)
class BuiltinKind:
    """One served resource of a built-in kind and what is particular to it. Every field but
    ``resource`` is optional: a kind with none is served with ObjectMeta's rules, Go's typed
    decoding and the required fields of upstream's schema, and printed as Name and Created At.
    """

    #: What is served: group, version, plural, scope, short names, subresources, ...
    resource: ResourceType
    #: The strategy class, for kinds whose writes or deletes differ from the generic store's.
    strategy: type[BuiltinStrategy] = BuiltinStrategy
    #: Fills the kind's defaults (upstream's ``SetDefaults_<Kind>``).
    defaults: Mutation | None = None
    #: Seeds the status of a new object (what upstream's ``PrepareForCreate`` sets).
    initial_status: Mutation | None = None
    #: Upstream's hand-written validation (``pkg/apis/<group>/validation``).
    rules: Rules | None = None
    #: Upstream's rules about a change (``Validate<Kind>Update``).
    update_rules: UpdateRules | None = None
    #: The columns of ``kubectl get`` (upstream's printer for the kind).
    columns: Callable[[], list[Column]] | None = None
    #: The form the columns read, when it is not the served one (another version's).
    printed_form: PrintedForm | None = None
    #: A row's conditions (pods: Completed when they ended).
    row_conditions: RowConditions | None = None

    def make_strategy(self, resource: ResourceType, services: ServiceAllocator | None) -> BuiltinStrategy:
        """The strategy that serves ``resource`` (this declaration's, or a newer copy of it)."""
        printer = None
        if self.columns is not None:
            printer = KindPrinter(self.columns, self.printed_form, self.row_conditions)
        rules = KindRules(self.defaults, self.initial_status, self.rules, self.update_rules, printer)
        strategy = self.strategy(resource, rules)
        strategy.attach_services(services)
        return strategy


def plain(
    group: str,
    plural: str,
    kind: str,
    namespaced: bool,
    *,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
    singular: str = "",
    returns_deleted_object: bool = False,
    tracks_generation: bool = False,
) -> ResourceType:
    """A version-1 resource with no serving rules of its own (its schema comes from upstream)."""
    return ResourceType(
        group,
        "v1",
        plural,
        singular or kind.lower(),
        kind,
        namespaced,
        short_names=short_names,
        categories=categories,
        subresources=subresources,
        returns_deleted_object=returns_deleted_object,
        tracks_generation=tracks_generation,
    )


def review(group: str, version: str, kind: str, *, namespaced: bool = False) -> ResourceType:
    """A review resource: created (answered) only, never stored."""
    return ResourceType(
        group, version, kind.lower() + "s", kind.lower(), kind, namespaced, verbs=("create",), review=True
    )
