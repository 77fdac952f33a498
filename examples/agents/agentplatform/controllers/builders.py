"""What the platform's controllers build alike: labels and the config hash, the Deployments and
Services they own, an agent's pod (an Agent's Deployment and an AgentRun's Job run the same
container), the names of owned ConfigMaps, and status writes only when something changed.
Controllers import this module, never each other."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import kubeloop

from ..api.v1alpha1 import (
    GROUP,
    AgentSpec,
    EndpointSpec,
    MCPServer,
    ServingRuntime,
    ServingRuntimeSpec,
    SkillPack,
)

MANAGED_BY = "kubeloop-agents"


CONFIG_HASH = f"{GROUP}/config-hash"
#: On every pod that acts as an agent (its Deployment's and its runs'): what its NetworkPolicy selects.
AGENT_LABEL = f"{GROUP}/agent"


def labels(component: str, instance: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def config_hash(*parts: Any) -> str:
    """A short, stable digest of what a workload was built from (JSON with sorted keys)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def service_url(name: str, namespace: str, port: int) -> str:
    return f"http://{name}.{namespace}.svc.cluster.local:{port}"


def env_list(*layers: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Environment variables merged by name (a later layer overrides), sorted by name."""
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for var in layer:
            merged[str(var["name"])] = dict(var)
    return [merged[name] for name in sorted(merged)]


def named(kind: kubeloop.GroupVersionKind, name: str, namespace: str) -> kubeloop.Obj:
    """The skeleton ``create_or_update`` starts from."""
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace},
    }


def set_deployment(
    deployment: kubeloop.Obj,
    *,
    replicas: int,
    selector: dict[str, str],
    annotations: dict[str, str],
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
) -> None:
    """Set what the platform owns in a Deployment, leaving the server's defaults in place (so an
    unchanged Deployment is not written again)."""
    spec = deployment.setdefault("spec", {})
    spec["replicas"] = replicas
    spec["selector"] = {"matchLabels": selector}
    template = spec.setdefault("template", {})
    meta = template.setdefault("metadata", {})
    meta["labels"] = selector
    meta["annotations"] = annotations
    pod = template.setdefault("spec", {})
    # Left-out lists are absent on the server, and absent resources are {} (Go's empty struct).
    container = {key: value for key, value in container.items() if value not in (None, [], {})}
    container.setdefault("resources", {})
    containers = pod.get("containers") or []
    current: dict[str, Any] = next((c for c in containers if c.get("name") == container["name"]), {})
    for key in ("command", "args", "env", "volumeMounts"):
        if key not in container:
            current.pop(key, None)
    current.update(container)
    pod["containers"] = [current]
    if volumes:
        pod["volumes"] = volumes
    else:
        pod.pop("volumes", None)


def model_port(base_url: str | None) -> int:
    """The port a model endpoint is reached on (443 when no base URL is given: a hosted API)."""
    return url_port(base_url) if base_url else 443


def url_port(url: str) -> int:
    """The port an http(s) URL is reached on (its scheme's when it names none, or none valid)."""
    parts = urlsplit(url)
    try:
        given = parts.port
    except ValueError:  # out of range: the connection fails, and says so, in the pod
        given = None
    return given or (80 if parts.scheme == "http" else 443)


def mcp_server_peer(server: MCPServer) -> tuple[dict[str, str] | None, int]:
    """Where a NetworkPolicy lets an agent reach ``server``: its pods on its port, or (a server
    at a URL) any address on the URL's port."""
    if server.spec.url:
        return None, url_port(server.spec.url)
    return labels("mcp-server", server.metadata.name or ""), server.spec.port


def network_policy_spec(
    selector: dict[str, str],
    *,
    channels: dict[str, str],
    operator_namespace: str,
    port: int,
    mcp_servers: list[tuple[dict[str, str] | None, int]],
    model_port: int,
    api_server: tuple[list[str], int] | None = None,
) -> dict[str, Any]:
    """An agent's NetworkPolicy: in from its channels' pods and the operator's namespace on its
    port; out to the cluster's DNS, the pods of ``mcp_servers`` (its MCP servers, and its memory
    server; labels None: a server at a URL, any address) on their ports, the ``api_server``'s
    addresses on its port (its runs read the cluster as their own accounts), and any address on
    its model endpoint's port."""
    tcp = "TCP"
    egress: list[dict[str, Any]] = [
        {
            "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": tcp, "port": 53}],
        }
    ]
    for selected, server_port in mcp_servers:
        to = {"to": [{"podSelector": {"matchLabels": selected}}]} if selected is not None else {}
        egress.append({**to, "ports": [{"protocol": tcp, "port": server_port}]})
    if api_server is not None:
        addresses, api_port = api_server
        egress.append(
            {
                "to": [{"ipBlock": {"cidr": f"{address}/{128 if ':' in address else 32}"}} for address in addresses],
                "ports": [{"protocol": tcp, "port": api_port}],
            }
        )
    egress.append({"ports": [{"protocol": tcp, "port": model_port}]})
    return {
        "podSelector": {"matchLabels": selector},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {
                "from": [
                    {"podSelector": {"matchLabels": channels}},
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": operator_namespace}
                        }
                    },
                ],
                "ports": [{"protocol": tcp, "port": port}],
            }
        ],
        "egress": egress,
    }


def set_service(service: kubeloop.Obj, selector: dict[str, str], port: int) -> None:
    spec = service.setdefault("spec", {})
    spec["type"] = "ClusterIP"
    spec["selector"] = selector
    spec["ports"] = [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]


def restricted_pod() -> dict[str, Any]:
    """The pod security context of every pod the platform runs: Kubernetes' "restricted" Pod
    Security Standard, as uid and gid 1000."""
    return {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def no_api_account(account: kubeloop.Obj) -> None:
    """A workload's own ServiceAccount, for pods that need no API access: no token is mounted
    (the namespace's ``default`` account, and what RBAC grants it, is not theirs either)."""
    account["automountServiceAccountToken"] = False


def run_as_own_account(pod: dict[str, Any], account: str) -> None:
    """Run ``pod`` as ``account`` with no API token mounted (``no_api_account``'s pods)."""
    pod["serviceAccountName"] = account
    pod["automountServiceAccountToken"] = False


def restricted_container() -> dict[str, Any]:
    """Each container's part of it: no privilege escalation, no capability, a read-only root
    filesystem (the pod gives a writable ``/tmp``)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


#: The writable scratch space of a pod whose root filesystem is read-only.
TMP_VOLUME: dict[str, Any] = {"name": "tmp", "emptyDir": {}}
TMP_MOUNT: dict[str, Any] = {"name": "tmp", "mountPath": "/tmp"}


def config_map_volume(name: str, config_map: str) -> dict[str, Any]:
    return {"name": name, "configMap": {"name": config_map, "defaultMode": 420}}


def http_port(port: int) -> list[dict[str, Any]]:
    return [{"name": "http", "containerPort": port, "protocol": "TCP"}]


def deployment_ready(deployment: kubeloop.Obj | None) -> tuple[bool, int, str]:
    """Whether a Deployment has rolled out every replica; its ready count; why not (with the
    server's refusal of its pods, when its ReplicaFailure condition says so)."""
    if deployment is None:
        return False, 0, "no Deployment yet"
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted, ready = int(spec.get("replicas", 1)), int(status.get("readyReplicas") or 0)
    if int(status.get("observedGeneration") or 0) < int(deployment["metadata"].get("generation") or 0):
        return False, ready, "the Deployment's change is not observed yet"
    updated, available = int(status.get("updatedReplicas") or 0), int(status.get("availableReplicas") or 0)
    if updated < wanted or available < wanted or int(status.get("replicas") or 0) > wanted:
        refused = kubeloop.find_status_condition(deployment, "ReplicaFailure") or {}
        why = f": {refused['message']}" if refused.get("status") == "True" and refused.get("message") else ""
        return False, ready, f"{available} of {wanted} replicas available{why}"
    return True, ready, f"{available} of {wanted} replicas available"


async def write_status(
    client: kubeloop.Client, obj: kubeloop.KubeObject, status: dict[str, Any], *, if_unchanged: bool = False
) -> bool:
    """Merge-patch ``status`` through /status if it differs from the object's; whether it did
    (not when the object is gone meanwhile: there is nothing left to report on). With
    ``if_unchanged`` the patch holds ``obj``'s resourceVersion: Conflict (the reconcile is
    retried) when the object changed since it was read, as a cache behind the writes just made
    would have it write again what it already wrote."""
    read = obj.to_dict()
    current = read.get("status") or {}
    if all(current.get(key) == value for key, value in status.items()):
        return False
    patch: dict[str, Any] = {"status": status}
    if if_unchanged:
        patch["metadata"] = {"resourceVersion": (read.get("metadata") or {}).get("resourceVersion")}
    try:
        await client.patch(obj, None, patch, subresource="status")
    except kubeloop.errors.NotFound:
        return False
    return True


def config_map_name(pack: str) -> str:
    return f"skillpack-{pack}"


def url_of(server: MCPServer) -> str:
    """Where agents reach an MCP server: its URL, or (one the platform runs) its Service, port
    and path."""
    if server.spec.url:
        return server.spec.url
    base = service_url(server.metadata.name or "", server.metadata.namespace or "", server.spec.port)
    return base + server.spec.path


CONFIG_DIR = "/etc/agent"
MEMORY_DIR = "/memory"
#: Where an agent's pods find the model's API key, as a file (``MODEL_API_KEY_FILE``): no
#: environment variable holds it, so the tools a pod runs do not inherit it.
MODEL_CREDENTIALS_DIR = f"/var/run/secrets/{GROUP}/model"
#: Where they find the values of their MCP servers' headers, a file each (``MCP_HEADERS`` says which).
MCP_HEADERS_DIR = f"/var/run/secrets/{GROUP}/mcp-headers"


def config_map_of(agent: str) -> str:
    return f"{agent}-config"


async def resolve_runtime(client: kubeloop.Client, name: str) -> tuple[ServingRuntime | None, str, str]:
    """The ServingRuntime ``name`` if it exists and is enabled; the reason and message either way."""
    try:
        runtime = await client.get(ServingRuntime, name)
    except kubeloop.errors.NotFound:
        return None, "RuntimeNotFound", f"ServingRuntime {name} does not exist"
    if runtime.spec.disabled:
        return None, "RuntimeDisabled", f"ServingRuntime {name} is disabled"
    return runtime, "Resolved", f"ServingRuntime {name}"


def tool_filters(server: MCPServer) -> dict[str, list[str]]:
    """An MCP server's allowTools and denyTools, as the runner takes them (empty: none)."""
    found = {"allow": sorted(server.spec.allow_tools), "deny": sorted(server.spec.deny_tools)}
    return {key: names for key, names in found.items() if names}


@dataclasses.dataclass(frozen=True)
class AgentTools:
    """What an agent's pods call tools with, resolved from the objects its spec names."""

    #: Its skill packs that exist: name → skill → text.
    packs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    #: Its MCP servers' URLs.
    mcp_urls: list[str] = dataclasses.field(default_factory=list)
    #: The tool filters of those that have some: URL → ``{"allow": [...], "deny": [...]}``.
    mcp_filters: dict[str, dict[str, list[str]]] = dataclasses.field(default_factory=dict)
    #: The headers of those that send some: URL → header → ``{"name": <Secret>, "key": <key>}``.
    mcp_headers: dict[str, dict[str, dict[str, str]]] = dataclasses.field(default_factory=dict)

    def snapshot(self) -> dict[str, str]:
        """As a run's input ConfigMap holds them (names of Secrets, never their values)."""
        return {
            "skill-packs": ",".join(self.packs),
            "mcp-servers": ",".join(self.mcp_urls),
            "mcp-tool-filters.json": json.dumps(self.mcp_filters, sort_keys=True),
            "mcp-headers.json": json.dumps(self.mcp_headers, sort_keys=True),
        }

    @classmethod
    def from_snapshot(cls, data: Mapping[str, str]) -> AgentTools:
        """Read back from a run's input (the packs' names only: their ConfigMaps are mounted)."""
        return cls(
            packs={pack: {} for pack in data.get("skill-packs", "").split(",") if pack},
            mcp_urls=[url for url in data.get("mcp-servers", "").split(",") if url],
            mcp_filters=json.loads(data.get("mcp-tool-filters.json") or "{}"),
            mcp_headers=json.loads(data.get("mcp-headers.json") or "{}"),
        )


async def resolve_tools(client: kubeloop.Client, namespace: str, spec: AgentSpec) -> AgentTools:
    """The skill packs and MCP servers an agent lists that exist. Missing ones are left out:
    their watches wake the agent when they appear."""
    tools = AgentTools()
    for pack_name in sorted(spec.skill_pack_refs):
        try:
            pack = await client.get(SkillPack, pack_name, namespace=namespace)
        except kubeloop.errors.NotFound:
            continue
        tools.packs[pack_name] = {skill.name: skill.text for skill in pack.spec.skills}
    for server_name in sorted(spec.mcp_server_refs):
        try:
            server = await client.get(MCPServer, server_name, namespace=namespace)
        except kubeloop.errors.NotFound:
            continue
        url = url_of(server)
        tools.mcp_urls.append(url)
        if found := tool_filters(server):
            tools.mcp_filters[url] = found
        if server.spec.headers:
            tools.mcp_headers[url] = {
                header.name: {"name": header.secret_key_ref.name, "key": header.secret_key_ref.key}
                for header in server.spec.headers
            }
    return tools


def mcp_headers_mount(
    headers: Mapping[str, Mapping[str, Mapping[str, str]]],
) -> tuple[dict[str, dict[str, str]], dict[str, Any]] | None:
    """The ``MCP_HEADERS`` a pod reads (URL → header → the file holding its value) and the
    projected volume of those files (``<n>/<header>``, n the URL's place in sorted order);
    None when no server sends a header."""
    if not headers:
        return None
    files: dict[str, dict[str, str]] = {}
    sources: list[dict[str, Any]] = []
    for index, url in enumerate(sorted(headers)):
        files[url] = {}
        for header, secret in sorted(headers[url].items()):
            path = f"{index}/{header}"
            files[url][header] = f"{MCP_HEADERS_DIR}/{path}"
            sources.append({"secret": {"name": secret["name"], "items": [{"key": secret["key"], "path": path}]}})
    return files, {"name": "mcp-headers", "projected": {"sources": sources, "defaultMode": 292}}


def agent_config(spec: AgentSpec) -> dict[str, str]:
    """What an agent's pods read from /etc/agent: the system prompt and the model (no secret)."""
    model = spec.model.to_dict()
    model.pop("authSecretRef", None)
    return {"system-prompt": spec.system_prompt, "model.json": json.dumps(model, sort_keys=True)}


def skills_volume(pack: str) -> str:
    """The pod volume of skill pack ``pack``: a DNS label (a pack's name may hold dots and be
    longer than 63 characters), distinct for distinct packs."""
    readable = "".join(c if c.isalnum() else "-" for c in pack[:40]).strip("-")
    return f"skills-{readable}-{hashlib.sha256(pack.encode()).hexdigest()[:8]}"


def agent_pod(
    name: str,
    spec: AgentSpec,
    runtime: ServingRuntimeSpec,
    *,
    config_map: str,
    tools: AgentTools,
    env: Iterable[dict[str, Any]] = (),
    memory: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The container and volumes of a pod serving agent ``name`` (an Agent's Deployment or an
    AgentRun's Job): ``config_map`` mounted at /etc/agent, the model's key (if any) as a file
    under ``MODEL_CREDENTIALS_DIR``, its MCP servers' headers as files under
    ``MCP_HEADERS_DIR``, each skill pack under skills/, the ``memory`` ConfigMap (if any) at
    /memory, a writable /tmp; the restricted security context
    unless the runtime gives its own (``set_pod_extras`` does the pod's part).

    The environment is the runtime's, then the platform's (model, prompt file, MCP servers,
    ``env``), then the agent's: a later one wins by name; sorted, so the template is stable."""
    platform_env: list[dict[str, Any]] = [
        {"name": "AGENT_NAME", "value": name},
        # Where to listen: its port, and its own address (a process node's pods share the machine's ports).
        {"name": "PORT", "value": str(runtime.port)},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
        # Its namespace, told to the model (where its Kubernetes tools look first).
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
        {"name": "MODEL_PROVIDER", "value": spec.model.provider},
        {"name": "MODEL_NAME", "value": spec.model.name},
        {"name": "SYSTEM_PROMPT_FILE", "value": f"{CONFIG_DIR}/system-prompt"},
        # The agent's own limits (a conversation with its endpoint); a run's ``env`` lowers them.
        *({"name": name, "value": str(limit)} for name, limit in
          (("AGENT_MAX_TURNS", spec.max_turns), ("AGENT_MAX_TOKENS", spec.max_tokens)) if limit is not None),
        *env,
    ]
    if spec.model.base_url:
        platform_env.append({"name": "MODEL_BASE_URL", "value": spec.model.base_url})
    if tools.mcp_urls:
        platform_env.append({"name": "MCP_SERVERS", "value": ",".join(tools.mcp_urls)})
    if tools.mcp_filters:
        platform_env.append({"name": "MCP_TOOL_FILTERS", "value": json.dumps(tools.mcp_filters, sort_keys=True)})
    if spec.allow_tools:
        platform_env.append({"name": "AGENT_ALLOW_TOOLS", "value": ",".join(sorted(spec.allow_tools))})
    if spec.deny_tools:
        platform_env.append({"name": "AGENT_DENY_TOOLS", "value": ",".join(sorted(spec.deny_tools))})
    runtime_env = [var.to_dict() for var in runtime.env or ()]
    agent_env = [var.to_dict() for var in spec.env or ()]
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes = [config_map_volume("config", config_map)]
    secret = spec.model.auth_secret_ref
    if secret is not None:  # the key as a file, not in the environment every tool inherits
        platform_env.append({"name": "MODEL_API_KEY_FILE", "value": f"{MODEL_CREDENTIALS_DIR}/api-key"})
        mounts.append({"name": "model-credentials", "mountPath": MODEL_CREDENTIALS_DIR, "readOnly": True})
        items = [{"key": secret.key, "path": "api-key"}]
        volumes.append(
            {
                "name": "model-credentials",
                "secret": {"secretName": secret.name, "items": items, "defaultMode": 420},
            }
        )
    if (headers := mcp_headers_mount(tools.mcp_headers)) is not None:  # files too, for the same reason
        files, headers_volume = headers
        platform_env.append({"name": "MCP_HEADERS", "value": json.dumps(files, sort_keys=True)})
        mounts.append({"name": headers_volume["name"], "mountPath": MCP_HEADERS_DIR, "readOnly": True})
        volumes.append(headers_volume)
    if memory is not None:  # the agent's MEMORY.md, read-only: the operator writes it
        mounts.append({"name": "memory", "mountPath": MEMORY_DIR, "readOnly": True})
        volumes.append(config_map_volume("memory", memory))
    for pack_name in tools.packs:
        volume = skills_volume(pack_name)
        mounts.append({"name": volume, "mountPath": f"{CONFIG_DIR}/skills/{pack_name}", "readOnly": True})
        volumes.append(config_map_volume(volume, config_map_name(pack_name)))
    mounts.append(dict(TMP_MOUNT))
    volumes.append(dict(TMP_VOLUME))
    container = {
        "name": "agent",
        "image": runtime.image,
        "command": runtime.command,
        "args": runtime.args,
        "ports": http_port(runtime.port),
        "env": env_list(runtime_env, platform_env, agent_env),
        "resources": runtime.resources.to_dict() if runtime.resources else None,
        "volumeMounts": mounts,
        "securityContext": runtime.security_context.to_dict()
        if runtime.security_context
        else restricted_container(),
    }
    return container, volumes


#: Where an agent's pods find the key callers of its endpoint must present (``AGENT_API_KEY_FILE``).
ENDPOINT_CREDENTIALS_DIR = "/var/run/secrets/agents.kubeloop.dev/endpoint"


def serve_endpoint(
    container: dict[str, Any], volumes: list[dict[str, Any]], endpoint: EndpointSpec | None, port: int
) -> None:
    """What an Agent's Deployment adds to its container for the agent's endpoint: its rate
    limit, its callers' key as a file, and Ready once its port listens."""
    endpoint = endpoint or EndpointSpec()
    env = [{"name": "AGENT_RATE_LIMIT", "value": str(endpoint.rate_limit_per_minute)}]
    secret = endpoint.auth_secret_ref
    if secret is not None:
        env.append({"name": "AGENT_API_KEY_FILE", "value": f"{ENDPOINT_CREDENTIALS_DIR}/api-key"})
        container["volumeMounts"].insert(
            -1, {"name": "endpoint-credentials", "mountPath": ENDPOINT_CREDENTIALS_DIR, "readOnly": True}
        )
        items = [{"key": secret.key, "path": "api-key"}]
        volumes.insert(
            -1, {"name": "endpoint-credentials", "secret": {"secretName": secret.name, "items": items, "defaultMode": 420}}
        )
    container["env"] = env_list(env, container["env"])
    container["readinessProbe"] = {
        "tcpSocket": {"port": port},
        "periodSeconds": 2, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3,
    }  # fmt: skip


def set_pod_extras(pod: dict[str, Any], runtime: ServingRuntimeSpec) -> None:
    """What a runtime sets on the whole pod of an agent or run: its security context (the
    restricted one unless the runtime gives its own) and its image pull secrets."""
    pod["securityContext"] = (
        runtime.pod_security_context.to_dict() if runtime.pod_security_context else restricted_pod()
    )
    if runtime.image_pull_secrets:
        pod["imagePullSecrets"] = [secret.to_dict() for secret in runtime.image_pull_secrets]
    else:
        pod.pop("imagePullSecrets", None)
