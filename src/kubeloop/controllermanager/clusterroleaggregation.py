"""The ClusterRole aggregation controller: an aggregating ClusterRole's ``rules`` are the rules of
the ClusterRoles its selectors match.

As upstream's ``pkg/controller/clusterroleaggregation``: any ClusterRole event wakes every
ClusterRole that has an ``aggregationRule`` (the set is small and who depends on whom is not
known). A woken role's rules become, selector by selector, the rules of the matching ClusterRoles
other than itself, taken in name order, each rule once; when that differs from what it holds, the
rules are written by server-side apply with the field manager
``clusterrole-aggregation-controller``, forced. So ``kubectl get clusterrole edit -o yaml`` lists
what ``edit`` grants, as on a cluster.
"""

from __future__ import annotations

from kubeloop import errors, kinds
from kubeloop.api.clusterroles import aggregated_rules, aggregation_selectors
from kubeloop.api.object import Obj
from kubeloop.controller.handler import EnqueueRequestsFromMapFunc
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

CLUSTER_ROLE = kinds.ClusterRole
FIELD_MANAGER = "clusterrole-aggregation-controller"


class ClusterRoleAggregation:
    """Registers its reconciler with ``manager`` (a controller named ``clusterrole-aggregation``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        (
            Builder(manager)
            .named("clusterrole-aggregation")
            .watches(CLUSTER_ROLE, EnqueueRequestsFromMapFunc(self._aggregating_roles))
            .complete(self.reconcile)
        )

    def _aggregating_roles(self, _changed: Obj) -> list[Request]:
        store = self.manager.informer_for(CLUSTER_ROLE).store
        return [Request("", str(role["metadata"]["name"])) for role in store.objects() if aggregation_selectors(role)]

    async def reconcile(self, request: Request) -> Result | None:
        store = self.manager.informer_for(CLUSTER_ROLE).store
        role = store.get(request.name)
        if role is None or not aggregation_selectors(role):
            return None
        try:
            rules = aggregated_rules(role, store.objects())
        except errors.InvalidSelector:
            return None  # validation refuses such selectors; one kept from before is left alone
        if rules == (role.get("rules") or []):
            return None
        applied = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": request.name},
            "rules": rules,
        }
        await self.manager.client.apply(applied, field_manager=FIELD_MANAGER, force=True)
        return None
