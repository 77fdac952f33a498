"""How a container's process is set up before its program runs: its working directory and
mounts, the environment a Secret or ConfigMap gives it, the Service links Kubernetes injects, its
terminal, and its memory limit (RLIMIT_DATA).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import pathlib
import resource
import termios
from collections.abc import Callable

from kubeloop.api.object import Obj
from kubeloop.node.downwardapi import field_value, resource_value
from kubeloop.node.expansion import expand
from kubeloop.node.localimages import LocalImage, LocalImages
from kubeloop.node.podruns import CannotRun
from kubeloop.node.podvolumes import (
    Lookup,
)
from kubeloop.node.serviceproxy import ServiceProxy

#: Variables that make a program load or run code of their choosing (dynamic loaders, shells,
#: interpreters): a pod of an ``IMAGE=COMMAND`` image does not get them, since only the
#: image's entrypoint is to run (LD_* and DYLD_* go too). Not a sandbox: see localimages.
INJECTING_VARIABLES = frozenset((
    "BASH_ENV", "ENV", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT",
    "PYTHONBREAKPOINT", "NODE_OPTIONS", "NODE_PATH", "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT",
    "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GCONV_PATH", "PROMPT_COMMAND",
))  # fmt: skip

#: Where a container finds its ServiceAccount's credentials.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def working_dir(container: Obj, root: pathlib.Path) -> str:
    """The container's ``workingDir`` in its root (a volume mounted there), else on this
    machine, else the container's root."""
    working = str(container.get("workingDir") or "")
    if working:
        inside = root / working.lstrip("/")
        if inside.is_dir():
            return str(inside)
        if os.path.isdir(working):
            return working
    return str(root)


def mounts(container: Obj, path: str) -> bool:
    return any(m.get("mountPath") == path for m in container.get("volumeMounts") or () if isinstance(m, dict))


def data(obj: Obj | None, kind: str) -> dict[str, str]:
    if obj is None:
        return {}
    values = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    if kind == "Secret":
        return {key: base64.b64decode(value).decode(errors="replace") for key, value in values.items()}
    return values


def take_terminal() -> None:
    """In the child, after setsid: the terminal on its stdin becomes its controlling one."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def memory_limit(container: Obj) -> int | None:
    """The container's memory limit in bytes (``resources.limits.memory``), if it has one."""
    value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if value is None:
        return None
    amount = _bytes(str(value))
    return int(amount) if amount > 0 else None


_QUANTITY_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def _bytes(quantity: str) -> float:
    number = quantity.rstrip("kKMGTi")
    suffix = quantity[len(number) :]
    try:
        return float(number) * _QUANTITY_SUFFIXES.get(suffix, 0)
    except ValueError:
        return 0.0


def preparation(*, tty: bool, memory: int | None) -> Callable[[], None] | None:
    """What the child does before it runs the container's program: take its terminal, and hold
    its data segments (heap and private mappings: RLIMIT_DATA) to the memory limit. A process past
    it sees its allocations fail (a MemoryError, ENOMEM), not an OOM kill; CPU limits are not
    applied."""
    if not tty and memory is None:
        return None

    def prepare() -> None:
        if tty:
            take_terminal()
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))

    return prepare


def service_links(services: list[Obj]) -> dict[str, str]:
    """The variables a container gets for each Service of its namespace (``enableServiceLinks``),
    as the kubelet writes them: ``<NAME>_SERVICE_HOST`` and ``_PORT`` (and ``_PORT_<PORT NAME>``),
    and Docker's link variables (``<NAME>_PORT=tcp://<ip>:<port>``, ``<NAME>_PORT_<port>_TCP``...)."""
    env: dict[str, str] = {}
    for service in services:
        spec = service.get("spec") or {}
        ip, ports = spec.get("clusterIP"), [p for p in spec.get("ports") or () if isinstance(p, dict)]
        if not ip or ip == "None" or not ports:
            continue
        name = str((service.get("metadata") or {}).get("name")).upper().replace("-", "_")
        env[f"{name}_SERVICE_HOST"] = str(ip)
        env[f"{name}_SERVICE_PORT"] = str(ports[0].get("port"))
        for port in ports:
            if port.get("name"):
                env[f"{name}_SERVICE_PORT_{str(port['name']).upper().replace('-', '_')}"] = str(
                    port.get("port")
                )
        first = ports[0]
        env[f"{name}_PORT"] = f"{str(first.get('protocol') or 'TCP').lower()}://{ip}:{first.get('port')}"
        for port in ports:
            protocol = str(port.get("protocol") or "TCP")
            prefix = f"{name}_PORT_{port.get('port')}_{protocol}"
            env[prefix] = f"{protocol.lower()}://{ip}:{port.get('port')}"
            env[f"{prefix}_PROTO"] = protocol.lower()
            env[f"{prefix}_PORT"] = str(port.get("port"))
            env[f"{prefix}_ADDR"] = str(ip)
    return env


class ContainerSetup:
    """What a local container's process is given: its argv (the image's entrypoint or the
    container's command, then its args, ``$(VAR)`` expanded), its environment (the machine's
    basics, the API server's address, Service links, ``envFrom`` and ``env``), and a kubeconfig of
    its ServiceAccount's credentials."""

    def __init__(
        self,
        images: LocalImages,
        lookup: Lookup,
        *,
        api_host: str,
        api_port: int,
        proxy: ServiceProxy | None,
    ) -> None:
        self.images = images
        self.lookup = lookup
        self.api_host = api_host
        self.api_port = api_port
        self.proxy = proxy

    def local_image(self, container: Obj) -> LocalImage:
        found = self.images.resolve(str(container.get("image") or ""))
        assert found is not None
        return found

    def kubeconfig(self, folder: pathlib.Path, root: pathlib.Path, namespace: str) -> pathlib.Path:
        """A kubeconfig of the container's ServiceAccount credentials (the files mounted in its
        root), for clients that do not know ``KUBELOOP_CONTAINER_ROOT``: ``kubectl`` and the
        official client's ``load_config()`` find the server through it."""
        account = root / SERVICE_ACCOUNT_DIR.lstrip("/")
        host = f"[{self.api_host}]" if ":" in self.api_host else self.api_host
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "in-cluster",
                    "cluster": {
                        "server": f"https://{host}:{self.api_port}",
                        "certificate-authority": str(account / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": "service-account", "user": {"tokenFile": str(account / "token")}}],
            "contexts": [
                {
                    "name": "in-cluster",
                    "context": {"cluster": "in-cluster", "user": "service-account", "namespace": namespace},
                }
            ],
            "current-context": "in-cluster",
        }
        path = folder / "kubeconfig"
        path.write_text(json.dumps(config, indent=2))
        return path

    def argv(self, container: Obj, env: dict[str, str]) -> list[str]:
        image = self.local_image(container)
        command = [str(part) for part in container.get("command") or ()]
        args = [str(part) for part in container.get("args") or ()]
        if image.entrypoint is not None:
            if command:
                raise CannotRun(
                    f"image {container.get('image')} runs {' '.join(image.entrypoint)}: the pod's command "
                    "would run on this machine (name the image with =host to allow that)"
                )
            argv = [*image.entrypoint, *(expand(arg, env) for arg in args)]
        else:
            argv = [expand(part, env) for part in [*command, *args]]
        if not argv:
            raise CannotRun(
                f"image {container.get('image')} is run as host, and the container names no command"
            )
        return argv

    async def environment(self, pod: Obj, container: Obj) -> dict[str, str]:
        """The process's environment: the machine's PATH and HOME, the API server's address,
        then the container's ``envFrom`` and ``env`` in order (a later one wins)."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TZ") if key in os.environ}
        env["HOSTNAME"] = str(meta.get("name") or "")
        if self.proxy is not None:
            if (pod.get("spec") or {}).get("enableServiceLinks", True) is not False:
                env.update(service_links(await self.proxy.list_objects("Service", namespace)))
            await self.proxy.start()
            env.update(self.proxy.environment(namespace, [self.api_host]))
        env["KUBERNETES_SERVICE_HOST"] = self.api_host
        env["KUBERNETES_SERVICE_PORT"] = str(self.api_port)
        env["KUBERNETES_SERVICE_PORT_HTTPS"] = str(self.api_port)
        for source in container.get("envFrom") or ():
            prefix = str(source.get("prefix") or "")
            for field_name, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                ref = source.get(field_name)
                if isinstance(ref, dict):
                    found = await self.lookup(kind, namespace, str(ref.get("name")))
                    for key, value in data(found, kind).items():
                        env[prefix + key] = value
        for var in container.get("env") or ():
            name = str(var.get("name"))
            if "value" in var or "valueFrom" not in var:
                env[name] = expand(str(var.get("value") or ""), env)
                continue
            resolved = await self._value_from(pod, container, var["valueFrom"] or {})
            if resolved is not None:
                env[name] = resolved
        if (
            self.images.resolve(str(container.get("image") or "")) is not None
            and self.local_image(container).entrypoint
        ):
            # The image allows its entrypoint only: what would make that run other code goes.
            for name in [n for n in env if n in INJECTING_VARIABLES or n.startswith(("LD_", "DYLD_"))]:
                del env[name]
        return env

    async def _value_from(self, pod: Obj, container: Obj, value_from: Obj) -> str | None:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        for field_name, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
            ref = value_from.get(field_name)
            if isinstance(ref, dict):
                found = await self.lookup(kind, namespace, str(ref.get("name")))
                return data(found, kind).get(str(ref.get("key")))
        field_ref = value_from.get("fieldRef")
        if isinstance(field_ref, dict):
            return field_value(pod, str(field_ref.get("fieldPath") or ""))
        resource_ref = value_from.get("resourceFieldRef")
        if isinstance(resource_ref, dict):
            return resource_value(container, resource_ref)
        return None
