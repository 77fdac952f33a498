"""A local pod's volumes, made as a kubelet makes them, in the pod's folder on this machine.

Each volume is a folder ``<pod folder>/volumes/<name>``:

- ``configMap`` and ``secret``: a file per key (or per ``items`` entry, at its ``path``), with
  ``defaultMode`` or the item's ``mode`` (0644 unless said); written again when the object
  changes (each sync of the pod, at least every ``RESYNC_SECONDS`` while it runs);
- ``emptyDir`` (either medium): an empty folder for the pod's life;
- ``downwardAPI``: the pod's fields and its containers' resources, one file per item;
- ``projected``: several of these sources in one folder, with ``serviceAccountToken``: a token
  of the pod's ServiceAccount bound to the pod (TokenRequest), for the API server or the
  ``audience`` asked, asked again when 80 % of its life is over (or after 24 hours);
- ``persistentVolumeClaim``: a folder per claim (by uid) that outlives the pod, in ``claims``;
- ``hostPath``: the machine's own path (``DirectoryOrCreate`` and ``FileOrCreate`` make it).

Any other kind of volume cannot be mounted: the pod waits, and a FailedMount event says so.

A container sees its volumes through its **root**: ``<pod folder>/<container>/root``, a tree
where each ``volumeMount``'s ``mountPath`` is a link to its volume (or the ``subPath`` in it),
and ``terminationMessagePath`` is a file. Its process gets the root's path as
``KUBELOOP_CONTAINER_ROOT``; :func:`kubeloop.container_path` maps a path a program would use in
a container to it, and in-cluster configuration reads the ServiceAccount's files through it.
Mounts are links, not a mount namespace: ``readOnly`` is not enforced, and a mount inside
another mount's path writes into that volume.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import pathlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubeloop.api.object import Obj
from kubeloop.node.downwardapi import field_value, resource_value
from kubeloop.node.expansion import expand

#: How often the contents of a running pod's ConfigMap and Secret volumes are looked at.
RESYNC_SECONDS = 60.0
#: A projected token is asked again once this share of its life is over (the kubelet's).
TOKEN_REFRESH_SHARE = 0.8
TOKEN_REFRESH_MAX_SECONDS = 24 * 3600.0
#: The subfolder of the pods' root where claims' folders are.
CLAIMS = "claims"
DEFAULT_MODE = 0o644
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"

#: Looks an object up: (kind, namespace, name) → the object or None.
Lookup = Callable[[str, str, str], Awaitable[Obj | None]]
#: Asks for a token of the account (namespace, account, audiences, expiration seconds, pod name,
#: pod uid) → (token, when it expires in Unix seconds); raises CannotMount when it cannot.
IssueToken = Callable[[str, str, list[str], int, str, str], Awaitable[tuple[str, float]]]


class CannotMount(Exception):
    """A volume that cannot be made now: its message is the kubelet's FailedMount event's."""


@dataclass
class _Token:
    token: str
    refresh_at: float


@dataclass
class PodVolumes:
    """The volumes of one pod (in ``folder``), made and kept current."""

    folder: pathlib.Path
    claims: pathlib.Path
    lookup: Lookup
    issue_token: IssueToken
    tokens: dict[tuple[str, int], _Token] = field(default_factory=dict)

    async def sync(self, pod: Obj) -> float:
        """Make (or bring up to date) every volume of ``pod``; in how many seconds to do it
        again. CannotMount: the first volume that cannot be made, in the kubelet's words."""
        again = RESYNC_SECONDS
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            if not isinstance(volume, dict):
                continue
            name = str(volume.get("name"))
            try:
                refresh = await self._volume(pod, volume, self.folder / "volumes" / name)
            except CannotMount as failed:
                raise CannotMount(f'MountVolume.SetUp failed for volume "{name}" : {failed}') from None
            if refresh is not None:
                again = min(again, max(0.0, refresh - time.time()))
        return again

    async def _volume(self, pod: Obj, volume: Obj, target: pathlib.Path) -> float | None:
        """Make one volume at ``target``; when its token is to be asked again (Unix seconds)."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        if "emptyDir" in volume:
            await asyncio.to_thread(target.mkdir, parents=True, exist_ok=True)
            return None
        if "persistentVolumeClaim" in volume:
            claim_name = str((volume["persistentVolumeClaim"] or {}).get("claimName") or "")
            claim = await self.lookup("PersistentVolumeClaim", namespace, claim_name)
            if claim is None:
                raise CannotMount(f'persistentvolumeclaim "{claim_name}" not found')
            folder = self.claims / str((claim.get("metadata") or {}).get("uid"))
            await asyncio.to_thread(_link, target, folder, make=True)
            return None
        if "hostPath" in volume:
            await asyncio.to_thread(_host_path, volume["hostPath"] or {}, target)
            return None
        files: dict[str, tuple[bytes, int]] = {}
        refresh: float | None = None
        if "configMap" in volume or "secret" in volume:
            source = volume.get("configMap") or volume.get("secret") or {}
            mode = _mode(source.get("defaultMode"), DEFAULT_MODE)
            await self._object_files(
                pod, "ConfigMap" if "configMap" in volume else "Secret", source, mode, files
            )
        elif "downwardAPI" in volume:
            source = volume["downwardAPI"] or {}
            _downward_files(pod, source, _mode(source.get("defaultMode"), DEFAULT_MODE), files)
        elif "projected" in volume:
            projected = volume["projected"] or {}
            mode = _mode(projected.get("defaultMode"), DEFAULT_MODE)
            for index, source in enumerate(projected.get("sources") or ()):
                if not isinstance(source, dict):
                    continue
                if "configMap" in source or "secret" in source:
                    kind = "ConfigMap" if "configMap" in source else "Secret"
                    await self._object_files(
                        pod, kind, source.get("configMap") or source.get("secret") or {}, mode, files
                    )
                elif "downwardAPI" in source:
                    _downward_files(pod, source["downwardAPI"] or {}, mode, files)
                elif "serviceAccountToken" in source:
                    token = await self._token(
                        pod, str(volume.get("name")), index, source["serviceAccountToken"] or {}
                    )
                    path = str((source["serviceAccountToken"] or {}).get("path") or "token")
                    files[path] = (token.token.encode(), mode)
                    refresh = token.refresh_at if refresh is None else min(refresh, token.refresh_at)
                else:
                    raise CannotMount(
                        f"projected source {', '.join(source) or '{}'} is not supported by the process node"
                    )
        else:
            kinds = [key for key in volume if key != "name"]
            raise CannotMount(
                f"volume type {', '.join(kinds) or '(none)'} is not supported by the process node"
            )
        await asyncio.to_thread(_write_files, target, files)
        return refresh

    async def _object_files(
        self, pod: Obj, kind: str, source: Obj, mode: int, files: dict[str, tuple[bytes, int]]
    ) -> None:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        name = str(source.get("secretName") or source.get("name") or "")
        found = await self.lookup(kind, namespace, name)
        if found is None:
            if source.get("optional"):
                return
            raise CannotMount(f'{kind.lower()} "{name}" not found')
        values = _values(found, kind)
        items = source.get("items")
        if not items:
            for key, value in values.items():
                files[key] = (value, mode)
            return
        for item in items:
            key = str(item.get("key"))
            if key not in values:
                if source.get("optional"):
                    continue
                raise CannotMount(
                    f"references non-existent secret key: {key}"
                    if kind == "Secret"
                    else f"configmap references non-existent config key: {key}"
                )
            files[str(item.get("path") or key)] = (values[key], _mode(item.get("mode"), mode))

    async def _token(self, pod: Obj, volume: str, index: int, source: Obj) -> _Token:
        """The projected token of one source: the one asked before while it is fresh."""
        key = (volume, index)
        held = self.tokens.get(key)
        now = time.time()
        if held is not None and now < held.refresh_at:
            return held
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        seconds = int(source.get("expirationSeconds") or 3600)
        audience = source.get("audience")
        token, expires = await self.issue_token(
            str(meta.get("namespace") or ""),
            str(spec.get("serviceAccountName") or "default"),
            [str(audience)] if audience else [],
            seconds,
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
        )
        life = max(0.0, expires - now)
        fresh = _Token(token, now + min(life * TOKEN_REFRESH_SHARE, TOKEN_REFRESH_MAX_SECONDS))
        self.tokens[key] = fresh
        return fresh

    def container_root(self, pod: Obj, container: Obj, env: dict[str, str]) -> pathlib.Path:
        """The container's root: a link at each ``mountPath`` to its volume (``subPath`` and
        ``subPathExpr``, expanded from ``env``, in it), and an empty termination message file."""
        root = self.folder / str(container.get("name")) / "root"
        root.mkdir(parents=True, exist_ok=True)
        for mount in container.get("volumeMounts") or ():
            source = self.folder / "volumes" / str(mount.get("name"))
            sub = str(mount.get("subPath") or "") or expand(str(mount.get("subPathExpr") or ""), env)
            if sub:
                source = inside(source, sub)
                if not source.exists():
                    source.mkdir(parents=True, exist_ok=True)  # as the kubelet makes a missing subPath
            _link(inside(root, str(mount.get("mountPath") or "/")), source)
        message = inside(
            root, str(container.get("terminationMessagePath") or DEFAULT_TERMINATION_MESSAGE_PATH)
        )
        message.parent.mkdir(parents=True, exist_ok=True)
        if not message.is_symlink():
            message.write_bytes(b"")
        return root


def _values(obj: Obj, kind: str) -> dict[str, bytes]:
    values = {str(k): str(v).encode() for k, v in (obj.get("data") or {}).items()}
    if kind == "Secret":
        return {key: base64.b64decode(value) for key, value in values.items()}
    values.update({str(k): base64.b64decode(str(v)) for k, v in (obj.get("binaryData") or {}).items()})
    return values


def _downward_files(pod: Obj, source: Obj, mode: int, files: dict[str, tuple[bytes, int]]) -> None:
    containers = [
        c
        for key in ("initContainers", "containers")
        for c in (pod.get("spec") or {}).get(key) or ()
        if isinstance(c, dict)
    ]
    for item in source.get("items") or ():
        path, item_mode = str(item.get("path")), _mode(item.get("mode"), mode)
        if isinstance(item.get("fieldRef"), dict):
            files[path] = (field_value(pod, str(item["fieldRef"].get("fieldPath") or "")).encode(), item_mode)
        elif isinstance(item.get("resourceFieldRef"), dict):
            ref = item["resourceFieldRef"]
            named = str(ref.get("containerName") or "")
            container = next(
                (c for c in containers if c.get("name") == named), containers[0] if containers else {}
            )
            files[path] = (resource_value(container, ref).encode(), item_mode)


def _mode(value: object, default: int) -> int:
    return value if isinstance(value, int) and 0 <= value <= 0o777 else default


def inside(base: pathlib.Path, path: str) -> pathlib.Path:
    """``path`` (absolute or relative) under ``base``; CannotMount when it climbs out."""
    parts = [part for part in pathlib.PurePosixPath(path).parts if part not in ("/", ".")]
    if ".." in parts:
        raise CannotMount(f"path {path!r} climbs out of its volume")
    return base.joinpath(*parts)


def _link(at: pathlib.Path, to: pathlib.Path, *, make: bool = False) -> None:
    """A link at ``at`` to ``to`` (what was there is replaced; ``make``: ``to`` is made a
    folder if it is not there)."""
    if make:
        to.mkdir(parents=True, exist_ok=True)
    if at.is_symlink() and pathlib.Path(os.readlink(at)) == to:
        return
    at.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if at.is_dir() and not at.is_symlink():
            at.rmdir()
        else:
            at.unlink()
    at.symlink_to(to)


def _host_path(source: Obj, target: pathlib.Path) -> None:
    path = pathlib.Path(str(source.get("path") or ""))
    kind = str(source.get("type") or "")
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    checks: dict[str, Callable[[], bool]] = {
        "Directory": path.is_dir,
        "File": path.is_file,
        "Socket": path.is_socket,
        "CharDevice": path.is_char_device,
        "BlockDevice": path.is_block_device,
    }
    if kind in checks and not checks[kind]():
        raise CannotMount(f"hostPath type check failed: {path} is not a {kind}")
    _link(target, path)


def _write_files(target: pathlib.Path, files: dict[str, tuple[bytes, int]]) -> None:
    """Make ``target`` hold exactly ``files``: each changed file replaced at once (a reader
    sees the old content or the new), the ones no longer wanted removed."""
    target.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for relative, (content, mode) in files.items():
        path = inside(target, relative)
        wanted.add(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if path.read_bytes() == content and (path.stat().st_mode & 0o777) == mode:
                continue
        partial = path.with_name(f".{path.name}.partial")
        partial.write_bytes(content)
        partial.chmod(mode)
        os.replace(partial, path)
    for path in sorted(target.rglob("*"), reverse=True):
        if path.is_file() and path not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
