"""The core (v1) API group: Namespaces, Nodes, ConfigMaps, Secrets, Services, ServiceAccounts,
Pods, Events, Endpoints, ResourceQuotas, LimitRanges, Bindings, ComponentStatuses,
PersistentVolumeClaims, PersistentVolumes, PodTemplates and ReplicationControllers."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kubeloop.apiserver.catalog.resources import ALL_VERBS, ResourceType
from kubeloop.apiserver.groups.core import columns, defaults, validation
from kubeloop.apiserver.groups.core.strategies import (
    NamespaceStrategy,
    NodeStrategy,
    PodStrategy,
    ReplicationControllerStrategy,
    ServiceStrategy,
)
from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.defaulting import empty_status


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


#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
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
        strategy=NamespaceStrategy,
        defaults=defaults.namespace,
        initial_status=defaults.namespace_status,
        columns=columns.namespace_columns,
    ),
    BuiltinKind(
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
        strategy=NodeStrategy,
        columns=columns.node_columns,
    ),
    BuiltinKind(
        ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, short_names=("cm",)),
        rules=validation.config_map_rules,
        update_rules=validation.config_map_update_rules,
        columns=columns.configmap_columns,
    ),
    BuiltinKind(
        ResourceType(
            "",
            "v1",
            "secrets",
            "secret",
            "Secret",
            True,
            field_selectors=MappingProxyType({"type": "type"}),
        ),
        defaults=defaults.secret,
        rules=validation.secret_rules,
        update_rules=validation.secret_update_rules,
        columns=columns.secret_columns,
    ),
    BuiltinKind(
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
        strategy=ServiceStrategy,
        defaults=defaults.service,
        initial_status=defaults.service_status,
        rules=validation.service_rules,
        columns=columns.service_columns,
    ),
    BuiltinKind(
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
        columns=columns.serviceaccount_columns,
    ),
    BuiltinKind(
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
        strategy=PodStrategy,
        defaults=defaults.pod,
        initial_status=defaults.pod_status,
        rules=validation.pod_rules,
        columns=columns.pod_columns,
        row_conditions=columns.pod_row_conditions,
    ),
    BuiltinKind(
        ResourceType(
            "", "v1", "events", "event", "Event", True, short_names=("ev",), field_selectors=_event_fields()
        ),
        columns=columns.event_columns,
        printed_form=columns.core_event,
    ),
    BuiltinKind(
        ResourceType("", "v1", "endpoints", "endpoints", "Endpoints", True, short_names=("ep",)),
        columns=columns.endpoints_columns,
    ),
    BuiltinKind(
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
        columns=columns.resourcequota_columns,
    ),
    BuiltinKind(
        ResourceType("", "v1", "limitranges", "limitrange", "LimitRange", True, short_names=("limits",)),
    ),
    BuiltinKind(
        ResourceType("", "v1", "bindings", "binding", "Binding", True, verbs=("create",)),
    ),
    BuiltinKind(
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
        columns=columns.componentstatus_columns,
    ),
    BuiltinKind(
        plain(
            "",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            True,
            short_names=("pvc",),
            subresources=("status",),
            returns_deleted_object=True,
        ),
        defaults=defaults.persistent_volume_claim,
        initial_status=defaults.pending_status,
        columns=columns.pvc_columns,
    ),
    BuiltinKind(
        plain(
            "",
            "persistentvolumes",
            "PersistentVolume",
            False,
            short_names=("pv",),
            subresources=("status",),
            returns_deleted_object=True,
        ),
        defaults=defaults.persistent_volume,
        initial_status=defaults.pending_status,
        columns=columns.pv_columns,
    ),
    BuiltinKind(
        plain("", "podtemplates", "PodTemplate", True, returns_deleted_object=True),
        defaults=defaults.pod_template,
        columns=columns.podtemplate_columns,
    ),
    BuiltinKind(
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
        strategy=ReplicationControllerStrategy,
        defaults=defaults.replication_controller,
        initial_status=empty_status,
        columns=columns.replicationcontroller_columns,
    ),
)
