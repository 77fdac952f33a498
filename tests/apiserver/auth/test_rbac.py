"""RBAC as kube-apiserver enforces it: 403 with upstream's message, Roles and ClusterRoles bound to
users and groups, the bootstrap roles (cluster-admin for system:masters, admin/edit/view by
aggregation), and the review APIs behind `kubectl auth whoami` and `kubectl auth can-i` — with
kubectl 1.27 and 1.33, as the admin and as a user with a client certificate of its own."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from kubeloop import certs
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, eventually


def user_kubeconfig(server: ServerThread, path: pathlib.Path, user: str, groups: list[str]) -> pathlib.Path:
    """A kubeconfig that authenticates as ``user`` (a client certificate, no token)."""
    credentials = server.server.credentials
    assert credentials is not None
    cert, key = certs.issue_client_certificate(credentials, user, groups)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": server.url, "certificate-authority-data": b64(credentials.ca_cert_pem)},
            }
        ],
        "users": [
            {"name": user, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": user}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def binary(request: pytest.FixtureRequest) -> pathlib.Path:
    return pathlib.Path(request.param)


@pytest.fixture
def admin(binary: pathlib.Path, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(binary, shared_server.kubeconfig, tmp_path)


@pytest.fixture
def alice(binary: pathlib.Path, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(
        binary, user_kubeconfig(shared_server, tmp_path / "alice.yaml", "alice", ["devs"]), tmp_path
    )


def test_whoami_for_the_admin_and_for_a_user(admin: Kubectl, alice: Kubectl) -> None:
    mine = admin("auth", "whoami", "-o", "json").stdout
    info = json.loads(mine)["status"]["userInfo"]
    assert info["username"] == "kubeloop-admin"
    assert "system:masters" in info["groups"]
    theirs = alice("auth", "whoami").stdout
    assert "alice" in theirs and "devs" in theirs and "system:authenticated" in theirs


def test_can_i_and_403_follow_the_bindings(admin: Kubectl, alice: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    assert admin("auth", "can-i", "create", "deployments", *ns).stdout.strip() == "yes"
    denied = alice("auth", "can-i", "list", "pods", *ns, check=False)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    refused = alice("get", "pods", *ns, check=False)
    assert refused.returncode == 1
    assert (
        f'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "{namespace}"'
        in refused.stderr
    )
    nodes = alice("get", "nodes", check=False)
    assert (
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope'
        in nodes.stderr
    )

    # The group gets edit in this namespace: pods and deployments yes, RBAC and other namespaces no.
    admin("create", "rolebinding", "devs-edit", "--clusterrole=edit", "--group=devs", *ns)
    assert alice("auth", "can-i", "create", "deployments.apps", *ns).stdout.strip() == "yes"
    assert alice("auth", "can-i", "get", "pods/log", *ns).stdout.strip() == "yes"
    assert alice("auth", "can-i", "create", "rolebindings", *ns, check=False).stdout.strip() == "no"
    assert alice("auth", "can-i", "list", "pods", "-n", "default", check=False).stdout.strip() == "no"
    alice("create", "configmap", "mine", *ns)
    assert "configmap/mine" in alice("get", "configmaps", *ns, "-o", "name").stdout
    cannot = alice(
        "create", "rolebinding", "escalate", "--clusterrole=admin", "--user=alice", *ns, check=False
    )
    assert (
        f'rolebindings.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "rolebindings" '
        f'in API group "rbac.authorization.k8s.io" in the namespace "{namespace}"' in cannot.stderr
    )
    # A Role with resourceNames: one RoleBinding by name (edit reads none), and no other.
    admin(
        "create",
        "role",
        "one-binding",
        "--verb=get",
        "--resource=rolebindings",
        "--resource-name=devs-edit",
        *ns,
    )
    admin("create", "rolebinding", "alice-one", "--role=one-binding", "--user=alice", *ns)
    assert alice("auth", "can-i", "get", "rolebindings/devs-edit", *ns).stdout.strip() == "yes"
    assert alice("auth", "can-i", "get", "rolebindings/alice-one", *ns, check=False).stdout.strip() == "no"
    assert "devs-edit" in alice("get", "rolebinding", "devs-edit", *ns).stdout


def test_the_forbidden_status_and_the_review_apis(
    shared_server: ServerThread, api: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    # As the admin, ask about someone else.
    review: dict[str, Any] = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "bob",
            "resourceAttributes": {"namespace": namespace, "verb": "get", "resource": "pods"},
        },
    }
    answer = api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"]["allowed"] is False
    review["spec"]["groups"] = ["system:masters"]
    assert (
        api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review).json()["status"]["allowed"]
        is True
    )
    # Nothing is stored: reviews cannot be listed.
    assert api.get("/apis/authorization.k8s.io/v1/subjectaccessreviews").status_code == 405
    # A non-resource path, through the bootstrap system:discovery role.
    discovery = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "bob",
            "groups": ["system:authenticated"],
            "nonResourceAttributes": {"path": "/apis", "verb": "get"},
        },
    }
    assert (
        api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", discovery).json()["status"]["allowed"]
        is True
    )
    missing = api.post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": "bob"}},
    )
    assert missing.status_code == 422
    assert missing.json()["details"]["causes"][0]["field"] == "spec.resourceAttributes"


def test_aggregated_roles_take_in_labelled_cluster_roles(
    admin: Kubectl, alice: Kubectl, namespace: str
) -> None:
    """A ClusterRole labelled aggregate-to-view (what a CRD's author ships) widens view."""
    ns = ["-n", namespace]
    admin("create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice", *ns)
    assert alice("auth", "can-i", "list", "deployments.apps", *ns).stdout.strip() == "yes"
    assert (
        alice("auth", "can-i", "list", "leases.coordination.k8s.io", *ns, check=False).stdout.strip() == "no"
    )
    extra = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": f"leases-view-{namespace}-{pathlib.Path(admin.argv[0]).suffix.lstrip('.')}",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"},
        },
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list"]}],
    }
    admin("apply", "-f", "-", stdin=json.dumps(extra))
    # The aggregation controller writes the rule into view's `rules` (and so into edit and admin).
    asyncio.run(
        eventually(
            lambda: (
                alice("auth", "can-i", "list", "leases.coordination.k8s.io", *ns, check=False).stdout.strip()
                == "yes"
            )
        )
    )
    admin("delete", "clusterrole", extra["metadata"]["name"])
    asyncio.run(
        eventually(
            lambda: (
                alice("auth", "can-i", "list", "leases.coordination.k8s.io", *ns, check=False).stdout.strip()
                == "no"
            )
        )
    )


def _rules_of(admin: Kubectl, role: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = json.loads(admin("get", "clusterrole", role, "-o", "json").stdout)["rules"]
    return rules


def test_aggregating_roles_hold_the_rules_they_aggregate(admin: Kubectl, namespace: str) -> None:
    """As on a cluster, `kubectl get clusterrole edit -o yaml` lists what edit grants: the
    clusterrole-aggregation controller writes the selected roles' rules into `rules`."""
    edit = yaml.safe_load(admin("get", "clusterrole", "edit", "-o", "yaml").stdout)
    assert edit["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}
    ]
    granted = {
        (group, resource)
        for rule in edit["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert ("apps", "deployments") in granted and ("", "configmaps") in granted
    assert {rule_key(rule) for rule in _rules_of(admin, "view")} <= {rule_key(rule) for rule in edit["rules"]}

    name = f"widgets-edit-{namespace}-{pathlib.Path(admin.argv[0]).suffix.lstrip('.')}"
    widgets = {"apiGroups": ["example.dev"], "resources": ["widgets"], "verbs": ["get", "update"]}
    extra = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [widgets],
    }
    admin("apply", "-f", "-", stdin=json.dumps(extra))
    # edit takes the rule in, and admin (which aggregates edit) after it.
    asyncio.run(
        eventually(lambda: widgets in _rules_of(admin, "edit") and widgets in _rules_of(admin, "admin"))
    )
    assert widgets not in _rules_of(admin, "view")
    managers = json.loads(admin("get", "clusterrole", "edit", "-o", "json", "--show-managed-fields").stdout)
    assert "clusterrole-aggregation-controller" in {
        entry["manager"] for entry in managers["metadata"]["managedFields"]
    }

    admin("label", "clusterrole", name, "rbac.authorization.k8s.io/aggregate-to-edit-")
    asyncio.run(
        eventually(
            lambda: widgets not in _rules_of(admin, "edit") and widgets not in _rules_of(admin, "admin")
        )
    )
    admin("delete", "clusterrole", name)


def rule_key(rule: dict[str, Any]) -> str:
    return json.dumps(rule, sort_keys=True)


def test_a_service_account_token_authenticates_until_the_account_goes(
    admin: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    admin("create", "serviceaccount", "robot", *ns)
    token = admin("create", "token", "robot", *ns).stdout.strip()
    robot = [*ns, f"--token={token}"]
    user = f"system:serviceaccount:{namespace}:robot"
    whoami = json.loads(admin("auth", "whoami", "-o", "json", *robot).stdout)["status"]["userInfo"]
    assert whoami["username"] == user
    assert set(whoami["groups"]) == {
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    }
    assert admin("auth", "can-i", "list", "pods", *robot, check=False).stdout.strip() == "no"
    refused = admin("get", "pods", *robot, check=False)
    assert f'pods is forbidden: User "{user}" cannot list resource "pods" in API group ""' in refused.stderr
    # A RoleBinding to the account: view here, and still nothing elsewhere or beyond view.
    admin(
        "create",
        "rolebinding",
        "robot-view",
        "--clusterrole=view",
        f"--serviceaccount={namespace}:robot",
        *ns,
    )
    assert admin("auth", "can-i", "list", "pods", *robot).stdout.strip() == "yes"
    admin("get", "pods", *robot)
    assert admin("auth", "can-i", "delete", "pods", *robot, check=False).stdout.strip() == "no"
    assert (
        admin(
            "auth", "can-i", "list", "pods", "-n", "default", f"--token={token}", check=False
        ).stdout.strip()
        == "no"
    )
    # Bound to the account: once it is deleted, the token no longer authenticates.
    admin("delete", "serviceaccount", "robot", *ns)
    gone = admin("get", "pods", *robot, check=False)
    assert gone.returncode == 1 and "Unauthorized" in gone.stderr
    # A forged or tampered token authenticates nobody.
    head, payload, signature = token.split(".")
    assert admin("get", "pods", *ns, f"--token={head}.{payload}x.{signature}", check=False).returncode == 1


def test_token_requests_are_checked(api: Client, namespace: str) -> None:
    assert (
        api.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "short"}}
        ).status_code
        == 201
    )
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/short/token"
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 60},
    }
    refused = api.post(path, request)
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"][0]["field"] == "spec.expirationSeconds"
    request["spec"] = {"expirationSeconds": 900, "audiences": ["vault"]}
    issued = api.post(path, request)
    assert issued.status_code == 201, issued.text
    answer = issued.json()
    assert answer["kind"] == "TokenRequest" and answer["spec"]["audiences"] == ["vault"]
    assert answer["status"]["token"].count(".") == 2 and answer["status"]["expirationTimestamp"]
    missing = api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/nobody/token", request)
    assert missing.status_code == 404
    assert api.get(path).status_code == 405


def test_impersonation_needs_the_impersonate_verb(admin: Kubectl, alice: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    # The admin may be anyone: the request runs as them.
    as_bob = json.loads(admin("auth", "whoami", "-o", "json", "--as=bob", "--as-group=qa").stdout)
    assert as_bob["status"]["userInfo"] == {"username": "bob", "groups": ["qa", "system:authenticated"]}
    refused = admin("get", "pods", *ns, "--as=bob", check=False)
    assert (
        f'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "{namespace}"'
        in refused.stderr
    )
    robot = f"system:serviceaccount:{namespace}:robot"
    as_robot = json.loads(admin("auth", "whoami", "-o", "json", f"--as={robot}").stdout)["status"]["userInfo"]
    assert as_robot["groups"] == [
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    ]
    # Anyone else needs impersonate on the user (and each group) claimed.
    denied = alice("get", "pods", *ns, "--as=bob", check=False)
    assert (
        'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'
        in denied.stderr
    )
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"impersonate-bob-{namespace}-{pathlib.Path(admin.argv[0]).suffix.lstrip('.')}"},
        "rules": [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob"]}
        ],
    }
    admin("apply", "-f", "-", stdin=json.dumps(role))
    binding = role["metadata"]["name"]
    admin("create", "clusterrolebinding", binding, f"--clusterrole={binding}", "--user=alice")
    try:
        as_bob = json.loads(alice("auth", "whoami", "-o", "json", "--as=bob").stdout)
        assert as_bob["status"]["userInfo"]["username"] == "bob"
        still = alice("get", "pods", *ns, "--as=bob", "--as-group=qa", check=False)
        assert 'groups "qa" is forbidden: User "alice" cannot impersonate resource "groups"' in still.stderr
        other = alice("get", "pods", *ns, "--as=carol", check=False)
        assert 'users "carol" is forbidden: User "alice" cannot impersonate resource "users"' in other.stderr
    finally:
        admin("delete", "clusterrolebinding", binding)
        admin("delete", "clusterrole", binding)


def test_groups_without_a_user_are_refused(api: Client) -> None:
    answer = api.get("/api/v1/namespaces/default/configmaps", headers={"Impersonate-Group": "qa"})
    assert answer.status_code == 400
    assert answer.json()["message"] == "requested ['qa'] without impersonating a user"


def test_can_i_list_shows_the_rules_bound_here(admin: Kubectl, alice: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    before = alice("auth", "can-i", "--list", *ns).stdout
    assert "selfsubjectaccessreviews.authorization.k8s.io" in before  # system:basic-user, for everyone
    assert "deployments.apps" not in before
    admin("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", *ns)
    rows = {
        line.split()[0]: line
        for line in alice("auth", "can-i", "--list", *ns).stdout.splitlines()[1:]
        if line.strip()
    }
    assert "create" in rows["deployments.apps"] and "delete" in rows["deployments.apps"]
    assert "list" in rows["pods"]
    assert not any(name.startswith("rolebindings") for name in rows)
    elsewhere = alice("auth", "can-i", "--list", "-n", "default").stdout
    assert "deployments.apps" not in elsewhere
    assert "*.*" in admin("auth", "can-i", "--list", *ns).stdout  # cluster-admin, through system:masters


def test_roles_and_bindings_are_validated_as_upstream(admin: Kubectl, api: Client, namespace: str) -> None:
    ns = ["-n", namespace]
    bad_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "bad", "namespace": namespace},
        "rules": [
            {"resources": ["pods"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
        ],
    }
    refused = admin("apply", "-f", "-", stdin=json.dumps(bad_role), check=False)
    assert refused.returncode != 0
    assert (
        'The Role "bad" is invalid: \n'
        "* rules[0].apiGroups: Required value: resource rules must supply at least one api group\n"
        '* rules[1].nonResourceURLs: Invalid value: ["/metrics"]: namespaced rules cannot apply to '
        "non-resource URLs" in refused.stderr
    )
    assert api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/bad").status_code == 404

    # A binding written without the RBAC group gets it; its roleRef never changes.
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "viewers", "namespace": namespace},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "auditors"}],
    }
    admin("apply", "-f", "-", stdin=json.dumps(binding))
    stored = json.loads(admin("get", "rolebinding", "viewers", "-o", "json", *ns).stdout)
    assert stored["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert stored["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "auditors"}
    ]
    binding["roleRef"]["name"] = "edit"
    changed = admin("apply", "-f", "-", stdin=json.dumps(binding), check=False)
    assert changed.returncode != 0
    assert (
        'roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"edit"}: '
        "cannot change roleRef" in changed.stderr
    )
    stored = json.loads(admin("get", "rolebinding", "viewers", "-o", "json", *ns).stdout)
    assert stored["roleRef"]["name"] == "view"


def test_a_service_account_subject_is_matched_in_its_own_namespace(api: Client, namespace: str) -> None:
    """A RoleBinding in this namespace naming ServiceAccount ``robot`` of namespace ``other``
    grants ``system:serviceaccount:other:robot``, not this namespace's ``robot``; one that names
    no namespace means the binding's (upstream's ``appliesToUser``)."""
    role = {
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }
    assert (
        api.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", role).status_code == 201
    )

    def bind(name: str, subject: dict[str, str]) -> None:
        binding = {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [subject],
        }
        answer = api.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", binding)
        assert answer.status_code == 201, answer.text

    def allowed(user: str) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "resourceAttributes": {"namespace": namespace, "verb": "get", "resource": "configmaps"},
            },
        }
        answer = api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        assert answer.status_code == 201, answer.text
        return bool(answer.json()["status"]["allowed"])

    bind("other-robot", {"kind": "ServiceAccount", "name": "robot", "namespace": "other"})
    assert allowed("system:serviceaccount:other:robot")
    assert not allowed(f"system:serviceaccount:{namespace}:robot")
    assert not allowed(f"system:serviceaccount:{namespace}:helper")
    bind("own-helper", {"kind": "ServiceAccount", "name": "helper"})  # no namespace: the binding's
    assert allowed(f"system:serviceaccount:{namespace}:helper")
    assert not allowed("system:serviceaccount:other:helper")


def test_token_lifetimes_are_capped_and_a_bound_token_ends_with_its_object(
    api: Client, namespace: str
) -> None:
    """As kube-apiserver with --service-account-max-token-expiration: a TokenRequest for 1e9
    seconds (until 2058) gets the maximum (two days here). A token bound to a Secret (or Pod, or
    Node) stops authenticating when that object is deleted, at once (kube-apiserver would let
    it work until its cached success expires, 10 s)."""
    assert (
        api.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "bound"}}
        ).status_code
        == 201
    )
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/bound/token"

    def request(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}

    def authenticated(token: str) -> bool:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        return bool(
            api.post("/apis/authentication.k8s.io/v1/tokenreviews", review)
            .json()["status"]
            .get("authenticated")
        )

    long = api.post(path, request(expirationSeconds=1_000_000_000)).json()
    assert long["spec"]["expirationSeconds"] == 172800
    expires = datetime.fromisoformat(long["status"]["expirationTimestamp"].replace("Z", "+00:00"))
    assert expires - datetime.now(UTC) <= timedelta(seconds=172800 + 5)

    secret = api.post(f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "holder"}}).json()
    ref = {"kind": "Secret", "apiVersion": "v1", "name": "holder"}
    issued = api.post(path, request(boundObjectRef=ref))
    assert issued.status_code == 201, issued.text
    assert issued.json()["spec"]["boundObjectRef"] == {**ref, "uid": secret["metadata"]["uid"]}
    token = issued.json()["status"]["token"]
    assert authenticated(token)

    def status_as_bearer() -> int:
        # Authenticated and not allowed (403), or not authenticated (401); twice, so that the
        # second is answered from the server's reuse of the first's success.
        path = f"/api/v1/namespaces/{namespace}/pods"
        codes = {api.get(path, headers={"Authorization": f"Bearer {token}"}).status_code for _ in range(2)}
        assert len(codes) == 1
        return codes.pop()

    assert status_as_bearer() == 403
    assert api.delete(f"/api/v1/namespaces/{namespace}/secrets/holder").status_code == 200
    assert not authenticated(token)  # its object is gone: so is the token
    assert status_as_bearer() == 401  # at once, though its success was reused a moment ago

    refused = api.post(path, request(boundObjectRef={"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}))
    assert refused.status_code == 400
    assert refused.json()["message"] == "cannot bind token to object of type v1, Kind=ConfigMap"
    assert api.post(path, request(boundObjectRef=ref)).status_code == 404  # deleted
    api.post(f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "holder"}})
    stale = api.post(path, request(boundObjectRef={**ref, "uid": secret["metadata"]["uid"]}))
    assert stale.status_code == 409 and "does not match the UID in record" in stale.json()["message"]
