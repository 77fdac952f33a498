"""RBAC, cell by cell: every verb on a resource and every served subresource, each allowed to a
ServiceAccount whose Role grants exactly that and refused to one with no role, with upstream's
words — through the official Python client (the account's own token) and through kubectl (the
admin impersonating the account, `kubectl --as`); and impersonation itself, refused to those not
allowed it."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, start_server

RBAC = "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"


@dataclass(frozen=True)
class Cell:
    """One verb on one resource (``resource/subresource``) of an API group, and the call that
    makes it with the official client (``name`` is the object it acts on, None for a collection)."""

    verb: str
    group: str
    resource: str
    name: str | None
    call: Callable[[k8s.ApiClient, str, str], Any]  # (api, namespace, cell id) -> result

    @property
    def id(self) -> str:
        return f"{self.verb}-{self.resource.replace('/', '-')}"

    @property
    def plural(self) -> str:
        return self.resource.split("/", 1)[0]

    def refusal(self, user: str, namespace: str) -> str:
        """kube-apiserver's 403 message for ``user``."""
        qualified = f"{self.plural}.{self.group}" if self.group else self.plural
        subject = f'{qualified} "{self.name}"' if self.name else qualified
        return (
            f'{subject} is forbidden: User "{user}" cannot {self.verb} resource "{self.resource}" '
            f'in API group "{self.group}" in the namespace "{namespace}"'
        )


def core(api: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api)


def apps(api: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(api)


def watch_once(api: k8s.ApiClient, namespace: str, _id: str) -> list[Any]:
    return list(watch.Watch().stream(core(api).list_namespaced_config_map, namespace, timeout_seconds=1))


CELLS = [
    Cell("get", "", "configmaps", "target", lambda api, ns, _: core(api).read_namespaced_config_map("target", ns)),
    Cell("list", "", "configmaps", None, lambda api, ns, _: core(api).list_namespaced_config_map(ns)),
    Cell("watch", "", "configmaps", None, watch_once),
    Cell(
        "create", "", "configmaps", None,
        lambda api, ns, i: core(api).create_namespaced_config_map(ns, {"metadata": {"name": f"made-{i}"}}),
    ),
    Cell(
        "update", "", "configmaps", "target",
        lambda api, ns, _: core(api).replace_namespaced_config_map(
            "target", ns, {"metadata": {"name": "target"}, "data": {"by": "update"}}
        ),
    ),
    Cell(
        "patch", "", "configmaps", "target",
        lambda api, ns, _: core(api).patch_namespaced_config_map("target", ns, {"data": {"by": "patch"}}),
    ),
    Cell("delete", "", "configmaps", "doomed", lambda api, ns, _: core(api).delete_namespaced_config_map("doomed", ns)),
    Cell(
        "deletecollection", "", "configmaps", None,
        lambda api, ns, _: core(api).delete_collection_namespaced_config_map(ns, label_selector="doomed=yes"),
    ),
    Cell("get", "apps", "deployments/status", "web", lambda api, ns, _: apps(api).read_namespaced_deployment_status("web", ns)),
    Cell(
        "update", "apps", "deployments/status", "web",
        lambda api, ns, _: apps(api).replace_namespaced_deployment_status("web", ns, DEPLOYMENT_WITH_STATUS),
    ),
    Cell(
        "patch", "apps", "deployments/status", "web",
        lambda api, ns, _: apps(api).patch_namespaced_deployment_status("web", ns, {"status": {"replicas": 1}}),
    ),
    Cell("get", "apps", "deployments/scale", "web", lambda api, ns, _: apps(api).read_namespaced_deployment_scale("web", ns)),
    Cell(
        "update", "apps", "deployments/scale", "web",
        lambda api, ns, _: apps(api).replace_namespaced_deployment_scale(
            "web", ns, {"metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": 2}}
        ),
    ),
    Cell(
        "patch", "apps", "deployments/scale", "web",
        lambda api, ns, _: apps(api).patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}}),
    ),
    Cell(
        "create", "", "pods/binding", "unbound",
        lambda api, ns, _: core(api).create_namespaced_pod_binding(
            "unbound", ns, {"metadata": {"name": "unbound"}, "target": {"kind": "Node", "name": "somewhere"}},
            _preload_content=False,
        ),
    ),
    Cell(
        "create", "", "pods/eviction", "evictable",
        lambda api, ns, _: core(api).create_namespaced_pod_eviction(
            "evictable", ns, {"metadata": {"name": "evictable", "namespace": ns}}
        ),
    ),
    Cell(
        "create", "", "serviceaccounts/token", "robot",
        lambda api, ns, _: core(api).create_namespaced_service_account_token("robot", ns, {"spec": {}}),
    ),
]  # fmt: skip

DEPLOYMENT_WITH_STATUS = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    },
    "status": {"replicas": 1},
}


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


class Accounts:
    """ServiceAccounts of one namespace, each bound to a Role of the rules it is given, and the
    official client as each of them (with a token from the TokenRequest API)."""

    def __init__(self, admin: Client, namespace: str) -> None:
        self.admin = admin
        self.namespace = namespace

    def make(self, name: str, rules: list[dict[str, Any]]) -> str:
        ns, admin = self.namespace, self.admin
        assert (
            admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": name}}).status_code
            == 201
        )
        if rules:
            role = {"metadata": {"name": name}, "rules": rules}
            assert admin.post(RBAC.format(ns=ns) + "/roles", role).status_code == 201
            binding = {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
            }
            assert admin.post(RBAC.format(ns=ns) + "/rolebindings", binding).status_code == 201
        return service_account_user(ns, name)

    def client(self, name: str) -> k8s.ApiClient:
        answer = self.admin.post(
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        assert answer.status_code == 201, answer.text
        configuration = k8s.Configuration()
        configuration.host = self.admin.server.url
        configuration.ssl_ca_cert = self.admin.server.ca_file
        configuration.api_key = {"authorization": "Bearer " + answer.json()["status"]["token"]}
        return k8s.ApiClient(configuration)


def objects(admin: Client, namespace: str) -> None:
    """What the cells act on."""
    base = f"/api/v1/namespaces/{namespace}"
    for path, body in (
        ("/configmaps", {"metadata": {"name": "target"}}),
        ("/configmaps", {"metadata": {"name": "doomed"}}),
        ("/serviceaccounts", {"metadata": {"name": "robot"}}),
        ("/pods", {"metadata": {"name": "unbound"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        ("/pods", {"metadata": {"name": "evictable"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    ):
        answer = admin.post(base + path, body)
        assert answer.status_code == 201, answer.text
    for i in range(2):
        doomed = {"metadata": {"name": f"doomed-{i}", "labels": {"doomed": "yes"}}}
        assert admin.post(base + "/configmaps", doomed).status_code == 201
    deployment = {k: v for k, v in DEPLOYMENT_WITH_STATUS.items() if k != "status"}
    answer = admin.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)
    assert answer.status_code == 201, answer.text


@pytest.fixture
def accounts(api: Client, namespace: str) -> Iterator[Accounts]:
    objects(api, namespace)
    yield Accounts(api, namespace)


@pytest.mark.parametrize("cell", CELLS, ids=[cell.id for cell in CELLS])
def test_each_cell_is_allowed_exactly_to_whom_a_role_grants_it(
    cell: Cell, accounts: Accounts, namespace: str
) -> None:
    allowed = accounts.make(
        "allowed", [{"apiGroups": [cell.group], "resources": [cell.resource], "verbs": [cell.verb]}]
    )
    nobody = accounts.make("nobody", [])
    # The same verb on the parent resource does not reach a subresource (and vice versa).
    other = cell.plural if "/" in cell.resource else f"{cell.resource}/status"
    beside = accounts.make(
        "beside", [{"apiGroups": [cell.group], "resources": [other], "verbs": [cell.verb]}]
    )
    with accounts.client("allowed") as api:
        cell.call(api, namespace, cell.id)
    assert allowed
    for name, user in (("nobody", nobody), ("beside", beside)):
        with accounts.client(name) as api, pytest.raises(ApiException) as refused:
            cell.call(api, namespace, cell.id + "-" + name)
        assert refused.value.status == 403, refused.value.body
        status = json.loads(refused.value.body)
        assert (status["reason"], status["message"]) == ("Forbidden", cell.refusal(user, namespace))
        assert status["details"] == {
            **({"name": cell.name} if cell.name else {}),
            **({"group": cell.group} if cell.group else {}),
            "kind": cell.plural,
        }


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


def test_kubectl_as_each_account_is_told_what_it_may_do(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    """`kubectl auth can-i ... --as` for every cell, and the real commands: allowed as the account
    whose Role grants the cell, refused with upstream's words as one without it."""
    kubectl_rbac(kubectl, api, namespace)


@pytest.fixture(scope="module")
def two_processes() -> Iterator[ServerThread]:
    """A server of two processes (``--workers 2``): the owner of the store and a front-end."""
    server = start_server(workers=2)
    yield server
    server.stop()


def test_kubectl_rbac_holds_on_two_processes(two_processes: ServerThread, tmp_path: pathlib.Path) -> None:
    """The same, each kubectl call a new connection to either process: a Role made through one
    holds on the other at once."""
    api = Client(two_processes)
    assert api.post("/api/v1/namespaces", {"metadata": {"name": "rbac-two"}}).status_code == 201
    kubectl_rbac(Kubectl(KUBECTLS[-1], two_processes.kubeconfig, tmp_path), api, "rbac-two")


def kubectl_rbac(kubectl: Kubectl, api: Client, namespace: str) -> None:
    objects(api, namespace)
    accounts = Accounts(api, namespace)
    nobody = accounts.make("nobody", [])
    ns = ["-n", namespace]
    for cell in CELLS:
        granted = accounts.make(
            cell.id, [{"apiGroups": [cell.group], "resources": [cell.resource], "verbs": [cell.verb]}]
        )
        target = cell.resource.split("/")
        kind = f"{target[0]}.{cell.group}" if cell.group else target[0]
        what = [f"{kind}/{cell.name}" if cell.name else kind]
        sub = [f"--subresource={target[1]}"] if len(target) == 2 else []
        for user, expected in ((granted, "yes"), (nobody, "no")):
            answer = kubectl("auth", "can-i", cell.verb, *what, *sub, *ns, f"--as={user}", check=False)
            assert answer.stdout.strip() == expected, (cell.id, user, answer.stdout, answer.stderr)
    reader = service_account_user(namespace, "get-configmaps")
    assert (
        kubectl("get", "configmap", "target", *ns, f"--as={reader}", "-o", "name").stdout.strip()
        == "configmap/target"
    )
    refused = kubectl("get", "configmaps", *ns, f"--as={reader}", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): configmaps is forbidden: User "{reader}" cannot list resource '
        f'"configmaps" in API group "" in the namespace "{namespace}"'
    )
    # kubectl scale reads the Deployment first, then patches its scale.
    scaler = accounts.make(
        "scaler",
        [
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
            {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]},
        ],
    )
    kubectl("scale", "deployment", "web", "--replicas=4", *ns, f"--as={scaler}")
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()["spec"]["replicas"] == 4
    # Without the read, kubectl itself says "no objects passed to scale"; with it and without the
    # patch of the scale, the server refuses the patch.
    looker = accounts.make(
        "looker", [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]
    )
    refused = kubectl("scale", "deployment", "web", "--replicas=5", *ns, f"--as={looker}", check=False)
    assert (
        f'deployments.apps "web" is forbidden: User "{looker}" cannot patch resource "deployments/scale" '
        f'in API group "apps" in the namespace "{namespace}"'
    ) in refused.stderr, refused.stderr
    deleter = service_account_user(namespace, "delete-configmaps")
    kubectl("delete", "configmap", "doomed", *ns, f"--as={deleter}")
    refused = kubectl("delete", "configmap", "target", *ns, f"--as={nobody}", check=False)
    assert (
        f'configmaps "target" is forbidden: User "{nobody}" cannot delete resource "configmaps"'
        in refused.stderr
    )


def test_impersonation_is_itself_authorized(kubectl: Kubectl, api: Client, namespace: str) -> None:
    """Only who may `impersonate` a user, a ServiceAccount or a group may act as them."""
    accounts = Accounts(api, namespace)
    accounts.make("plain", [])
    accounts.make("reader", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    impersonator = accounts.make(
        "impersonator",
        [
            {
                "apiGroups": [""],
                "resources": ["serviceaccounts"],
                "verbs": ["impersonate"],
                "resourceNames": ["reader"],
            }
        ],
    )
    plain = service_account_user(namespace, "plain")
    reader = service_account_user(namespace, "reader")

    def token(name: str) -> str:
        answer = api.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        return str(answer.json()["status"]["token"])

    def as_whom(bearer: str, user: str, *groups: str) -> Any:
        headers = {"Authorization": f"Bearer {bearer}", "Impersonate-User": user}
        if groups:
            headers["Impersonate-Group"] = groups[0]
        return api.get(f"/api/v1/namespaces/{namespace}/configmaps", headers=headers)

    refused = as_whom(token("plain"), reader)
    assert refused.status_code == 403 and refused.json()["message"] == (
        f'serviceaccounts "reader" is forbidden: User "{plain}" cannot impersonate resource '
        f'"serviceaccounts" in API group "" in the namespace "{namespace}"'
    )
    allowed_token = token("impersonator")
    assert as_whom(allowed_token, reader).status_code == 200  # may be reader, who may list
    refused = as_whom(allowed_token, plain)  # reader only, not anyone else
    assert refused.status_code == 403
    assert (
        f'serviceaccounts "plain" is forbidden: User "{impersonator}" cannot impersonate'
        in refused.json()["message"]
    )
    refused = as_whom(allowed_token, reader, "system:masters")  # and no group it was not given
    assert refused.status_code == 403 and refused.json()["message"] == (
        f'groups "system:masters" is forbidden: User "{impersonator}" cannot impersonate resource "groups" '
        'in API group "" at the cluster scope'
    )
    # kubectl --as, with the impersonator's token: acts, and is known, as reader.
    as_reader = ["-n", namespace, f"--token={allowed_token}", f"--as={reader}"]
    kubectl("get", "configmaps", *as_reader)
    whoami = json.loads(kubectl("auth", "whoami", "-o", "json", *as_reader).stdout)["status"]["userInfo"]
    assert whoami["username"] == reader and impersonator not in json.dumps(whoami)
    assert (
        kubectl(
            "get", "configmaps", "-n", namespace, f"--token={allowed_token}", f"--as={plain}", check=False
        ).returncode
        == 1
    )
