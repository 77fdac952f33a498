"""Clients that wrap a client to change every call the same way (controller-runtime's
``client.WithFieldOwner``, ``client.NewNamespacedClient`` and ``client.NewDryRunClient``):

- :func:`with_field_owner`: every create, update, patch and apply records ``owner`` as its
  field manager in ``managedFields``, unless the call names one (an apply needs no
  ``field_manager`` then);
- :func:`namespaced`: every call on a namespaced kind is in ``namespace`` (a list without one
  lists there, not everywhere); an object or call naming another namespace is a ``ValueError``
  naming both, sent nowhere; cluster-scoped kinds pass as they are;
- :func:`dry_run`: every write is sent with ``dryRun=All``: admission and validation run, the
  answer is what would be stored, nothing is.

Reads pass through (and whatever else the wrapped client has, e.g. ``writer``). Wrappers wrap
any :class:`~kubeloop.Client` (the API client, the manager's cached client, another wrapper).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from kubeloop.api.model import KubeModel
from kubeloop.client.interface import Client, KindRef, gvk_of
from kubeloop.client.restmapper import ResourceMapping


class _Wrapper:
    """Passes every call to ``inner``; subclasses change the calls they are about."""

    def __init__(self, inner: Client) -> None:
        #: The wrapped client (typed loosely: each call passes what it was given on).
        self._inner: Any = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get(self, kind: KindRef, name: str, **options: Any) -> Any:
        return await self._inner.get(kind, name, **options)

    async def list(self, kind: KindRef, **options: Any) -> Any:
        return await self._inner.list(kind, **options)

    async def create(self, obj: Any, **options: Any) -> Any:
        return await self._inner.create(obj, **options)

    async def update(self, obj: Any, **options: Any) -> Any:
        return await self._inner.update(obj, **options)

    async def patch(self, kind: KindRef, name: str | None, patch: Any, **options: Any) -> Any:
        return await self._inner.patch(kind, name, patch, **options)

    async def apply(self, obj: Any, **options: Any) -> Any:
        return await self._inner.apply(obj, **options)

    async def delete(self, kind: KindRef, name: str | None = None, **options: Any) -> Any:
        return await self._inner.delete(kind, name, **options)

    async def delete_collection(self, kind: KindRef, **options: Any) -> Any:
        return await self._inner.delete_collection(kind, **options)


class _FieldOwner(_Wrapper):
    def __init__(self, inner: Client, owner: str) -> None:
        super().__init__(inner)
        self._owner = owner

    def _owned(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with this owner as the field manager, unless they name one."""
        return options if options.get("field_manager") else {**options, "field_manager": self._owner}

    async def create(self, obj: Any, **options: Any) -> Any:
        return await self._inner.create(obj, **self._owned(options))

    async def update(self, obj: Any, **options: Any) -> Any:
        return await self._inner.update(obj, **self._owned(options))

    async def patch(self, kind: KindRef, name: str | None, patch: Any, **options: Any) -> Any:
        return await self._inner.patch(kind, name, patch, **self._owned(options))

    async def apply(self, obj: Any, **options: Any) -> Any:
        return await self._inner.apply(obj, **self._owned(options))


class _DryRun(_Wrapper):
    async def create(self, obj: Any, **options: Any) -> Any:
        return await self._inner.create(obj, **{**options, "dry_run": True})

    async def update(self, obj: Any, **options: Any) -> Any:
        return await self._inner.update(obj, **{**options, "dry_run": True})

    async def patch(self, kind: KindRef, name: str | None, patch: Any, **options: Any) -> Any:
        return await self._inner.patch(kind, name, patch, **{**options, "dry_run": True})

    async def apply(self, obj: Any, **options: Any) -> Any:
        return await self._inner.apply(obj, **{**options, "dry_run": True})

    async def delete(self, kind: KindRef, name: str | None = None, **options: Any) -> Any:
        return await self._inner.delete(kind, name, **{**options, "dry_run": True})

    async def delete_collection(self, kind: KindRef, **options: Any) -> Any:
        return await self._inner.delete_collection(kind, **{**options, "dry_run": True})


def _mapper(client: Any) -> Callable[[KindRef], Awaitable[ResourceMapping]]:
    """How ``client`` (or the API client behind it) resolves a kind's scope."""
    for candidate in (client, getattr(client, "writer", None)):
        mapping = getattr(candidate, "mapping", None)
        if callable(mapping):
            return cast(Callable[[KindRef], Awaitable[ResourceMapping]], mapping)
    raise TypeError(f"{type(client).__name__} resolves no kind's scope (it has no mapping, nor a writer with one)")


def _object_namespace(obj: Any) -> str | None:
    if isinstance(obj, KubeModel):
        metadata = getattr(obj, "metadata", None)
        return getattr(metadata, "namespace", None) if metadata is not None else None
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        return meta.get("namespace") if isinstance(meta, Mapping) else None
    return None


class _Namespaced(_Wrapper):
    def __init__(self, inner: Client, namespace: str) -> None:
        super().__init__(inner)
        self._namespace = namespace
        self._mapping = _mapper(inner)

    async def _in(self, kind: KindRef, given: str | None, obj: Any = None) -> str | None:
        """The namespace a call on ``kind`` goes to: this client's (None: a cluster-scoped kind)."""
        if not (await self._mapping(kind)).namespaced:
            return given
        for named in (given, _object_namespace(obj)):
            if named and named != self._namespace:
                raise ValueError(
                    f"the namespace {named} of the {gvk_of(kind).kind} does not match the namespace "
                    f"{self._namespace} of the client"
                )
        return self._namespace

    async def get(self, kind: KindRef, name: str, **options: Any) -> Any:
        namespace = await self._in(kind, options.pop("namespace", None))
        return await self._inner.get(kind, name, namespace=namespace, **options)

    async def list(self, kind: KindRef, **options: Any) -> Any:
        namespace = await self._in(kind, options.pop("namespace", None))
        return await self._inner.list(kind, namespace=namespace, **options)

    async def create(self, obj: Any, **options: Any) -> Any:
        namespace = await self._in(obj, options.pop("namespace", None), obj)
        return await self._inner.create(obj, namespace=namespace, **options)

    async def update(self, obj: Any, **options: Any) -> Any:
        namespace = await self._in(obj, options.pop("namespace", None), obj)
        return await self._inner.update(obj, namespace=namespace, **options)

    async def patch(self, kind: KindRef, name: str | None, patch: Any, **options: Any) -> Any:
        namespace = await self._in(kind, options.pop("namespace", None), kind if name is None else None)
        return await self._inner.patch(kind, name, patch, namespace=namespace, **options)

    async def apply(self, obj: Any, **options: Any) -> Any:
        namespace = await self._in(obj, options.pop("namespace", None), obj)
        return await self._inner.apply(obj, namespace=namespace, **options)

    async def delete(self, kind: KindRef, name: str | None = None, **options: Any) -> Any:
        namespace = await self._in(kind, options.pop("namespace", None), kind if name is None else None)
        return await self._inner.delete(kind, name, namespace=namespace, **options)

    async def delete_collection(self, kind: KindRef, **options: Any) -> Any:
        namespace = await self._in(kind, options.pop("namespace", None))
        return await self._inner.delete_collection(kind, namespace=namespace, **options)


def with_field_owner(client: Client, owner: str) -> Client:
    """``client``, every write recording ``owner`` as its field manager unless it names one."""
    return cast(Client, _FieldOwner(client, owner))


def namespaced(client: Client, namespace: str) -> Client:
    """``client``, every call on a namespaced kind in ``namespace`` (another is a ValueError)."""
    return cast(Client, _Namespaced(client, namespace))


def dry_run(client: Client) -> Client:
    """``client``, every write sent with ``dryRun=All`` (nothing is stored)."""
    return cast(Client, _DryRun(client))
