"""Everything kube-apiserver serves, served here: `kubectl api-resources` lists what a
kube-apiserver of the schemas' release lists (tests/data/, taken from upstream's discovery and
checked against the schemas), and kubectl's typed create/get/describe work for every kind; the
resources that are not stored (bindings, evictions, component statuses, token reviews) answer as
upstream's do."""

from __future__ import annotations

import base64
import copy
import json
import pathlib
import re
import time
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubeloop.apiserver.catalog import schemas
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread

EXPECTED = pathlib.Path(__file__).parent.parent / "data" / "kube-apiserver-1.37-api-resources.txt"
STORED_VERBS = "create,delete,deletecollection,get,list,patch,update,watch"
#: Kinds in the schemas that are parts of other resources' requests, not resources themselves.
NOT_RESOURCES = {"Status", "APIGroup", "APIVersions", "Scale", "TokenRequest", "Eviction"}


def expected_rows() -> set[tuple[str, ...]]:
    rows = set()
    for line in EXPECTED.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, short, api_version, namespaced, kind, verbs, categories = (f.strip() for f in line.split("|"))
        verbs = STORED_VERBS if verbs == "all" else verbs.replace(" ", ",")
        rows.add((name, short, api_version, namespaced, kind, verbs, categories))
    return rows


def test_the_expected_list_is_every_ga_resource_of_the_schemas() -> None:
    assert schemas.schema_release().startswith("1.37.")
    ga: set[tuple[str, str]] = set()
    kinds: set[tuple[str, str, str]] = set()
    for node in schemas.definitions().values():
        for gvk in node.get("x-kubernetes-group-version-kind", ()):
            if re.fullmatch(r"v\d+", gvk["version"]):
                kinds.add((gvk["group"], gvk["version"], gvk["kind"]))
    for group, version, kind in kinds:
        listed = (group, version, f"{kind}List") in kinds
        if (listed or kind.endswith("Review") or kind == "Binding") and kind not in NOT_RESOURCES:
            ga.add((group, kind))
    in_file = {
        (row[2].rpartition("/")[0], row[4]) for row in expected_rows()
    }  # group from apiVersion ("v1": core)
    assert in_file == ga


def _api_resources(kubectl: Kubectl) -> set[tuple[str, ...]]:
    lines = kubectl("api-resources", "-o", "wide").stdout.splitlines()
    header = lines[0]
    starts = [header.index(column) for column in header.split()]
    rows = set()
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line) + 1], strict=True)]
        rows.add(tuple(cells))
    return rows


@pytest.mark.kubectl
def test_kubectl_api_resources_lists_what_kube_apiserver_does(kubectl: Kubectl) -> None:
    expected = expected_rows()
    built_in = {row[2] for row in expected}
    # Other tests add CRDs to the shared server: their groups are none of upstream's.
    served = {row for row in _api_resources(kubectl) if row[2] in built_in}
    assert served == expected


def _certificate_request() -> str:
    """A PEM certificate signing request, base64-encoded as a CSR's spec.request carries it."""
    key = ec.generate_private_key(ec.SECP256R1())
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")]))
        .sign(key, hashes.SHA256())
    )
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def manifests(ns: str, ca_pem: str) -> list[dict[str, object]]:
    """One valid object of each kind the server gained with the full catalog; cluster-scoped
    names carry ``ns`` so that each kubectl version's run has its own."""
    selector = {"matchLabels": {"app": "web"}}
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"pv-{ns}"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/pv"},
            },
        },
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "tmpl"}, "template": template},
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": "rc"},
            "spec": {"replicas": 0, "selector": {"app": "web"}, "template": template},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": f"vap-{ns}"},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["deployments"],
                        }
                    ]
                },
                "validations": [{"expression": "object.spec.replicas <= 5"}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": f"vapb-{ns}"},
            "spec": {"policyName": f"vap-{ns}", "validationActions": ["Deny"]},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": f"map-{ns}"},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
                "reinvocationPolicy": "Never",
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": f"mapb-{ns}"},
            "spec": {"policyName": f"map-{ns}"},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": f"vwc-{ns}"},
            "webhooks": [],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": f"mwc-{ns}"},
            "webhooks": [],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"v1.{ns}.example.com"},
            "spec": {
                "group": f"{ns}.example.com",
                "version": "v1",
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
                "service": {"namespace": ns, "name": "api"},
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {"name": "rev-1"},
            "revision": 1,
            "data": {"spec": {"template": template}},
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1,
                "maxReplicas": 3,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": f"csr-{ns}"},
            "spec": {
                "request": _certificate_request(),
                "signerName": "kubernetes.io/kube-apiserver-client",
                "usages": ["client auth"],
            },
        },
        {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "ClusterTrustBundle",
            "metadata": {"name": f"ctb-{ns}"},
            "spec": {"trustBundle": ca_pem},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "web-abc"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.5"]}],
            "ports": [{"port": 80}],
        },
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": f"plc-{ns}"},
            "spec": {
                "type": "Limited",
                "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}},
            },
        },
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": f"fs-{ns}"},
            "spec": {
                "priorityLevelConfiguration": {"name": f"plc-{ns}"},
                "matchingPrecedence": 500,
                "rules": [
                    {
                        "subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                        "resourceRules": [
                            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": f"ic-{ns}"},
            "spec": {"controller": "example.com/ingress"},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {
                "rules": [
                    {
                        "host": "web.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "web", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ]
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "deny"},
            "spec": {"podSelector": {}},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "ServiceCIDR",
            "metadata": {"name": f"cidr-{ns}"},
            "spec": {"cidrs": ["10.200.0.0/24"]},
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": f"rc-{ns}"},
            "handler": "runc",
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": selector},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"gpu-{ns}"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu"},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"gpu-{ns}"}}]}
                }
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"gpu-{ns}"}}]}},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"high-{ns}"},
            "value": 1000,
            "description": "important",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"fast-{ns}"},
            "provisioner": "example.com/fast",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": f"{ns}.csi.example.com"},
            "spec": {},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": f"node-{ns}"},
            "spec": {"drivers": [{"name": f"{ns}.csi.example.com", "nodeID": "node-1"}]},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": "cap"},
            "storageClassName": f"fast-{ns}",
            "capacity": "10Gi",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": f"va-{ns}"},
            "spec": {
                "attacher": "example.com/fast",
                "nodeName": "kubeloop-node",
                "source": {"persistentVolumeName": f"pv-{ns}"},
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttributesClass",
            "metadata": {"name": f"gold-{ns}"},
            "driverName": "example.com/fast",
            "parameters": {"iops": "1000"},
        },
        {
            "apiVersion": "storagemigration.k8s.io/v1",
            "kind": "StorageVersionMigration",
            "metadata": {"name": f"svm-{ns}"},
            "spec": {"resource": {"group": "apps", "resource": "deployments"}},
        },
    ]


#: The columns kube-apiserver's printers give each kind (``-o wide`` adds none of these), as
#: kubectl shows them: a header word per column (PodTemplate's "POD LABELS" and LimitRange's
#: "CREATED AT" are two).
UPSTREAM_HEADERS = {
    "HorizontalPodAutoscaler": "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE",
    "Ingress": "NAME CLASS HOSTS ADDRESS PORTS AGE",
    "IngressClass": "NAME CONTROLLER PARAMETERS AGE",
    "NetworkPolicy": "NAME POD-SELECTOR AGE",
    "EndpointSlice": "NAME ADDRESSTYPE PORTS ENDPOINTS AGE",
    "CertificateSigningRequest": "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION",
    "ClusterTrustBundle": "NAME SIGNERNAME",
    "ControllerRevision": "NAME CONTROLLER REVISION AGE",
    "PodTemplate": "NAME CONTAINERS IMAGES POD LABELS",
    "MutatingWebhookConfiguration": "NAME WEBHOOKS AGE",
    "ValidatingWebhookConfiguration": "NAME WEBHOOKS AGE",
    "ValidatingAdmissionPolicy": "NAME VALIDATIONS PARAMKIND AGE",
    "MutatingAdmissionPolicy": "NAME MUTATIONS PARAMKIND AGE",
    "ValidatingAdmissionPolicyBinding": "NAME POLICYNAME PARAMREF AGE",
    "MutatingAdmissionPolicyBinding": "NAME POLICYNAME PARAMREF AGE",
    "APIService": "NAME SERVICE AVAILABLE AGE",
    "FlowSchema": "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL",
    "PriorityLevelConfiguration": "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE",
    "RuntimeClass": "NAME HANDLER AGE",
    "CSIDriver": "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
    "CSINode": "NAME DRIVERS AGE",
    "CSIStorageCapacity": "NAME STORAGECLASSNAME CAPACITY",
    "VolumeAttachment": "NAME ATTACHER PV NODE ATTACHED AGE",
    "VolumeAttributesClass": "NAME DRIVERNAME AGE",
    "StorageVersionMigration": "NAME RESOURCE STATUS",
    "ServiceCIDR": "NAME CIDRS AGE",
    "DeviceClass": "NAME AGE",
    "ResourceClaim": "NAME STATE AGE",
    "ResourceClaimTemplate": "NAME AGE",
}


def _plural(kind: str, api_version: str) -> str:
    for row in expected_rows():
        if row[4] == kind and row[2] == api_version:
            return row[0] if "/" not in api_version else f"{row[0]}.{api_version.split('/')[0]}"
    raise AssertionError(f"{kind} is not in the expected list")


@pytest.mark.kubectl
def test_kubectl_creates_gets_and_describes_every_new_kind(
    kubectl: Kubectl, namespace: str, shared_server: ServerThread
) -> None:
    credentials = shared_server.server.credentials
    assert credentials is not None
    objects = manifests(namespace, credentials.ca_cert_pem.decode())
    documents = yaml.safe_dump_all(objects)
    targets = [f"{_plural(str(o['kind']), str(o['apiVersion']))}/{o['metadata']['name']}" for o in objects]  # type: ignore[index]
    # Among them are cluster-wide objects (admission policies, a FlowSchema, an APIService): removed
    # even when an assertion fails, or they would meet every later test on this worker's server.
    try:
        kubectl("create", "-n", namespace, "-f", "-", stdin=documents)
        listed = kubectl("get", "-n", namespace, *targets, "-o", "json").stdout
        got = json.loads(listed)["items"]
        assert [(o["kind"], o["metadata"]["name"]) for o in got] == [
            (o["kind"], o["metadata"]["name"])
            for o in objects  # type: ignore[index]
        ]
        table = kubectl("get", "-n", namespace, *targets).stdout
        for obj in objects:
            assert str(obj["metadata"]["name"]) in table  # type: ignore[index]
        # Each kind's table has upstream's columns (kubectl prints a header per kind).
        headers = {}
        for block in table.strip().split("\n\n"):
            header, *rows = block.splitlines()
            for row in rows:
                headers[row.split()[0]] = header.split()  # kind.group/name
        for obj in objects:
            kind, group = str(obj["kind"]), str(obj["apiVersion"]).rpartition("/")[0]
            printed = f"{kind.lower()}{'.' + group if group else ''}/{obj['metadata']['name']}"  # type: ignore[index]
            expected = UPSTREAM_HEADERS.get(kind)
            if expected is not None:
                # StorageVersionMigration's name column has no "name" format: kubectl shows it bare.
                name = printed if kind != "StorageVersionMigration" else printed.rpartition("/")[2]
                assert headers[name] == expected.split(), kind
        # kubectl before 1.34 describes VolumeAttributesClasses through storage.k8s.io/v1beta1, which
        # a 1.37 kube-apiserver does not serve by default either.
        describable = [t for t in targets if not t.startswith("volumeattributesclasses.")]
        described = kubectl("describe", "-n", namespace, *describable).stdout
        assert described.count("\nName:") + described.startswith("Name:") >= len(describable)
        for obj in objects:
            if obj["kind"] != "VolumeAttributesClass":
                assert str(obj["metadata"]["name"]) in described  # type: ignore[index]
    finally:
        kubectl("delete", "-n", namespace, *targets, "--wait=false", "--ignore-not-found", check=False)


def test_upstream_defaults_fill_the_new_kinds(api: Client, namespace: str) -> None:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    created = api.post(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["volumeMode"] == "Filesystem"
    assert created.json()["status"] == {"phase": "Pending"}
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            }
        },
    }
    made = api.post(f"/api/v1/namespaces/{namespace}/replicationcontrollers", rc).json()
    assert made["spec"]["replicas"] == 1
    assert made["spec"]["selector"] == {"app": "rc"}
    assert made["metadata"]["labels"] == {"app": "rc"}
    scale = api.get(f"/api/v1/namespaces/{namespace}/replicationcontrollers/rc/scale").json()
    assert scale["spec"] == {"replicas": 1} and scale["status"]["selector"] == "app=rc"
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny"},
        "spec": {"podSelector": {}},
    }
    made = api.post(f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies", policy).json()
    assert made["spec"]["policyTypes"] == ["Ingress"]


def test_delete_answers_with_the_object_where_upstream_does(api: Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    api.post(
        f"{base}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}}
    )
    gone = api.delete(f"{base}/serviceaccounts/bot").json()
    assert (gone["kind"], gone["metadata"]["name"]) == ("ServiceAccount", "bot")
    api.post(f"{base}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    status = api.delete(f"{base}/configmaps/cm").json()
    assert (status["kind"], status["status"]) == ("Status", "Success")


@pytest.mark.kubectl
def test_component_statuses(kubectl: Kubectl) -> None:
    out = kubectl("get", "componentstatuses").stdout
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert rows["etcd-0"] == "Healthy" and rows["controller-manager"] == "Healthy"
    one = json.loads(kubectl("get", "cs", "etcd-0", "-o", "json").stdout)
    assert one["conditions"] == [{"type": "Healthy", "status": "True", "message": "ok"}]


def test_kubectl_hears_upstreams_pod_spec_rules(kubectl: Kubectl, namespace: str) -> None:
    """A Deployment whose template a cluster refuses is refused here with upstream's causes, in
    upstream's order, and nothing is written."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "refused", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "refused"}},
            "template": {
                "metadata": {"labels": {"app": "refused"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "busybox",
                            "ports": [{"containerPort": 70000}],
                            "env": [{"name": "LOG=LEVEL", "value": "debug"}],
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                        }
                    ]
                },
            },
        },
    }
    result = kubectl("apply", "-f", "-", stdin=json.dumps(deployment), check=False)
    assert result.returncode == 1
    prefix = "spec.template.spec.containers[0]"
    assert (
        f'The Deployment "refused" is invalid: \n* {prefix}.ports[0].containerPort: Invalid value: 70000: must be'
        f' between 1 and 65535, inclusive\n* {prefix}.env[0].name: Invalid value: "LOG=LEVEL": a valid'
        " environment variable name must consist only of printable ASCII characters other than '='\n*"
        f' {prefix}.volumeMounts[0].name: Not found: "config"'
    ) in result.stderr
    assert "NotFound" in kubectl("get", "deployment", "refused", "-n", namespace, check=False).stderr


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_binding_assigns_a_pod_once(api: Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    api.post(f"{base}/pods", _pod("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"},
    }
    bound = api.post(f"{base}/pods/p/binding", binding)
    assert bound.status_code == 201, bound.text
    assert bound.json()["status"] == "Success"
    pod = api.get(f"{base}/pods/p").json()
    assert pod["spec"]["nodeName"] == "n1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in pod["status"]["conditions"])
    again = api.post(f"{base}/bindings", {**binding, "target": {"name": "n2"}})
    assert again.status_code == 409
    assert again.json()["message"].endswith('pod p is already assigned to node "n1"')
    mismatched = api.post(f"{base}/pods/p/binding", {**binding, "metadata": {"name": "q"}})
    assert mismatched.status_code == 400
    assert (
        api.post(f"{base}/pods/missing/binding", {**binding, "metadata": {"name": "missing"}}).status_code
        == 404
    )


def _ready_pod(api: Client, base: str, name: str) -> None:
    pod = api.post(f"{base}/pods", _pod(name)).json()
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert api.put(f"{base}/pods/{name}/status", {**pod, "status": ready}).status_code == 200


def test_eviction_respects_the_disruption_budget(api: Client, namespace: str) -> None:
    # The disruption controller keeps the budget's status; evictions spend what it allows.
    base = f"/api/v1/namespaces/{namespace}"
    _ready_pod(api, base, "p")
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    pdbs = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    assert api.post(pdbs, budget).status_code == 201

    def status_is(**wanted: int) -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while True:
            status: dict[str, Any] = api.get(f"{pdbs}/web").json().get("status", {})
            if all(status.get(k) == v for k, v in wanted.items()):
                return status
            assert time.monotonic() < deadline, status
            time.sleep(0.05)

    status = status_is(observedGeneration=1, expectedPods=1, currentHealthy=1, desiredHealthy=1)
    assert status["disruptionsAllowed"] == 0
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "False",
        "InsufficientPods",
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
    refused = api.post(f"{base}/pods/p/eviction", eviction)
    assert refused.status_code == 429, refused.text
    assert refused.json()["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert "needs 1 healthy pods and has 1 currently" in refused.json()["details"]["causes"][0]["message"]

    _ready_pod(api, base, "q")
    status_is(expectedPods=2, currentHealthy=2, disruptionsAllowed=1)
    evicted = api.post(f"{base}/pods/p/eviction", eviction)
    assert evicted.status_code == 201, evicted.text
    assert api.get(f"{base}/pods/p").status_code == 404
    # The controller recounts: one pod left, none to spare, and the gone pod's record dropped.
    status = status_is(expectedPods=1, currentHealthy=1, disruptionsAllowed=0)
    assert "disruptedPods" not in status
    again = api.post(f"{base}/pods/q/eviction", {**eviction, "metadata": {"name": "q"}})
    assert again.status_code == 429


def test_token_review_judges_tokens(api: Client, namespace: str, shared_server: ServerThread) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    api.post(
        f"{base}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}}
    )
    token = api.post(
        f"{base}/serviceaccounts/bot/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    ).json()
    reviews = "/apis/authentication.k8s.io/v1/tokenreviews"

    def review(token_text: str, audiences: list[str] | None = None) -> dict[str, object]:
        spec: dict[str, object] = {"token": token_text}
        if audiences is not None:
            spec["audiences"] = audiences
        answer = api.post(
            reviews, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        )
        assert answer.status_code == 201, answer.text
        return answer.json()["status"]  # type: ignore[no-any-return]

    good = review(token["status"]["token"])
    assert good["authenticated"] is True
    assert good["user"]["username"] == f"system:serviceaccount:{namespace}:bot"  # type: ignore[index]
    assert good["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    assert "authenticated" not in review("not-a-token")
    assert "authenticated" not in review(token["status"]["token"], ["vault"])
    admin = review(shared_server.server.credentials.admin_token)  # type: ignore[union-attr]
    assert admin["user"]["username"] == "kubeloop-admin"  # type: ignore[index]
    missing = api.post(reviews, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})
    assert missing.status_code == 422 and "spec.token" in missing.json()["message"]


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


# Durability is what this proves; each kubectl reads the served resources in the tests above.
@pytest.mark.kubectl
@pytest.mark.parametrize("binary", KUBECTLS[-1:], ids=[p.name for p in KUBECTLS[-1:]])
def test_kubectl_on_the_durable_server(binary: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # `kubeloop apiserver --data-dir`, as users run it: the same list, and what a cluster makes
    # by itself is there for kubectl to read.
    from tests.apiserver.storage.test_durability import apiserver

    with apiserver(tmp_path / "data"):
        kubectl = Kubectl(binary, tmp_path / "data" / "kubeconfig", tmp_path)
        assert _api_resources(kubectl) == expected_rows()
        assert "Healthy" in kubectl("get", "componentstatuses").stdout
        assert "10.96.0.1" in kubectl("get", "service", "kubernetes", "-n", "default").stdout
        assert "system-node-critical" in kubectl("get", "priorityclasses").stdout
        deadline = time.monotonic() + 10  # the control loops make the default account soon after start
        while kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode != 0:
            assert time.monotonic() < deadline, "no default ServiceAccount"
            time.sleep(0.1)
        token = kubectl("create", "token", "default", "-n", "default").stdout.strip()
        review = yaml.safe_dump(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        )
        answered = json.loads(kubectl("create", "-f", "-", "-o", "json", stdin=review).stdout)
        assert answered["status"]["user"]["username"] == "system:serviceaccount:default:default"


def test_bad_budgets_are_refused_and_uncomputable_ones_allow_nothing(api: Client, namespace: str) -> None:
    # Bad numbers and selectors are refused with upstream's causes, nothing written.
    pdbs = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"

    def budget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": spec,
        }

    bad = {
        "number": ({"maxUnavailable": "lots"}, "spec.maxUnavailable"),
        "selector": (
            {"minAvailable": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}},
            "spec.selector.matchExpressions[0].operator",
        ),
        "both": ({"minAvailable": 1, "maxUnavailable": 1}, "spec"),
    }
    for name, (spec, field) in bad.items():
        refused = api.post(pdbs, budget(name, spec))
        assert refused.status_code == 422, refused.text
        assert [c["field"] for c in refused.json()["details"]["causes"]] == [field]
        assert api.get(f"{pdbs}/{name}").status_code == 404
    # Upstream's failSafe: a budget the controller cannot compute (maxUnavailable over a pod no
    # controller owns) says SyncFailed and allows nothing.
    made = api.post(
        pdbs, budget("orphans", {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}})
    )
    assert made.status_code == 201, made.text
    _ready_pod(api, f"/api/v1/namespaces/{namespace}", "p")
    deadline = time.monotonic() + 20
    while True:
        status = api.get(f"{pdbs}/orphans").json().get("status", {})
        conditions = status.get("conditions") or [{}]
        if conditions[0].get("reason") == "SyncFailed":
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert status["disruptionsAllowed"] == 0 and conditions[0]["status"] == "False"
    assert conditions[0]["message"] == 'found no controller ref for pod "p"'
    # A status write is still checked for what it brings itself: a negative counter is refused.
    refused = api.patch(
        f"{pdbs}/orphans/status",
        {"status": {"currentHealthy": -1}},
        "application/merge-patch+json",
    )
    assert refused.status_code == 422, refused.text
    assert [c["field"] for c in refused.json()["details"]["causes"]] == ["status.currentHealthy"]


def test_fields_upstream_fixes_stay_fixed_through_every_kind_of_write(api: Client, namespace: str) -> None:
    # PUT, merge patch and server-side apply all meet Validate<Kind>Update; nothing is written.
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    made = api.post(deployments, deployment).json()
    moved = copy.deepcopy(made)
    moved["spec"]["selector"] = {"matchLabels": {"app": "api"}}
    moved["spec"]["template"]["metadata"]["labels"] = {"app": "api"}
    refused = api.put(f"{deployments}/web", moved)
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: {"matchLabels":{"app":"api"}}: field is immutable',
            "field": "spec.selector",
        }
    ]
    applied = api.patch(
        f"{deployments}/web?fieldManager=me&force=true",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": moved["spec"]},
        "application/apply-patch+yaml",
    )
    assert applied.status_code == 422 and "spec.selector" in applied.json()["message"]
    assert api.get(f"{deployments}/web").json()["spec"]["selector"] == {"matchLabels": labels}

    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    frozen = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "f"},
        "data": {"k": "v"},
        "immutable": True,
    }
    assert api.post(configmaps, frozen).status_code == 201
    patched = api.patch(f"{configmaps}/f", {"data": {"k": "w"}}, "application/merge-patch+json")
    assert patched.status_code == 422
    assert patched.json()["message"] == (
        'ConfigMap "f" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )
    labelled = api.patch(
        f"{configmaps}/f", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json"
    )
    assert labelled.status_code == 200, labelled.text
    assert api.get(f"{configmaps}/f").json()["data"] == {"k": "v"}
