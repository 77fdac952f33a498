"""The PodSecurity admission plugin (upstream's ``plugin/pkg/admission/security/podsecurity``
over ``k8s.io/pod-security-admission/admission``): the namespace's labels say which Pod Security
Standard its pods must meet (``namespacepolicy``), and the pods are checked against it
(``standards``) when they are created, and on an update that changes their containers' images
or adds an ephemeral container.

- **enforce**: a pod that does not meet the level is refused, 403 Forbidden, ``pods "<name>" is
  forbidden: violates PodSecurity "restricted:latest": <reason (detail)>, ...``. Pods made by
  the cluster's controllers (a Deployment's, a Job's) are refused the same way, so their
  owners' status and events say why.
- **warn**: the client is warned, ``would violate PodSecurity "<level>:<version>": ...`` — for
  pods, and for the workloads that make pods (Deployments, ReplicaSets, StatefulSets,
  DaemonSets, Jobs, CronJobs, ReplicationControllers, PodTemplates), whose templates are checked
  on every create and update and are never refused.
- **audit**: the request's audit event gets ``pod-security.kubernetes.io/audit-violations``
  (a refused pod's too), and ``pod-security.kubernetes.io/error`` when the labels are wrong.

A namespace whose labels name an unknown level or version is refused (422, naming the label) on
create, and on an update that makes them wrong. An update that tightens ``enforce`` is allowed,
with warnings naming the existing pods that would now be refused. No namespace, user or runtime
class is exempt (upstream's defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.admission.podsecurity.namespacepolicy import LevelVersion, Policy, policy_of
from kubeloop.apiserver.admission.podsecurity.standards import (
    LEVELS,
    PRIVILEGED,
    Violation,
    evaluate,
    forbidden_detail,
    forbidden_reasons,
)
from kubeloop.apiserver.audit import requestaudit
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.registry.admissionhooks import CREATE, UPDATE, AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.validation.causes import as_dict
from kubeloop.apiserver.registry.verboptions import ListOptions

#: Where the pod template of each kind that makes pods is: (group, plural) → path.
TEMPLATES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("", "replicationcontrollers"): ("spec", "template"),
    ("", "podtemplates"): ("template",),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
#: Pod subresources that are not checked (the rest, ephemeralcontainers included, are).
IGNORED_POD_SUBRESOURCES = frozenset(
    ("exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status")
)
#: How many existing pods a tightened enforce level is checked against.
MAX_CHECKED_PODS = 3000
AUDIT_VIOLATIONS = "pod-security.kubernetes.io/audit-violations"
PARSE_ERROR = "pod-security.kubernetes.io/error"
ENFORCE_POLICY = "pod-security.kubernetes.io/enforce-policy"


class PodSecurityAdmission:
    """Validates pods, pod-making workloads and namespaces; mutates nothing."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog, latest_minor: int) -> None:
        self.registry = registry
        self.catalog = catalog
        #: The server's release: what ``latest`` means.
        self.latest_minor = latest_minor

    #: Its coverage follows no object: pods, namespaces and the kinds with pod templates.
    coverage_sources: tuple[tuple[str, str], ...] = ()

    def covers(self, resource: ResourceType) -> bool:
        key = (resource.group, resource.plural)
        return key in TEMPLATES or key in (("", "pods"), ("", "namespaces"))

    async def mutate(
        self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        return obj, []

    async def validate(self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> list[str]:
        if attributes.operation not in (CREATE, UPDATE) or obj is None:
            return []
        key = (attributes.resource.group, attributes.resource.plural)
        if key == ("", "namespaces"):
            return await self._namespace(attributes, obj, old)
        if key == ("", "pods"):
            return await self._pod(attributes, obj, old)
        return await self._workload(attributes, obj, TEMPLATES[key])

    # ------------------------------------------------------------------ pods and workloads

    async def _policy(self, namespace: str) -> tuple[Policy, bool] | None:
        """The namespace's policy and whether its labels are wrong (said in the audit event);
        None without the namespace."""
        resource = self.catalog.lookup("", "v1", "namespaces")
        assert resource is not None
        try:
            found = await self.registry.read(lambda: self.registry.get(resource, None, namespace))
        except errors.NotFound:
            return None
        policy, problems = policy_of((found.get("metadata") or {}).get("labels"))
        if problems:
            causes = [f"{c.field}: {c.message}" for c in problems]
            joined = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
            requestaudit.add_annotation(PARSE_ERROR, f"Failed to parse policy: {joined}")
        return policy, bool(problems)

    def _evaluate(self, mode: LevelVersion, metadata: Any, spec: Any) -> list[Violation]:
        return evaluate(mode.level, mode.minor(self.latest_minor), as_dict(metadata), as_dict(spec))

    async def _pod(self, attributes: AdmissionAttributes, pod: Obj, old: Obj | None) -> list[str]:
        if attributes.subresource in IGNORED_POD_SUBRESOURCES:
            return []
        if attributes.operation == UPDATE and old is not None and not _significant_update(pod, old):
            return []
        found = await self._policy(attributes.namespace)
        if found is None:
            return []
        policy, wrong_labels = found
        if policy.all_privileged() and not wrong_labels:
            return []
        metadata, spec = pod.get("metadata"), pod.get("spec")
        requestaudit.add_annotation(ENFORCE_POLICY, str(policy.enforce))
        self._audit(policy, metadata, spec)  # whatever enforce decides
        refused = self._evaluate(policy.enforce, metadata, spec)
        if refused:
            name = str(as_dict(metadata).get("name") or attributes.name)
            subject = f'pods "{name}"' if name else "pods"
            raise errors.Forbidden(
                f'{subject} is forbidden: violates PodSecurity "{policy.enforce}": {forbidden_detail(refused)}',
                name=name,
                kind="pods",
            )
        return self._warn(policy, metadata, spec)

    async def _workload(self, attributes: AdmissionAttributes, obj: Obj, path: tuple[str, ...]) -> list[str]:
        if attributes.subresource:
            return []
        template: Any = obj
        for step in path:
            template = as_dict(template).get(step)
        if not isinstance(template, dict):
            return []
        found = await self._policy(attributes.namespace)
        if found is None:
            return []
        policy, wrong_labels = found
        if policy.warn.level == PRIVILEGED and policy.audit.level == PRIVILEGED and not wrong_labels:
            return []
        self._audit(policy, template.get("metadata"), template.get("spec"))
        return self._warn(policy, template.get("metadata"), template.get("spec"))

    def _warn(self, policy: Policy, metadata: Any, spec: Any) -> list[str]:
        violations = self._evaluate(policy.warn, metadata, spec)
        if not violations:
            return []
        return [f'would violate PodSecurity "{policy.warn}": {forbidden_detail(violations)}']

    def _audit(self, policy: Policy, metadata: Any, spec: Any) -> None:
        violations = self._evaluate(policy.audit, metadata, spec)
        if violations:
            requestaudit.add_annotation(
                AUDIT_VIOLATIONS,
                f'would violate PodSecurity "{policy.audit}": {forbidden_detail(violations)}',
            )

    # ---------------------------------------------------------------------- namespaces

    async def _namespace(self, attributes: AdmissionAttributes, namespace: Obj, old: Obj | None) -> list[str]:
        if attributes.subresource:
            return []
        name = str(as_dict(namespace.get("metadata")).get("name") or attributes.name)
        policy, problems = policy_of(as_dict(namespace.get("metadata")).get("labels"))
        if attributes.operation == CREATE or old is None:
            if problems:
                raise errors.invalid("", "Namespace", name, problems)
            return []
        old_policy, old_problems = policy_of(as_dict(old.get("metadata")).get("labels"))
        if problems and (not old_problems or problems != old_problems):
            raise errors.invalid("", "Namespace", name, problems)
        new, previous = policy.enforce, old_policy.enforce
        if new == previous or new.level == PRIVILEGED:
            return []
        if new.version == previous.version and LEVELS.index(new.level) <= LEVELS.index(previous.level):
            return []
        return await self._existing_pods(name, new)

    async def _existing_pods(self, namespace: str, enforce: LevelVersion) -> list[str]:
        """Warnings naming the namespace's pods that ``enforce`` would refuse (one line per set of
        reasons, its pod the first by name)."""
        resource = self.catalog.lookup("", "v1", "pods")
        assert resource is not None
        listed = await self.registry.read(
            lambda: self.registry.list_objects(resource, namespace, ListOptions())
        )
        pods = sorted(listed.items, key=lambda pod: str(pod["metadata"]["name"]))
        checked = pods[:MAX_CHECKED_PODS]
        by_reasons: dict[str, list[str]] = {}
        for pod in checked:
            violations = self._evaluate(enforce, pod.get("metadata"), pod.get("spec"))
            if violations:
                by_reasons.setdefault(forbidden_reasons(violations), []).append(str(pod["metadata"]["name"]))
        warnings = []
        if len(checked) < len(pods):
            warnings.append(
                f"new PodSecurity enforce level only checked against the first {len(checked)} of {len(pods)} "
                "existing pods"
            )
        if by_reasons:
            warnings.append(
                f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level "{enforce}"'
            )
        lines = []
        for reasons, names in by_reasons.items():
            others = len(names) - 1
            more = "" if others == 0 else f" (and {others} other {'pod' if others == 1 else 'pods'})"
            lines.append(f"{names[0]}{more}: {reasons}")
        return warnings + sorted(lines)


def _significant_update(pod: Obj, old: Obj) -> bool:
    """Whether a pod update is checked: a container count or image changed, or an ephemeral
    container was added or changed its image (upstream's ``isSignificantPodUpdate``)."""
    spec, old_spec = as_dict(pod.get("spec")), as_dict(old.get("spec"))
    for field in ("containers", "initContainers"):
        new, previous = spec.get(field) or [], old_spec.get(field) or []
        if len(new) != len(previous):
            return True
        if any(
            as_dict(a).get("image") != as_dict(b).get("image") for a, b in zip(new, previous, strict=True)
        ):
            return True
    previous_ephemeral = {
        as_dict(c).get("name"): as_dict(c) for c in old_spec.get("ephemeralContainers") or ()
    }
    for container in spec.get("ephemeralContainers") or ():
        before = previous_ephemeral.get(as_dict(container).get("name"))
        if before is None or before.get("image") != as_dict(container).get("image"):
            return True
    return False
