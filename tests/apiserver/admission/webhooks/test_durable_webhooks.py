"""Webhooks, conversion and policies on the durable server (``kubeloop apiserver --data-dir``)
across a SIGKILL, driven with kubectl 1.27 and 1.33: the configurations, the CRD's conversion
stanza and the policies are read back from disk and enforced at once, the stored version of a
converted object is what was written before the kill, and a huge or deeply nested body sent
through a webhook and a conversion is answered, not a 500."""

from __future__ import annotations

import json
import pathlib
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apiserver.admission.webhooks.webhookserver import WebhookServer, deny
from tests.apiserver.apiextensions.test_conversion_webhooks import (
    GROUP,
    V1ALPHA1,
    convert_widgets,
    widget_crd,
)
from tests.apiserver.storage.test_durability import apiserver, session_for
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
OLD_AND_NEW = [k for k in KUBECTLS if k.name.endswith(("1.27", "1.33"))] or KUBECTLS[:1]


@pytest.fixture
def hooks() -> Iterator[WebhookServer]:
    server = WebhookServer().start()
    yield server
    server.stop()


# Durability is what this proves; the kubectls meet webhooks in tests/apiserver/webhooks.
@pytest.mark.parametrize("binary", OLD_AND_NEW[-1:], ids=[k.name for k in OLD_AND_NEW[-1:]])
def test_webhooks_conversion_and_policies_survive_a_sigkill(
    binary: pathlib.Path, tmp_path: pathlib.Path, hooks: WebhookServer
) -> None:
    data = tmp_path / "data"
    kubectl = Kubectl(binary, data / "kubeconfig", tmp_path)
    hooks.handlers["convert"] = convert_widgets
    hooks.handlers["deny"] = deny("no ConfigMap named forbidden")
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "durable"},
        "webhooks": [
            {
                "name": "durable.hooks.kubeloop.test",
                "clientConfig": hooks.client_config("deny"),
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "objectSelector": {"matchLabels": {"name": "forbidden"}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }  # fmt: skip
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "small.example.com"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]},
            "validations": [{"expression": "!has(object.spec.replicas) || object.spec.replicas <= 10", "message": "at most 10"}],
        },
    }  # fmt: skip
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "small-binding"},
        "spec": {"policyName": "small.example.com", "validationActions": ["Deny"]},
    }
    with apiserver(data) as (proc, url):
        session = session_for(data)
        for path, body in (
            (f"{ADMISSION}/validatingwebhookconfigurations", webhook),
            (f"{ADMISSION}/validatingadmissionpolicies", policy),
            (f"{ADMISSION}/validatingadmissionpolicybindings", binding),
            (CRDS, widget_crd(hooks, "convert")),
        ):
            made = session.post(url + path, json=body, timeout=30)
            assert made.status_code == 201, made.text
        kubectl("create", "-f", "-", stdin=json.dumps(_widget("before", V1ALPHA1, size="4")))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    with apiserver(data) as (_proc, url):
        session = session_for(data)
        # What was written before the kill is stored in v1 and read back in either version.
        as_v1 = json.loads(
            kubectl("get", f"widgets.v1.{GROUP}", "before", "-n", "default", "-o", "json").stdout
        )
        assert as_v1["spec"] == {"replicas": 4}
        as_alpha = json.loads(
            kubectl("get", f"widgets.v1alpha1.{GROUP}", "before", "-n", "default", "-o", "json").stdout
        )
        assert as_alpha["spec"] == {"size": "4"}
        # The policy names v1: a v1alpha1 write is judged after its conversion to v1 (Equivalent).
        refused = kubectl(
            "create", "-f", "-", stdin=json.dumps(_widget("many", V1ALPHA1, size="40")), check=False
        )
        assert "denied request: at most 10" in refused.stderr
        # The webhook configuration is called again at once.
        refused = kubectl(
            "create", "configmap", "x", "-n", "default", "--dry-run=server", "-o", "name", check=False
        )
        assert refused.returncode == 0, refused.stderr
        labelled = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "f", "labels": {"name": "forbidden"}},
        }
        refused = kubectl("create", "-n", "default", "-f", "-", stdin=json.dumps(labelled), check=False)
        assert "denied the request: no ConfigMap named forbidden" in refused.stderr

        # Hostile bodies through a conversion: huge and deeply nested, answered without a 500.
        huge = _widget("huge", V1ALPHA1, size="3")
        huge["metadata"]["annotations"] = {"blob": "x" * 200_000}
        made = session.post(url + f"/apis/{GROUP}/v1alpha1/namespaces/default/widgets", json=huge, timeout=60)
        assert made.status_code == 201, made.text[:300]
        deep = '{"a":' * 5_000 + '"leaf"' + "}" * 5_000
        nested = json.dumps(_widget("nested", V1ALPHA1, size="1")).replace(
            '"size": "1"', f'"size": "1", "extra": {deep}'
        )
        answered = session.post(
            url + f"/apis/{GROUP}/v1alpha1/namespaces/default/widgets",
            data=nested,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert 400 <= answered.status_code < 500, answered.text[:300]


def _widget(name: str, api_version: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
