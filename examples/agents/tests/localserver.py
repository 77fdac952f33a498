"""Serving a test double's aiohttp application on a free port of the loopback."""

from __future__ import annotations

from aiohttp import web


async def serve_locally(app: web.Application) -> tuple[web.AppRunner, int]:
    """``app`` serving on 127.0.0.1: its runner (to clean up) and its port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    return runner, port
