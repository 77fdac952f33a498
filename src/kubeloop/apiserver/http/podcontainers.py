"""Which container of a pod a request means (``pods/log``, ``pods/exec``, ``pods/attach``): the
``container`` query parameter, or the pod's only container; 400s in upstream's words."""

from __future__ import annotations

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.http.http1 import HTTPRequest


def chosen_container(request: HTTPRequest, pod: Obj) -> str:
    """The container ``request`` names in ``pod`` (an init container too), or its only one."""
    meta = pod.get("metadata") or {}
    containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or ()]
    init = [str(c.get("name")) for c in (pod.get("spec") or {}).get("initContainers") or ()]
    container = request.query.get("container") or ""
    if not container:
        if len(containers) != 1:
            raise errors.BadRequest(
                f"a container name must be specified for pod {meta.get('name')}, choose one of: "
                f"[{' '.join(containers)}]"
                + (f" or one of the init containers: [{' '.join(init)}]" if init else "")
            )
        return containers[0]
    if container not in containers and container not in init:
        raise errors.BadRequest(f"container {container} is not valid for pod {meta.get('name')}")
    return container
