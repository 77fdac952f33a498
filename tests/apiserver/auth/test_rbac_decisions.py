"""The server's authorizer keeps its decisions until an RBAC object is written: every answer is
the one a fresh look at the roles gives, before and after the roles change."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.auth.rbacauthorizer import Attributes, RBACAuthorizer
from kubeloop.apiserver.userinfo import UserInfo
from tests.conftest import Client, ServerThread, start_server

_VERBS = ["get", "list", "create", "patch", "delete"]
_RESOURCES = ["pods", "configmaps", "pods/log", "*", "*/status"]
_NAMES = ["a", "b"]

_rules = st.lists(
    st.fixed_dictionaries(
        {
            "apiGroups": st.sampled_from([[""], ["*"], ["apps"]]),
            "verbs": st.lists(st.sampled_from([*_VERBS, "*"]), min_size=1, max_size=2, unique=True),
            "resources": st.lists(st.sampled_from(_RESOURCES), min_size=1, max_size=2, unique=True),
        },
        optional={"resourceNames": st.lists(st.sampled_from(_NAMES), min_size=1, max_size=2, unique=True)},
    ),
    max_size=3,
)
_questions = st.lists(
    st.builds(
        Attributes,
        verb=st.sampled_from(_VERBS),
        group=st.sampled_from(["", "apps"]),
        resource=st.sampled_from(["pods", "configmaps", "secrets"]),
        subresource=st.sampled_from(["", "log", "status"]),
        namespace=st.sampled_from(["team", "other"]),
    ),
    min_size=1,
    max_size=6,
)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    server = start_server()
    yield server
    server.stop()


def _role_and_binding(api: Client, rules: list[dict[str, Any]]) -> None:
    base = "/apis/rbac.authorization.k8s.io/v1/namespaces/team"
    api.delete(f"{base}/roles/robot")
    assert api.post(f"{base}/roles", {"metadata": {"name": "robot"}, "rules": rules}).status_code == 201


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=_rules, after=_rules, questions=_questions)
def test_kept_decisions_are_those_of_a_fresh_look(
    server: ServerThread, before: list[dict[str, Any]], after: list[dict[str, Any]], questions: list[Attributes]
) -> None:
    """A Role of random rules (some limited to resource names) bound to a ServiceAccount: the
    remembering authorizer answers each question, of each name, as one that looks every time,
    asked twice (the second answer a kept one), and again after the Role's rules are replaced."""
    api = Client(server)
    if api.get("/api/v1/namespaces/team").status_code == 404:
        api.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
        api.post(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
            {
                "metadata": {"name": "robot"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "robot"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}],
            },
        )
    registry = server.server.registry
    assert registry is not None
    remembering = RBACAuthorizer(registry.store, server.server.catalog, remember=True)
    fresh = RBACAuthorizer(registry.store, server.server.catalog)
    user = UserInfo("system:serviceaccount:team:robot", ("system:serviceaccounts", "system:authenticated"))

    async def answers(authorizer: RBACAuthorizer) -> list[bool]:
        # Each question of every name in turn: a decision kept for one name must not answer
        # for another unless no rule limited to names could allow it.
        return [
            authorizer.allowed(user, dataclasses.replace(question, name=name))
            for question in questions
            for name in ["", *_NAMES, "c"]
        ]

    for rules in (before, after):
        _role_and_binding(api, rules)
        expected = server.call(answers(fresh))
        assert server.call(answers(remembering)) == expected
        assert server.call(answers(remembering)) == expected  # kept
