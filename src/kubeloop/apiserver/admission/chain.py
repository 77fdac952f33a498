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
    validates in turn (the first refusal answers).

    Given the ``registry`` and plugins that each name the objects their coverage follows
    (``coverage_sources``: (group, plural) pairs, none for a plugin that covers a resource or
    not by its kind alone), whether the chain covers a resource is remembered until one of
    those objects is written: every write asks twice, and asking each plugin was ~2.5 % of a
    small write's CPU."""

    def __init__(self, *plugins: Admission, registry: Registry | None = None) -> None:
        self.plugins = plugins
        #: Coverage by (group, plural, kind); None: asked of the plugins every time.
        self._covered: dict[tuple[str, str, str], bool] | None = None
        sources = [getattr(plugin, "coverage_sources", None) for plugin in plugins]
        if registry is not None and all(source is not None for source in sources):
            self._covered = {}
            for group, plural in sorted({pair for source in sources if source for pair in source}):
                registry.add_commit_listener(group, plural, self._forget_coverage)

    def _forget_coverage(self, new: Obj | None, old: Obj | None) -> None:
        if self._covered:
            self._covered.clear()

    def covers(self, resource: ResourceType) -> bool:
        covered = self._covered
        if covered is None:
            return any(plugin.covers(resource) for plugin in self.plugins)
        key = (resource.group, resource.plural, resource.kind)
        found = covered.get(key)
        if found is None:
            found = covered[key] = any(plugin.covers(resource) for plugin in self.plugins)
        return found

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
        registry=registry,
    )
