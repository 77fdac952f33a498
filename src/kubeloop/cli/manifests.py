"""``kubeloop manifests [DIR]``: a project's ``config/`` written from its code, as a kubebuilder
project's ``make manifests`` runs controller-gen: one file per CRD of its models in
``config/crd/`` (``<group>_<plural>.yaml``, listed in its kustomization, files of CRDs no model
defines any more removed), the ClusterRole its setup needs in ``config/rbac/role.yaml``, and,
when it registers webhooks, what deploys them in ``config/webhook/``: their configurations
(calling the Service ``webhook-service``), that Service, and the permissions the manager needs
to keep their serving certificate in a Secret and inject its CA (``webhook.certrotator``:
no cert-manager needed), with ``config/default`` patched to serve them.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys
from typing import Any

import yaml

from kubeloop.api.crdgen import to_yaml
from kubeloop.cli.run import NO_CONTROLLERS, required_manifests
from kubeloop.cli.scaffold import add_resource

CRD_COMMENT = "# The CRDs of the operator's kinds (written by kubeloop manifests)."


async def write_manifests(root: pathlib.Path, *, warn: bool = True) -> list[pathlib.Path]:
    """Write the project's CRDs, role and webhook files; the files written. Everything is
    computed before anything is written: an operator whose setup fails, or names a kind nothing
    defines, leaves ``config/`` as it was. ``warn``: say so when the setup registers no
    controllers (the role is then next to empty)."""
    manifests = await required_manifests(
        str(root), role="manager-role", service="webhook-service", namespace="system"
    )
    if warn and not manifests.controllers:
        print(f"kubeloop manifests: {NO_CONTROLLERS}", file=sys.stderr, flush=True)
    crd_dir = root / "config" / "crd"
    crd_files = {
        f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml": to_yaml([crd])
        for crd in manifests.crds
    }
    role_text = to_yaml([manifests.role])
    crd_dir.mkdir(parents=True, exist_ok=True)
    written: list[pathlib.Path] = []
    for name, text in crd_files.items():
        (crd_dir / name).write_text(text)
        written.append(crd_dir / name)
    for stale in crd_dir.glob("*_*.yaml"):
        if stale.name not in crd_files:
            stale.unlink()
    kustomization = crd_dir / "kustomization.yaml"
    kustomization.write_text(CRD_COMMENT + "\nresources: []\n")
    for name in crd_files:
        add_resource(kustomization, name)
    written.append(kustomization)
    role = root / "config" / "rbac" / "role.yaml"
    role.parent.mkdir(parents=True, exist_ok=True)
    role.write_text(role_text)
    written.append(role)
    written.extend(write_webhook_deployment(root, manifests.webhook_configurations, crds=manifests.crds))
    return written


def write_webhook_deployment(
    root: pathlib.Path, configurations: list[dict[str, Any]], *, crds: list[dict[str, Any]]
) -> list[pathlib.Path]:
    """``config/webhook/``: the configurations, the Service they call, the Secret's and the CA
    injection's permissions; and in ``config/default`` the webhook folder and the manager's
    patch (port 9443, ``--webhook-cert-secret``, ``--webhook-service``, a writable certificate
    folder). Without webhooks, all of it is taken out again."""
    folder = root / "config" / "webhook"
    default = root / "config" / "default" / "kustomization.yaml"
    patch = default.parent / MANAGER_PATCH
    settings = yaml.safe_load(default.read_text()) if default.exists() else None
    settings = settings if isinstance(settings, dict) else {}
    if not configurations:
        for name in (*WEBHOOK_FILES, "kustomization.yaml"):
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()
        with contextlib.suppress(FileNotFoundError):
            patch.unlink()
        if settings:
            _kustomize_default(default, settings, webhooks=False)
        return []
    prefix = str(settings.get("namePrefix") or "")
    labels = _manager_labels(root)
    folder.mkdir(parents=True, exist_ok=True)
    conversions = sorted(
        crd["metadata"]["name"]
        for crd in crds
        if (crd["spec"].get("conversion") or {}).get("strategy") == "Webhook"
    )
    files = {
        "manifests.yaml": to_yaml(configurations),
        "service.yaml": WEBHOOK_SERVICE_COMMENT + to_yaml([_webhook_service(labels)]),
        "certificates.yaml": CERTIFICATES_COMMENT
        + to_yaml(_certificate_permissions(prefix, configurations, conversions)),
        "kustomization.yaml": "resources:\n" + "".join(f"- {name}\n" for name in WEBHOOK_FILES),
    }
    written = []
    for name, text in files.items():
        (folder / name).write_text(text)
        written.append(folder / name)
    if settings:
        patch.write_text(MANAGER_PATCH_COMMENT + yaml.safe_dump(_manager_patch(prefix), sort_keys=False))
        _kustomize_default(default, settings, webhooks=True)
        written.extend([patch, default])
    return written


MANAGER_PATCH = "manager_webhook_patch.yaml"
WEBHOOK_FILES = ("certificates.yaml", "manifests.yaml", "service.yaml")
WEBHOOK_SERVICE_COMMENT = (
    "# The Service kube-apiserver calls the webhooks through: its 443 to the manager's 9443.\n"
)
CERTIFICATES_COMMENT = (
    "# What the manager needs to keep the webhooks' serving certificate in a Secret and its CA in\n"
    "# the configurations that call them (kubeloop run --webhook-cert-secret; no cert-manager).\n"
)
MANAGER_PATCH_COMMENT = (
    "# The manager serves the webhooks on 9443 with the certificate it keeps in a Secret.\n"
)
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"


def _manager_labels(root: pathlib.Path) -> dict[str, str]:
    """The manager's pod labels (its Deployment's selector), which the Service selects."""
    manager = root / "config" / "manager" / "manager.yaml"
    if manager.exists():
        for document in yaml.safe_load_all(manager.read_text()):
            if isinstance(document, dict) and document.get("kind") == "Deployment":
                labels = ((document.get("spec") or {}).get("selector") or {}).get("matchLabels")
                if isinstance(labels, dict) and labels:
                    return {str(key): str(value) for key, value in labels.items()}
    return {"control-plane": "controller-manager"}


def _webhook_service(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "webhook-service", "namespace": "system"},
        "spec": {"selector": labels, "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook"}]},
    }


def _certificate_permissions(
    prefix: str, configurations: list[dict[str, Any]], conversions: list[str]
) -> list[dict[str, Any]]:
    """A Role for the Secret and a ClusterRole for the CA's injection (updates only of these
    configurations and CRDs: kustomize prefixes names, not resourceNames, so they are written
    prefixed), each bound to the manager's ServiceAccount."""
    rbac = "rbac.authorization.k8s.io/v1"
    plurals = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations", "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}  # fmt: skip
    rules: list[dict[str, Any]] = [
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": sorted(plurals.values()), "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]},
    ]  # fmt: skip
    for configuration in configurations:
        rules.append(
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": [plurals[configuration["kind"]]],
                "resourceNames": [prefix + configuration["metadata"]["name"]],
                "verbs": ["update"],
            }
        )
    if conversions:
        rules.append(
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": conversions,
                "verbs": ["update"],
            }
        )
    subject = [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}]
    return [
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "webhook-certificates", "namespace": "system"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update"]}],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "webhook-certificates", "namespace": "system"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "webhook-certificates",
            },
            "subjects": subject,
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": "webhook-ca-injection"},
            "rules": rules,
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "webhook-ca-injection"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "webhook-ca-injection",
            },
            "subjects": subject,
        },
    ]


def _manager_patch(prefix: str) -> list[dict[str, Any]]:
    container = "/spec/template/spec/containers/0"
    arguments = [
        f"--webhook-cert-secret={prefix}webhook-server-cert",
        f"--webhook-service={prefix}webhook-service",
        f"--webhook-cert-dir={CERT_DIR}",
    ]
    return [
        *({"op": "add", "path": f"{container}/args/-", "value": argument} for argument in arguments),
        {"op": "add", "path": f"{container}/ports/-", "value": {"name": "webhook", "containerPort": 9443}},
        {
            "op": "add",
            "path": f"{container}/volumeMounts",
            "value": [{"name": "webhook-certs", "mountPath": CERT_DIR}],
        },
        {
            "op": "add",
            "path": "/spec/template/spec/volumes",
            "value": [{"name": "webhook-certs", "emptyDir": {}}],
        },
    ]


def _kustomize_default(path: pathlib.Path, settings: dict[str, Any], *, webhooks: bool) -> None:
    """config/default with the webhook folder and the manager's patch in it, or out of it."""
    resources = [item for item in settings.get("resources") or () if item != "../webhook"]
    patches = [item for item in settings.get("patches") or () if (item or {}).get("path") != MANAGER_PATCH]
    if webhooks:
        resources.append("../webhook")
        patches.append(
            {"path": MANAGER_PATCH, "target": {"kind": "Deployment", "name": "controller-manager"}}
        )
    settings["resources"] = resources
    if patches:
        settings["patches"] = patches
    else:
        settings.pop("patches", None)
    comments = "".join(line + "\n" for line in path.read_text().splitlines() if line.startswith("#"))
    path.write_text(comments + yaml.safe_dump(settings, sort_keys=False))
