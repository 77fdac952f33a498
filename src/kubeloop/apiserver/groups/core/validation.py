"""The core group's rules (``pkg/apis/core/validation``): pods and pod templates (the pod spec:
volumes, containers, ports, env, mounts, resources), Services, ConfigMaps and Secrets, with the
update rules of immutable ConfigMaps and Secrets. The apps and batch groups use the pod
template rules, as upstream's do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubeloop.api import naming, quantity
from kubeloop.apiserver.decoding.typed import go_base64
from kubeloop.apiserver.registry.validation.causes import (
    NOT_FOUND,
    as_dict,
    as_list,
    as_text,
    duplicate,
    forbidden,
    immutable,
    invalid,
    is_int,
    not_supported,
    render,
    required,
    too_long,
)
from kubeloop.apiserver.registry.validation.objectmeta import validate_annotations, validate_labels
from kubeloop.errors import StatusCause

__all__ = [
    "MAX_SECRET_SIZE",
    "config_key_errors",
    "config_map_rules",
    "config_map_update_rules",
    "pod_rules",
    "pod_template_rules",
    "pod_template_spec_rules",
    "secret_rules",
    "secret_update_rules",
    "service_rules",
]


#: core MaxSecretSize (ConfigMap and Secret data).
MAX_SECRET_SIZE = 1024 * 1024


def pod_template_spec_rules(template: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidatePodTemplateSpec``: template labels and annotations, then the pod spec."""
    meta = as_dict(template.get("metadata"))
    # Upstream names these fields <template>.labels / <template>.annotations (no "metadata").
    causes = validate_labels(meta.get("labels"), f"{path}.labels")
    causes.extend(validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    causes.extend(_pod_spec_rules(template.get("spec"), f"{path}.spec"))
    return causes


def _pod_spec_rules(spec: Any, path: str) -> list[StatusCause]:
    """``ValidatePodSpec``'s common rules, in its order: volumes; each container's name, image,
    ports, environment, volume mounts and resources (``validateContainerCommon``), unique names
    across init and app containers; then restartPolicy, dnsPolicy, serviceAccountName and
    activeDeadlineSeconds. (Probes, security contexts, affinity and the rest are not checked.)"""
    if not isinstance(spec, dict):
        return [required(f"{path}.containers")]
    causes, volumes = _volume_rules(as_list(spec.get("volumes")), f"{path}.volumes")
    seen: set[str] = set()
    for list_name in ("containers", "initContainers"):
        for index, container in enumerate(as_list(spec.get(list_name))):
            container = as_dict(container)
            at = f"{path}.{list_name}[{index}]"
            name = as_text(container.get("name"))
            if name:
                causes.extend(invalid(f"{at}.name", name, msg) for msg in naming.dns1123_label_errors(name))
            if not as_text(container.get("image")):
                causes.append(required(f"{at}.image"))
            policy = container.get("terminationMessagePolicy")
            if isinstance(policy, str) and policy and policy not in ("File", "FallbackToLogsOnError"):
                causes.append(
                    not_supported(f"{at}.terminationMessagePolicy", policy, ["File", "FallbackToLogsOnError"])
                )
            causes.extend(_container_port_rules(as_list(container.get("ports")), f"{at}.ports"))
            causes.extend(_env_rules(as_list(container.get("env")), f"{at}.env"))
            causes.extend(_env_from_rules(as_list(container.get("envFrom")), f"{at}.envFrom"))
            causes.extend(_volume_mount_rules(as_list(container.get("volumeMounts")), volumes, at))
            pull = container.get("imagePullPolicy")
            if isinstance(pull, str) and pull and pull not in _PULL_POLICIES:
                causes.append(not_supported(f"{at}.imagePullPolicy", pull, _PULL_POLICIES))
            causes.extend(_resource_rules(as_dict(container.get("resources")), f"{at}.resources"))
            if name:
                if name in seen:
                    causes.append(duplicate(f"{at}.name", name))
                seen.add(name)
    restart = spec.get("restartPolicy")
    if isinstance(restart, str) and restart and restart not in ("Always", "OnFailure", "Never"):
        causes.append(not_supported(f"{path}.restartPolicy", restart, ["Always", "OnFailure", "Never"]))
    dns = spec.get("dnsPolicy")
    if isinstance(dns, str) and dns and dns not in _DNS_POLICIES:
        causes.append(not_supported(f"{path}.dnsPolicy", dns, _DNS_POLICIES))
    account = as_text(spec.get("serviceAccountName"))
    if account:
        causes.extend(
            invalid(f"{path}.serviceAccountName", account, msg)
            for msg in naming.dns1123_subdomain_errors(account)
        )
    deadline = spec.get("activeDeadlineSeconds")
    if is_int(deadline) and not 1 <= deadline <= 2**31 - 1:
        causes.append(
            invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")
        )
    return causes


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")


_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


#: The volume sources, in the order ``validateVolumeSource`` looks at them.
_VOLUME_SOURCES = (
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs",
    "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte",
    "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
    "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO", "csi",
    "ephemeral", "image",
)  # fmt: skip


#: Upstream's path for a second source of this kind (misspelled there).
_SOURCE_PATHS = {"downwardAPI": "downwarAPI"}


_ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


_MODE_RANGE = "must be a number between 0 and 0777 (octal), both inclusive"


def _volume_rules(volumes: list[Any], path: str) -> tuple[list[StatusCause], set[str]]:
    """``ValidateVolumes``: the causes, and the names of the volumes without any (the ones
    mounts may refer to)."""
    causes: list[StatusCause] = []
    names: set[str] = set()
    for index, volume in enumerate(volumes):
        volume = as_dict(volume)
        at = f"{path}[{index}]"
        found: list[StatusCause] = []
        sources = [source for source in _VOLUME_SOURCES if volume.get(source) is not None]
        if sources:
            found.extend(_volume_source_rules(sources[0], as_dict(volume[sources[0]]), f"{at}.{sources[0]}"))
            found.extend(
                forbidden(
                    f"{at}.{_SOURCE_PATHS.get(extra, extra)}", "may not specify more than 1 volume type"
                )
                for extra in sources[1:]
            )
        else:
            found.append(required(at, "must specify a volume type"))
        name = as_text(volume.get("name"))
        if not name:
            found.append(required(f"{at}.name"))
        else:
            found.extend(invalid(f"{at}.name", name, msg) for msg in naming.dns1123_label_errors(name))
        if name and name in names:
            found.append(duplicate(f"{at}.name", name))
        if not found:
            names.add(name)
        causes.extend(found)
    return causes, names


def _volume_source_rules(source: str, spec: dict[str, Any], path: str) -> list[StatusCause]:
    """A configMap's or secret's name, default mode and items."""
    if source not in ("configMap", "secret"):
        return []
    causes: list[StatusCause] = []
    name_field = "name" if source == "configMap" else "secretName"
    if not as_text(spec.get(name_field)):
        causes.append(required(f"{path}.{name_field}"))
    mode = spec.get("defaultMode")
    if is_int(mode) and not 0 <= mode <= 0o777:
        causes.append(invalid(f"{path}.defaultMode", mode, _MODE_RANGE))
    for index, item in enumerate(as_list(spec.get("items"))):
        item = as_dict(item)
        at = f"{path}.items[{index}]"
        if not as_text(item.get("key")):
            causes.append(required(f"{at}.key"))
        item_path = as_text(item.get("path"))
        if not item_path:
            causes.append(required(f"{at}.path"))
        else:
            causes.extend(
                invalid(f"{at}.path", item_path, msg) for msg in _local_path_errors(item_path, True)
            )
        mode = item.get("mode")
        if is_int(mode) and not 0 <= mode <= 0o777:
            causes.append(invalid(f"{at}.mode", mode, _MODE_RANGE))
    return causes


def _local_path_errors(value: str, dot_prefix: bool) -> list[str]:
    """``validateLocalDescendingPath``: relative, no '..' element (and, for items, no '..' start)."""
    found = []
    if value.startswith("/"):
        found.append("must be a relative path")
    if ".." in value.split("/"):
        found.append("must not contain '..'")
    elif dot_prefix and value.startswith(".."):
        found.append("must not start with '..'")
    return found


def _container_port_rules(ports: list[Any], path: str) -> list[StatusCause]:
    """``validateContainerPorts``: names (IANA service names, unique), port ranges, protocols."""
    causes: list[StatusCause] = []
    names: set[str] = set()
    for index, port in enumerate(ports):
        port = as_dict(port)
        at = f"{path}[{index}]"
        name = as_text(port.get("name"))
        if name:
            problems = naming.port_name_errors(name)
            causes.extend(invalid(f"{at}.name", name, msg) for msg in problems)
            if not problems and name in names:
                causes.append(duplicate(f"{at}.name", name))
            names.add(name)
        container_port = port.get("containerPort")
        if container_port == 0:
            causes.append(required(f"{at}.containerPort"))
        elif is_int(container_port) and not 1 <= container_port <= 65535:
            causes.append(invalid(f"{at}.containerPort", container_port, _PORT_RANGE))
        host_port = port.get("hostPort")
        if is_int(host_port) and host_port != 0 and not 1 <= host_port <= 65535:
            causes.append(invalid(f"{at}.hostPort", host_port, _PORT_RANGE))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol and protocol not in _PROTOCOLS:
            causes.append(not_supported(f"{at}.protocol", protocol, _PROTOCOLS))
    return causes


def _env_rules(env: list[Any], path: str) -> list[StatusCause]:
    """``ValidateEnv`` with relaxed names (RelaxedEnvironmentVariableValidation, on in 1.33):
    printable ASCII but '='; a valueFrom names exactly one source and no value beside it."""
    causes: list[StatusCause] = []
    for index, var in enumerate(env):
        var = as_dict(var)
        at = f"{path}[{index}]"
        name = as_text(var.get("name"))
        if name and not _env_name_valid(name):
            causes.append(invalid(f"{at}.name", name, ENV_NAME_MESSAGE))
        source = var.get("valueFrom")
        if source is None:
            continue
        source = as_dict(source)
        set_sources = [key for key in _ENV_SOURCES if source.get(key) is not None]
        for key in ("configMapKeyRef", "secretKeyRef"):
            if key in set_sources:
                causes.extend(_key_selector_rules(as_dict(source[key]), f"{at}.valueFrom.{key}"))
        if not set_sources:
            detail = (
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
            )
            causes.append(invalid(f"{at}.valueFrom", "", detail))
        elif as_text(var.get("value")):
            causes.append(invalid(f"{at}.valueFrom", "", "may not be specified when `value` is not empty"))
        elif len(set_sources) > 1:
            causes.append(
                invalid(f"{at}.valueFrom", "", "may not have more than one field specified at a time")
            )
    return causes


def _key_selector_rules(selector: dict[str, Any], path: str) -> list[StatusCause]:
    name = as_text(selector.get("name"))
    causes = [invalid(f"{path}.name", name, msg) for msg in naming.dns1123_subdomain_errors(name)]
    key = as_text(selector.get("key"))
    if not key:
        causes.append(required(f"{path}.key"))
    else:
        causes.extend(invalid(f"{path}.key", key, msg) for msg in config_key_errors(key))
    return causes


ENV_NAME_MESSAGE = (
    "a valid environment variable name must consist only of printable ASCII characters other than '='"
)


def _env_name_valid(name: str) -> bool:
    """RelaxedEnvironmentVariableValidation: printable ASCII but '='."""
    return all(" " <= char <= "~" and char != "=" for char in name)


def _env_from_rules(sources: list[Any], path: str) -> list[StatusCause]:
    """``ValidateEnvFrom``: a prefix is an environment variable name; exactly one of
    configMapRef and secretRef per entry (reported at the list's path, as upstream), each naming
    a ConfigMap or Secret (a DNS subdomain)."""
    causes: list[StatusCause] = []
    for index, source in enumerate(sources):
        source = as_dict(source)
        prefix = as_text(source.get("prefix"))
        if prefix and not _env_name_valid(prefix):
            causes.append(invalid(f"{path}[{index}].prefix", prefix, ENV_NAME_MESSAGE))
        refs = [key for key in ("configMapRef", "secretRef") if source.get(key) is not None]
        for key in refs:
            name = as_text(as_dict(source[key]).get("name"))
            if not name:
                causes.append(required(f"{path}[{index}].{key}.name"))
            else:
                causes.extend(
                    invalid(f"{path}[{index}].{key}.name", name, msg)
                    for msg in naming.dns1123_subdomain_errors(name)
                )
        if not refs:
            causes.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(refs) > 1:
            causes.append(invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def _volume_mount_rules(mounts: list[Any], volumes: set[str], container: str) -> list[StatusCause]:
    """``ValidateVolumeMounts``: each names a volume of the pod, at a path of its own; a subPath
    is relative and does not climb (reported at the list's path, without an index, as upstream)."""
    causes: list[StatusCause] = []
    paths: set[str] = set()
    path = f"{container}.volumeMounts"
    for index, mount in enumerate(mounts):
        mount = as_dict(mount)
        at = f"{path}[{index}]"
        name = as_text(mount.get("name"))
        if name not in volumes:
            causes.append(StatusCause(NOT_FOUND, f"Not found: {render(name)}", f"{at}.name"))
        mount_path = as_text(mount.get("mountPath"))
        if mount_path and mount_path in paths:
            causes.append(invalid(f"{at}.mountPath", mount_path, "must be unique"))
        paths.add(mount_path)
        sub_path = as_text(mount.get("subPath"))
        if sub_path:
            causes.extend(
                invalid(f"{path}.subPath", sub_path, msg) for msg in _local_path_errors(sub_path, False)
            )
    return causes


def _resource_rules(resources: dict[str, Any], path: str) -> list[StatusCause]:
    """A request may not exceed its limit (``must be less than or equal to cpu limit of 1``)."""
    limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
    causes: list[StatusCause] = []
    for name in sorted(requests):
        if name not in limits:
            continue
        try:
            over = quantity.parse(str(requests[name])) > quantity.parse(str(limits[name]))
        except quantity.QuantityError:
            continue  # a malformed quantity is refused by its format
        if over:
            detail = f"must be less than or equal to {name} limit of {limits[name]}"
            causes.append(invalid(f"{path}.requests", str(requests[name]), detail))
    return causes


def pod_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return _pod_spec_rules(obj.get("spec"), "spec")


def pod_template_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    return pod_template_spec_rules(as_dict(obj.get("template")), "template")


_PORT_RANGE = "must be between 1 and 65535, inclusive"


_PROTOCOLS = ("SCTP", "TCP", "UDP")


def service_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateServicePort``: names (required when several), port numbers, protocols."""
    ports = as_list(as_dict(obj.get("spec")).get("ports"))
    require_name = len(ports) > 1
    names: set[str] = set()
    causes: list[StatusCause] = []
    for index, port in enumerate(ports):
        port = as_dict(port)
        at = f"spec.ports[{index}]"
        name = as_text(port.get("name"))
        if require_name and not name:
            causes.append(required(f"{at}.name"))
        elif name:
            causes.extend(invalid(f"{at}.name", name, msg) for msg in naming.dns1123_label_errors(name))
            if name in names:
                causes.append(duplicate(f"{at}.name", name))
            names.add(name)
        number = port.get("port")
        if is_int(number) and not 1 <= number <= 65535:
            causes.append(invalid(f"{at}.port", number, _PORT_RANGE))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            causes.append(not_supported(f"{at}.protocol", protocol, _PROTOCOLS))
        target = port.get("targetPort")
        if is_int(target) and target != 0 and not 1 <= target <= 65535:
            causes.append(invalid(f"{at}.targetPort", target, _PORT_RANGE))
        node_port = port.get("nodePort")
        if is_int(node_port) and node_port != 0 and not 1 <= node_port <= 65535:
            causes.append(invalid(f"{at}.nodePort", node_port, _PORT_RANGE))
    return causes


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


_CONFIG_KEY_MESSAGE = naming.regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    "[-._a-zA-Z0-9]+",
    "key.name",
    "KEY_NAME",
    "key-name",
)


#: Keys judged valid: a server's ConfigMaps and Secrets use a few keys over and over.
_VALID_CONFIG_KEYS: set[str] = set()


def config_key_errors(key: str) -> list[str]:
    """``IsConfigMapKey``: keys of ConfigMap and Secret data."""
    if key in _VALID_CONFIG_KEYS:
        return []
    messages: list[str] = []
    if naming.byte_length(key) > naming.DNS1123_SUBDOMAIN_MAX_LENGTH:
        messages.append(naming.max_len_error(naming.DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _CONFIG_KEY.fullmatch(key):
        messages.append(_CONFIG_KEY_MESSAGE)
    if key == ".":
        messages.append("must not be '.'")
    elif key == "..":
        messages.append("must not be '..'")
    elif key.startswith(".."):
        messages.append("must not start with '..'")
    if not messages and len(_VALID_CONFIG_KEYS) < 4096:
        _VALID_CONFIG_KEYS.add(key)
    return messages


def _text_size(value: Any) -> int:
    return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0


def _binary_size(value: Any) -> int:
    if not isinstance(value, str):
        return 0
    decoded = go_base64(value)
    return len(decoded) if isinstance(decoded, bytes) else 0


def config_map_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    data, binary = as_dict(obj.get("data")), as_dict(obj.get("binaryData"))
    causes: list[StatusCause] = []
    total = 0
    for key, value in data.items():
        if problems := config_key_errors(key):
            causes.extend(invalid(f"data[{key}]", key, msg) for msg in problems)
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += _text_size(value)
    for key, value in binary.items():
        if problems := config_key_errors(key):
            causes.extend(invalid(f"binaryData[{key}]", key, msg) for msg in problems)
        total += _binary_size(value)
    if total > MAX_SECRET_SIZE:
        causes.append(too_long("", MAX_SECRET_SIZE))  # upstream: the whole object
    return causes


def secret_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    # stringData is merged over data before validation (the v1 → internal conversion).
    sizes = {key: _binary_size(value) for key, value in as_dict(obj.get("data")).items()}
    sizes.update({key: _text_size(value) for key, value in as_dict(obj.get("stringData")).items()})
    causes: list[StatusCause] = []
    for key in sizes:
        if problems := config_key_errors(key):
            causes.extend(invalid(f"data[{key}]", key, msg) for msg in problems)
    if sum(sizes.values()) > MAX_SECRET_SIZE:
        causes.append(too_long("data", MAX_SECRET_SIZE))
    return causes


_WHEN_IMMUTABLE = "field is immutable when `immutable` is set"


def _immutable_data_rules(
    *fields: str,
) -> Callable[[Mapping[str, Any], Mapping[str, Any]], list[StatusCause]]:
    """ConfigMaps and Secrets marked ``immutable``: the mark and the data stay."""

    def rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
        if old.get("immutable") is not True:
            return []
        causes: list[StatusCause] = []
        if new.get("immutable") is not True:
            causes.append(forbidden("immutable", _WHEN_IMMUTABLE))
        causes += [forbidden(key, _WHEN_IMMUTABLE) for key in fields if new.get(key) != old.get(key)]
        return causes

    return rules


config_map_update_rules = _immutable_data_rules("data", "binaryData")


_secret_data_rules = _immutable_data_rules("data")


def secret_update_rules(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidateSecretUpdate``: the type never changes; an immutable secret's data neither."""
    return immutable("type", new.get("type"), old.get("type")) + _secret_data_rules(new, old)
