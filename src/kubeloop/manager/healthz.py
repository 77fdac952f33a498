"""Named health checks served on ``/healthz`` and ``/readyz`` (controller-runtime's ``healthz``).

A check is a callable — plain or async — that returns when healthy and raises when not. The
endpoint runs every check: all pass → 200 ``ok`` (``?verbose`` lists them as ``[+]name ok``);
any fails → 500 with ``[+]``/``[-]`` lines and ``<endpoint> check failed`` (the reason is logged,
the body says "reason withheld", as upstream). ``/healthz/<name>`` runs one check.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger("kubeloop.manager.healthz")

Check = Callable[[], Awaitable[None] | None]


class Checks:
    """The named checks of one probe endpoint (``/healthz`` or ``/readyz``), as controller-runtime's
    ``healthz.Handler``: each passes when it returns (or its awaitable does) without raising::

        async def database_reachable() -> None:
            await asyncio.wait_for(database.ping(), 1)  # raising: not ready

        manager.add_readyz_check("database", database_reachable)
    """

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """Add the check ``name`` (unique, without ``/``)."""
        if not name or "/" in name:
            raise ValueError(f"a check name must be non-empty and free of '/': {name!r}")
        if name in self._checks:
            raise ValueError(f"a {self.endpoint} check named {name!r} already exists")
        self._checks[name] = check

    async def handle(self, request: web.Request) -> web.Response:
        """Answer the endpoint (every check) or ``<endpoint>/<name>`` (that one): 200 with a line
        per check when all pass, else 500 naming the failures."""
        from aiohttp import web  # loaded with the probe server, which only a manager asked for starts

        only = request.match_info.get("name")
        if only is not None and only not in self._checks:
            return web.Response(status=404, text=f"no {self.endpoint} check named {only!r}\n")
        chosen = {only: self._checks[only]} if only is not None else self._checks
        lines: list[str] = []
        failed = False
        for name, check in chosen.items():
            try:
                outcome = check()
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:
                failed = True
                log.info("%s check %s failed: %s", self.endpoint, name, exc)
                lines.append(f"[-]{name} failed: reason withheld")
            else:
                lines.append(f"[+]{name} ok")
        if failed:
            return web.Response(status=500, text="\n".join(lines) + f"\n{self.endpoint} check failed\n")
        if "verbose" in request.query:
            return web.Response(text="\n".join(lines) + f"\n{self.endpoint} check passed\n")
        return web.Response(text="ok")
