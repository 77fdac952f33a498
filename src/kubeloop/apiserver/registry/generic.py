"""Registry semantics: what create, get, list, update, patch and delete mean for an object.

This is kube-apiserver's generic registry store plus the built-in kinds' strategies, applied to
plain dicts: create-time metadata (uid, creationTimestamp, generation, generateName), optimistic
concurrency on resourceVersion, the status subresource, generation rules, finalizers and
deletionTimestamp, delete preconditions and propagation policies (recorded as finalizers),
dry-run, field validation, and namespace lifecycle checks. The HTTP layer parses requests into
calls on :class:`Registry`; the store underneath keeps objects and serves watches.
"""

from __future__ import annotations

from kubeloop.apiserver.registry.deleting import Deleting
from kubeloop.apiserver.registry.scaling import Scaling


class Registry(Scaling, Deleting):
    """Object semantics over a :class:`~kubeloop.apiserver.storage.store.Store` for
    the resources of a catalog: reads (``registrybase``), create (``creating``), update, patch
    and apply (``updating``), scale (``scaling``), delete (``deleting``), each calling admission
    where kube-apiserver does (``admitting``)."""
