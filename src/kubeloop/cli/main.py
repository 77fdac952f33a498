"""Argument parsing and dispatch for the ``kubeloop`` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import logging
import os
import pathlib
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubeloop.cli import eventloop
from kubeloop.version import __version__

if TYPE_CHECKING:
    from kubeloop.apiserver.audit.policy import AuditPolicy
    from kubeloop.apiserver.frontends import FrontEndProcesses


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubeloop", description="Kubernetes controller-runtime for Python.")
    parser.add_argument("--version", action="version", version=f"kubeloop {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="-v: a line per reconcile; -vv: debug, everything"
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines as text or JSON (default text)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    server = commands.add_parser("apiserver", help="serve the embedded Kubernetes-compatible API server")
    _server_flags(server)

    run = commands.add_parser(
        "run", help="run an operator (module:attribute, a file, or a directory with main.py)"
    )
    run.add_argument("target", help="module:attribute, a Python file, or a directory holding main.py")
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--kubeconfig", help="the cluster to run against (default: $KUBECONFIG, ~/.kube/config, in-cluster)"
    )
    where.add_argument("--embedded", action="store_true", help="start an embedded API server in this process")
    run.add_argument("--context", help="the kubeconfig context to use")
    run.add_argument(
        "--simulate",
        action="store_true",
        help="with --embedded: simulate workloads (a node, pods that run, Deployments and Jobs that progress)",
    )
    run.add_argument(
        "--local-image",
        action="append",
        default=[],
        metavar="IMAGE=COMMAND",
        help="with --embedded --simulate: run the containers of IMAGE as processes on this machine "
        "(as kubeloop apiserver --local-image: COMMAND is the entrypoint, or host; repeatable)",
    )
    run.add_argument(
        "--data-dir", type=pathlib.Path, help="with --embedded: keep its state here (default: in memory)"
    )
    run.add_argument(
        "--view",
        action="store_true",
        help="a live view of the controllers, the latest reconciles and events (logs: warnings only, unless -v)",
    )
    run.add_argument(
        "--console",
        metavar="HOST:PORT",
        help="serve a live web console of the operator here, e.g. 127.0.0.1:8090 (:8090 is loopback too) "
        "(controllers, reconciles, events; with --embedded the objects and their owner trees)",
    )
    run.add_argument(
        "--reload",
        action="store_true",
        help="restart the manager on the new code when a .py file of the operator changes "
        "(the process and an embedded server stay)",
    )
    run.add_argument(
        "--namespace", help="cache and watch only this namespace, or these (comma-separated; default: all)"
    )
    run.add_argument(
        "--metrics-bind-address", help='serve /metrics here, e.g. ":8080" ("0": off, the default)'
    )
    run.add_argument(
        "--metrics-secure",
        action="store_true",
        help="serve /metrics over HTTPS only, to callers the API server authenticates (TokenReview) "
        "and allows get on /metrics (SubjectAccessReview), as kubebuilder v4 deploys operators",
    )
    run.add_argument(
        "--debug-endpoints",
        action="store_true",
        help="serve /debug/tasks, /debug/threads and /debug/tracemalloc on the metrics server (behind "
        "--metrics-secure's checks: bind get on the nonResourceURL /debug/* to who may look)",
    )
    run.add_argument(
        "--metrics-cert-path",
        help="with --metrics-secure: the directory of tls.crt and tls.key, reloaded when they change "
        "(default: a certificate made for the process)",
    )
    run.add_argument(
        "--health-probe-bind-address",
        help='serve /healthz and /readyz here, e.g. ":8081" ("0": off, the default)',
    )
    run.add_argument("--leader-elect", action="store_true", help="run controllers only while holding a Lease")
    run.add_argument("--leader-election-id", help="the Lease's name")
    run.add_argument(
        "--leader-election-namespace", help="the Lease's namespace (default: --namespace or the kubeconfig's)"
    )

    run.add_argument(
        "--as-operator",
        action="store_true",
        help="with --embedded: run the operator as a ServiceAccount bound to exactly the ClusterRole "
        "kubeloop rbac prints, so a permission the role lacks shows now, not in production",
    )
    run.add_argument(
        "--install-crds",
        action="store_true",
        help="first install the CRDs of the custom resource models the target defines or imports",
    )
    run.add_argument(
        "--crds",
        action="append",
        default=[],
        metavar="PATH",
        help="also install the CRDs in this file or folder (repeatable)",
    )
    run.add_argument(
        "--webhook-port",
        type=int,
        help="the webhook server's port (default 9443; with --embedded a free one)",
    )
    run.add_argument(
        "--webhook-cert-dir",
        help="serve webhooks with tls.crt and tls.key from this folder, reloaded when they change "
        "(default: a development certificate)",
    )
    run.add_argument(
        "--webhook-cert-secret",
        metavar="[NAMESPACE/]NAME",
        help="keep the webhooks' serving certificate in this Secret, made when missing and renewed, and "
        "inject its CA into the configurations calling --webhook-service (no cert-manager needed; "
        "default namespace: the operator's)",
    )
    run.add_argument(
        "--webhook-service",
        metavar="[NAMESPACE/]NAME",
        help="the Service kube-apiserver calls the webhooks through (with --webhook-cert-secret)",
    )

    crd = commands.add_parser(
        "crd", help="print the CRDs of the custom resource models a module defines or imports, as YAML"
    )
    crd.add_argument("target", help="a module, a Python file, or a directory holding main.py")

    rbac = commands.add_parser(
        "rbac",
        help="print the ClusterRole an operator needs (what its controllers watch, own and write), as YAML",
    )
    rbac.add_argument("target", help="a module, a Python file, or a directory holding main.py")
    rbac.add_argument("--name", default="manager-role", help="the ClusterRole's name (default manager-role)")

    webhook = commands.add_parser(
        "webhook",
        help="print the webhook configurations and CRD conversion patches an operator's webhooks need, as YAML",
    )
    webhook.add_argument("target", help="a module, a Python file, or a directory holding main.py")
    webhook.add_argument(
        "--service",
        default="webhook-service",
        help="the Service in front of the webhook server (default webhook-service)",
    )
    webhook.add_argument("--namespace", default="system", help="the Service's namespace (default system)")
    webhook.add_argument(
        "--name-prefix", default="", help="put before the configurations' names (kustomize's namePrefix)"
    )
    webhook.add_argument(
        "--ca-bundle",
        type=pathlib.Path,
        metavar="FILE",
        help="the CA certificate (PEM) that signed the webhook server's; default: none, for cert-manager's CA injector",
    )

    init = commands.add_parser("init", help="create an operator project in a new folder NAME")
    init.add_argument("name", help="the project's name: lower-case letters, digits and '-' (blog-operator)")
    init.add_argument(
        "--domain",
        default="example.com",
        help="the domain of the project's API groups: create api --group web makes web.DOMAIN (default example.com)",
    )
    create = commands.add_parser("create", help="add to the project in the current folder: create api ...")
    what = create.add_subparsers(dest="what", required=True)
    api = what.add_parser("api", help="a kind: its model, a controller, a test and a sample")
    api.add_argument(
        "--group", required=True, help="the API group: web (under the project's domain) or web.example.com"
    )
    api.add_argument("--version", required=True, help="the API version: v1, v1alpha1 ...")
    api.add_argument("--kind", required=True, help="the kind, in CamelCase: Website")
    hook = what.add_parser("webhook", help="a defaulting and/or validating webhook of a kind, and its test")
    hook.add_argument("--group", required=True, help="the kind's API group")
    hook.add_argument("--version", required=True, help="the kind's API version")
    hook.add_argument("--kind", required=True, help="the kind")
    hook.add_argument("--defaulting", action="store_true", help="a defaulter (a mutating webhook)")
    hook.add_argument("--validation", action="store_true", help="a validator (a validating webhook)")
    manifests = commands.add_parser(
        "manifests", help="write a project's config/crd and config/rbac/role.yaml from its code"
    )
    manifests.add_argument(
        "folder", nargs="?", default=".", type=pathlib.Path, help="the project (default .)"
    )
    demo = commands.add_parser(
        "demo", help="the agent platform operator on the embedded server, with samples and a live view"
    )
    demo.add_argument(
        "--once",
        action="store_true",
        help="wait until everything converged, print it and exit (1: it did not)",
    )
    demo.add_argument(
        "--timeout", type=float, default=30.0, help="how long --once waits (seconds, default 30)"
    )
    demo.add_argument("--data-dir", type=pathlib.Path, help="keep the demo's state here (default: in memory)")
    demo.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")
    demo.add_argument(
        "--webhook-port", type=int, default=0, help="port of the operator's run webhook (default: a free one)"
    )
    demo.add_argument(
        "--operator",
        type=pathlib.Path,
        help="the operator's folder, with config/samples/ (default: examples/agents)",
    )
    for command in commands.choices.values():  # -v after the command too: kubeloop run -v TARGET
        command.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=argparse.SUPPRESS,
            help="-v: a line per reconcile; -vv: debug",
        )
    return parser


def _server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", type=pathlib.Path, help="state, PKI and kubeconfig (default ~/.local/share/kubeloop)"
    )
    parser.add_argument("--memory", action="store_true", help="keep all state in memory")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=6443, help="port to listen on (0: a free one)")
    parser.add_argument("--kubeconfig", type=pathlib.Path, help="where to write the kubeconfig")
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="commit without fsync (writes survive a crash of the process, not of the machine)",
    )
    parser.add_argument("--insecure-http", action="store_true", help="serve plain HTTP (benchmarks only)")
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="simulate workloads: a node, pods that run, Jobs that finish (kwok-style)",
    )
    parser.add_argument(
        "--local-image",
        action="append",
        default=[],
        metavar="IMAGE=COMMAND",
        help="with --simulate: run the containers of IMAGE (a repository without a tag: every tag) as "
        "processes on this machine, COMMAND as the image's entrypoint; IMAGE=host runs the container's "
        "own command and args here. Opt-in, image by image: they run with your user's rights, "
        "unisolated (repeatable). Images installed packages declare (entry points kubeloop.images) "
        "run too, unless --no-installed-images",
    )
    parser.add_argument(
        "--no-installed-images",
        action="store_true",
        help="with --simulate: simulate the images installed packages declare instead of running them",
    )
    parser.add_argument(
        "--no-fork-server",
        action="store_true",
        help="with --simulate: start every local container's process anew, Python images' too "
        "(by default a warm interpreter forks them, with the libraries their package requires "
        "imported once)",
    )
    parser.add_argument(
        "--no-controllers",
        action="store_true",
        help="serve the API alone: no garbage collector or namespace controller "
        "(kube-apiserver without kube-controller-manager)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes serving the port (default: the cores this process may run on; 1 with "
        "--memory): this one, which keeps the store and runs the node, and WORKERS-1 front-end "
        "processes over it",
    )
    parser.add_argument(
        "--history-window",
        type=int,
        default=100_000,
        help="changes kept for watches from old resourceVersions (older ones get 410)",
    )
    parser.add_argument(
        "--history-bytes",
        type=int,
        default=128 * 1024 * 1024,
        help="bytes of JSON those changes may hold (default 128 MiB)",
    )
    parser.add_argument(
        "--compaction-interval",
        type=float,
        default=300.0,
        help="seconds between history compactions (default 300, as kube-apiserver)",
    )
    parser.add_argument(
        "--audit-log-path",
        metavar="PATH",
        help="append an audit.k8s.io/v1 Event per request stage to PATH, one JSON line each ('-': stdout)",
    )
    parser.add_argument(
        "--audit-policy-file",
        type=pathlib.Path,
        metavar="FILE",
        help="the audit Policy saying which requests are logged at which level "
        "(default with --audit-log-path: every request at Metadata)",
    )
    parser.add_argument(
        "--service-account-max-token-expiration",
        type=int,
        default=48 * 3600,
        metavar="SECONDS",
        help="the longest a ServiceAccount token is issued for; a TokenRequest for longer gets this "
        "(default 172800: two days)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    from kubeloop.cli.logs import configure
    from kubeloop.cli.usage import UsageError
    from kubeloop.manager.targeterror import TargetError

    configure(verbose=args.verbose, json_format=args.log_format == "json")
    try:
        return _command(args)
    except UsageError as error:
        print(error.line(args.command), file=sys.stderr, flush=True)
        return error.exit_code
    except TargetError as error:
        print(UsageError(error.message, error.hint).line(args.command), file=sys.stderr, flush=True)
        return UsageError.exit_code


def _command(args: argparse.Namespace) -> int:
    if args.command in ("init", "create", "manifests"):
        return _scaffold(args)
    if args.command == "apiserver":
        from kubeloop.gcpause import start_up_without_gc

        start_up_without_gc()  # until tune_for_serving, once the server has started
        code = eventloop.run(_serve(args))
        # The server has stopped cleanly (watchers closed, the log flushed and closed). Tearing
        # the interpreter down would now free every stored object one by one — 6 s for 20,000
        # Pods, half a minute for 100,000 — so leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if args.command == "run":
        from kubeloop.cli.run import ManagerFlags, run

        if args.view and not args.verbose:  # the view says what happens; warnings are logged beside it
            logging.getLogger().setLevel(logging.WARNING)
        flags = ManagerFlags(
            namespace=args.namespace,
            metrics_bind_address=args.metrics_bind_address,
            metrics_secure=args.metrics_secure,
            metrics_cert_path=args.metrics_cert_path,
            debug_endpoints=args.debug_endpoints,
            health_probe_bind_address=args.health_probe_bind_address,
            leader_elect=args.leader_elect,
            leader_election_id=args.leader_election_id,
            leader_election_namespace=args.leader_election_namespace,
            install_crds=args.install_crds,
            crd_files=tuple(args.crds),
            webhook_port=args.webhook_port,
            webhook_cert_dir=args.webhook_cert_dir,
            webhook_cert_secret=args.webhook_cert_secret,
            webhook_service=args.webhook_service,
            view=args.view,
            console=args.console,
            as_operator=args.as_operator,
        )
        return eventloop.run(
            run(
                args.target,
                kubeconfig=args.kubeconfig,
                context=args.context,
                embedded=args.embedded,
                data_dir=args.data_dir,
                flags=flags,
                simulate=args.simulate,
                local_images=tuple(args.local_image),
                reload=args.reload,
            )
        )
    if args.command == "rbac":
        from kubeloop.api.crdgen import to_yaml
        from kubeloop.cli.run import required_cluster_role

        logging.getLogger().setLevel(logging.WARNING)  # the embedded server it asks is no news
        sys.stdout.write(to_yaml([asyncio.run(required_cluster_role(args.target, args.name))]))
        return 0
    if args.command == "webhook":
        from kubeloop.api.crdgen import to_yaml
        from kubeloop.cli.run import required_webhook_configurations

        logging.getLogger().setLevel(logging.WARNING)
        ca_bundle = args.ca_bundle.read_bytes() if args.ca_bundle is not None else None
        configurations = asyncio.run(
            required_webhook_configurations(
                args.target,
                service=args.service,
                namespace=args.namespace,
                name_prefix=args.name_prefix,
                ca_bundle=ca_bundle,
            )
        )
        if not configurations:
            print(
                f"kubeloop webhook: {args.target} registers no webhooks",
                file=sys.stderr,
                flush=True,
            )
            return 1
        sys.stdout.write(to_yaml(configurations))
        return 0
    if args.command == "crd":
        from kubeloop.api.crdgen import to_yaml
        from kubeloop.api.structuralschema import SchemaConversionError
        from kubeloop.manager.operatortarget import load_target, module_crds

        try:
            crds = module_crds(load_target(args.target)[0])
        except SchemaConversionError as error:
            print(f"kubeloop crd: {error}", file=sys.stderr, flush=True)
            return 1
        if not crds:
            print(f"kubeloop crd: {args.target} holds no custom resource models", file=sys.stderr, flush=True)
            return 1
        sys.stdout.write(to_yaml(crds))
        return 0
    if args.command == "demo":
        from kubeloop.cli.demo import run_demo

        if not args.verbose:  # the view says what happens; only warnings are logged beside it
            logging.getLogger().setLevel(logging.WARNING)

        async def demo_until_stopped() -> int:
            # SIGTERM (a process manager's stop, `timeout`) ends it as Ctrl-C does: the server
            # stops its pods' processes on the way out rather than leaving them behind.
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
            return await run_demo(
                once=args.once,
                data_dir=args.data_dir,
                port=args.port,
                timeout=args.timeout,
                operator=args.operator,
                webhook_port=args.webhook_port,
            )

        try:
            code = eventloop.run(demo_until_stopped())
        except (KeyboardInterrupt, asyncio.CancelledError):
            code = 0
        if args.once:
            return code
        # The live view's writer may be blocked on an output nobody reads, holding stdout's lock:
        # the interpreter's own exit would wait on it for ever (demo.ViewWriter).
        sys.stderr.flush()
        os._exit(code)
    return 2


async def _serve(args: argparse.Namespace) -> int:
    from kubeloop.apiserver.audit.policy import AuditPolicyError, load_policy
    from kubeloop.apiserver.frontends import FrontEndProcesses, available_cores
    from kubeloop.node.localimages import LocalImages

    audit_policy = None
    if args.audit_policy_file is not None:
        if args.audit_log_path is None:
            print("kubeloop apiserver: --audit-policy-file needs --audit-log-path", file=sys.stderr)
            return 2
        try:
            audit_policy = load_policy(args.audit_policy_file)
        except AuditPolicyError as error:
            print(f"kubeloop apiserver: {error}", file=sys.stderr)
            return 2
    if args.workers is None:
        args.workers = 1 if args.memory else available_cores()
    if args.workers < 1:
        print("kubeloop apiserver: --workers must be at least 1", file=sys.stderr)
        return 2
    if args.local_image and not args.simulate:
        print("kubeloop apiserver: --local-image needs --simulate (a node to run them on)", file=sys.stderr)
        return 2
    try:
        LocalImages.parse(args.local_image)
    except ValueError as error:
        print(f"kubeloop apiserver: {error}", file=sys.stderr)
        return 2
    # The front-ends are launched before this process imports the server, so that all of them
    # import it at once (on as many cores): served once this one has started.
    front_ends = FrontEndProcesses(args.workers - 1) if args.workers > 1 else None
    if front_ends is not None:
        await front_ends.launch()
    try:
        return await _serve_from(args, audit_policy, front_ends)
    finally:
        if front_ends is not None:
            await front_ends.stop()


async def _serve_from(
    args: argparse.Namespace, audit_policy: AuditPolicy | None, front_ends: FrontEndProcesses | None
) -> int:
    from kubeloop.apiserver.datadir import DataDirectoryInUse
    from kubeloop.apiserver.kubeconfig import KubeconfigError
    from kubeloop.apiserver.server import APIServer, ServerOptions
    from kubeloop.gcpause import tune_for_serving
    from kubeloop.node.simulation import SimulationOptions

    options = ServerOptions(
        simulation=SimulationOptions(
            local_images=tuple(args.local_image),
            installed_images=not args.no_installed_images,
            fork_server=not args.no_fork_server,
        ),
        data_dir=args.data_dir,
        memory=args.memory,
        host=args.host,
        port=args.port,
        workers=args.workers,
        kubeconfig=args.kubeconfig,
        fsync=not args.no_fsync,
        insecure_http=args.insecure_http,
        history_window=args.history_window,
        history_bytes=args.history_bytes,
        compaction_interval=args.compaction_interval,
        controllers=not args.no_controllers,
        simulate=args.simulate,
        audit_log_path=args.audit_log_path,
        audit_policy=audit_policy,
        service_account_max_token_expiration=args.service_account_max_token_expiration,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGQUIT prints every thread's stack to stderr and the server goes on (a Go server's
    # goroutine dump, without the exit): what a stalled server is doing, without a debugger.
    faulthandler.register(signal.SIGQUIT, all_threads=True)
    server = APIServer(options, front_ends=front_ends)
    try:
        await server.start()
    except (DataDirectoryInUse, KubeconfigError, OSError) as error:
        await server.stop()
        print(f"kubeloop apiserver: {error}", file=sys.stderr, flush=True)
        return 1
    tune_for_serving(collect_first=False)
    async with server:
        print(f"kubeloop apiserver ready at {server.url} kubeconfig={server.kubeconfig_path}", flush=True)
        await stop.wait()
        # A second signal while shutting down exits at once.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, _exit_now)
    return 0


def _scaffold(args: argparse.Namespace) -> int:
    """``kubeloop init``, ``create api`` and ``manifests``: they print what they wrote."""
    from kubeloop.cli import scaffold
    from kubeloop.cli.manifests import write_manifests

    logging.getLogger().setLevel(logging.WARNING)  # the embedded server they ask is no news
    here = pathlib.Path.cwd()
    if args.command == "init":
        root = scaffold.init_project(args.name, here, args.domain)
        asyncio.run(write_manifests(root, warn=False))  # a new project has no controllers yet
        print(f"kubeloop init: wrote {root.name}/: cd {root.name}, then kubeloop create api ...")
        return 0
    if args.command == "create":
        if args.what == "webhook":
            written = scaffold.create_webhook(
                here,
                args.group,
                args.version,
                args.kind,
                defaulting=args.defaulting,
                validation=args.validation,
            )
        else:
            written = scaffold.create_api(here, args.group, args.version, args.kind)
        for path in written:
            print(f"kubeloop create {args.what}: wrote {path.relative_to(here)}")
        folder = here
    else:
        folder = args.folder.resolve()
    for path in asyncio.run(write_manifests(folder)):
        command = f"create {args.what}" if args.command == "create" else args.command
        print(f"kubeloop {command}: wrote {path.relative_to(folder)}")
    return 0


def _exit_now() -> None:
    with contextlib.suppress(Exception):
        sys.stderr.write("second signal: exiting at once\n")
    os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
