"""Group/version/kind and group/version/resource: how API types and their URLs are named."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @classmethod
    def of(cls, api_version: str, kind: str) -> GroupVersionKind:
        """From an object's ``apiVersion`` ("apps/v1", or "v1" for the core group) and ``kind``."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @classmethod
    def of_object(cls, obj: Mapping[str, Any]) -> GroupVersionKind:
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
            raise ValueError("the object needs a non-empty apiVersion and kind")
        return cls.of(api_version, kind)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True, order=True)
class GroupVersionResource:
    group: str
    version: str
    resource: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}, Resource={self.resource}"
