"""The files ``kubeloop init``, ``create api`` and ``create webhook`` write, as templates (``$name``
filled in by ``string.Template``): a kubebuilder project's layout in Python.
"""

from __future__ import annotations

PYPROJECT = """\
[project]
name = "$name"
version = "0.1.0"
description = "A Kubernetes operator written with kubeloop."
requires-python = ">=3.11"
# kubeloop has no release yet: install it from its checkout first (pip install /path/to/kubeloop).
dependencies = ["kubeloop"]

[project.optional-dependencies]
test = ["pytest", "pytest-asyncio"]

[tool.setuptools]
packages = { find = { include = ["$package*"] } }
py-modules = ["main"]

[tool.kubeloop]
# kubeloop create api --group web ... makes the API group web.$domain (kubebuilder's --domain).
domain = "$domain"

[tool.ruff]
line-length = 110

[tool.ruff.lint]
select = ["E", "W", "F", "I"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
# The test kit's kube_operator fixture runs this setup; the test server simulates workloads.
kubeloop_setup = "main:setup"
"""

MAIN = '''\
"""The $name operator: ``kubeloop run .`` runs it (``make run``: on an embedded API server).

The models imported here are the operator's kinds: ``kubeloop crd .`` prints their CRDs.
"""

from $package import setup

__all__ = ["setup"]
'''

PACKAGE_INIT = '''\
"""$name: its kinds (``api/``), their controllers (``controllers/``) and admission webhooks
(``webhooks/``)."""

import kubeloop

from $package import controllers, webhooks


def setup(manager: kubeloop.Manager) -> None:
    """Add the operator's controllers and webhooks to ``manager`` (what ``kubeloop run`` calls)."""
    controllers.setup(manager)
    webhooks.setup(manager)
'''

WEBHOOKS_INIT = '''\
"""The operator's admission webhooks, one module per kind (``kubeloop create webhook`` adds them)."""

import kubeloop


def setup(manager: kubeloop.Manager) -> None:
    """Register every webhook with ``manager``'s webhook server."""
    $setup_marker
'''

WEBHOOK = '''\
"""Admission webhooks of ${kind}s: $summary.

kube-apiserver (or the embedded one) calls them on every write of a $kind; ``kubeloop webhook .``
prints the configurations that make it do so (``make manifests``: config/webhook/).
"""

import kubeloop
from kubeloop import field

from $package.api.$version import $kind


$classes
def setup(manager: kubeloop.Manager) -> None:
    builder = kubeloop.WebhookBuilder(manager).for_($kind)
    builder$with_calls.complete()
'''

DEFAULTER = '''\
class ${kind}Defaulter:
    """Labels every $kind with the app it runs (what the controller's Deployment selects by)."""

    def default(self, $lower: $kind) -> None:
        labels = dict($lower.metadata.labels or {})
        labels.setdefault("app.kubernetes.io/name", "$lower")
        $lower.metadata.labels = labels

'''

VALIDATOR = '''\
class ${kind}Validator:
    """An image must name its version: without a tag it is refused, ``:latest`` is warned about."""

    def validate_create(self, $lower: $kind) -> list[str]:
        image = $lower.spec.image
        if ":" not in image.rsplit("/", 1)[-1]:
            raise kubeloop.webhook.invalid(
                $lower, field.invalid("spec.image", image, "must name a tag, e.g. nginx:1.27")
            )
        if image.endswith(":latest"):
            return ["spec.image: a :latest image changes under you; pin a version"]
        return []

    def validate_update(self, old: $kind, new: $kind) -> list[str]:
        return self.validate_create(new)

    def validate_delete(self, $lower: $kind) -> None:
        return None

'''

WEBHOOK_TEST = '''\
"""The $kind webhooks, called by the embedded API server as kube-apiserver calls them
(``kube_operator`` installs the configurations for each test)."""

import kubeloop
${imports}
from $package.api.$version import $kind


$tests
'''

DEFAULTER_TEST = """\
async def test_a_${lower}_is_labelled(
    kube_operator: kubeloop.Manager, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    created = await kube_client.create(
        $kind.model_validate({"metadata": {"name": "labelled"}, "spec": {"image": "nginx:1.27"}}),
        namespace=kube_namespace,
    )
    assert (created.metadata.labels or {})["app.kubernetes.io/name"] == "$lower"

"""

VALIDATOR_TEST = """\
async def test_an_image_without_a_tag_is_refused(
    kube_operator: kubeloop.Manager, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    untagged = $kind.model_validate({"metadata": {"name": "untagged"}, "spec": {"image": "nginx"}})
    with pytest.raises(kubeloop.errors.Invalid) as refused:
        await kube_client.create(untagged, namespace=kube_namespace)
    assert refused.value.causes[0].field == "spec.image"
    assert "must name a tag" in refused.value.causes[0].message

"""

API_INIT = '''\
"""The operator's kinds, one package per API version (``kubeloop create api`` adds them)."""
'''

CONTROLLERS_INIT = '''\
"""The operator's controllers, one module per kind (``kubeloop create api`` adds them)."""

import kubeloop


def setup(manager: kubeloop.Manager) -> None:
    """Add every controller to ``manager``."""
    $setup_marker
'''

TESTS_CONFTEST = '''\
"""The operator's tests run against kubeloop's embedded API server (the ``kube_*`` fixtures of
kubeloop's pytest plugin): no cluster, no binaries. See ``[tool.pytest.ini_options]``."""
'''

DOCKERFILE = """\
# The operator's image: make docker-build (kubeloop's wheel goes into dist/ first).
FROM python:3.12-slim
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir --find-links dist . && useradd --uid 65532 --no-create-home operator
USER 65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ENTRYPOINT ["kubeloop"]
CMD ["run", "/app", "--leader-elect", "--leader-election-id=$name"]
"""

MAKEFILE = """\
IMG ?= $name:dev
PYTHON ?= python3
# Where kubeloop is installed from: it has no release yet, so the kubeloop that ran init.
KUBELOOP ?= $kubeloop
# The operator's environment: .venv, made on first use with kubeloop and what pyproject.toml
# lists (its test extra too). VENV=path on the command line uses an environment as it is.
VENV ?= .venv
BIN := $$(VENV)/bin
# Packages go in with uv: the one on PATH (kubeloop's own environment has one), else one installed
# into .venv by its pip. uv reads no pip.conf: an index of your own goes in UV_INDEX_URL /
# UV_EXTRA_INDEX_URL; it trusts the system's certificates. Files are hard-linked from its cache.
UV := $$(or $$(shell command -v uv 2>/dev/null),$$(BIN)/uv)
INSTALL := UV_NATIVE_TLS=1 $$(UV) pip install --quiet --python $$(BIN)/python --compile-bytecode
ifeq ($$(origin VENV),file)
ENVIRONMENT := $$(VENV)/.installed
endif

.PHONY: run test manifests deploy undeploy docker-build

$$(VENV)/.installed: pyproject.toml
\ttest -x $$(BIN)/python || $$(if $$(filter $$(BIN)/uv,$$(UV)),$$(PYTHON) -m venv $$(VENV),$$(UV) venv --seed --quiet --python $$(PYTHON) $$(VENV))
\ttest -x $$(UV) || $$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
\t$$(INSTALL) $$(KUBELOOP) -e '.[test]'
\ttouch $$@

run: $$(ENVIRONMENT) ## Run the operator on an embedded API server, workloads simulated, reloaded on every edit
\t$$(BIN)/kubeloop run . --embedded --simulate --install-crds --reload

test: $$(ENVIRONMENT) ## Run the operator's tests against the embedded API server
\t$$(BIN)/python -m pytest

manifests: $$(ENVIRONMENT) ## Write config/crd, config/rbac and config/webhook from the code
\t$$(BIN)/kubeloop manifests .

deploy: manifests ## Install the CRDs, RBAC and the operator into the cluster of your kubeconfig
\tkubectl apply -k config/default

undeploy: ## Remove them
\tkubectl delete -k config/default --ignore-not-found

docker-build: ## Build the operator's image; KUBELOOP_WHEEL=... (pip wheel --no-deps -w dist /path/to/kubeloop)
\tmkdir -p dist && if [ -n "$$$$(KUBELOOP_WHEEL)" ]; then cp $$$$(KUBELOOP_WHEEL) dist/; fi
\tdocker build -t $$(IMG) .
"""

GITIGNORE = """\
__pycache__/
*.egg-info/
.venv/
dist/
"""

README = """\
# $name

A Kubernetes operator written with [kubeloop](https://github.com/kubeloop/kubeloop).

    kubeloop create api --group web --version v1 --kind Website   # add a kind (web.$domain) and its controller
    kubeloop create webhook --group web --version v1 --kind Website --defaulting --validation
    make test         # its tests, against the embedded API server (the first run installs into .venv)
    make run          # run it on an embedded API server (no cluster needed)
    make deploy       # install it into the cluster of your kubeconfig (image: make docker-build)
"""

CRD_KUSTOMIZATION = """\
# The CRDs of the operator's kinds (written by kubeloop manifests).
resources: []
"""

RBAC_KUSTOMIZATION = """\
resources:
- service_account.yaml
- role.yaml
- role_binding.yaml
- metrics_auth_role.yaml
- metrics_reader_role.yaml
"""

# The manager's --metrics-secure: who calls /metrics is asked of the API server.
METRICS_AUTH_ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: metrics-auth-role
rules:
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-auth-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: metrics-auth-role
subjects:
- kind: ServiceAccount
  name: controller-manager
  namespace: system
"""

# Bind it to the account that scrapes (Prometheus's): it may get /metrics.
METRICS_READER_ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: metrics-reader
rules:
- nonResourceURLs: [/metrics]
  verbs: [get]
"""

SERVICE_ACCOUNT = """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: controller-manager
  namespace: system
"""

ROLE_BINDING = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: manager-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: manager-role
subjects:
- kind: ServiceAccount
  name: controller-manager
  namespace: system
"""

MANAGER_KUSTOMIZATION = """\
resources:
- manager.yaml
images:
- name: controller
  newName: $name
  newTag: dev
"""

MANAGER = """\
apiVersion: v1
kind: Namespace
metadata:
  name: system
---
# The operator: two replicas, one leads (a Lease); probes and metrics as a kubebuilder project's.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: system
  labels:
    app.kubernetes.io/name: $name
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: $name
  template:
    metadata:
      labels:
        app.kubernetes.io/name: $name
    spec:
      serviceAccountName: controller-manager
      securityContext:
        runAsNonRoot: true
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: manager
        image: controller
        args:
        - run
        - /app
        - --leader-elect
        - --leader-election-id=$name
        # HTTPS only, to callers the API server authenticates and allows get on /metrics.
        - --metrics-bind-address=:8443
        - --metrics-secure
        - --health-probe-bind-address=:8081
        ports:
        - {name: metrics, containerPort: 8443}
        - {name: probes, containerPort: 8081}
        livenessProbe:
          httpGet: {path: /healthz, port: probes}
        readinessProbe:
          httpGet: {path: /readyz, port: probes}
        resources:
          requests: {cpu: 50m, memory: 96Mi}
          limits: {memory: 512Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
"""

SAMPLES_KUSTOMIZATION = """\
# Samples of the operator's kinds: kubectl apply -k config/samples
resources: []
"""

DEFAULT_KUSTOMIZATION = """\
# Everything the operator needs on a cluster: kubectl apply -k config/default
namespace: $name-system
namePrefix: $name-
resources:
- ../crd
- ../rbac
- ../manager
"""

MODEL = '''\
"""The $kind kind ($group/$version)."""

from typing import Annotated

import kubeloop
from kubeloop.crd import ListType, PrinterColumn
from kubeloop.models import meta_v1
from pydantic import Field


class ${kind}Spec(kubeloop.KubeModel):
    """What a $kind asks for."""

    image: str = "nginx:1.27"
    replicas: Annotated[int, Field(ge=0, le=10)] = 1


class ${kind}Status(kubeloop.KubeModel):
    """What the operator found."""

    ready_replicas: int = 0
    conditions: Annotated[list[meta_v1.Condition], ListType("map", keys=("type",))] = []


class $kind(
    kubeloop.CustomResource,
    group="$group",
    version="$version",
    printer_columns=(
        PrinterColumn("Ready", ".status.readyReplicas", type="integer"),
        PrinterColumn("Available", '.status.conditions[?(@.type=="Available")].status'),
    ),
):
    """A $kind: a Deployment of its image, with as many replicas as it asks for."""

    spec: ${kind}Spec
    status: ${kind}Status | None = None
'''

VERSION_INIT = '''\
"""The operator's kinds of $group/$version."""

$imports

__all__ = [$names]
'''

CONTROLLER = '''\
"""Reconciles ${kind}s: each gets a Deployment of its image and replicas, owned by it (deleted
with it); its status says how many replicas are ready, and an Available condition whether all
are."""

import kubeloop
from kubeloop import kinds

from $package.api.$version import $kind, ${kind}Status

CONTAINER = "app"


def setup(manager: kubeloop.Manager) -> None:
    async def reconcile(request: kubeloop.Request) -> None:
        try:
            $lower = await manager.client.get($kind, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return  # deleted: its Deployment goes with it (garbage collection)
        labels = {"app.kubernetes.io/name": "$lower", "app.kubernetes.io/instance": request.name}

        def deployment(obj: kubeloop.Obj) -> None:
            # Set only the fields this controller owns: the server defaults the others, and
            # overwriting them would make every reconcile send a write.
            kubeloop.set_controller_reference($lower, obj)
            spec = obj.setdefault("spec", {})
            spec["replicas"] = $lower.spec.replicas
            spec["selector"] = {"matchLabels": labels}
            template = spec.setdefault("template", {})
            template.setdefault("metadata", {})["labels"] = labels
            containers = template.setdefault("spec", {}).setdefault("containers", [])
            container = next((c for c in containers if c.get("name") == CONTAINER), None)
            if container is None:
                container = {"name": CONTAINER}
                containers.append(container)
            container["image"] = $lower.spec.image

        wanted = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": request.name, "namespace": request.namespace},
        }
        _, current = await kubeloop.create_or_update(manager.client, wanted, deployment)

        ready = int((current.get("status") or {}).get("readyReplicas") or 0)
        wanted_replicas = $lower.spec.replicas
        status = $lower.status or ${kind}Status()
        changed = status.ready_replicas != ready
        status.ready_replicas = ready
        $lower.status = status
        if ready >= wanted_replicas:
            condition = ("True", "ReplicasReady", f"{ready} of {wanted_replicas} replicas ready")
        else:
            condition = ("False", "ReplicasNotReady", f"{ready} of {wanted_replicas} replicas ready")
        changed |= kubeloop.set_status_condition(
            $lower, "Available", *condition, observed_generation=$lower.metadata.generation
        )
        if changed:
            await manager.client.update($lower, subresource="status")

    kubeloop.Builder(manager).for_($kind).owns(kinds.Deployment).complete(reconcile)
'''

CONTROLLER_TEST = '''\
"""The $kind controller: against the embedded API server, with workloads simulated (pods run),
and one reconcile at a time with no server beside the test (``fake_manager``)."""

import kubeloop
from kubeloop.models import apps_v1
from kubeloop.testing import assert_converged, eventually, fake_manager

from $package.api.$version import $kind
from $package.controllers.$lower import setup


async def test_a_${lower}_gets_a_deployment_and_becomes_available(
    kube_operator: kubeloop.Manager, kube_client: kubeloop.APIClient, kube_namespace: str
) -> None:
    sample = $kind.model_validate({"metadata": {"name": "sample"}, "spec": {"replicas": 2}})
    await kube_client.create(sample, namespace=kube_namespace)

    async def available() -> None:
        found = await kube_client.get($kind, "sample", namespace=kube_namespace)
        assert kubeloop.is_status_condition_true(found, "Available"), found.status
        assert found.status is not None and found.status.ready_replicas == 2

    await eventually(available)
    deployment = await kube_client.get(apps_v1.Deployment, "sample", namespace=kube_namespace)
    [owner] = deployment.metadata.owner_references or []
    assert (owner.kind, owner.name, owner.controller) == ("$kind", "sample", True)
    # Reconciling it again, with nothing changed, writes nothing.
    await assert_converged(kube_operator)


async def test_one_reconcile_makes_the_deployment_and_says_it_is_not_ready() -> None:
    metadata = {"name": "sample", "namespace": "default"}
    sample = $kind.model_validate({"metadata": metadata, "spec": {"replicas": 3}})
    async with fake_manager(setup, sample) as manager:
        await manager.controllers["$lower"].reconcile_once(kubeloop.Request("default", "sample"))
        deployment = await manager.api_reader.get(apps_v1.Deployment, "sample", namespace="default")
        assert deployment.spec is not None and deployment.spec.replicas == 3
        found = await manager.api_reader.get($kind, "sample", namespace="default")
        assert found.status is not None and found.status.ready_replicas == 0  # no pods run here
        assert not kubeloop.is_status_condition_true(found, "Available")
'''

SAMPLE = """\
apiVersion: $group/$version
kind: $kind
metadata:
  name: $lower-sample
spec:
  image: nginx:1.27
  replicas: 2
"""
