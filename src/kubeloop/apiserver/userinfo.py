"""``UserInfo``: who made a request, as authentication found it, authorization judges it and
admission tells webhooks (``AdmissionRequest.userInfo``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UserInfo:
    """Who made a request (user.Info upstream)."""

    name: str
    groups: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """authentication.k8s.io/v1 UserInfo, as an AdmissionRequest carries it."""
        return {"username": self.name, "groups": list(self.groups)}
