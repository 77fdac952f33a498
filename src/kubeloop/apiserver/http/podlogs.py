"""``pods/<name>/log``: a container's output, as kubectl logs reads it.

Local pods' containers (the process node's) have logs, read from the files their runs write;
a simulated container has written nothing, and its log is empty. The query is the kubelet's:
``container`` (needed when the pod has several), ``previous`` (the run before the current one),
``timestamps`` (each line after the time it was written), ``tailLines``, ``sinceSeconds`` or
``sinceTime``, ``limitBytes``, and ``follow``, which streams what the run writes until it ends or
the client goes. Mistakes are 400s naming the parameter, as upstream words them.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aiohttp import web

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.podcontainers import chosen_container
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.node.sessions import ProcessNode

#: How often a followed log is looked at for more.
FOLLOW_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class LogOptions:
    container: str
    previous: bool
    follow: bool
    timestamps: bool
    tail_lines: int | None
    since: datetime | None
    limit_bytes: int | None


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _positive(request: HTTPRequest, name: str, *, allow_zero: bool = False) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0 or (value == 0 and not allow_zero):
        raise errors.BadRequest(
            f"{name}: Invalid value: {raw!r}: must be {'non-negative' if allow_zero else 'greater than 0'}"
        )
    return value


def options_of(request: HTTPRequest, pod: Obj) -> LogOptions:
    """The query's options for ``pod``; 400 for a mistake, naming it."""
    container = chosen_container(request, pod)
    since_seconds = _positive(request, "sinceSeconds")
    since_time = request.query.get("sinceTime")
    if since_seconds is not None and since_time:
        raise errors.BadRequest("at most one of `sinceTime` or `sinceSeconds` may be specified")
    since = None
    if since_seconds is not None:
        since = datetime.now(UTC) - timedelta(seconds=since_seconds)
    elif since_time:
        since = timestamps.parse_time(since_time)
        if since is None:
            raise errors.BadRequest(f"sinceTime: Invalid value: {since_time!r}: must be an RFC 3339 time")
    return LogOptions(
        container=container,
        previous=_truthy(request.query.get("previous")),
        follow=_truthy(request.query.get("follow")),
        timestamps=_truthy(request.query.get("timestamps")),
        tail_lines=_positive(request, "tailLines", allow_zero=True),
        since=since,
        limit_bytes=_positive(request, "limitBytes"),
    )


def _lines(path: pathlib.Path, start: int) -> tuple[list[tuple[str, bytes]], int]:
    """The whole records of the log from byte ``start``: (time, line) each, and where they end
    (from its start again if it was started again past its cap; none once it is gone)."""
    try:
        with path.open("rb") as log:
            if log.seek(0, 2) < start:
                start = 0
            log.seek(start)
            data = log.read()
    except FileNotFoundError:  # its pod was deleted
        return [], start
    end = data.rfind(b"\n") + 1
    records = []
    partial = b""
    for raw in data[:end].split(b"\n")[:-1]:
        stamp, _, rest = raw.partition(b" ")
        _stream, _, rest = rest.partition(b" ")
        tag, _, line = rest.partition(b" ")
        if tag == b"P":  # a long line, in parts
            partial += line
            continue
        records.append((stamp.decode(), partial + line))
        partial = b""
    return records, start + end


def _render(records: list[tuple[str, bytes]], options: LogOptions) -> Iterator[bytes]:
    for stamp, line in records:
        if options.since is not None:
            written = timestamps.parse_time(stamp)
            if written is not None and written < options.since:
                continue
        yield (stamp.encode() + b" " + line + b"\n") if options.timestamps else line + b"\n"


async def pod_log(
    scope: Scope, request: HTTPRequest, target: Target, logs: ProcessNode | None
) -> web.StreamResponse:
    assert target.namespace is not None and target.name is not None
    namespace, name = target.namespace, target.name
    pod = await scope.registry.read(lambda: scope.registry.get(target.resource, namespace, name))
    options = options_of(request, pod)
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    path = logs.log_file(namespace, name, uid, options.container, previous=options.previous) if logs else None
    if path is None:
        _refuse_missing(pod, options)
        return web.Response(body=b"", content_type="text/plain")  # a simulated container wrote nothing
    records, offset = await asyncio.to_thread(_lines, path, 0)
    if options.tail_lines is not None:
        records = records[-options.tail_lines :] if options.tail_lines else []
    chunks = list(_render(records, options))
    budget = options.limit_bytes
    if not options.follow or options.previous:
        body = b"".join(chunks)
        return web.Response(body=body[:budget] if budget is not None else body, content_type="text/plain")
    assert isinstance(request, web.Request)  # a followed log never takes the small-request path
    response = web.StreamResponse(status=200)
    response.content_type = "text/plain"
    response.enable_chunked_encoding()
    await response.prepare(request)
    with contextlib.suppress(ConnectionResetError, ConnectionError):
        while True:
            for chunk in chunks:
                if budget is not None:
                    chunk = chunk[:budget]
                    budget -= len(chunk)
                await response.write(chunk)
                if budget is not None and budget <= 0:
                    return response
            live = logs is not None and logs.running(namespace, name, uid, options.container)
            records, offset = await asyncio.to_thread(_lines, path, offset)
            chunks = list(_render(records, options))
            if not chunks and not live:
                break  # the run has ended and all it wrote is out
            if not chunks:
                await asyncio.sleep(FOLLOW_POLL_SECONDS)
        await response.write_eof()
    return response


def _refuse_missing(pod: Obj, options: LogOptions) -> None:
    """400 as the kubelet says it when a container has no log to show (yet)."""
    meta = pod.get("metadata") or {}
    status_of = pod.get("status") or {}
    every = [*(status_of.get("containerStatuses") or ()), *(status_of.get("initContainerStatuses") or ())]
    statuses = {str(s.get("name")): s for s in every}
    status = statuses.get(options.container) or {}
    if options.previous:
        raise errors.BadRequest(
            f'previous terminated container "{options.container}" in pod "{meta.get("name")}" not found'
        )
    waiting = (status.get("state") or {}).get("waiting")
    if waiting is not None or not status:
        reason = (waiting or {}).get("reason") or "ContainerCreating"
        raise errors.BadRequest(
            f'container "{options.container}" in pod "{meta.get("name")}" is waiting to start: {reason}'
        )
