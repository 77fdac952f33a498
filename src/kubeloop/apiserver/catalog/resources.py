"""The resource types the embedded server serves, each one declaration.

Adding a built-in resource means adding one ``ResourceType`` to ``BUILTIN_RESOURCES``;
handlers, discovery, OpenAPI, tables and storage read everything from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` declared by a CustomResourceDefinition (additionalPrinterColumns)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    """One REST resource (a group/version/plural) and everything the server needs to serve it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    #: Extra field selectors beyond metadata.name/metadata.namespace: selector name → dotted path.
    field_selectors: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: Whether changes to metadata.annotations bump metadata.generation (upstream: Deployment-like kinds).
    annotations_bump_generation: bool = False
    #: Resource whose storage this one shares ((group, plural)); objects are converted on the way.
    storage_of: tuple[str, str] | None = None
    #: The version objects are stored in when it is not this one (autoscaling/v1
    #: HorizontalPodAutoscalers are stored as v2); "" for this resource's own version.
    stored_version: str = ""
    #: Whether the kind has metadata.generation (workloads do; ConfigMap, Secret, ... do not).
    tracks_generation: bool = False
    #: DELETE answers with the deleted object (pods, custom resources) rather than a Success Status.
    returns_deleted_object: bool = False
    #: Name syntax: "subdomain" (RFC 1123 subdomain), "label" (RFC 1123 label: Namespace,
    #: StatefulSet), "dns1035" (RFC 1035 label, starts with a letter: Service) or "path" (a
    #: path segment: RBAC objects).
    name_rule: str = "subdomain"
    #: Table columns a CustomResourceDefinition declares (None: the kind's built-in printer).
    printer_columns: tuple[PrinterColumn, ...] | None = None
    #: The CustomResourceDefinition serving this resource ("" for built-in resources).
    definition: str = ""
    #: A review: a create is answered from the request (who asks, what they may do) and nothing
    #: is stored (TokenReview, SubjectAccessReview, SelfSubjectReview...).
    review: bool = False
    #: Answered from the server's own state on every read, never stored (ComponentStatus).
    synthesized: bool = False

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage_group_resource(self) -> tuple[str, str]:
        return self.storage_of if self.storage_of is not None else (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def key_prefix(self, namespace: str | None = None) -> str:
        """Storage key prefix in the style of kube-apiserver: /registry/[group/]plural/[ns/]."""
        group, plural = self.storage_group_resource
        base = f"/registry/{group}/{plural}/" if group else f"/registry/{plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, namespace: str | None, name: str) -> str:
        return f"{self.key_prefix(namespace if self.namespaced else None)}{name}"


def _autoscaler(version: str, stored_version: str = "") -> ResourceType:
    """HorizontalPodAutoscalers, served as v2 (stored) and as v1 (a view of v2)."""
    return ResourceType(
        "autoscaling",
        version,
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
        short_names=("hpa",),
        categories=("all",),
        subresources=("status",),
        stored_version=stored_version,
    )


def _pod_fields() -> Mapping[str, str]:
    return MappingProxyType(
        {
            "spec.nodeName": "spec.nodeName",
            "spec.restartPolicy": "spec.restartPolicy",
            "spec.schedulerName": "spec.schedulerName",
            "spec.serviceAccountName": "spec.serviceAccountName",
            "spec.hostNetwork": "spec.hostNetwork",
            "status.phase": "status.phase",
            "status.podIP": "status.podIP",
            "status.nominatedNodeName": "status.nominatedNodeName",
        }
    )


def _event_fields() -> Mapping[str, str]:
    return MappingProxyType(
        {
            "involvedObject.kind": "involvedObject.kind",
            "involvedObject.namespace": "involvedObject.namespace",
            "involvedObject.name": "involvedObject.name",
            "involvedObject.uid": "involvedObject.uid",
            "involvedObject.apiVersion": "involvedObject.apiVersion",
            "involvedObject.resourceVersion": "involvedObject.resourceVersion",
            "involvedObject.fieldPath": "involvedObject.fieldPath",
            "reason": "reason",
            "reportingComponent": "reportingComponent",
            "source": "source.component",
            "type": "type",
        }
    )


def _events_v1_fields() -> Mapping[str, str]:
    # events.k8s.io/v1 selects on the same stored fields, spelled in its own vocabulary.
    return MappingProxyType(
        {
            "regarding.kind": "regarding.kind",
            "regarding.namespace": "regarding.namespace",
            "regarding.name": "regarding.name",
            "regarding.uid": "regarding.uid",
            "regarding.apiVersion": "regarding.apiVersion",
            "regarding.resourceVersion": "regarding.resourceVersion",
            "regarding.fieldPath": "regarding.fieldPath",
            "reason": "reason",
            "reportingController": "reportingController",
            "type": "type",
        }
    )


def _review(group: str, version: str, kind: str, *, namespaced: bool = False) -> ResourceType:
    """A review resource: created (answered) only, never stored."""
    return ResourceType(
        group, version, kind.lower() + "s", kind.lower(), kind, namespaced, verbs=("create",), review=True
    )


def _plain(
    group: str,
    plural: str,
    kind: str,
    namespaced: bool,
    *,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
    singular: str = "",
    returns_deleted_object: bool = False,
    tracks_generation: bool = False,
) -> ResourceType:
    """A version-1 resource with no rules of its own in the catalog (its schema, defaults and
    validation come from upstream)."""
    return ResourceType(
        group,
        "v1",
        plural,
        singular or kind.lower(),
        kind,
        namespaced,
        short_names=short_names,
        categories=categories,
        subresources=subresources,
        returns_deleted_object=returns_deleted_object,
        tracks_generation=tracks_generation,
    )


_ADMISSION = "admissionregistration.k8s.io"
_EXTENSIONS = ("api-extensions",)


BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        False,
        short_names=("ns",),
        verbs=tuple(v for v in ALL_VERBS if v != "deletecollection"),
        subresources=("status", "finalize"),
        name_rule="label",
        field_selectors=MappingProxyType({"status.phase": "status.phase"}),
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        False,
        short_names=("no",),
        subresources=("status",),
        field_selectors=MappingProxyType({"spec.unschedulable": "spec.unschedulable"}),
    ),
    ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, short_names=("cm",)),
    ResourceType(
        "",
        "v1",
        "secrets",
        "secret",
        "Secret",
        True,
        field_selectors=MappingProxyType({"type": "type"}),
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "service",
        "Service",
        True,
        short_names=("svc",),
        categories=("all",),
        subresources=("status",),
        name_rule="dns1035",
        returns_deleted_object=True,
    ),
    ResourceType(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        True,
        short_names=("sa",),
        subresources=("token",),
        returns_deleted_object=True,
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        True,
        short_names=("po",),
        categories=("all",),
        subresources=("status", "binding", "eviction", "log", "exec", "attach", "portforward"),
        field_selectors=_pod_fields(),
        tracks_generation=True,
        returns_deleted_object=True,
    ),
    ResourceType(
        "", "v1", "events", "event", "Event", True, short_names=("ev",), field_selectors=_event_fields()
    ),
    ResourceType("", "v1", "endpoints", "endpoints", "Endpoints", True, short_names=("ep",)),
    ResourceType(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        True,
        short_names=("quota",),
        subresources=("status",),
    ),
    ResourceType("", "v1", "limitranges", "limitrange", "LimitRange", True, short_names=("limits",)),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        True,
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
        annotations_bump_generation=True,
        tracks_generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        True,
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
        field_selectors=MappingProxyType({"status.replicas": "status.replicas"}),
        tracks_generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        True,
        short_names=("sts",),
        categories=("all",),
        subresources=("status", "scale"),
        tracks_generation=True,
        name_rule="label",
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        True,
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
        tracks_generation=True,
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        True,
        categories=("all",),
        subresources=("status",),
        field_selectors=MappingProxyType({"status.successful": "status.succeeded"}),
        tracks_generation=True,
    ),
    ResourceType(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        True,
        short_names=("cj",),
        categories=("all",),
        subresources=("status",),
        tracks_generation=True,
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        True,
        short_names=("ev",),
        storage_of=("", "events"),
        field_selectors=_events_v1_fields(),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=("status",),
        tracks_generation=True,
    ),
    _review("authentication.k8s.io", "v1", "SelfSubjectReview"),
    _review("authentication.k8s.io", "v1beta1", "SelfSubjectReview"),
    _review("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
    _review("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
    _review("authorization.k8s.io", "v1", "SubjectAccessReview"),
    _review("authorization.k8s.io", "v1", "LocalSubjectAccessReview", namespaced=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True, name_rule="path"),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        True,
        name_rule="path",
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        False,
        name_rule="path",
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        False,
        name_rule="path",
    ),
    ResourceType("", "v1", "bindings", "binding", "Binding", True, verbs=("create",)),
    ResourceType(
        "",
        "v1",
        "componentstatuses",
        "componentstatus",
        "ComponentStatus",
        False,
        short_names=("cs",),
        verbs=("get", "list"),
        synthesized=True,
    ),
    _plain(
        "",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        short_names=("pvc",),
        subresources=("status",),
        returns_deleted_object=True,
    ),
    _plain(
        "",
        "persistentvolumes",
        "PersistentVolume",
        False,
        short_names=("pv",),
        subresources=("status",),
        returns_deleted_object=True,
    ),
    _plain("", "podtemplates", "PodTemplate", True, returns_deleted_object=True),
    ResourceType(
        "",
        "v1",
        "replicationcontrollers",
        "replicationcontroller",
        "ReplicationController",
        True,
        short_names=("rc",),
        categories=("all",),
        subresources=("status", "scale"),
        tracks_generation=True,
    ),
    _plain(
        _ADMISSION,
        "mutatingadmissionpolicies",
        "MutatingAdmissionPolicy",
        False,
        categories=_EXTENSIONS,
        tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
    ),
    _plain(
        _ADMISSION,
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
        False,
        categories=_EXTENSIONS,
        tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
    ),
    _plain(
        _ADMISSION,
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        categories=_EXTENSIONS,
        tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
    ),
    _plain(
        _ADMISSION,
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
        categories=_EXTENSIONS,
        tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
        subresources=("status",),
    ),
    _plain(
        _ADMISSION,
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
        categories=_EXTENSIONS,
        tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
    ),
    _plain(
        _ADMISSION,
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        categories=_EXTENSIONS,
        tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
    ),
    _plain(
        "apiregistration.k8s.io",
        "apiservices",
        "APIService",
        False,
        categories=_EXTENSIONS,
        subresources=("status",),
    ),
    _plain("apps", "controllerrevisions", "ControllerRevision", True),
    _review("authentication.k8s.io", "v1", "TokenReview"),
    _autoscaler("v2"),
    _autoscaler("v1", stored_version="v2"),
    _plain(
        "certificates.k8s.io",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        False,
        short_names=("csr",),
        subresources=("status", "approval"),
    ),
    _plain("certificates.k8s.io", "clustertrustbundles", "ClusterTrustBundle", False),
    _plain(
        "certificates.k8s.io",
        "podcertificaterequests",
        "PodCertificateRequest",
        True,
        subresources=("status",),
    ),
    _plain("discovery.k8s.io", "endpointslices", "EndpointSlice", True),
    _plain("flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema", False, subresources=("status",)),
    _plain(
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        False,
        subresources=("status",),
    ),
    _plain("networking.k8s.io", "ingressclasses", "IngressClass", False),
    _plain("networking.k8s.io", "ingresses", "Ingress", True, short_names=("ing",), subresources=("status",)),
    _plain("networking.k8s.io", "ipaddresses", "IPAddress", False, short_names=("ip",)),
    _plain("networking.k8s.io", "networkpolicies", "NetworkPolicy", True, short_names=("netpol",)),
    _plain("networking.k8s.io", "servicecidrs", "ServiceCIDR", False, subresources=("status",)),
    _plain("node.k8s.io", "runtimeclasses", "RuntimeClass", False),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=("status",),
        tracks_generation=True,
    ),
    _plain("resource.k8s.io", "deviceclasses", "DeviceClass", False),
    _plain("resource.k8s.io", "devicetaintrules", "DeviceTaintRule", False, subresources=("status",)),
    _plain(
        "resource.k8s.io",
        "resourceclaims",
        "ResourceClaim",
        True,
        subresources=("status",),
        returns_deleted_object=True,
    ),
    _plain("resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    _plain("resource.k8s.io", "resourceslices", "ResourceSlice", False),
    _plain("scheduling.k8s.io", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    _plain("storage.k8s.io", "csidrivers", "CSIDriver", False),
    _plain("storage.k8s.io", "csinodes", "CSINode", False),
    _plain("storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity", True),
    _plain("storage.k8s.io", "storageclasses", "StorageClass", False, short_names=("sc",)),
    _plain("storage.k8s.io", "volumeattachments", "VolumeAttachment", False, subresources=("status",)),
    _plain("storage.k8s.io", "volumeattributesclasses", "VolumeAttributesClass", False, short_names=("vac",)),
    _plain(
        "storagemigration.k8s.io",
        "storageversionmigrations",
        "StorageVersionMigration",
        False,
        subresources=("status",),
    ),
)


class ResourceCatalog:
    """Looks resource types up by group/version/plural and by kind; kinds come and go at run time
    (CustomResourceDefinitions), and ``generation`` counts the changes."""

    def __init__(self, resources: Iterable[ResourceType] = BUILTIN_RESOURCES) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._by_gvk: dict[tuple[str, str, str], ResourceType] = {}
        #: Bumped by every add and remove: what caches of the served API key on.
        self.generation = 0
        for resource in resources:
            self.add(resource)

    def add(self, resource: ResourceType) -> None:
        """Serve ``resource``, replacing what was served at its group/version/plural."""
        old = self._by_gvr.get((resource.group, resource.version, resource.plural))
        if old is not None and old.kind != resource.kind:
            self._by_gvk.pop((old.group, old.version, old.kind), None)
        self._by_gvr[(resource.group, resource.version, resource.plural)] = resource
        self._by_gvk[(resource.group, resource.version, resource.kind)] = resource
        self.generation += 1

    def remove(self, resource: ResourceType) -> None:
        self._by_gvr.pop((resource.group, resource.version, resource.plural), None)
        if self._by_gvk.get((resource.group, resource.version, resource.kind)) is resource:
            del self._by_gvk[(resource.group, resource.version, resource.kind)]
        self.generation += 1

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        return self._by_gvk.get((group, version, kind))

    def all(self) -> list[ResourceType]:
        return list(self._by_gvr.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Group name → its served versions (the core group is the empty string)."""
        result: dict[str, list[str]] = {}
        for resource in list(self._by_gvr.values()):
            versions = result.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in list(self._by_gvr.values()) if r.group == group and r.version == version]
