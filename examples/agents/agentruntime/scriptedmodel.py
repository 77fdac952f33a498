"""The scripted model: a small OpenAI-compatible Chat Completions endpoint that stands in for a
model provider where there is none (``kubeloop demo`` with no ``OPENAI_API_KEY``), so that every
part of a run but the model itself is real: the runner, its tools, the MCP server, the memory.

It does not understand language. Its replies follow one script, driven by what each request
holds, as a careful model would work through a task with the tools it is offered:

1. the task is new (no tool results after the last user message): it calls ``memory_search``
   with the task's words, and the namespace's events (``namespace_events`` of an MCP server
   such as mcp-kubernetes) for the namespace its instructions name;
2. it has those results: it keeps a note with ``memory_store`` (what it found, in one line);
3. then it answers: what it found in the events (the latest warning first) and in memory.

Tools it is not offered are skipped; with none, it answers at once. Usage counts a token per
four characters, as a rough tokenizer would. Served on ``PORT`` (8080) of ``POD_IP`` (else every
address): ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /healthz``.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from typing import Any

from aiohttp import web

DEFAULT_PORT = 8080
MODEL = "scripted"
#: Where a system prompt names the namespace (``RunInput.instructions`` says it so).
_NAMESPACE = re.compile(r"namespace ([a-z0-9]([-a-z0-9]*[a-z0-9])?)\b")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{3,}")
_STOP_WORDS = frozenset(
    {"what", "does", "keep", "with", "that", "this", "from", "there", "which", "check", "the"}
)
#: An MCP server's events tool (mcp-kubernetes's; ``mcp_`` when a built-in tool has its name).
#: The runner's own ``k8s_*`` tools are not used: a run's Role reads little but its own input.
_EVENTS_TOOLS = ("namespace_events", "mcp_namespace_events")


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message that answers the request ``body``: tool calls, or the answer."""
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    offered = {
        str((tool.get("function") or {}).get("name"))
        for tool in body.get("tools") or ()
        if isinstance(tool, dict)
    }
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    task = _text(messages[last_user].get("content")) if last_user >= 0 else ""
    since = messages[last_user + 1 :]
    calls_by_id = {
        str(call.get("id")): str(call["function"].get("name")) for m in since for call in _calls(m)
    }
    called = set(calls_by_id.values())
    results = {
        calls_by_id[str(m.get("tool_call_id"))]: _text(m.get("content"))
        for m in since
        if m.get("role") == "tool" and str(m.get("tool_call_id")) in calls_by_id
    }
    if not called:
        calls: list[tuple[str, dict[str, Any]]] = []
        if "memory_search" in offered:
            calls.append(("memory_search", {"query": " ".join(_keywords(task)) or task[:80]}))
        events = next((name for name in _EVENTS_TOOLS if name in offered), None)
        if events is not None:
            calls.append((events, {"namespace": _namespace(messages), "limit": 10}))
        if calls:
            return _tool_calls(calls)
    findings = _findings(results)
    if "memory_store" in offered and "memory_store" not in called and results:
        note = f"{task.strip()[:120]} -> {findings[0]}"
        return _tool_calls([("memory_store", {"text": note})])
    return {"role": "assistant", "content": _answer(task, findings)}


def _findings(results: dict[str, str]) -> list[str]:
    """What the tools' results say, most telling first."""
    found: list[str] = []
    events = next((results[name] for name in _EVENTS_TOOLS if name in results), None)
    if events is not None:
        lines = [line for line in events.splitlines() if line.strip() and not line.startswith("no events")]
        warnings = [line for line in lines if " Warning " in f" {line} "]
        if warnings:
            found.append(f"the latest warning is {_event(warnings[0])}")
        if lines:
            found.append(f"{len(lines)} recent events, the newest {_event(lines[0])}")
        else:
            found.append("no events in the namespace")
    memory = results.get("memory_search")
    if memory is not None:
        remembered = [line for line in memory.splitlines() if line.strip()]
        nothing = not remembered or remembered[0].lower().startswith(("no ", "nothing"))
        found.append("nothing related in memory" if nothing else f"memory recalls: {remembered[0][:160]}")
    return found or ["no tool had anything to say"]


def _event(line: str) -> str:
    """An event line (``<time> <type> <reason> <kind>/<name>: <message>``) without its time."""
    _, _, rest = line.partition(" ")
    return repr(rest.strip()[:200])


def _answer(task: str, findings: list[str]) -> str:
    if not task:
        return "(scripted model) There was no question to answer."
    return f"(scripted model) On {task.strip()[:100]!r}: " + "; ".join(findings) + "."


def _tool_calls(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for name, arguments in calls
        ],
    }


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    return [c for c in calls or () if isinstance(c, dict) and isinstance(c.get("function"), dict)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _keywords(task: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(task)]
    return [w for w in dict.fromkeys(words) if w not in _STOP_WORDS][:4]


def _namespace(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "system" and (found := _NAMESPACE.search(_text(message.get("content")))):
            return found[1]
    return "default"


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def application() -> web.Application:
    async def complete(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "messages: a list of messages is required")
        if body.get("stream"):
            return _error(400, "stream: the scripted model does not stream")
        message = reply(body)
        prompt = _tokens(json.dumps(body["messages"]))
        completion = _tokens(json.dumps(message))
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(body.get("model") or MODEL),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "kubeloop"}],
            }
        )

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/healthz", healthz)
    return app


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


def main() -> int:
    """Serve until SIGTERM (the pod's end)."""
    port = int(os.environ.get("PORT", DEFAULT_PORT))
    host = os.environ.get("BIND_ADDRESS") or os.environ.get("POD_IP") or "0.0.0.0"
    web.run_app(application(), host=host, port=port, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
