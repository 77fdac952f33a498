"""The client protocol (controller-runtime's ``client.Client``): what every helper and every
reconciler takes, whichever client is behind it.

Two implementations: ``rest.APIClient`` talks to the API server for everything (the manager's
``api_reader``), ``manager.CachedClient`` reads from the shared informer cache and writes to the
server (the manager's ``client``). Both take the same arguments — the namespace is always the
``namespace=`` keyword — and answer in the form they were asked in: a model class or a model
gives models, a ``GroupVersionKind`` or a dict gives dicts. ``list`` answers an ``ObjectList``
(iterable, ``len``, ``.items`` and the snapshot's ``.resource_version``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, Unpack, overload

from kubeloop.api.applyconfiguration import ObjectApplyConfiguration
from kubeloop.api.fields import FieldSelector
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.labels import LabelSelector
from kubeloop.api.model import KubeObject
from kubeloop.api.object import Obj
from kubeloop.client.calloptions import ApplyOptions, DeleteOptions, ListOptions, PatchOptions, WriteOptions

#: A kind: a GroupVersionKind, an object dict (its apiVersion/kind), a model class or a model.
KindRef = GroupVersionKind | Mapping[str, Any] | type[KubeObject] | KubeObject
#: What a write takes: an object dict or a model.
ObjectRef = Mapping[str, Any] | KubeObject
M = TypeVar("M", bound=KubeObject)
#: What an apply takes: an object dict, a model, or an apply configuration (only its set fields).
ApplyRef = ObjectRef | ObjectApplyConfiguration[Any]
T = TypeVar("T")


@dataclass(frozen=True)
class ObjectList(Generic[T]):
    """The objects a list found (models or dicts) and the resourceVersion of their snapshot."""

    items: list[T]
    resource_version: str = ""

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __eq__(self, other: object) -> bool:
        """Equal to a list (or tuple) of the same items, as its items are; to another
        ObjectList when the items and the resourceVersion are the same."""
        if isinstance(other, ObjectList):
            return self.items == other.items and self.resource_version == other.resource_version
        if isinstance(other, (list, tuple)):
            return self.items == list(other)
        return NotImplemented

    def __getitem__(self, index: int) -> T:
        if not isinstance(index, int):
            raise TypeError(
                f"an ObjectList is indexed by position, not {index!r} (the items are .items, "
                "the snapshot's resourceVersion .resource_version)"
            )
        return self.items[index]


class KindError(TypeError):
    """Something given as a kind names none."""


def gvk_of(kind: KindRef) -> GroupVersionKind:
    """The GroupVersionKind of any way of naming a kind (GVK, object dict, model class or model)."""
    if isinstance(kind, GroupVersionKind):
        return kind
    if isinstance(kind, str):
        raise KindError(
            f"a kind is named by a model class, a GroupVersionKind (kubeloop.kinds.Deployment) or an "
            f"object, not by the string {kind!r}"
        )
    if isinstance(kind, type):
        gvk = getattr(kind, "__gvk__", None)
        if not isinstance(gvk, GroupVersionKind):
            raise KindError(
                f"{kind.__name__} is not a Kubernetes model: a custom resource model subclasses "
                "kubeloop.CustomResource with group, version and kind"
            )
        return gvk
    if isinstance(kind, (KubeObject, ObjectApplyConfiguration)):
        return type(kind).__gvk__
    return GroupVersionKind.of_object(kind)


def model_class(kind: KindRef) -> type[KubeObject] | None:
    """The model class a kind names (a model class or a model), or None (dicts are wanted)."""
    if isinstance(kind, type) and issubclass(kind, KubeObject):
        return kind
    if isinstance(kind, KubeObject):
        return type(kind)
    if isinstance(kind, ObjectApplyConfiguration):
        return type(kind).__model__  # an apply is answered with the kind's model
    return None


class Reader(Protocol):
    """controller-runtime's ``client.Reader``: get one object, list many."""

    @overload
    async def get(self, kind: type[M], name: str, *, namespace: str | None = None) -> M: ...

    @overload
    async def get(self, kind: M, name: str, *, namespace: str | None = None) -> M: ...

    @overload
    async def get(
        self, kind: GroupVersionKind | Mapping[str, Any], name: str, *, namespace: str | None = None
    ) -> Obj: ...

    async def get(self, kind: KindRef, name: str, *, namespace: str | None = None) -> Any:
        """The object ``name`` of ``kind``; ``NotFound`` when there is none.

        A model class or model as ``kind`` gives a model, a GroupVersionKind or dict a dict.
        ``namespace`` is needed for a namespaced kind (the API client falls back to the
        kubeconfig context's namespace); a cluster-scoped kind takes none.
        """

    @overload
    async def list(
        self,
        kind: type[M],
        *,
        namespace: str | None = None,
        **options: Unpack[ListOptions],
    ) -> ObjectList[M]: ...

    @overload
    async def list(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        *,
        namespace: str | None = None,
        **options: Unpack[ListOptions],
    ) -> ObjectList[Obj]: ...

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        **options: Unpack[ListOptions],
    ) -> ObjectList[Any]:
        """The objects of ``kind`` in ``namespace`` (None: every namespace) that match.

        ``label_selector`` is selector text (``"app=web,tier in (a,b)"``) or a
        ``LabelSelector``; ``match_labels`` a dict of labels that must all be equal;
        ``field_selector`` selects on fields (``"metadata.name=web"``; the cache answers only
        exact matches on names, namespaces and indexed fields). Answers an
        :class:`ObjectList`.
        """


class Writer(Protocol):
    """controller-runtime's ``client.Writer`` (and its status writer: ``subresource="status"``).

    Every write takes its verb's options as keywords (:mod:`kubeloop.client.calloptions`):
    ``dry_run``, ``field_manager`` and ``field_validation``; patch adds ``force``; deletes take
    ``propagation_policy``, ``preconditions``, ``grace_period_seconds`` and ``dry_run``.
    """

    @overload
    async def create(self, obj: M, *, namespace: str | None = None, **options: Unpack[WriteOptions]) -> M: ...

    @overload
    async def create(
        self, obj: Mapping[str, Any], *, namespace: str | None = None, **options: Unpack[WriteOptions]
    ) -> Obj: ...

    async def create(
        self, obj: ObjectRef, *, namespace: str | None = None, **options: Unpack[WriteOptions]
    ) -> Any:
        """Create ``obj``; answers the object as stored (uid, resourceVersion, defaults).

        ``AlreadyExists`` when the name is taken, ``Invalid`` (with causes) when it is not valid.
        """

    @overload
    async def update(
        self,
        obj: M,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> M: ...

    @overload
    async def update(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> Obj: ...

    async def update(
        self,
        obj: ObjectRef,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> Any:
        """Replace ``obj`` as a whole (PUT). Its ``metadata.resourceVersion`` must be the
        stored one, else ``Conflict``: read again and retry. ``subresource="status"`` writes
        only the status (controller-runtime's ``Status().Update``)."""

    @overload
    async def patch(
        self,
        kind: type[M] | M,
        name: str | None,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> M: ...

    @overload
    async def patch(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        name: str | None,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> Obj: ...

    async def patch(
        self,
        kind: KindRef,
        name: str | None,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> Any:
        """Patch the object ``name`` of ``kind`` (or ``kind`` itself, an object, with
        ``name=None``) with a JSON merge patch (a dict or model); the API client's
        ``patch_type`` sends a JSON patch, a strategic merge patch or an apply patch instead."""

    @overload
    async def apply(
        self,
        obj: M,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> M: ...

    @overload
    async def apply(
        self,
        obj: ObjectApplyConfiguration[M],
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> M: ...

    @overload
    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> Obj: ...

    async def apply(
        self,
        obj: ApplyRef,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> Any:
        """Server-side apply ``obj`` (the fields this ``field_manager`` owns); ``force`` takes
        fields another manager owns instead of answering ``Conflict``. An apply configuration
        (``kubeloop.applyconfigurations``) sends only the fields set in it and is answered with
        its kind's model."""

    async def delete(
        self,
        kind: KindRef,
        name: str | None = None,
        *,
        namespace: str | None = None,
        **options: Unpack[DeleteOptions],
    ) -> Obj:
        """Delete the object ``name`` of ``kind`` (or ``kind`` itself, an object). Answers the
        object when finalizers keep it (deletionTimestamp set), else a Success Status.
        ``propagation_policy`` (``Background``, ``Foreground``, ``Orphan``) says what happens
        to its dependents; the kind's default without it (Jobs orphan their pods)."""

    async def delete_collection(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        **options: Unpack[DeleteOptions],
    ) -> Obj:
        """Delete every object of ``kind`` in ``namespace`` that the selectors match."""


class Client(Reader, Writer, Protocol):
    """Reads and writes: what reconcilers and helpers take (``manager.client`` is one)."""
