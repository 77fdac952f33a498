"""kubeloop: Kubernetes' controller-runtime in Python, with an embedded API server.

One import gives an operator everything it needs (controller-runtime's ``ctrl``)::

    import kubeloop
    from kubeloop import kinds

    def setup(manager: kubeloop.Manager) -> None:
        async def reconcile(request: kubeloop.Request) -> kubeloop.Result | None:
            ...

        kubeloop.Builder(manager).for_(kinds.ConfigMap).owns(kinds.Deployment).complete(reconcile)

Names are loaded on first use, so ``import kubeloop`` costs next to nothing. What is here:

- the manager and controllers: ``Manager``, ``Builder``, ``Request``, ``Result``,
  ``TerminalError``, ``DeadlineExceeded`` and ``reconcile_time_left`` (a reconcile's timeout,
  ``with_options(reconcile_timeout=...)``), ``LeaderElectionConfig``, ``CacheOptions``, ``ByObject``, ``NamespaceConfig``, ``Cluster`` (another cluster's
  client and cache: ``manager.add_cluster``), ``EventRecorder``
  with ``NORMAL``/``WARNING``, ``MetricsServerOptions`` and ``with_authentication_and_authorization``
  (secure metrics);
- clients: ``Client`` (the protocol helpers take), ``APIClient``, ``CachedClient``,
  ``BlockingClient``, ``SyncClient``, ``ObjectList``, ``PatchType``, ``Preconditions``,
  ``load_config``, ``ClientConfig``, ``container_path`` (a path as a container sees it, also on
  kubeloop's process node); ``with_field_owner``, ``namespaced`` and ``dry_run`` (a client whose
  every write names a field manager, whose every call is in one namespace, or whose every write
  is a dry run: controller-runtime's wrapper clients);
- kinds and objects: ``kinds`` (a constant per built-in kind), ``models`` (typed models:
  ``models.apps_v1.Deployment``), ``GroupVersionKind``, ``CustomResource`` (a custom resource
  model that generates its CRD), ``KubeModel`` (the base of the models of its parts),
  ``KubeObject``, ``Obj`` (an object as a dict), ``ObjectMeta``, and ``crd`` (CRD markers, the
  generator and ``install_crds``); ``applyconfigurations`` (for server-side apply, every field
  optional: ``applyconfigurations.apps_v1.Deployment``, ``extract_deployment``),
  ``apply_configuration`` (a custom resource's) and ``extract``;
- helpers (controller-runtime's ``controllerutil``): ``create_or_update``, ``create_or_patch``,
  ``OperationResult`` (``NotControlledError`` for ``controlled_by``), ``set_controller_reference``, ``set_owner_reference``, ``is_controlled_by``,
  ``has_owner_reference``, ``has_controller_reference``, ``remove_owner_reference``,
  ``remove_controller_reference``, ``add_finalizer``, ``remove_finalizer``, ``contains_finalizer``, ``set_status_condition``,
  ``find_status_condition``, ``is_status_condition_true``, ``remove_status_condition``,
  ``AlreadyOwnedError``; ``finalizer`` (apply and cleanup around a finalizer, as kube-rs'),
  ``Finalizers`` and ``FinalizerResult`` (several named finalizers, controller-runtime's registry),
  ``logger`` (a logger bound to the reconcile, as ``log.FromContext``);
- an operator's own HTTP server: ``GuardedSite`` and ``guarded_runner`` (aiohttp's, with the
  API server's limits on slow clients: ``ConnectionLimits``);
- webhooks (controller-runtime's ``pkg/webhook``): ``WebhookBuilder`` (a kind's defaulter and
  validator), ``WebhookServer``, ``webhook`` (admission requests and answers, ``webhook.invalid``)
  and ``field`` (field errors as apimachinery words them: ``field.invalid(path, value, detail)``);
- modules: ``errors`` (one exception class per Status reason: ``errors.NotFound``, ...),
  ``predicate``, ``handler``, ``source``, ``timestamps`` and ``cron`` (CronJob schedules).

The packages under it are the layers (see docs/architecture.md), bottom to top: ``api``,
``client``, ``cache``, ``controller``, ``manager``, ``apiserver`` (the embedded server),
``testing`` and ``cli``.
"""

from kubeloop.version import __version__

#: ``typing`` is not imported at run time: ``import kubeloop`` stays this cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Public name → (module, attribute); an attribute of None means the module itself.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    # manager and controllers
    "Manager": ("kubeloop.manager.manager", "Manager"),
    "Builder": ("kubeloop.manager.builder", "Builder"),
    "WebhookBuilder": ("kubeloop.manager.webhookbuilder", "WebhookBuilder"),
    "WebhookServer": ("kubeloop.webhook.server", "WebhookServer"),
    "GuardedSite": ("kubeloop.httpguard", "GuardedSite"),
    "guarded_runner": ("kubeloop.httpguard", "guarded_runner"),
    "ConnectionLimits": ("kubeloop.httpguard", "ConnectionLimits"),
    "Request": ("kubeloop.controller.reconcile", "Request"),
    "Result": ("kubeloop.controller.reconcile", "Result"),
    "logger": ("kubeloop.controller.reconcilelog", "logger"),
    "finalizer": ("kubeloop.controller.finalizer", "finalizer"),
    "Finalizers": ("kubeloop.controller.finalizer", "Finalizers"),
    "FinalizerResult": ("kubeloop.controller.finalizer", "FinalizerResult"),
    "TerminalError": ("kubeloop.controller.reconcile", "TerminalError"),
    "DeadlineExceeded": ("kubeloop.client.deadline", "DeadlineExceeded"),
    "reconcile_time_left": ("kubeloop.client.deadline", "time_left"),
    "LeaderElectionConfig": ("kubeloop.manager.leaderelection", "LeaderElectionConfig"),
    "MetricsServerOptions": ("kubeloop.manager.metricsserver", "MetricsServerOptions"),
    "debug_handlers": ("kubeloop.manager.debugendpoints", "debug_handlers"),
    "with_authentication_and_authorization": (
        "kubeloop.manager.metricsserver",
        "with_authentication_and_authorization",
    ),
    "CacheOptions": ("kubeloop.cache.options", "CacheOptions"),
    "Cluster": ("kubeloop.manager.cluster", "Cluster"),
    "ByObject": ("kubeloop.cache.options", "ByObject"),
    "NamespaceConfig": ("kubeloop.cache.options", "NamespaceConfig"),
    "EventRecorder": ("kubeloop.manager.recorder", "EventRecorder"),
    "NORMAL": ("kubeloop.manager.recorder", "NORMAL"),
    "WARNING": ("kubeloop.manager.recorder", "WARNING"),
    # clients
    "Client": ("kubeloop.client.interface", "Client"),
    "ObjectList": ("kubeloop.client.interface", "ObjectList"),
    "APIClient": ("kubeloop.client.rest", "APIClient"),
    "PatchType": ("kubeloop.client.rest", "PatchType"),
    "Preconditions": ("kubeloop.client.calloptions", "Preconditions"),
    "CachedClient": ("kubeloop.manager.cachedclient", "CachedClient"),
    "BlockingClient": ("kubeloop.client.sync", "BlockingClient"),
    "SyncClient": ("kubeloop.client.sync", "SyncClient"),
    "load_config": ("kubeloop.client.config", "load_config"),
    "ClientConfig": ("kubeloop.client.config", "ClientConfig"),
    "container_path": ("kubeloop.containerpath", "container_path"),
    "with_field_owner": ("kubeloop.client.wrappers", "with_field_owner"),
    "namespaced": ("kubeloop.client.wrappers", "namespaced"),
    "dry_run": ("kubeloop.client.wrappers", "dry_run"),
    # kinds and objects
    "GroupVersionKind": ("kubeloop.api.gvk", "GroupVersionKind"),
    "CustomResource": ("kubeloop.api.customresource", "CustomResource"),
    "KubeObject": ("kubeloop.api.model", "KubeObject"),
    "KubeModel": ("kubeloop.api.model", "KubeModel"),
    "ObjectMeta": ("kubeloop.api.models.meta_v1", "ObjectMeta"),
    "Obj": ("kubeloop.api.object", "Obj"),
    "apply_configuration": ("kubeloop.api.applyconfiguration", "apply_configuration"),
    "extract": ("kubeloop.api.applyconfiguration", "extract"),
    # controllerutil
    "create_or_update": ("kubeloop.controller.controllerutil", "create_or_update"),
    "create_or_patch": ("kubeloop.controller.controllerutil", "create_or_patch"),
    "OperationResult": ("kubeloop.controller.controllerutil", "OperationResult"),
    "set_controller_reference": ("kubeloop.controller.controllerutil", "set_controller_reference"),
    "set_owner_reference": ("kubeloop.controller.controllerutil", "set_owner_reference"),
    "has_owner_reference": ("kubeloop.controller.controllerutil", "has_owner_reference"),
    "has_controller_reference": ("kubeloop.controller.controllerutil", "has_controller_reference"),
    "remove_owner_reference": ("kubeloop.controller.controllerutil", "remove_owner_reference"),
    "remove_controller_reference": ("kubeloop.controller.controllerutil", "remove_controller_reference"),
    "is_controlled_by": ("kubeloop.controller.controllerutil", "is_controlled_by"),
    "add_finalizer": ("kubeloop.controller.controllerutil", "add_finalizer"),
    "remove_finalizer": ("kubeloop.controller.controllerutil", "remove_finalizer"),
    "contains_finalizer": ("kubeloop.controller.controllerutil", "contains_finalizer"),
    "set_status_condition": ("kubeloop.controller.controllerutil", "set_status_condition"),
    "find_status_condition": ("kubeloop.controller.controllerutil", "find_status_condition"),
    "is_status_condition_true": ("kubeloop.controller.controllerutil", "is_status_condition_true"),
    "remove_status_condition": ("kubeloop.controller.controllerutil", "remove_status_condition"),
    "AlreadyOwnedError": ("kubeloop.controller.controllerutil", "AlreadyOwnedError"),
    "NotControlledError": ("kubeloop.controller.controllerutil", "NotControlledError"),
    # modules
    "kinds": ("kubeloop.kinds", None),
    "crd": ("kubeloop.crd", None),
    "models": ("kubeloop.models", None),
    "applyconfigurations": ("kubeloop.applyconfigurations", None),
    "errors": ("kubeloop.errors", None),
    "field": ("kubeloop.api.fielderrors", None),
    "webhook": ("kubeloop.webhook", None),
    "predicate": ("kubeloop.controller.predicate", None),
    "handler": ("kubeloop.controller.handler", None),
    "source": ("kubeloop.controller.source", None),
    "timestamps": ("kubeloop.api.timestamps", None),
    "cron": ("kubeloop.api.cronschedule", None),
}

__all__ = [
    "NORMAL",
    "WARNING",
    "APIClient",
    "AlreadyOwnedError",
    "BlockingClient",
    "Builder",
    "ByObject",
    "CacheOptions",
    "CachedClient",
    "Client",
    "ClientConfig",
    "Cluster",
    "ConnectionLimits",
    "CustomResource",
    "DeadlineExceeded",
    "EventRecorder",
    "FinalizerResult",
    "Finalizers",
    "GroupVersionKind",
    "GuardedSite",
    "KubeModel",
    "KubeObject",
    "LeaderElectionConfig",
    "Manager",
    "MetricsServerOptions",
    "NamespaceConfig",
    "NotControlledError",
    "Obj",
    "ObjectList",
    "ObjectMeta",
    "OperationResult",
    "PatchType",
    "Preconditions",
    "Request",
    "Result",
    "SyncClient",
    "TerminalError",
    "WebhookBuilder",
    "WebhookServer",
    "__version__",
    "add_finalizer",
    "apply_configuration",
    "applyconfigurations",
    "container_path",
    "contains_finalizer",
    "crd",
    "create_or_patch",
    "create_or_update",
    "cron",
    "debug_handlers",
    "dry_run",
    "errors",
    "extract",
    "field",
    "finalizer",
    "find_status_condition",
    "guarded_runner",
    "handler",
    "has_controller_reference",
    "has_owner_reference",
    "is_controlled_by",
    "is_status_condition_true",
    "kinds",
    "load_config",
    "logger",
    "models",
    "namespaced",
    "predicate",
    "reconcile_time_left",
    "remove_controller_reference",
    "remove_finalizer",
    "remove_owner_reference",
    "remove_status_condition",
    "set_controller_reference",
    "set_owner_reference",
    "set_status_condition",
    "source",
    "timestamps",
    "webhook",
    "with_authentication_and_authorization",
    "with_field_owner",
]


def __getattr__(name: str) -> "Any":
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'kubeloop' has no attribute {name!r}") from None
    module = __import__(module_name, fromlist=["__name__"])  # the submodule itself
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load lazily
    import kubeloop.applyconfigurations as applyconfigurations
    import kubeloop.crd as crd
    import kubeloop.kinds as kinds
    import kubeloop.models as models
    from kubeloop import errors, webhook
    from kubeloop.api import cronschedule as cron
    from kubeloop.api import fielderrors as field
    from kubeloop.api import timestamps
    from kubeloop.api.applyconfiguration import apply_configuration, extract
    from kubeloop.api.customresource import CustomResource
    from kubeloop.api.gvk import GroupVersionKind
    from kubeloop.api.model import KubeModel, KubeObject
    from kubeloop.api.models.meta_v1 import ObjectMeta
    from kubeloop.api.object import Obj
    from kubeloop.cache.options import ByObject, CacheOptions, NamespaceConfig
    from kubeloop.client.calloptions import Preconditions
    from kubeloop.client.config import ClientConfig, load_config
    from kubeloop.client.deadline import DeadlineExceeded
    from kubeloop.client.deadline import time_left as reconcile_time_left
    from kubeloop.client.interface import Client, ObjectList
    from kubeloop.client.rest import APIClient, PatchType
    from kubeloop.client.sync import BlockingClient, SyncClient
    from kubeloop.client.wrappers import dry_run, namespaced, with_field_owner
    from kubeloop.containerpath import container_path
    from kubeloop.controller import handler, predicate, source
    from kubeloop.controller.controllerutil import (
        AlreadyOwnedError,
        NotControlledError,
        OperationResult,
        add_finalizer,
        contains_finalizer,
        create_or_patch,
        create_or_update,
        find_status_condition,
        has_controller_reference,
        has_owner_reference,
        is_controlled_by,
        is_status_condition_true,
        remove_controller_reference,
        remove_finalizer,
        remove_owner_reference,
        remove_status_condition,
        set_controller_reference,
        set_owner_reference,
        set_status_condition,
    )
    from kubeloop.controller.finalizer import FinalizerResult, Finalizers, finalizer
    from kubeloop.controller.reconcile import Request, Result, TerminalError
    from kubeloop.controller.reconcilelog import logger
    from kubeloop.httpguard import ConnectionLimits, GuardedSite, guarded_runner
    from kubeloop.manager.builder import Builder
    from kubeloop.manager.cachedclient import CachedClient
    from kubeloop.manager.cluster import Cluster
    from kubeloop.manager.debugendpoints import debug_handlers
    from kubeloop.manager.leaderelection import LeaderElectionConfig
    from kubeloop.manager.manager import Manager
    from kubeloop.manager.metricsserver import MetricsServerOptions, with_authentication_and_authorization
    from kubeloop.manager.recorder import NORMAL, WARNING, EventRecorder
    from kubeloop.manager.webhookbuilder import WebhookBuilder
    from kubeloop.webhook.server import WebhookServer
