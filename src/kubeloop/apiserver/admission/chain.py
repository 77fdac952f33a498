"""The admission chain a server runs, and its plugins in kube-apiserver's order.

kube-apiserver runs its admission plugins in one fixed order (``AllOrderedPlugins``): each
mutating one in turn, then each validating one in turn, the first refusal answering. Of those it
enables by default, the server has ServiceAccount (a pod's account and its credentials volume),
PodSecurity (the Pod Security Standards a namespace's labels ask for), ValidatingAdmissionPolicy
and the two webhook plugins (MutatingAdmissionWebhook mutates before the policies validate,
ValidatingAdmissionWebhook validates after them). :func:`builtin_chain` puts them in that order;
the registry calls the chain at its admission points (``registry.admissionhooks``).
"""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.admission.admissionpolicy.policyadmission import PolicyAdmission
from kubeloop.apiserver.admission.podsecurity.enforcement import PodSecurityAdmission
from kubeloop.apiserver.admission.serviceaccount import ServiceAccountAdmission
from kubeloop.apiserver.admission.webhooks.dispatcher import WebhookAdmission
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.registry.admissionhooks import Admission, AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry


class AdmissionChain:
    """Several admission plugins in kube-apiserver's order: each mutates in turn, then each
    validates in turn (the first refusal answers)."""

    def __init__(self, *plugins: Admission) -> None:
        self.plugins = plugins

    def covers(self, resource: ResourceType) -> bool:
        return any(plugin.covers(resource) for plugin in self.plugins)

    async def mutate(
        self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        warnings: list[str] = []
        for plugin in self.plugins:
            if plugin.covers(attributes.resource):
                obj, said = await plugin.mutate(attributes, obj, old)
                warnings.extend(said)
        return obj, warnings

    async def validate(self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> list[str]:
        warnings: list[str] = []
        for plugin in self.plugins:
            if plugin.covers(attributes.resource):
                warnings.extend(await plugin.validate(attributes, obj, old))
        return warnings


def builtin_chain(
    registry: Registry,
    catalog: ResourceCatalog,
    webhooks: WebhookAdmission,
    *,
    service_accounts: bool,
    pod_security_release: int,
) -> AdmissionChain:
    """The server's plugins in kube-apiserver's order. ``service_accounts``: whether pods get
    their account's credentials (where the cluster keeps the accounts and the CA they need; as
    envtest, without a controller manager, leaves the plugin off). ``pod_security_release``:
    the Kubernetes minor release ``latest`` means to Pod Security."""
    return AdmissionChain(
        *([ServiceAccountAdmission(registry, catalog)] if service_accounts else []),
        PodSecurityAdmission(registry, catalog, pod_security_release),
        PolicyAdmission(registry, catalog),
        webhooks,
    )
