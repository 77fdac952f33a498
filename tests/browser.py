"""Headless Chromium (Debian's, which ``make test`` installs) driven over the DevTools protocol, so a
test can load a page once and watch its DOM change as the page updates itself.

    async with Browser() as browser:
        await browser.open(url)
        title = await browser.evaluate("document.title")
        png = await browser.screenshot()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
from typing import Any

import aiohttp

from kubeloop.testing import eventually


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        raise RuntimeError(
            "chromium is missing: make test installs Debian's chromium (tests/debian_packages.py)"
        )
    return found


class Browser:
    """One headless Chromium with one page, at ``width``×``height``."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self.width, self.height = width, height
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, asyncio.Event] = {}

    async def __aenter__(self) -> Browser:
        # Chromium's helper processes may still be closing files when the profile is removed.
        self._profile = tempfile.TemporaryDirectory(prefix="kubeloop-chromium-", ignore_cleanup_errors=True)
        profile = pathlib.Path(self._profile.name)
        self._process = await asyncio.create_subprocess_exec(
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--remote-debugging-port=0", f"--user-data-dir={profile}",
            f"--window-size={self.width},{self.height}", "about:blank",
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        port_file = profile / "DevToolsActivePort"
        await eventually(lambda: port_file.exists() and len(port_file.read_text().splitlines()) >= 2)
        port = int(port_file.read_text().splitlines()[0])
        self._session = aiohttp.ClientSession()
        pages: list[dict[str, Any]] = []

        async def page_listed() -> bool:
            nonlocal pages
            async with self._session.get(f"http://127.0.0.1:{port}/json/list") as response:
                pages = [target for target in await response.json() if target.get("type") == "page"]
            return bool(pages)

        await eventually(page_listed)
        self._socket = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self._socket.close()
        await self._session.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)  # the browser and its helpers
        await self._process.wait()
        self._profile.cleanup()

    async def _read(self) -> None:
        async for message in self._socket:
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"])
                if "error" in data:
                    future.set_exception(RuntimeError(f"DevTools: {data['error']}"))
                else:
                    future.set_result(data.get("result") or {})
            elif data.get("method") in self._events:
                self._events[data["method"]].set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[number] = future
        await self._socket.send_str(json.dumps({"id": number, "method": method, "params": params}))
        return await future

    async def open(self, url: str) -> None:
        """Navigate to ``url`` and wait for its load event."""
        loaded = self._events["Page.loadEventFired"] = asyncio.Event()
        await self.send("Page.navigate", url=url)
        await loaded.wait()

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page (a script's exception fails the test)."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self) -> bytes:
        """The page as PNG, as the window shows it."""
        return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])
