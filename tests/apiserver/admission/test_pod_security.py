"""Pod Security admission, as kube-apiserver enforces it, driven by kubectl over HTTPS on a
simulating server of the module's own: a namespace's ``pod-security.kubernetes.io/`` labels
refuse pods that do not meet the level in upstream's words (403), warn of them (kubectl prints
``Warning:``), warn of a Deployment's template without refusing it while its ReplicaSet's pods
are refused (FailedCreate, as a cluster's controllers are), refuse a namespace whose label names
no level (422 naming the label), warn of existing pods when enforce is tightened, and let a pod
update that changes no image through. The checks' texts and order are upstream's."""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.admission.podsecurity import standards
from kubeloop.apiserver.admission.podsecurity.namespacepolicy import policy_of
from kubeloop.apiserver.admission.podsecurity.standards import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    evaluate,
    forbidden_detail,
)
from kubeloop.testing import ServerThread, SimulationOptions, start_server
from tests.apiserver.test_kubectl import KUBECTLS
from tests.apiserver.test_kubectl import Kubectl as VersionedKubectl

LATEST = 37
NAIVE_RESTRICTED = (
    'allowPrivilegeEscalation != false (container "naive" must set securityContext.allowPrivilegeEscalation=false), '
    'unrestricted capabilities (container "naive" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "naive" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "naive" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost")'
)
COMPLIANT_CONTAINER = {
    "name": "app",
    "image": "ghcr.io/example/app:1",
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
}
COMPLIANT_POD = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [COMPLIANT_CONTAINER],
}


@pytest.fixture(scope="module", params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def versioned(request: pytest.FixtureRequest) -> Iterator[tuple[ServerThread, pathlib.Path]]:
    """A server of its own per kubectl version (the tests name their namespaces)."""
    server = start_server(simulate=True, simulation=SimulationOptions(pod_start_seconds=0.05))
    yield server, request.param
    server.stop()


class Kubectl(VersionedKubectl):
    """kubectl whose failures are the tests' to read (``check`` off)."""

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return super().__call__(*args, stdin=stdin, check=check, timeout=timeout)

    def apply(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self("apply", "-f", "-", stdin=yaml.safe_dump(obj))


@pytest.fixture
def kubectl(versioned: tuple[ServerThread, pathlib.Path], tmp_path: pathlib.Path) -> Kubectl:
    server, binary = versioned
    return Kubectl(binary, server.kubeconfig, tmp_path)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    full = {f"pod-security.kubernetes.io/{key.replace('_', '-')}": value for key, value in labels.items()}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": full}}


def pod(name: str, ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_enforce_refuses_a_pod_in_upstreams_words_and_takes_a_compliant_one(kubectl: Kubectl) -> None:
    assert kubectl.apply(namespace("strict", enforce="restricted")).returncode == 0
    refused = kubectl("run", "naive", "--image=nginx:1.27", "-n", "strict")
    assert refused.returncode == 1
    assert refused.stderr == (
        'Error from server (Forbidden): pods "naive" is forbidden: violates PodSecurity "restricted:latest": '
        f"{NAIVE_RESTRICTED}\n"
    )
    assert kubectl("get", "pod", "naive", "-n", "strict").returncode == 1  # nothing written
    created = kubectl.apply(pod("fine", "strict", COMPLIANT_POD))
    assert created.returncode == 0 and created.stderr == "", created.stderr


def test_baseline_names_each_violation_in_upstreams_order(kubectl: Kubectl) -> None:
    assert kubectl.apply(namespace("base", enforce="baseline", enforce_version="v1.33")).returncode == 0
    spec = {
        "hostNetwork": True,
        "containers": [
            {"name": "b", "image": "busybox:1", "securityContext": {"privileged": True},
             "ports": [{"containerPort": 80, "hostPort": 8080}]},
            {"name": "c", "image": "busybox:1", "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}},
        ],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    }  # fmt: skip
    refused = kubectl.apply(pod("loose", "base", spec))
    assert refused.returncode == 1
    assert (
        'pods "loose" is forbidden: violates PodSecurity "baseline:v1.33": '
        'non-default capabilities (container "c" must not include "NET_ADMIN" in securityContext.capabilities.add), '
        "host namespaces (hostNetwork=true), "
        'hostPath volumes (volume "root"), '
        'hostPort (container "b" uses hostPort 8080), '
        'privileged (container "b" must not set securityContext.privileged=true)'
    ) in refused.stderr, refused.stderr
    # The same pod meets privileged; restricted (warn) adds its own checks only as a warning.
    assert kubectl.apply(namespace("open", warn="baseline")).returncode == 0
    warned = kubectl.apply(pod("loose", "open", spec))
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.startswith(
        'Warning: would violate PodSecurity "baseline:latest": non-default capabilities'
    )


def test_a_deployment_is_warned_of_and_its_pods_are_refused(kubectl: Kubectl) -> None:
    assert kubectl.apply(namespace("teams", enforce="restricted")).returncode == 0
    created = kubectl("create", "deployment", "naive", "--image=nginx:1.27", "-n", "teams")
    assert created.returncode == 0
    # Without a warn label, warn takes enforce's level: the template is warned of, not refused.
    assert created.stderr == (
        'Warning: would violate PodSecurity "restricted:latest": '
        + NAIVE_RESTRICTED.replace('"naive"', '"nginx"')
        + "\n"
    )
    waited = kubectl("wait", "--for=condition=ReplicaFailure", "replicaset", "-l", "app=naive", "-n", "teams",
                     "--timeout=30s")  # fmt: skip
    assert waited.returncode == 0, waited.stderr
    events = kubectl("get", "events", "-n", "teams", "--field-selector", "reason=FailedCreate", "-o", "json")
    messages = [event["message"] for event in json.loads(events.stdout)["items"]]
    assert (
        messages
        and 'is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation' in messages[0]
    )
    assert json.loads(kubectl("get", "pods", "-n", "teams", "-o", "json").stdout)["items"] == []


def test_a_namespace_label_naming_no_level_is_refused(kubectl: Kubectl) -> None:
    refused = kubectl.apply(namespace("typo", enforce="strict", warn_version="1.30"))
    assert refused.returncode == 1
    assert refused.stderr == (
        'The Namespace "typo" is invalid: \n'
        '* metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, '
        "baseline, restricted\n"
        '* metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.30": must be "latest" or '
        '"v1.x"\n'
    )
    assert kubectl("get", "namespace", "typo").returncode == 1
    assert kubectl.apply(namespace("later")).returncode == 0
    relabel = kubectl("label", "namespace", "later", "pod-security.kubernetes.io/audit=everything")
    assert relabel.returncode == 1
    assert 'Invalid value: "everything": must be one of privileged, baseline, restricted' in relabel.stderr


def test_tightening_enforce_warns_of_existing_pods_and_updates_pass(kubectl: Kubectl) -> None:
    assert kubectl.apply(namespace("legacy")).returncode == 0
    for name in ("one", "two", "three"):
        assert kubectl("run", name, "--image=nginx:1.27", "-n", "legacy").returncode == 0
    assert kubectl.apply(pod("fine", "legacy", COMPLIANT_POD)).returncode == 0
    as_root = {**COMPLIANT_POD, "securityContext": {**COMPLIANT_POD["securityContext"], "runAsUser": 0}}  # type: ignore[dict-item]
    assert kubectl.apply(pod("alpha", "legacy", as_root)).returncode == 0
    tightened = kubectl("label", "namespace", "legacy", "pod-security.kubernetes.io/enforce=restricted")
    assert tightened.returncode == 0
    assert tightened.stderr == (  # one line per set of reasons, the lines sorted as upstream sorts them
        'Warning: existing pods in namespace "legacy" violate the new PodSecurity enforce level "restricted:latest"\n'
        "Warning: alpha: runAsUser=0\n"
        "Warning: one (and 2 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, "
        "runAsNonRoot != true, seccompProfile\n"
    )
    # Existing pods stay; an update that changes no image is not checked, one that does is.
    assert kubectl("label", "pod", "one", "-n", "legacy", "touched=yes").returncode == 0
    image = kubectl("set", "image", "pod/one", "one=nginx:1.28", "-n", "legacy")
    assert image.returncode == 1 and 'violates PodSecurity "restricted:latest"' in image.stderr


def test_texts_of_the_checks_that_read_more_than_one_place() -> None:
    spec = {
        "securityContext": {"runAsNonRoot": False, "seccompProfile": {"type": "Unconfined"},
                            "sysctls": [{"name": "kernel.msgmax"}, {"name": "net.ipv4.tcp_rmem"}]},
        "initContainers": [{"name": "init", "securityContext": {"runAsUser": 0, "procMount": "Unmasked"}}],
        "containers": [
            {"name": "a", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
                                              "seLinuxOptions": {"type": "spc_t", "user": "root"}}},
            {"name": "b", "readinessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}},
        ],
        "volumes": [{"name": "n", "nfs": {"server": "x", "path": "/"}}, {"name": "c", "configMap": {"name": "x"}}],
    }  # fmt: skip
    annotations = {"container.apparmor.security.beta.kubernetes.io/a": "unconfined"}
    found = forbidden_detail(evaluate(RESTRICTED, LATEST, {"annotations": annotations}, spec))
    assert found == (
        "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/a="unconfined""), '
        'probe or lifecycle host (container "b" uses probe or lifecycle host "10.0.0.1"), '
        'seLinuxOptions (container "a" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set), '
        "forbidden sysctls (kernel.msgmax), "
        'allowPrivilegeEscalation != false (containers "init", "b" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (containers "init", "b" must set securityContext.capabilities.drop=["ALL"]; '
        'container "a" must not include "SYS_ADMIN" in securityContext.capabilities.add), '
        'procMount (container "init" must not set securityContext.procMount to "Unmasked"), '
        'restricted volume types (volume "n" uses restricted volume type "nfs"), '
        "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), "
        'runAsUser=0 (container "init" must not set runAsUser=0), '
        'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'
    )
    # Older versions: no probe-host check before v1.34, fewer safe sysctls before v1.32.
    older = forbidden_detail(evaluate(RESTRICTED, 31, {}, spec))
    assert (
        "probe or lifecycle host" not in older
        and "forbidden sysctls (kernel.msgmax, net.ipv4.tcp_rmem)" in older
    )
    # A pod in a user namespace (hostUsers: false) may run as uid 0 from v1.35 on.
    user_namespace = {**spec, "hostUsers": False}
    assert "runAsUser=0" not in forbidden_detail(evaluate(RESTRICTED, LATEST, {}, user_namespace))
    assert "runAsUser=0" in forbidden_detail(evaluate(RESTRICTED, 34, {}, user_namespace))


def test_labels_read_as_upstreams_policy_to_evaluate() -> None:
    policy, problems = policy_of({"pod-security.kubernetes.io/enforce": "baseline"})
    assert (str(policy.enforce), str(policy.warn), str(policy.audit), problems) == (
        "baseline:latest", "baseline:latest", "privileged:latest", [],
    )  # fmt: skip
    policy, problems = policy_of({"pod-security.kubernetes.io/enforce": "bogus"})
    assert str(policy.enforce) == "restricted:latest" and len(problems) == 1  # fails closed
    policy, _ = policy_of(
        {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "privileged"}
    )
    assert str(policy.warn) == "privileged:latest"  # an explicit warn label stands


security_contexts = st.fixed_dictionaries(
    {},
    optional={
        "allowPrivilegeEscalation": st.booleans(),
        "privileged": st.booleans(),
        "runAsNonRoot": st.booleans(),
        "runAsUser": st.sampled_from([0, 1000]),
        "seccompProfile": st.fixed_dictionaries({"type": st.sampled_from(["RuntimeDefault", "Unconfined", "Localhost"])}),
        "capabilities": st.fixed_dictionaries(
            {}, optional={"drop": st.lists(st.sampled_from(["ALL", "NET_RAW"]), max_size=2),
                          "add": st.lists(st.sampled_from(["NET_BIND_SERVICE", "CHOWN", "SYS_ADMIN"]), max_size=2)}),
        "procMount": st.sampled_from(["Default", "Unmasked"]),
    },
)  # fmt: skip
pod_specs = st.fixed_dictionaries(
    {"containers": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]), "securityContext": security_contexts}), min_size=1, max_size=2)},
    optional={
        "securityContext": security_contexts,
        "hostNetwork": st.booleans(),
        "hostUsers": st.booleans(),
        "volumes": st.lists(st.sampled_from([{"name": "h", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}]), max_size=2),
    },
)  # fmt: skip


@given(pod_specs)
@settings(max_examples=300, deadline=None)
def test_the_levels_nest(spec: dict[str, Any]) -> None:
    """privileged allows every pod; what restricted allows, baseline allows; and any pod refused
    names at least one reason."""
    assert evaluate(PRIVILEGED, LATEST, {}, spec) == []
    restricted, baseline = evaluate(RESTRICTED, LATEST, {}, spec), evaluate(BASELINE, LATEST, {}, spec)
    if not restricted:
        assert baseline == []
    assert all(violation.reason and violation.detail for violation in [*restricted, *baseline])


def _container(**extra: Any) -> dict[str, Any]:
    return {"name": "app", "image": "nginx", **extra}


#: One pod per baseline control, violating that control alone: (check id, pod spec, reason, detail).
BASELINE_VIOLATIONS = [
    ("appArmorProfile", {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}, "containers": [_container()]},
     "forbidden AppArmor profile", 'pod must not set AppArmor profile type to "Unconfined"'),
    ("capabilities_baseline", {"containers": [_container(securityContext={"capabilities": {"add": ["NET_ADMIN"]}})]},
     "non-default capabilities", 'container "app" must not include "NET_ADMIN" in securityContext.capabilities.add'),
    ("hostNamespaces", {"hostNetwork": True, "containers": [_container()]}, "host namespaces", "hostNetwork=true"),
    ("hostNamespaces", {"hostPID": True, "containers": [_container()]}, "host namespaces", "hostPID=true"),
    ("hostNamespaces", {"hostIPC": True, "containers": [_container()]}, "host namespaces", "hostIPC=true"),
    ("hostPathVolumes", {"volumes": [{"name": "h", "hostPath": {"path": "/etc"}}], "containers": [_container()]},
     "hostPath volumes", 'volume "h"'),
    ("hostPorts", {"containers": [_container(ports=[{"containerPort": 80, "hostPort": 8080}])]},
     "hostPort", 'container "app" uses hostPort 8080'),
    ("hostProbesAndHostLifecycle", {"containers": [_container(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}})]},
     "probe or lifecycle host", 'container "app" uses probe or lifecycle host "10.0.0.1"'),
    ("privileged", {"containers": [_container(securityContext={"privileged": True})]},
     "privileged", 'container "app" must not set securityContext.privileged=true'),
    ("procMount", {"containers": [_container(securityContext={"procMount": "Unmasked"})]},
     "procMount", 'container "app" must not set securityContext.procMount to "Unmasked"'),
    ("seLinuxOptions", {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}, "containers": [_container()]},
     "seLinuxOptions", 'pod set forbidden securityContext.seLinuxOptions: type "spc_t"'),
    ("seccompProfile_baseline", {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [_container()]},
     "seccompProfile", 'pod must not set securityContext.seccompProfile.type to "Unconfined"'),
    ("sysctls", {"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "0"}, {"name": "net.core.somaxconn", "value": "1"}]},
                 "containers": [_container()]},
     "forbidden sysctls", "net.core.somaxconn"),
    ("windowsHostProcess", {"securityContext": {"windowsOptions": {"hostProcess": True}}, "containers": [_container()]},
     "hostProcess", "pod must not set securityContext.windowsOptions.hostProcess=true"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("check", "spec", "reason", "detail"),
    BASELINE_VIOLATIONS,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(BASELINE_VIOLATIONS)],
)
def test_each_baseline_control_alone_refuses_a_pod(
    check: str, spec: dict[str, Any], reason: str, detail: str
) -> None:
    """A pod that breaks one baseline control and nothing else is refused by baseline for that
    control alone, in upstream's words (each host namespace on its own)."""
    [violation] = standards.evaluate(standards.BASELINE, 37, {"name": "p"}, spec)
    assert (violation.reason, violation.detail) == (reason, detail)
    compliant = (
        {**spec, "hostNetwork": False, "hostPID": False, "hostIPC": False}
        if check == "hostNamespaces"
        else None
    )
    if compliant is not None:
        assert standards.evaluate(standards.BASELINE, 37, {"name": "p"}, compliant) == []


def test_the_baseline_cases_cover_every_baseline_control() -> None:
    covered = {case[0] for case in BASELINE_VIOLATIONS}
    assert covered == {check.id for check in standards.checks_of(standards.BASELINE, 37)}
