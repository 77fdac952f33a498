"""What the registry asks of admission, and where: the request's attributes and the two phases.

kube-apiserver runs its admission chain at fixed points of every write, and so does the
registry: **mutating** admission on the decoded, defaulted object before the kind's strategy
prepares and validates it (a create before its name is generated and its uid set; an update
after the patch or body is applied), then **validating** admission on the object exactly as it
will be stored, just before the write. A delete runs both with the stored object as the old one
and no new one. Requests a client made go through admission (their options name a user);
what the server writes for itself (a bootstrap object, an eviction's delete, a CRD's cleanup)
does not. What plugs in here implements :class:`Admission` (the server plugs in
``admission.chain.AdmissionChain``); it sees and returns objects in their served form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.userinfo import UserInfo

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
CONNECT = "CONNECT"


@dataclass(frozen=True)
class AdmissionAttributes:
    """One request as admission sees it (upstream's ``admission.Attributes``)."""

    resource: ResourceType
    #: The subresource written ("" for the main resource): ``status``, ``scale``...
    subresource: str
    #: CREATE, UPDATE, DELETE or CONNECT.
    operation: str
    #: The object's name ("" for a create whose name is still to be generated).
    name: str
    #: The object's namespace ("" for a cluster-scoped kind).
    namespace: str
    #: Who made the request (None: the server itself).
    user: UserInfo | None
    dry_run: bool
    #: The operation's options object (meta.k8s.io/v1 CreateOptions, UpdateOptions, PatchOptions
    #: or DeleteOptions), as an AdmissionRequest carries it.
    options: Obj
    #: (group, version, kind) of the objects admission sees when they are not the resource's
    #: own: an autoscaling/v1 Scale through ``scale``.
    object_kind: tuple[str, str, str] | None = None


class Admission(Protocol):
    """The admission chain a registry runs: mutating, then (after the strategy) validating.

    A plugin of :class:`~kubeloop.apiserver.admission.chain.AdmissionChain` may also name the
    objects its ``covers`` answer follows (``coverage_sources``: (group, plural) pairs, empty
    when it follows none); the chain then remembers its answers until one of them is written."""

    def covers(self, resource: ResourceType) -> bool:
        """Whether admission may act on writes of ``resource`` at all (a cheap test: without
        it the registry skips both phases)."""
        ...

    async def mutate(
        self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        """The object as mutating admission leaves it (``obj`` itself when nothing changed) and
        the warnings for the client; raises an ``APIError`` to refuse the request."""
        ...

    async def validate(self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> list[str]:
        """The warnings validating admission has for the client; raises an ``APIError`` to refuse
        the request. Nothing may change the object any more."""
        ...
