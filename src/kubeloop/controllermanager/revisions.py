"""ControllerRevisions: the history of a StatefulSet's or DaemonSet's pod template.

Upstream's StatefulSet and DaemonSet controllers record each pod template they have run as a
``ControllerRevision`` owned by the workload: named ``<owner>-<hash>``, labelled with the hash
(``controller-revision-hash``) and numbered, its ``data`` the strategic-merge patch that puts the
template back (``spec.template`` with ``$patch: replace``) — what ``kubectl rollout history``
lists and ``kubectl rollout undo`` applies. Going back to an earlier template renumbers its
revision as the newest; revisions beyond ``revisionHistoryLimit`` that no pod runs are deleted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection

from kubeloop import errors, kinds
from kubeloop.api.object import Obj
from kubeloop.client.rest import APIClient
from kubeloop.controllermanager.deployments import template_hash
from kubeloop.controllermanager.podcontrol import controlled_by

CONTROLLER_REVISION = kinds.ControllerRevision
HASH_LABEL = "controller-revision-hash"


def revision_data(template: Obj) -> Obj:
    """The patch a revision records: the whole pod template, replacing the current one."""
    return {"spec": {"template": {**template, "$patch": "replace"}}}


def template_of(revision: Obj) -> Obj:
    """The pod template a revision records."""
    template = dict(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def revision_hash(revision: Obj) -> str:
    return str(((revision.get("metadata") or {}).get("labels") or {}).get(HASH_LABEL, ""))


def _number(revision: Obj) -> int:
    return int(revision.get("revision") or 0)


class History:
    """The revisions of one workload (``owner``), as listed from the cache."""

    def __init__(self, client: APIClient, owner: Obj, listed: list[Obj]) -> None:
        self.client = client
        self.owner = owner
        uid = str((owner.get("metadata") or {}).get("uid"))
        self.revisions = sorted((r for r in listed if controlled_by(r, uid)), key=_number)

    def named(self, name: str) -> Obj | None:
        return next((r for r in self.revisions if (r.get("metadata") or {}).get("name") == name), None)

    async def for_template(self, template: Obj) -> Obj:
        """The revision of ``template``: an existing one (renumbered as the newest if it is not),
        else a new one."""
        meta = self.owner.get("metadata") or {}
        digest = template_hash(template)
        newest = _number(self.revisions[-1]) if self.revisions else 0
        existing = next(
            (r for r in self.revisions if revision_hash(r) == digest and template_of(r) == template), None
        )
        if existing is not None:
            if _number(existing) == newest:
                return existing
            renumbered = await self.client.patch(
                CONTROLLER_REVISION,
                str((existing.get("metadata") or {}).get("name")),
                {"revision": newest + 1},
                namespace=meta.get("namespace"),
            )
            self._replace(existing, renumbered)
            return renumbered
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels[HASH_LABEL] = digest
        body: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {
                "name": f"{meta.get('name')}-{digest}",
                "namespace": meta.get("namespace"),
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": self.owner.get("apiVersion"),
                        "kind": self.owner.get("kind"),
                        "name": meta.get("name"),
                        "uid": meta.get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "data": revision_data(template),
            "revision": newest + 1,
        }
        try:
            created = await self.client.create(body)
        except errors.AlreadyExists:
            # Made by an earlier reconcile whose write the cache has not shown yet.
            created = await self.client.get(
                CONTROLLER_REVISION, str(body["metadata"]["name"]), namespace=meta.get("namespace")
            )
        self.revisions.append(created)
        self.revisions.sort(key=_number)
        return created

    async def truncate(self, limit: int, in_use: Collection[str]) -> None:
        """Delete the oldest revisions beyond ``limit`` whose names are not ``in_use``."""
        unused = [r for r in self.revisions if (r.get("metadata") or {}).get("name") not in in_use]
        for revision in unused[: max(0, len(unused) - limit)]:
            meta = revision.get("metadata") or {}
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(
                    CONTROLLER_REVISION, str(meta.get("name")), namespace=meta.get("namespace")
                )
            self.revisions.remove(revision)

    def _replace(self, old: Obj, new: Obj) -> None:
        self.revisions = sorted([new if r is old else r for r in self.revisions], key=_number)
