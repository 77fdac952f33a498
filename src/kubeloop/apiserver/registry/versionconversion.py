"""Conversion between a kind's versions that is not done in process: a CRD's conversion webhook.

The registry's reads and writes turn objects from their stored version into the served one and
back (``Strategy.to_served``/``to_stored``) without awaiting anything: that keeps the hot paths
synchronous. A strategy with a :class:`VersionConverter` answers from what the converter has
already converted and raises :class:`ConversionPending` for the rest; the registry's async
callers convert those (one call for all the objects of a list or a write, as kube-apiserver
sends a list in one ConversionReview) and ask again.
"""

from __future__ import annotations

from typing import Protocol

from kubeloop.api.object import Obj


class VersionConverter(Protocol):
    """Converts objects of one kind between its versions, remembering what it converted."""

    def cached(self, obj: Obj, api_version: str) -> Obj | None:
        """``obj`` in ``api_version`` when it has been converted already (a fresh dict), else None."""
        ...

    async def convert(self, objects: list[Obj], api_version: str) -> None:
        """Convert ``objects`` to ``api_version`` so that ``cached`` has them; an APIError (500)
        with upstream's words when the converter fails or misbehaves."""
        ...


class ConversionPending(Exception):
    """Objects a synchronous conversion could not finish: convert them, then try again."""

    def __init__(self, converter: VersionConverter, objects: list[Obj], api_version: str) -> None:
        super().__init__(f"{len(objects)} object(s) wait for conversion to {api_version}")
        self.converter = converter
        self.objects = objects
        self.api_version = api_version

    async def convert(self) -> None:
        await self.converter.convert(self.objects, self.api_version)

    def merged(self, other: ConversionPending) -> ConversionPending:
        """One pending conversion for both (a list's items share their target version)."""
        if other.converter is not self.converter or other.api_version != self.api_version:
            raise ValueError("pending conversions of different converters or versions do not merge")
        return ConversionPending(self.converter, [*self.objects, *other.objects], self.api_version)
