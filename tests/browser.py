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
import collections
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Any

import aiohttp


async def _devtools_url(stderr: asyncio.StreamReader, said: collections.deque[str]) -> str | None:
    """The browser's DevTools address from Chromium's stderr; None if it ended first."""
    async for raw in stderr:
        line = raw.decode(errors="replace").rstrip()
        said.append(line)
        if line.startswith("DevTools listening on "):
            return line.removeprefix("DevTools listening on ")
    return None


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


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
        self._process = await asyncio.create_subprocess_exec(
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--remote-debugging-port=0", f"--user-data-dir={self._profile.name}",
            f"--window-size={self.width},{self.height}", "about:blank",
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        # Chromium says where DevTools listens on stderr once it does; a first start on a fresh
        # machine (font caches being built, a busy CI) may take many seconds, so the test waits
        # for that line, or for Chromium's end, rather than for a clock.
        assert self._process.stderr is not None
        said: collections.deque[str] = collections.deque(maxlen=40)
        browser_url = await _devtools_url(self._process.stderr, said)
        if browser_url is None:
            await self._process.wait()
            raise RuntimeError(
                f"chromium exited ({self._process.returncode}) before DevTools listened:\n" + "\n".join(said)
            )
        # Its stderr goes on (D-Bus complaints): drained so that a full pipe never stops it.
        self._drain = asyncio.create_task(_drain(self._process.stderr))
        self._session = aiohttp.ClientSession()
        # A page of its own, made by the browser endpoint: its id is known once the call answers,
        # whereas the initial about:blank page is listed only some time after the start.
        async with self._session.ws_connect(browser_url) as browser_socket:
            await browser_socket.send_json(
                {"id": 1, "method": "Target.createTarget", "params": {"url": "about:blank"}}
            )
            while True:
                answer = await browser_socket.receive_json()
                if answer.get("id") == 1:
                    break
        if "error" in answer:
            raise RuntimeError(f"DevTools: {answer['error']}")
        origin = browser_url.split("/devtools/", 1)[0]
        self._socket = await self._session.ws_connect(
            f"{origin}/devtools/page/{answer['result']['targetId']}", max_msg_size=0
        )
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
        self._drain.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._drain
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
