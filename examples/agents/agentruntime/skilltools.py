"""The tools a skill pack's skills declare: each a command the runner runs in its own pod, in the
pod's environment, with ``/tmp`` as its working folder (the pod's writable one). The model's
arguments go to its stdin as one JSON object; what it prints to stdout is the result (the first
``RESULT_BYTES``, trailing whitespace dropped). A command that exits non-zero, cannot be started, or outlives its
``timeoutSeconds`` (it is killed) fails the tool, with the end of what it wrote to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import kubeloop
from agentruntime.tools import Tool, ToolError

#: The most of a command's stdout the model gets (what follows is read and dropped).
RESULT_BYTES = 64 * 1024
#: How much of the end of its stderr a failure quotes.
STDERR_BYTES = 2048


@dataclass(frozen=True)
class CommandTool:
    """A skill's tool as its pack's ``.tools.json`` declares it."""

    pack: str
    skill: str
    name: str
    description: str
    parameters: dict[str, Any]
    command: tuple[str, ...]
    timeout_seconds: float

    def tool(self, name: str | None = None) -> Tool:
        """The tool, offered as ``name`` (its own by default)."""

        async def run(arguments: dict[str, Any]) -> str:
            return await run_command(self.command, arguments, self.timeout_seconds)

        description = self.description or f"A tool of the skill {self.skill} ({self.pack})."
        return Tool(name or self.name, description, self.parameters, run)


async def run_command(command: tuple[str, ...], arguments: dict[str, Any], timeout_seconds: float) -> str:
    """What ``command`` prints given ``arguments`` on stdin (ToolError if it fails)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=kubeloop.container_path("/tmp"),  # the pod's writable folder
        )
    except OSError as exc:  # not in the image, not executable
        raise ToolError(f"the command {command[0]} cannot be started: {exc.strerror or exc}") from None
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

    async def feed() -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it need not read them
            stdin.write(json.dumps(arguments).encode())
            await stdin.drain()
            stdin.close()

    async def read_capped() -> bytes:
        kept = bytearray()
        while chunk := await stdout.read(65536):
            kept += chunk[: max(0, RESULT_BYTES - len(kept))]
        return bytes(kept)

    async def read_tail() -> bytes:
        tail = b""
        while chunk := await stderr.read(65536):
            tail = (tail + chunk)[-STDERR_BYTES:]
        return tail

    reading = asyncio.gather(feed(), read_capped(), read_tail(), process.wait())
    try:
        _, out, err, code = await asyncio.wait_for(reading, timeout_seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise ToolError(f"{command[0]} did not finish within {timeout_seconds:g} s: killed") from None
    if code != 0:
        said = err.decode(errors="replace").strip()
        raise ToolError(f"{command[0]} exited with {code}" + (f": {said}" if said else ""))
    return out.decode(errors="replace").rstrip()
