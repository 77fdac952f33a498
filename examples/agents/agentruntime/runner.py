"""The agent runner: the loop of a run's pod. The task goes to the model with the agent's
instructions and tools; the tools the model calls run and their results go back, until the
model answers or a limit is reached (turns, tokens, the run's time).

What the run ends with is its termination message, JSON of at most 4 KiB (what a kubelet
keeps): ``{"result", "memory", "usage"}`` when it answered (exit 0), ``{"reason", "message",
"usage"}`` when it did not (exit 1). Its transcript is its standard output, one JSON line per
model turn and tool call: ``kubectl logs`` of the run's pod. The model's key is never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

import kubeloop
from agentruntime.runinput import TERMINATION_LOG, InputError, RunInput
from agentruntime.tools import Memory, MemoryServer, Tool, ToolError, kubernetes_tools
from agentruntime.transcript import Transcript
from kubeloop.client.config import ConfigError

#: The most a termination message holds (the kubelet's limit), and a tool result in the transcript.
MESSAGE_BYTES = 4096
TRANSCRIPT_RESULT_CHARS = 2000
#: Taken from the run's time to write its end before its pod's deadline.
END_MARGIN_SECONDS = 2.0


class RunFailed(Exception):
    """The run ends without an answer; ``reason`` is the AgentRun's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0
    model: str = ""

    def add(self, usage: Any) -> None:
        if usage is None:
            return
        self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        self.total_tokens += int(getattr(usage, "total_tokens", 0) or 0)

    def document(self) -> dict[str, Any]:
        """As the AgentRun's ``status.usage`` has it."""
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "turns": self.turns,
            "toolCalls": self.tool_calls,
            "model": self.model,
        }


@dataclass
class Outcome:
    result: str
    memory: str | None


class Runner:
    """One run: its input, its model client, its tools and what it has used."""

    def __init__(self, given: RunInput, transcript: Transcript, client: openai.AsyncOpenAI | None = None) -> None:
        self.input = given
        self.transcript = transcript
        self.usage = Usage(model=given.model)
        self.memory = Memory(given.memory)
        self.memory_server = MemoryServer(given.memory_url, given.run) if given.memory_url else None
        memory_tools = (self.memory_server or self.memory).tools()
        self.tools: dict[str, Tool] = {tool.name: tool for tool in memory_tools}
        # Kubernetes reads as the pod's ServiceAccount, when it has one's credentials.
        self.kubernetes = _kubernetes_client()
        if self.kubernetes is not None:
            self.tools.update((tool.name, tool) for tool in kubernetes_tools(self.kubernetes))
        for declared in given.skill_tools:  # a name the platform's tools took: the pack's before it
            name = declared.name
            if name in self.tools:  # as a function's name may be: [a-zA-Z0-9_-], at most 64
                name = re.sub(r"[^a-zA-Z0-9_-]", "_", f"{declared.pack}_{declared.name}")[-64:]
            self.tools[name] = declared.tool(name)
        self.client = client or openai.AsyncOpenAI(
            api_key=given.api_key or "unused",
            base_url=given.base_url,
            timeout=given.call_timeout_seconds,
            max_retries=given.max_retries,
        )

    async def close(self) -> None:
        await self.client.close()
        if self.memory_server is not None:
            await self.memory_server.close()
        if self.kubernetes is not None:
            await self.kubernetes.close()

    async def run(self) -> Outcome:
        """The run's task, answered."""
        return await self.converse([{"role": "user", "content": self.input.task}])

    async def converse(self, conversation: list[dict[str, Any]]) -> Outcome:
        """The answer to ``conversation`` (after the agent's instructions), with the tools of the
        agent's MCP servers connected for the loop's length."""
        async with contextlib.AsyncExitStack() as stack:
            served: list[Tool] = []
            if self.input.mcp_servers:
                # Imported only when used: the SDK is 0.4 s of a run's start.
                from agentruntime.mcptools import MCPUnreachable, mcp_tools

                try:
                    served = await stack.enter_async_context(
                        mcp_tools(
                            list(self.input.mcp_servers), self.input.mcp_filters, headers=self.input.mcp_headers
                        )
                    )
                except MCPUnreachable as exc:  # or refused
                    raise RunFailed(exc.reason, str(exc)) from None
            for tool in served:
                name = tool.name if tool.name not in self.tools else f"mcp_{tool.name}"
                self.tools[name] = Tool(name, tool.description, tool.parameters, tool.run)
            # The agent's allowTools and denyTools: what is not offered cannot be called.
            self.tools = {name: tool for name, tool in self.tools.items() if self.input.offers(name)}
            return await self._loop(conversation)

    async def _loop(self, conversation: list[dict[str, Any]]) -> Outcome:
        given = self.input
        messages: list[dict[str, Any]] = []
        if instructions := given.instructions():
            messages.append({"role": "system", "content": instructions})
        messages.extend(conversation)
        last = next((m.get("content") for m in reversed(conversation) if m.get("role") == "user"), "")
        self.transcript.line(
            "start", run=given.run, agent=given.agent, model=given.model, task=last, tools=sorted(self.tools)
        )
        while self.usage.turns < given.max_turns:
            self.usage.turns += 1
            reply = await self._turn(messages)
            calls = list(reply.tool_calls or ())
            self.transcript.line(
                "model", turn=self.usage.turns, content=reply.content or "", toolCalls=[_call_line(c) for c in calls],
                usage={"prompt": self.usage.prompt_tokens, "completion": self.usage.completion_tokens},
            )  # fmt: skip
            if given.max_tokens is not None and self.usage.total_tokens > given.max_tokens:
                raise RunFailed(
                    "BudgetExceeded",
                    f"the run used {self.usage.total_tokens} tokens, over its budget of {given.max_tokens}",
                )
            if not calls:
                stored = "\n\n".join(self.memory.stored) or None
                return Outcome(reply.content or "", stored)
            messages.append(reply.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
            for call in calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": await self._call(call)})
        raise RunFailed("TurnLimitReached", f"the model gave no answer within {given.max_turns} turns")

    async def _turn(self, messages: list[dict[str, Any]]) -> Any:
        specs = [tool.spec() for tool in self.tools.values()]
        try:
            response = await self.client.chat.completions.create(
                model=self.input.model,
                messages=cast("list[ChatCompletionMessageParam]", messages),
                tools=cast("list[ChatCompletionFunctionToolParam]", specs) if specs else openai.omit,
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise RunFailed("ModelRefused", f"the model's provider refused the run ({exc.status_code}): {_said(exc)}") from None
        except openai.NotFoundError as exc:
            raise RunFailed("UnknownModel", f"the provider does not serve the model {self.input.model!r}: {_said(exc)}") from None
        except openai.RateLimitError as exc:
            raise RunFailed("ModelRateLimited", f"the provider kept answering 429 ({self.input.max_retries} retries): {_said(exc)}") from None
        except openai.APITimeoutError:
            raise RunFailed("ModelUnreachable", f"the model did not answer within {self.input.call_timeout_seconds}s") from None
        except openai.APIConnectionError as exc:
            raise RunFailed("ModelUnreachable", f"the model cannot be reached at {self.client.base_url}: {exc.__cause__ or exc}") from None
        except openai.APIStatusError as exc:
            raise RunFailed("ModelFailed", f"the model's provider answered {exc.status_code}: {_said(exc)}") from None
        self.usage.add(response.usage)
        if not response.choices:
            raise RunFailed("ModelFailed", "the model's answer has no choices")
        return response.choices[0].message

    async def _call(self, call: Any) -> str:
        self.usage.tool_calls += 1
        name = call.function.name
        tool = self.tools.get(name)
        if tool is None:
            raise RunFailed("MalformedToolCall", f"the model called {name!r}, which is not one of its tools: {sorted(self.tools)}")
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError as exc:
            raise RunFailed("MalformedToolCall", f"the model's arguments to {name} are not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise RunFailed("MalformedToolCall", f"the model's arguments to {name} are not a JSON object")
        started = time.monotonic()
        try:
            result = await tool.run(arguments)
        except ToolError as exc:
            self.transcript.line("tool", name=name, arguments=arguments, error=str(exc))
            raise RunFailed("ToolFailed", f"{name}: {exc}") from None
        self.transcript.line(
            "tool", name=name, arguments=arguments, result=result[:TRANSCRIPT_RESULT_CHARS],
            seconds=round(time.monotonic() - started, 3),
        )  # fmt: skip
        return result


def _kubernetes_client() -> kubeloop.APIClient | None:
    """A client acting as the pod's ServiceAccount; None when the pod has no credentials (an
    Agent's Deployment mounts no token)."""
    try:
        return kubeloop.APIClient(kubeloop.load_config())
    except ConfigError:
        return None


def _call_line(call: Any) -> dict[str, str]:
    return {"id": call.id, "name": call.function.name, "arguments": call.function.arguments}


def _said(exc: openai.APIStatusError) -> str:
    """What the provider said, as its error body has it (else its text, else its status line)."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    with contextlib.suppress(Exception):  # a body that is not JSON: a proxy's or a gateway's words
        if text := exc.response.text.strip():
            return text[:300]
    return str(exc.message)


def termination_message(document: dict[str, Any]) -> str:
    """``document`` as JSON within :data:`MESSAGE_BYTES`: the longest text is cut until it fits."""
    fitted = dict(document)
    while len(encoded := json.dumps(fitted, ensure_ascii=False).encode()) > MESSAGE_BYTES:
        longest = max((key for key in ("result", "memory", "message") if fitted.get(key)), key=lambda k: len(fitted[k]))
        text = fitted[longest]
        over = len(encoded) - MESSAGE_BYTES
        fitted[longest] = text[: max(0, len(text) - over - 16)] + " [cut]"
    return encoded.decode()


async def run_once(given: RunInput, transcript: Transcript) -> tuple[dict[str, Any], int]:
    """The run's termination message and exit code."""
    runner = Runner(given, transcript)
    limit = given.timeout_seconds - END_MARGIN_SECONDS if given.timeout_seconds else None
    try:
        async with asyncio.timeout(max(1.0, limit) if limit is not None else None):
            outcome = await runner.run()
    except RunFailed as failed:
        transcript.line("end", reason=failed.reason, message=failed.message, usage=runner.usage.document())
        return {"reason": failed.reason, "message": failed.message, "usage": runner.usage.document()}, 1
    except TimeoutError:
        message = f"the run did not finish within its {given.timeout_seconds:g}s"
        transcript.line("end", reason="TimedOut", message=message, usage=runner.usage.document())
        return {"reason": "TimedOut", "message": message, "usage": runner.usage.document()}, 1
    finally:
        await runner.close()
    transcript.line("end", result=outcome.result, usage=runner.usage.document())
    document: dict[str, Any] = {"result": outcome.result, "usage": runner.usage.document()}
    if outcome.memory:
        document["memory"] = outcome.memory
    return document, 0


def main() -> int:
    """Run the task the pod was given; write the termination message; 0 if it was answered."""
    transcript = Transcript(sys.stdout)
    try:
        given = RunInput.load()
    except InputError as bad:
        document, code = {"reason": bad.reason, "message": str(bad)}, 1
        transcript.line("end", **document)
    else:
        document, code = asyncio.run(run_once(given, transcript))
    path = pathlib.Path(kubeloop.container_path(TERMINATION_LOG))
    path.write_text(termination_message(document))
    return code
