"""The ServiceAccount admission plugin (upstream's ``plugin/pkg/admission/serviceaccount``):
a pod that is created without ``serviceAccountName`` runs as the namespace's ``default``
account, and, unless automounting is off (the pod's ``automountServiceAccountToken``, else its
account's, else on), gets the account's credentials as a volume every container mounts:
``kube-api-access-<5 letters>``, a projected volume of a token for the API server (3607 s,
refreshed by the kubelet), the cluster's CA (the ``kube-root-ca.crt`` ConfigMap) and the pod's
namespace, at ``/var/run/secrets/kubernetes.io/serviceaccount``. A container that already
mounts something there keeps its own; a pod that already has a ``kube-api-access-`` volume
keeps it. Mirror pods are left alone.

Unlike upstream, a pod that names an account which does not exist is admitted (upstream
refuses it): its token cannot be issued until the account exists, which the kubelet says
(FailedMount) as it does when an account is deleted under a running pod.
"""

from __future__ import annotations

import copy

from kubeloop import errors
from kubeloop.api import naming
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.registry.admissionhooks import CREATE, AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry

DEFAULT_ACCOUNT = "default"
VOLUME_PREFIX = "kube-api-access-"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: How long the kubelet asks the projected token to live (upstream's, a little over an hour).
TOKEN_EXPIRATION_SECONDS = 3607
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def access_volume(name: str) -> Obj:
    """The projected volume of an account's credentials, defaulted as the server stores it."""
    return {
        "name": name,
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


class ServiceAccountAdmission:
    """Mutates pods as they are created; validates nothing."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.catalog = catalog

    #: Its coverage follows no object: pods only.
    coverage_sources: tuple[tuple[str, str], ...] = ()

    def covers(self, resource: ResourceType) -> bool:
        return (resource.group, resource.plural) == ("", "pods")

    async def mutate(
        self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        if attributes.operation != CREATE or attributes.subresource or not isinstance(obj, dict):
            return obj, []
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if MIRROR_ANNOTATION in annotations:
            return obj, []
        pod = copy.deepcopy(obj)
        spec = pod.setdefault("spec", {})
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = DEFAULT_ACCOUNT
        if await self._automounts(attributes.namespace, spec):
            _mount_credentials(spec)
        return pod, []

    async def validate(self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> list[str]:
        return []

    async def _automounts(self, namespace: str, spec: Obj) -> bool:
        """The pod's own choice, else its account's, else yes."""
        own = spec.get("automountServiceAccountToken")
        if isinstance(own, bool):
            return own
        resource = self.catalog.lookup("", "v1", "serviceaccounts")
        assert resource is not None
        try:
            account = await self.registry.read(
                lambda: self.registry.get(resource, namespace, str(spec["serviceAccountName"]))
            )
        except errors.NotFound:
            return True
        chosen = account.get("automountServiceAccountToken")
        return chosen if isinstance(chosen, bool) else True


def _mount_credentials(spec: Obj) -> None:
    volumes = spec.get("volumes") or []
    existing = next(
        (
            str(v.get("name"))
            for v in volumes
            if isinstance(v, dict) and str(v.get("name", "")).startswith(VOLUME_PREFIX)
        ),
        None,
    )
    name = existing or VOLUME_PREFIX + naming.generate_name_suffix()  # upstream's utilrand.String(5)
    needed = False
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if not isinstance(container, dict):
                continue
            mounts = container.get("volumeMounts") or []
            if any(isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH for m in mounts):
                continue
            container["volumeMounts"] = [*mounts, {"name": name, "readOnly": True, "mountPath": MOUNT_PATH}]
            needed = True
    if needed and existing is None:
        spec["volumes"] = [*volumes, access_volume(name)]
