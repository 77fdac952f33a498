"""Typed models of the built-in kinds, one module per group-version, loaded on first use::

    from kubeloop.models import apps_v1, core_v1
    deployment = await manager.client.get(apps_v1.Deployment, "web", namespace="default")

They live in ``kubeloop.api.models``; this module lets an operator reach them as
``kubeloop.models`` without importing any it does not use.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    from kubeloop.api.models import apps_v1, batch_v1, coordination_v1, core_v1, meta_v1

__all__ = ["apps_v1", "batch_v1", "coordination_v1", "core_v1", "meta_v1"]


def __getattr__(name: str) -> "ModuleType":
    if name not in __all__:
        raise AttributeError(f"module 'kubeloop.models' has no attribute {name!r}")
    module: ModuleType = __import__(f"kubeloop.api.models.{name}", fromlist=["__name__"])
    globals()[name] = module
    return module
