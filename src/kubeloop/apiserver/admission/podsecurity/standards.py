"""The Pod Security Standards (``k8s.io/pod-security-admission/policy``): the baseline and
restricted checks of a pod's metadata and spec, each worded as upstream's — a reason and a
detail naming the pod or the containers and the field — in upstream's order.

A level's checks are the baseline ones (``privileged`` has none), sorted by check ID; restricted
adds its own, sorted, after them, and drops the baseline checks they replace. A version says
which revision of each check applies: ``latest`` is the server's release, and the revisions that
differ from v1.25 on are kept (probe and lifecycle hosts from v1.34; the restricted procMount
check, and the relaxations for pods in a user namespace, from v1.35; the sysctls added over the
releases; SELinux's container_engine_t from v1.31). An older version is evaluated as v1.25's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kubeloop.apiserver.registry.validation.causes import as_dict

Obj = dict[str, Any]

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
#: The oldest version whose checks are kept as they were.
OLDEST_MINOR = 25


@dataclass(frozen=True)
class Violation:
    reason: str
    detail: str

    def text(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason


def forbidden_detail(violations: Iterable[Violation]) -> str:
    """What a refusal or a warning says: each ``reason (detail)``, joined with ", "."""
    return ", ".join(violation.text() for violation in violations)


def forbidden_reasons(violations: Iterable[Violation]) -> str:
    return ", ".join(violation.reason for violation in violations)


def _quote(items: Iterable[str]) -> str:
    """upstream's joinQuote: "a", "b" (no escaping)."""
    items = list(items)
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers_phrase(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_quote(names)}"


def _setters(pod: bool, containers: list[str]) -> str:
    parts = (["pod"] if pod else []) + ([_containers_phrase(containers)] if containers else [])
    return " and ".join(parts)


@dataclass(frozen=True)
class Pod:
    """A pod's metadata and spec, as the checks read them (a template's too)."""

    metadata: Obj
    spec: Obj
    #: The minor version whose revision of the checks applies.
    minor: int

    @property
    def security(self) -> Obj:
        return as_dict(self.spec.get("securityContext"))

    @property
    def windows(self) -> bool:
        return as_dict(self.spec.get("os")).get("name") == "windows"

    @property
    def in_user_namespace(self) -> bool:
        """``hostUsers: false``, which relaxes some checks from v1.35 on."""
        return self.minor >= 35 and self.spec.get("hostUsers") is False

    def containers(self) -> Iterator[tuple[str, Obj]]:
        """(name, securityContext) of the init containers, the containers, the ephemeral ones."""
        for field in ("initContainers", "containers", "ephemeralContainers"):
            for container in self.spec.get(field) or ():
                if isinstance(container, dict):
                    yield str(container.get("name") or ""), container

    def container_security(self) -> Iterator[tuple[str, Obj | None]]:
        for name, container in self.containers():
            context = container.get("securityContext")
            yield name, context if isinstance(context, dict) else None


# ---------------------------------------------------------------------------- baseline


APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
ALLOWED_PROFILES = ("RuntimeDefault", "Localhost")


def _app_armor_profile(pod: Pod) -> Violation | None:
    def bad(profile: Any) -> bool:
        return isinstance(profile, dict) and profile.get("type") not in ALLOWED_PROFILES

    values: set[str] = set()
    pod_bad = bad(pod.security.get("appArmorProfile"))
    if pod_bad:
        values.add(str(pod.security["appArmorProfile"].get("type") or ""))
    containers = []
    for name, context in pod.container_security():
        profile = as_dict(context).get("appArmorProfile")
        if bad(profile):
            containers.append(name)
            values.add(str(as_dict(profile).get("type") or ""))
    annotations = sorted(
        f'{key}="{value}"'
        for key, value in as_dict(pod.metadata.get("annotations")).items()
        if key.startswith(APPARMOR_ANNOTATION)
        and value not in ("", "runtime/default")
        and not str(value).startswith("localhost/")
    )
    if not (pod_bad or containers or annotations):
        return None
    bad_values = [*sorted(values), *annotations]
    setters = [_setters(pod_bad, containers)] if pod_bad or containers else []
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    reason = _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad_values))
    return Violation(
        reason, f"{' and '.join(setters)} must not set AppArmor profile type to {_quote(bad_values)}"
    )


BASELINE_CAPABILITIES = frozenset(
    ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
     "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
)  # fmt: skip


def _capabilities_baseline(pod: Pod) -> Violation | None:
    containers, capabilities = [], set()
    for name, context in pod.container_security():
        added = [str(c) for c in as_dict(as_dict(context).get("capabilities")).get("add") or ()]
        extra = [c for c in added if c not in BASELINE_CAPABILITIES]
        if extra:
            containers.append(name)
            capabilities.update(extra)
    if not containers:
        return None
    return Violation(
        "non-default capabilities",
        f"{_containers_phrase(containers)} must not include {_quote(sorted(capabilities))} in "
        "securityContext.capabilities.add",
    )


def _host_namespaces(pod: Pod) -> Violation | None:
    used = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.spec.get(field) is True]
    return Violation("host namespaces", ", ".join(used)) if used else None


def _host_path_volumes(pod: Pod) -> Violation | None:
    names = [str(v.get("name")) for v in _volumes(pod) if v.get("hostPath") is not None]
    if not names:
        return None
    return Violation("hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_quote(names)}")


def _volumes(pod: Pod) -> list[Obj]:
    return [v for v in pod.spec.get("volumes") or () if isinstance(v, dict)]


def _host_ports(pod: Pod) -> Violation | None:
    containers, ports = [], set()
    for name, container in pod.containers():
        used = [str(p.get("hostPort")) for p in container.get("ports") or () if as_dict(p).get("hostPort")]
        if used:
            containers.append(name)
            ports.update(used)
    if not containers:
        return None
    return Violation(
        "hostPort",
        f"{_plural('container', 'containers', len(containers))} {_quote(containers)} "
        f"{_plural('uses', 'use', len(containers))} {_plural('hostPort', 'hostPorts', len(ports))} "
        f"{', '.join(sorted(ports))}",
    )


def _host_probes_and_host_lifecycle(pod: Pod) -> Violation | None:
    containers, hosts = set(), set()
    for name, container in pod.containers():
        handlers = [as_dict(container.get(p)) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        lifecycle = as_dict(container.get("lifecycle"))
        handlers += [as_dict(lifecycle.get(hook)) for hook in ("postStart", "preStop")]
        for handler in handlers:
            for action in ("httpGet", "tcpSocket"):
                host = as_dict(handler.get(action)).get("host")
                if host:
                    containers.add(name)
                    hosts.add(str(host))
    if not containers:
        return None
    return Violation(
        "probe or lifecycle host",
        f"{_plural('container', 'containers', len(containers))} {_quote(sorted(containers))} "
        f"{_plural('uses', 'use', len(containers))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} {_quote(sorted(hosts))}",
    )


def _privileged(pod: Pod) -> Violation | None:
    names = [name for name, context in pod.container_security() if as_dict(context).get("privileged") is True]
    if not names:
        return None
    return Violation(
        "privileged", f"{_containers_phrase(names)} must not set securityContext.privileged=true"
    )


def _proc_mount(pod: Pod, *, relax: bool) -> Violation | None:
    if relax and pod.in_user_namespace:
        return None
    containers, values = [], set()
    for name, context in pod.container_security():
        mount = as_dict(context).get("procMount")
        if mount is not None and mount != "Default":
            containers.append(name)
            values.add(str(mount))
    if not containers:
        return None
    return Violation(
        "procMount",
        f"{_containers_phrase(containers)} must not set securityContext.procMount to {_quote(sorted(values))}",
    )


def _se_linux_options(pod: Pod) -> Violation | None:
    allowed = {"", "container_t", "container_init_t", "container_kvm_t"}
    if pod.minor >= 31:
        allowed.add("container_engine_t")
    types: set[str] = set()
    user = role = False

    def bad(options: Any) -> bool:
        nonlocal user, role
        if not isinstance(options, dict):
            return False
        found = False
        if str(options.get("type") or "") not in allowed:
            types.add(str(options.get("type")))
            found = True
        if options.get("user"):
            user = found = True
        if options.get("role"):
            role = found = True
        return found

    pod_bad = bad(pod.security.get("seLinuxOptions"))
    containers = [
        name for name, context in pod.container_security() if bad(as_dict(context).get("seLinuxOptions"))
    ]
    if not (pod_bad or containers):
        return None
    data = []
    if types:
        data.append(f"{_plural('type', 'types', len(types))} {_quote(sorted(types))}")
    if user:
        data.append("user may not be set")
    if role:
        data.append("role may not be set")
    return Violation(
        "seLinuxOptions",
        f"{_setters(pod_bad, containers)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
    )


def _seccomp_type(context: Obj | None) -> str | None:
    """The seccompProfile's type, "" when the profile names none, None when there is none."""
    profile = as_dict(context).get("seccompProfile")
    return str(profile.get("type") or "") if isinstance(profile, dict) else None


def _seccomp_profile_baseline(pod: Pod) -> Violation | None:
    values: set[str] = set()
    pod_type = _seccomp_type(pod.security)
    pod_bad = pod_type is not None and pod_type not in ALLOWED_PROFILES
    if pod_bad:
        values.add(str(pod_type))
    containers = []
    for name, context in pod.container_security():
        kind = _seccomp_type(context)
        if kind is not None and kind not in ALLOWED_PROFILES:
            containers.append(name)
            values.add(kind)
    if not (pod_bad or containers):
        return None
    return Violation(
        "seccompProfile",
        f"{_setters(pod_bad, containers)} must not set securityContext.seccompProfile.type to "
        f"{_quote(sorted(values))}",
    )


#: The sysctls baseline allows, by the minor version that added them.
SAFE_SYSCTLS = (
    (0, ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
         "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start")),
    (27, ("net.ipv4.ip_local_reserved_ports",)),
    (29, ("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
          "net.ipv4.tcp_keepalive_probes")),
    (32, ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")),
    (37, ("net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat")),
)  # fmt: skip


def _sysctls(pod: Pod) -> Violation | None:
    allowed = {name for since, names in SAFE_SYSCTLS if pod.minor >= since for name in names}
    names = [str(as_dict(s).get("name")) for s in pod.security.get("sysctls") or ()]
    bad = [name for name in names if name not in allowed]
    return Violation("forbidden sysctls", ", ".join(bad)) if bad else None


def _windows_host_process(pod: Pod) -> Violation | None:
    def host_process(context: Any) -> bool:
        return as_dict(as_dict(context).get("windowsOptions")).get("hostProcess") is True

    pod_bad = host_process(pod.security)
    containers = [name for name, context in pod.container_security() if host_process(context)]
    if not (pod_bad or containers):
        return None
    return Violation(
        "hostProcess",
        f"{_setters(pod_bad, containers)} must not set securityContext.windowsOptions.hostProcess=true",
    )


# -------------------------------------------------------------------------- restricted


def _allow_privilege_escalation(pod: Pod) -> Violation | None:
    if pod.windows:
        return None
    names = [
        name
        for name, context in pod.container_security()
        if as_dict(context).get("allowPrivilegeEscalation") is not False
    ]
    if not names:
        return None
    return Violation(
        "allowPrivilegeEscalation != false",
        f"{_containers_phrase(names)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(pod: Pod) -> Violation | None:
    if pod.windows:
        return None
    missing, adding, added = [], [], set()
    for name, context in pod.container_security():
        capabilities = as_dict(context).get("capabilities")
        if not isinstance(capabilities, dict):
            missing.append(name)
            continue
        if "ALL" not in (capabilities.get("drop") or ()):
            missing.append(name)
        extra = [str(c) for c in capabilities.get("add") or () if c != "NET_BIND_SERVICE"]
        if extra:
            adding.append(name)
            added.update(extra)
    parts = []
    if missing:
        parts.append(f'{_containers_phrase(missing)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        parts.append(
            f"{_containers_phrase(adding)} must not include {_quote(sorted(added))} in securityContext.capabilities.add"
        )
    return Violation("unrestricted capabilities", "; ".join(parts)) if parts else None


RESTRICTED_VOLUME_SOURCES = frozenset(
    (
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    )
)
#: The volume sources restricted refuses, in the order upstream names them.
KNOWN_VOLUME_SOURCES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs", "rbd",
    "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos",
)  # fmt: skip


def _restricted_volumes(pod: Pod) -> Violation | None:
    names, kinds = [], set()
    for volume in _volumes(pod):
        sources = [key for key, value in volume.items() if key != "name" and value is not None]
        if any(source in RESTRICTED_VOLUME_SOURCES for source in sources):
            continue
        names.append(str(volume.get("name")))
        kinds.add(next((s for s in KNOWN_VOLUME_SOURCES if s in sources), "unknown"))
    if not names:
        return None
    return Violation(
        "restricted volume types",
        f"{_plural('volume', 'volumes', len(names))} {_quote(names)} {_plural('uses', 'use', len(names))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} {_quote(sorted(kinds))}",
    )


def _run_as_non_root(pod: Pod) -> Violation | None:
    if pod.in_user_namespace:
        return None
    pod_value = pod.security.get("runAsNonRoot")
    pod_explicit = pod_value is False
    explicit, implicit = [], []
    for name, context in pod.container_security():
        value = as_dict(context).get("runAsNonRoot")
        if value is False:
            explicit.append(name)
        elif value is None and pod_value is not True:
            implicit.append(name)
    if pod_explicit or explicit:
        return Violation(
            "runAsNonRoot != true",
            f"{_setters(pod_explicit, explicit)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return Violation(
            "runAsNonRoot != true",
            f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(pod: Pod) -> Violation | None:
    if pod.in_user_namespace:
        return None
    pod_bad = pod.security.get("runAsUser") == 0
    containers = [
        name for name, context in pod.container_security() if as_dict(context).get("runAsUser") == 0
    ]
    if not (pod_bad or containers):
        return None
    return Violation("runAsUser=0", f"{_setters(pod_bad, containers)} must not set runAsUser=0")


def _seccomp_profile_restricted(pod: Pod) -> Violation | None:
    if pod.windows:
        return None
    values: set[str] = set()
    pod_type = _seccomp_type(pod.security)
    pod_explicit = pod_type is not None and pod_type not in ALLOWED_PROFILES
    pod_valid = pod_type in ALLOWED_PROFILES
    if pod_explicit:
        values.add(str(pod_type))
    explicit, implicit = [], []
    for name, context in pod.container_security():
        kind = _seccomp_type(context)
        if kind is None:
            if not pod_valid:
                implicit.append(name)
        elif kind not in ALLOWED_PROFILES:
            explicit.append(name)
            values.add(kind)
    if pod_explicit or explicit:
        return Violation(
            "seccompProfile",
            f"{_setters(pod_explicit, explicit)} must not set securityContext.seccompProfile.type to "
            f"{_quote(sorted(values))}",
        )
    if implicit:
        return Violation(
            "seccompProfile",
            f'pod or {_containers_phrase(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" '
            'or "Localhost"',
        )
    return None


# ---------------------------------------------------------------------------- levels

Check = Callable[[Pod], Violation | None]


@dataclass(frozen=True)
class _Registered:
    id: str
    level: str
    check: Check
    #: The first minor version the check exists in.
    since: int = 0
    #: The baseline check it replaces at restricted.
    replaces: str = ""


_CHECKS = (
    _Registered("appArmorProfile", BASELINE, _app_armor_profile),
    _Registered("capabilities_baseline", BASELINE, _capabilities_baseline),
    _Registered("hostNamespaces", BASELINE, _host_namespaces),
    _Registered("hostPathVolumes", BASELINE, _host_path_volumes),
    _Registered("hostPorts", BASELINE, _host_ports),
    _Registered("hostProbesAndHostLifecycle", BASELINE, _host_probes_and_host_lifecycle, since=34),
    _Registered("privileged", BASELINE, _privileged),
    _Registered("procMount", BASELINE, lambda pod: _proc_mount(pod, relax=True)),
    _Registered("seLinuxOptions", BASELINE, _se_linux_options),
    _Registered("seccompProfile_baseline", BASELINE, _seccomp_profile_baseline),
    _Registered("sysctls", BASELINE, _sysctls),
    _Registered("windowsHostProcess", BASELINE, _windows_host_process),
    _Registered("allowPrivilegeEscalation", RESTRICTED, _allow_privilege_escalation),
    _Registered(
        "capabilities_restricted", RESTRICTED, _capabilities_restricted, replaces="capabilities_baseline"
    ),
    _Registered(
        "procMount_restricted",
        RESTRICTED,
        lambda pod: _proc_mount(pod, relax=False),
        since=35,
        replaces="procMount",
    ),
    _Registered("restrictedVolumes", RESTRICTED, _restricted_volumes, replaces="hostPathVolumes"),
    _Registered("runAsNonRoot", RESTRICTED, _run_as_non_root),
    _Registered("runAsUser", RESTRICTED, _run_as_user),
    _Registered(
        "seccompProfile_restricted",
        RESTRICTED,
        _seccomp_profile_restricted,
        replaces="seccompProfile_baseline",
    ),
)


def checks_of(level: str, minor: int) -> list[_Registered]:
    """The checks of ``level`` at ``minor``, in upstream's order."""
    if level == PRIVILEGED:
        return []
    present = [c for c in _CHECKS if c.since <= minor]
    baseline = sorted((c for c in present if c.level == BASELINE), key=lambda c: c.id)
    if level == BASELINE:
        return baseline
    restricted = sorted((c for c in present if c.level == RESTRICTED), key=lambda c: c.id)
    replaced = {c.replaces for c in restricted}
    return [c for c in baseline if c.id not in replaced] + restricted


def evaluate(level: str, minor: int, metadata: Obj, spec: Obj) -> list[Violation]:
    """What ``level`` (at version ``minor``) finds wrong with a pod of ``metadata`` and ``spec``."""
    pod = Pod(as_dict(metadata), as_dict(spec), max(minor, OLDEST_MINOR))
    return [v for v in (c.check(pod) for c in checks_of(level, pod.minor)) if v is not None]
