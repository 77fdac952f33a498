"""``kubeloop run TARGET``: load an operator and run its manager until a signal.

TARGET is ``module:attribute``, a Python file, or a directory holding ``main.py`` (a name that
shadows no module of the standard library, as ``operator.py`` would); it exposes
a ``setup(manager)`` function (or the attribute named after the colon is one). The manager talks
to the cluster of ``--kubeconfig``/``--context`` (default: ``$KUBECONFIG``, ``~/.kube/config``,
in-cluster), or with ``--embedded`` to an embedded API server started in the same process.
The manager flags are those of a kubebuilder project's ``main.go``: ``--namespace`` (the cache's
scope: one namespace, or several comma-separated, as ``cache.Options.DefaultNamespaces``), ``--metrics-bind-address``, ``--health-probe-bind-address`` ("0" or empty: off) and
``--leader-elect`` with ``--leader-election-id``/``--leader-election-namespace``;
``--metrics-secure`` (with ``--metrics-cert-path``) serves the metrics over HTTPS to callers the
API server authenticates and authorizes; ``--debug-endpoints`` adds ``/debug/tasks``,
``/debug/threads`` and ``/debug/tracemalloc`` beside them, behind the same checks.
``--install-crds`` first applies the CRDs of the custom resource models the target's module
defines or imports (and ``--crds FILE`` ones), waiting until they serve.

Before the manager starts, the server is asked once whether it answers and whom the
credentials are (``client.preflight``), and, once the setup has said what the operator needs,
whether it may: a server that cannot be reached, refused credentials and refused list/watch
permissions end the command with one line naming the URL and the cause (exit 1); other refused
verbs are one warning. A TARGET that names nothing, a missing ``setup``, a kubeconfig that
cannot be used, a kind given as a string and a Builder never completed are one line each
(exit 2, ``cli.usage``).

With ``--reload`` the manager restarts on the new code whenever a ``.py`` file under the
operator's folder changes, in the same process and on the same embedded server (``cli.reload``);
the command owns SIGTERM and SIGINT across its managers.

Webhooks the setup registers (``WebhookBuilder``) are served on ``--webhook-port`` (9443) with
the certificate in ``--webhook-cert-dir`` or a development one; with ``--embedded`` their
configurations are installed into the embedded server, by URL with the development CA, once the
manager has started.

``kubeloop crd TARGET`` prints those CRDs as YAML (``module_crds``). ``kubeloop rbac TARGET``
prints the ClusterRole the operator needs (``required_cluster_role``): its setup runs against an
embedded server holding its CRDs, and what the manager recorded (``manager.permissions``) is
resolved to resources by discovery, with Leases for leader election. ``kubeloop webhook TARGET``
prints the webhook configurations (``required_webhook_configurations``), found the same way,
calling a Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.cache.options import CacheOptions
from kubeloop.cli import reload as reloading
from kubeloop.cli.usage import ClusterUnusable, UsageError
from kubeloop.client.config import ClientConfig, ConfigError, load_config
from kubeloop.client.crdinstall import install_crds
from kubeloop.client.preflight import CannotUseCluster, Needed, check_connection, check_permissions
from kubeloop.client.rest import APIClient
from kubeloop.client.restmapper import NoKindMatch
from kubeloop.errors import APIError
from kubeloop.gcpause import tune_for_serving
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.manager.debugendpoints import debug_handlers
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import IncompleteBuilder, Manager
from kubeloop.manager.metricsserver import MetricsServerOptions, with_authentication_and_authorization
from kubeloop.manager.operatortarget import (
    Setup,
    TargetError,
    load_target,
    module_crds,
    run_setup,
    setup_of,
)
from kubeloop.manager.permissions import LEASE, Resource
from kubeloop.manager.webhookconfigurations import (
    crd_conversion_patches,
    install_webhook_configurations,
    service_client_config,
    webhook_configurations,
)
from kubeloop.webhook.certrotator import CertRotator
from kubeloop.webhook.server import DEFAULT_CERT_DIR, DEFAULT_PORT, WebhookServer


@dataclass(frozen=True)
class ManagerFlags:
    namespace: str | None = None
    metrics_bind_address: str | None = None
    #: /metrics over HTTPS, callers authenticated and authorized by the API server.
    metrics_secure: bool = False
    metrics_cert_path: str | None = None
    #: /debug/tasks, /debug/threads and /debug/tracemalloc on the metrics server.
    debug_endpoints: bool = False
    health_probe_bind_address: str | None = None
    leader_elect: bool = False
    leader_election_id: str | None = None
    leader_election_namespace: str | None = None
    #: Install the CRDs of the target's models (and these files) before the manager starts.
    install_crds: bool = False
    crd_files: Sequence[str] = ()
    #: None: 9443, or a free port with an embedded server.
    webhook_port: int | None = None
    webhook_cert_dir: str | None = None
    #: ``[namespace/]name`` of the Secret a CertRotator keeps the webhooks' certificate in, and
    #: of the Service they are called through.
    webhook_cert_secret: str | None = None
    webhook_service: str | None = None
    #: Show the live view of the operator (``--view``) while it runs.
    view: bool = False
    #: Serve the web console (``--console HOST:PORT``) while it runs.
    console: str | None = None
    #: Run the operator as a ServiceAccount holding only the role its setup needs (``--as-operator``).
    as_operator: bool = False

    @property
    def namespaces(self) -> tuple[str, ...]:
        """The namespaces ``--namespace`` names (none: the whole cluster)."""
        return tuple(name.strip() for name in (self.namespace or "").split(",") if name.strip())

    @property
    def single_namespace(self) -> str | None:
        """The namespace ``--namespace`` names when it names exactly one."""
        return self.namespaces[0] if len(self.namespaces) == 1 else None

    def manager(self, client: APIClient, default_namespace: str, *, embedded: bool = False) -> Manager:
        election = None
        if self.leader_elect:
            if not self.leader_election_id:
                raise UsageError("--leader-elect needs --leader-election-id")
            election = LeaderElectionConfig(
                self.leader_election_id,
                namespace=self.leader_election_namespace or self.single_namespace or default_namespace,
                release_on_cancel=True,  # the process ends with the manager: the next leads at once
            )
        port = self.webhook_port if self.webhook_port is not None else 0 if embedded else DEFAULT_PORT
        if self.metrics_cert_path and not self.metrics_secure:
            raise UsageError("--metrics-cert-path needs --metrics-secure")
        if bool(self.webhook_cert_secret) != bool(self.webhook_service):
            raise UsageError("--webhook-cert-secret and --webhook-service go together")
        cert_dir = self.webhook_cert_dir
        if self.webhook_cert_secret and cert_dir is None:
            cert_dir = str(DEFAULT_CERT_DIR)
        return Manager(
            client,
            cache=CacheOptions(default_namespaces=self.namespaces or None),
            leader_election=election,
            metrics=MetricsServerOptions(
                bind_address=_address(self.metrics_bind_address) or "0",
                secure_serving=self.metrics_secure,
                cert_dir=self.metrics_cert_path,
                filter_provider=with_authentication_and_authorization if self.metrics_secure else None,
                extra_handlers=debug_handlers() if self.debug_endpoints else {},
            ),
            health_probe_bind_address=_address(self.health_probe_bind_address),
            # An embedded server calls the webhooks over loopback: nothing else should reach them.
            webhook_server=WebhookServer(host="127.0.0.1" if embedded else "", port=port, cert_dir=cert_dir),
        )


def _address(flag: str | None) -> str | None:
    """controller-runtime's convention: "0" (or nothing) turns a server off."""
    return None if not flag or flag == "0" else flag


def client_config(kubeconfig: str | None, context: str | None) -> tuple[ClientConfig, str]:
    """The configuration ``--kubeconfig``/``--context`` (or the environment) name, and where it
    came from (a file, or "the pod's service account"); a :class:`UsageError` when there is none
    or it cannot be used."""
    try:
        config = load_config(kubeconfig, context=context)
    except ConfigError as error:
        if kubeconfig is None and not os.environ.get("KUBECONFIG") and "no configuration" in str(error):
            raise UsageError(
                "no cluster is configured ($KUBECONFIG unset, no ~/.kube/config, not in a pod)",
                "run with --embedded for an API server in this process, or give --kubeconfig",
            ) from None
        raise UsageError(str(error)) from None
    source = kubeconfig or os.environ.get("KUBECONFIG") or ""
    if not source:
        default = pathlib.Path.home() / ".kube" / "config"
        source = str(default) if default.exists() else "the pod's service account"
    return config, source


async def run(
    target: str,
    *,
    kubeconfig: str | None,
    context: str | None,
    embedded: bool,
    data_dir: pathlib.Path | None,
    flags: ManagerFlags | None = None,
    simulate: bool = False,
    local_images: tuple[str, ...] = (),
    reload: bool = False,
) -> int:
    flags = flags or ManagerFlags()
    if local_images:
        from kubeloop.node.localimages import LocalImages

        if not (embedded and simulate):
            raise UsageError("--local-image needs --embedded --simulate", "a node of this process runs them")
        try:
            LocalImages.parse(local_images)
        except ValueError as error:
            raise UsageError(str(error)) from None
    module, attribute = load_target(target)
    setup = setup_of(target, module, attribute)
    signals = reloading.CommandSignals()
    signals.install()
    try:
        if embedded:
            from kubeloop.apiserver.server import APIServer, ServerOptions
            from kubeloop.node.simulation import SimulationOptions

            options = ServerOptions(
                memory=data_dir is None,
                data_dir=data_dir,
                port=0,
                simulate=simulate,
                simulation=SimulationOptions(local_images=local_images),
            )
            async with APIServer(options) as server:
                print(
                    f"kubeloop embedded apiserver ready at {server.url} kubeconfig={server.kubeconfig_path}",
                    flush=True,
                )
                kubeconfig, context = str(server.kubeconfig_path), None
                store = server.store
                assert store is not None  # started

                def objects() -> Iterator[Obj]:
                    return (obj for _, obj in store.items("/registry/"))

                if reload:
                    return await _run_reloading(
                        target,
                        (module, attribute),
                        kubeconfig,
                        context,
                        flags,
                        signals,
                        embedded=True,
                        objects=objects,
                    )
                await _manage(
                    setup, module, kubeconfig, context, flags, signals, embedded=True, objects=objects
                )
                return 0
        if reload:
            return await _run_reloading(target, (module, attribute), kubeconfig, context, flags, signals)
        await _manage(setup, module, kubeconfig, context, flags, signals)
        return 0
    finally:
        signals.remove()


async def _run_reloading(
    target: str,
    loaded: tuple[ModuleType, str],
    kubeconfig: str | None,
    context: str | None,
    flags: ManagerFlags,
    signals: reloading.CommandSignals,
    *,
    embedded: bool = False,
    objects: Callable[[], Iterable[Obj]] | None = None,
) -> int:
    """``--reload``: the manager runs until a ``.py`` file under the operator's folder changes,
    then the operator's modules are imported afresh and a new manager starts (on the same
    embedded server, if any). Code that does not load, or a setup that fails, is reported and
    the next change is waited for; SIGTERM or SIGINT end it."""
    module, attribute = loaded
    root = reloading.operator_root(target, module)
    watcher = reloading.FileWatcher(root)
    print(f"kubeloop run: --reload: watching the .py files under {root}", flush=True)
    while True:
        try:
            setup = setup_of(target, module, attribute)
            changed = await _manage(
                setup,
                module,
                kubeconfig,
                context,
                flags,
                signals,
                embedded=embedded,
                watcher=watcher,
                objects=objects,
            )
            if changed is None:
                return 0
        except ClusterUnusable:
            raise
        except (UsageError, TargetError) as error:
            print(f"kubeloop run: {error}; waiting for a change", file=sys.stderr, flush=True)
            changed = await signals.changed_or_stopped(watcher)
        except Exception:
            traceback.print_exc()
            print("kubeloop run: the setup failed; waiting for a change", file=sys.stderr, flush=True)
            changed = await signals.changed_or_stopped(watcher)
        while True:
            if changed is None:
                return 0
            shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
            print(f"kubeloop run: {shown} changed: reloading", flush=True)
            reloading.forget_modules(root)
            reloading.forget_bytecode(root, changed)
            try:
                module, attribute = load_target(target)
                break
            except TargetError as error:
                problem = str(error)
            except SyntaxError as error:
                problem = f"{error.msg} ({error.filename}, line {error.lineno})"
            except Exception as error:  # the operator's code: a failing import, a failing statement
                problem = "".join(traceback.format_exception_only(error)).strip().splitlines()[-1]
            print(
                f"kubeloop run: {target} does not load: {problem}; waiting for a change",
                file=sys.stderr,
                flush=True,
            )
            changed = await signals.changed_or_stopped(watcher)


async def _manage(
    setup: Setup,
    module: ModuleType,
    kubeconfig: str | None,
    context: str | None,
    flags: ManagerFlags,
    signals: reloading.CommandSignals,
    *,
    embedded: bool = False,
    watcher: reloading.FileWatcher | None = None,
    objects: Callable[[], Iterable[Obj]] | None = None,
) -> list[str] | None:
    """Run a manager with ``setup`` until a signal (None), or with ``watcher`` until files
    change (the files). With ``--install-crds``, the CRDs of the models ``module`` holds and of
    those the setup uses are installed before the manager starts."""
    config, source = client_config(kubeconfig, context)
    if flags.as_operator and not embedded:
        raise UsageError(
            "--as-operator needs --embedded", "it makes a ServiceAccount and a role on the server"
        )
    async with APIClient(config) as client, contextlib.AsyncExitStack() as scope:
        try:
            user = await check_connection(client, source=source)
        except CannotUseCluster as error:
            hint = "" if embedded else "without a cluster: --embedded runs an API server in this process"
            raise ClusterUnusable(str(error), hint) from None
        print(f"kubeloop run: connected to {config.server}" + (f" as {user}" if user else ""), flush=True)
        manager = flags.manager(client, config.namespace, embedded=embedded)
        run_setup(setup, manager)
        crds = module_crds(module, manager) if flags.install_crds else []
        if crds or flags.crd_files:
            installed = await install_crds(client, *crds, *flags.crd_files)
            names = ", ".join(crd["metadata"]["name"] for crd in installed)
            print(f"kubeloop run: installed {len(installed)} CRD(s): {names}", flush=True)
        if flags.as_operator:
            # The same setup again, on a manager whose client holds only the generated role.
            operator_config, user = await _as_operator(client, manager, config)
            operator_client = await scope.enter_async_context(APIClient(operator_config))
            manager = flags.manager(operator_client, config.namespace, embedded=embedded)
            run_setup(setup, manager)
            await _check_permissions(operator_client, manager, user, flags.namespaces)
        else:
            await _check_permissions(client, manager, user, flags.namespaces)
        if flags.webhook_cert_secret and flags.webhook_service and manager.webhook_server.webhooks:
            rotator = cert_rotator(
                client, flags.webhook_cert_secret, flags.webhook_service, manager, config.namespace
            )
            try:
                await rotator.provision()  # the files the webhook server starts with
            except APIError as error:
                raise ClusterUnusable(
                    f"cannot keep the webhook certificate in Secret {rotator.namespace}/{rotator.secret}: {error}",
                    "grant the operator the Role config/webhook/certificates.yaml holds",
                ) from None
            manager.add(rotator.run, name="webhook certificates", need_leader_election=False)
            print(
                f"kubeloop run: webhook certificate for {rotator.hosts[0]} in Secret "
                f"{rotator.namespace}/{rotator.secret}",
                flush=True,
            )
        if embedded and manager.webhook_server.webhooks:
            installer = _webhook_installer(client, manager, off_when_stopped=watcher is not None)
            manager.add(installer, name="webhook configurations", need_leader_election=False)
        if flags.console:
            from kubeloop.cli.console import Console  # aiohttp's server and the page: when asked for

            console = Console(
                manager,
                client,
                address=flags.console,
                title=f"kubeloop run — {config.server}",
                namespace=flags.single_namespace,
                objects=objects,
                on_serving=lambda url: print(f"kubeloop run: console at {url}", flush=True),
            )
            manager.add(console.run, name="console", need_leader_election=False)
        print(f"kubeloop run: {len(manager.controllers)} controller(s) starting", flush=True)
        if not manager.controllers:
            print(f"kubeloop run: {NO_CONTROLLERS}", file=sys.stderr, flush=True)
        tune_for_serving()
        changed: list[str] | None = None

        async def stop_on_change() -> None:
            nonlocal changed
            assert watcher is not None
            changed = await watcher.changed()
            running = {c.name: c.active_workers for c in manager.controllers.values() if c.active_workers}
            if running:
                # Reconciles are idempotent: the new code reconciles the same objects again.
                shown = ", ".join(f"{count} of {name}" for name, count in running.items())
                print(f"kubeloop run: cancelling the reconciles in flight ({shown}) to reload", flush=True)
            manager.request_stop(cancel_reconciles=True)

        watching = asyncio.create_task(stop_on_change(), name="kubeloop reload watch") if watcher else None
        if flags.view:
            from kubeloop.cli.operatorview import show_view  # rich, and the console's helpers

        viewing = (
            asyncio.create_task(
                show_view(
                    manager, client, header=f"kubeloop run — {config.server}", namespace=flags.single_namespace
                ),
                name="kubeloop view",
            )
            if flags.view
            else None
        )
        signals.manager = manager
        if signals.requested.is_set():
            manager.request_stop()
        try:
            await manager.run(handle_signals=False)
        except IncompleteBuilder as error:
            raise UsageError(str(error)) from None
        finally:
            signals.manager = None
            await cancel_and_wait([task for task in (watching, viewing) if task is not None])
    return None if signals.requested.is_set() else changed


def cert_rotator(
    client: APIClient, secret: str, service: str, manager: Manager, default_namespace: str
) -> CertRotator:
    """The rotator ``--webhook-cert-secret`` and ``--webhook-service`` name (``[namespace/]name``,
    in the operator's namespace by default)."""
    secret_namespace, _, secret_name = secret.rpartition("/")
    service_namespace, _, service_name = service.rpartition("/")
    namespace = secret_namespace or service_namespace or default_namespace
    if (service_namespace or namespace) != namespace:
        raise UsageError("--webhook-cert-secret and --webhook-service name different namespaces")
    server = manager.webhook_server
    assert server.cert_dir is not None  # ManagerFlags.manager gives one
    return CertRotator(
        client,
        namespace=namespace,
        secret=secret_name,
        service=service_name,
        cert_dir=server.cert_dir,
        cert_name=server.cert_name,
        key_name=server.key_name,
    )


def _resolver(client: APIClient) -> Callable[[GroupVersionKind], Awaitable[Resource]]:
    """A kind's resource as a policy rule names it, by the client's discovery."""

    async def resolve(gvk: GroupVersionKind) -> Resource:
        mapping = await client.mapping(gvk)
        return Resource(gvk.group, mapping.resource, mapping.subresources)

    return resolve


#: The ServiceAccount and ClusterRole (and its binding) ``--as-operator`` runs the operator with.
AS_OPERATOR = "kubeloop-operator"


async def _as_operator(admin: APIClient, manager: Manager, config: ClientConfig) -> tuple[ClientConfig, str]:
    """``--as-operator``: a ServiceAccount bound to exactly the ClusterRole ``kubeloop rbac``
    prints for this setup (leader election's Lease included), and the configuration of a client
    that acts as it; what the role lacks then shows on the first day, as it would on a cluster."""
    namespace = config.namespace
    manager.permissions.allow(LEASE, "get", "create", "update")  # deployed with --leader-elect
    role = await manager.permissions.cluster_role(AS_OPERATOR, _resolver(admin))
    rbac = "rbac.authorization.k8s.io/v1"
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": AS_OPERATOR, "namespace": namespace},
    }
    binding = {
        "apiVersion": rbac,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": AS_OPERATOR},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AS_OPERATOR},
        "subjects": [{"kind": "ServiceAccount", "name": AS_OPERATOR, "namespace": namespace}],
    }
    for obj in (account, role, binding):
        await admin.apply(obj, field_manager="kubeloop-run", force=True)
    issued = await admin.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        of=kinds.ServiceAccount,
        name=AS_OPERATOR,
        subresource="token",
        namespace=namespace,
    )
    user = f"system:serviceaccount:{namespace}:{AS_OPERATOR}"
    rules = len(role.get("rules") or ())
    print(
        f"kubeloop run: --as-operator: running as {user}, bound to ClusterRole {AS_OPERATOR} "
        f"({rules} rules: what kubeloop rbac prints)",
        flush=True,
    )
    return config.with_token(str(issued["status"]["token"])), user


#: What ``kubeloop run`` and ``kubeloop manifests`` say of a setup that registers no controller.
NO_CONTROLLERS = (
    "warning: the setup registers no controllers (no Builder(...).complete(...) ran): "
    "nothing will be reconciled, and the generated role grants only what the rest of the setup needs"
)


def _no_kind(client: APIClient, manager: Manager, missing: NoKindMatch) -> tuple[str, str]:
    """The one line (and its hint) for a kind the operator uses and the server does not serve."""
    gvk = missing.gvk
    problem = f"{client.config.server} serves no {gvk.kind} in {gvk.api_version}"
    if missing.suggestion:
        return (
            f"{problem}: did you mean {missing.suggestion}?",
            "kinds are case-sensitive, as in kubectl api-resources",
        )
    if any(model.__gvk__ == gvk for model in manager.custom_resources):
        return (
            problem,
            "its CRD is not installed: run with --install-crds, or kubeloop manifests and kubectl apply -k config/crd",
        )
    return problem, "install its CRD first, or use the kind's model in the setup so that --install-crds can"


async def _check_permissions(
    client: APIClient, manager: Manager, user: str, namespaces: Sequence[str]
) -> None:
    """ClusterUnusable when the server refuses the operator what its informers need (list and
    watch), cluster-wide or in any of ``namespaces``; other refused verbs are warned about, in
    one line per namespace."""
    try:
        rules = await manager.permissions.rules(_resolver(client))
    except NoKindMatch as missing:  # a kind the server does not serve
        raise ClusterUnusable(*_no_kind(client, manager, missing)) from None
    except APIError as error:
        raise ClusterUnusable(f"{client.config.server}: {error}") from None
    needed = [
        Needed(verb, group, *(resource.split("/", 1) if "/" in resource else (resource,)))
        for rule in rules
        for group in rule.get("apiGroups") or ()
        for resource in rule.get("resources") or ()
        for verb in rule.get("verbs") or ()
    ]
    who = user or "the operator"
    # The Lease is the leader election's namespace's, wherever the cache looks.
    election = manager.elector.config.namespace if manager.elector is not None else None
    lease = [need for need in needed if (need.group, need.resource) == (LEASE.group, "leases")]
    scopes: list[tuple[str | None, list[Needed]]] = [
        (namespace, [need for need in needed if need not in lease or election is None])
        for namespace in namespaces or (None,)
    ]
    if election is not None and lease:
        scopes.append((election, lease))
    for namespace, asked in scopes:
        refused = await check_permissions(client, asked, namespace)
        where = f"in namespace {namespace}" if namespace else "cluster-wide"
        blocking = [need for need in refused if need.verb in ("list", "watch") and not need.subresource]
        if blocking:
            raise ClusterUnusable(
                f"{who} may not {_grouped(blocking)} {where} on {client.config.server}",
                "grant it the ClusterRole `kubeloop rbac TARGET` prints",
            )
        if refused:
            print(
                f"kubeloop run: warning: {who} may not {_grouped(refused)} {where}: reconciles that need it will fail",
                file=sys.stderr,
                flush=True,
            )


def _grouped(refused: list[Needed]) -> str:
    """``list, watch configmaps; create deployments.apps``: the verbs of each resource."""
    verbs: dict[str, list[str]] = {}
    for need in refused:
        verbs.setdefault(need.resource_name, []).append(need.verb)
    return "; ".join(f"{', '.join(listed)} {name}" for name, listed in verbs.items())


def _webhook_installer(
    client: APIClient, manager: Manager, *, off_when_stopped: bool = False
) -> Callable[[asyncio.Event], Awaitable[None]]:
    """A runnable that installs the manager's webhook configurations once it serves them; with
    ``off_when_stopped`` (``--reload``) it deletes them again when the manager stops, so that
    while the new code loads (or does not) writes of their kinds are not refused by a webhook
    nobody serves."""

    async def install(stop: asyncio.Event) -> None:
        installed = await install_webhook_configurations(client, manager.webhook_server)
        names = ", ".join(f"{c['kind']}/{c['metadata']['name']}" for c in installed)
        print(f"kubeloop run: webhooks at {manager.webhook_server.address} installed: {names}", flush=True)
        await stop.wait()
        if not off_when_stopped:
            return
        admission = [c for c in installed if c["kind"].endswith("WebhookConfiguration")]
        for configuration in admission:
            with contextlib.suppress(errors.NotFound):
                await client.delete(configuration, configuration["metadata"]["name"])
        if admission:
            names = ", ".join(f"{c['kind']}/{c['metadata']['name']}" for c in admission)
            print(f"kubeloop run: webhooks off until the operator is back: {names}", flush=True)

    return install


@contextlib.asynccontextmanager
async def _set_up_on_an_embedded_server(target: str) -> AsyncIterator[tuple[APIClient, Manager, ModuleType]]:
    """TARGET's setup run on a manager (not started) of an embedded server holding the CRDs of
    its models and of those its setup uses: what ``kubeloop rbac``, ``webhook`` and ``manifests``
    read what the operator registers from. A kind the setup uses and nothing defines is a
    :class:`UsageError` naming it."""
    from kubeloop.apiserver.server import APIServer, ServerOptions

    module, attribute = load_target(target)
    setup = setup_of(target, module, attribute)
    async with (
        APIServer(ServerOptions(memory=True, port=0, controllers=False)) as server,
        APIClient(load_config(str(server.kubeconfig_path))) as client,
    ):
        manager = Manager(client)
        run_setup(setup, manager)
        await install_crds(client, *module_crds(module, manager))
        try:
            yield client, manager, module
        except NoKindMatch as missing:
            gvk = missing.gvk
            hint = (
                f"did you mean {missing.suggestion}?"
                if missing.suggestion
                else "it is not a built-in kind, and no model of the operator's defines it"
            )
            raise UsageError(f"the setup uses {gvk.kind} of {gvk.api_version}", hint) from None


@dataclass(frozen=True)
class OperatorManifests:
    """What a project's ``config/`` is written from: its CRDs, its ClusterRole and its webhook
    configurations (with the patches of the CRDs it converts)."""

    crds: list[dict[str, Any]]
    role: dict[str, Any]
    webhook_configurations: list[dict[str, Any]]
    controllers: int


async def required_manifests(target: str, *, role: str, service: str, namespace: str) -> OperatorManifests:
    """Everything ``kubeloop manifests`` writes, computed from one setup of TARGET's operator."""
    async with _set_up_on_an_embedded_server(target) as (client, manager, module):
        manager.permissions.allow(LEASE, "get", "create", "update")  # deployed with --leader-elect
        cluster_role = await manager.permissions.cluster_role(role, _resolver(client))
        configurations = await _webhook_configurations(client, manager, service, namespace)
        return OperatorManifests(
            module_crds(module, manager), cluster_role, configurations, len(manager.controllers)
        )


async def _webhook_configurations(
    client: APIClient,
    manager: Manager,
    service: str,
    namespace: str,
    name_prefix: str = "",
    ca_bundle: bytes | None = None,
) -> list[dict[str, Any]]:
    async def resolve(gvk: GroupVersionKind) -> str:
        return (await client.mapping(gvk)).resource

    client_config = service_client_config(service, namespace, ca_bundle=ca_bundle)
    configurations = await webhook_configurations(
        manager.webhook_server, resolve, client_config, name_prefix=name_prefix
    )
    return configurations + crd_conversion_patches(manager.webhook_server, client_config)


async def required_webhook_configurations(
    target: str, *, service: str, namespace: str, name_prefix: str = "", ca_bundle: bytes | None = None
) -> list[dict[str, Any]]:
    """The webhook configurations TARGET's operator needs, calling ``service`` in ``namespace``,
    then the patches of the CRDs it converts (``kubeloop webhook``)."""
    async with _set_up_on_an_embedded_server(target) as (client, manager, _):
        return await _webhook_configurations(client, manager, service, namespace, name_prefix, ca_bundle)


async def required_cluster_role(target: str, name: str) -> dict[str, Any]:
    """The ClusterRole TARGET's operator needs (``kubeloop rbac``)."""
    async with _set_up_on_an_embedded_server(target) as (client, manager, _):
        manager.permissions.allow(LEASE, "get", "create", "update")  # deployed with --leader-elect
        return await manager.permissions.cluster_role(name, _resolver(client))
