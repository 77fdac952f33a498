"""``kubeloop manifests [DIR]``: a project's ``config/`` written from its code, as a kubebuilder
project's ``make manifests`` runs controller-gen: one file per CRD of its models in
``config/crd/`` (``<group>_<plural>.yaml``, listed in its kustomization, files of CRDs no model
defines any more removed), the ClusterRole its setup needs in ``config/rbac/role.yaml``, and,
when it registers webhooks, their configurations (calling the Service ``webhook-service``) in
``config/webhook/manifests.yaml``.
"""

from __future__ import annotations

import pathlib

from kubeloop.api.crdgen import to_yaml
from kubeloop.cli.run import required_cluster_role, required_webhook_configurations
from kubeloop.cli.scaffold import add_resource
from kubeloop.manager.operatortarget import load_target, module_crds

CRD_COMMENT = "# The CRDs of the operator's kinds (written by kubeloop manifests)."


async def write_manifests(root: pathlib.Path) -> list[pathlib.Path]:
    """Write the project's CRDs and role; the files written."""
    module, _ = load_target(str(root))
    crd_dir = root / "config" / "crd"
    crd_dir.mkdir(parents=True, exist_ok=True)
    written: list[pathlib.Path] = []
    names: list[str] = []
    for crd in module_crds(module):
        spec = crd["spec"]
        path = crd_dir / f"{spec['group']}_{spec['names']['plural']}.yaml"
        path.write_text(to_yaml([crd]))
        written.append(path)
        names.append(path.name)
    for stale in crd_dir.glob("*_*.yaml"):
        if stale.name not in names:
            stale.unlink()
    kustomization = crd_dir / "kustomization.yaml"
    kustomization.write_text(CRD_COMMENT + "\nresources: []\n")
    for name in names:
        add_resource(kustomization, name)
    written.append(kustomization)
    role = root / "config" / "rbac" / "role.yaml"
    role.parent.mkdir(parents=True, exist_ok=True)
    role.write_text(to_yaml([await required_cluster_role(str(root), "manager-role")]))
    written.append(role)
    configurations = await required_webhook_configurations(
        str(root), service="webhook-service", namespace="system"
    )
    webhook = root / "config" / "webhook" / "manifests.yaml"
    if configurations:
        webhook.parent.mkdir(parents=True, exist_ok=True)
        webhook.write_text(to_yaml(configurations))
        written.append(webhook)
    elif webhook.exists():
        webhook.unlink()
    return written
