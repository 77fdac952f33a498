"""The scripted model (what the samples and ``kubeloop demo`` use when no provider is named),
driven through the official ``openai`` client as the runner drives a model: it works through a
task with the tools it is offered (memory and the MCP server's events, then a note kept), and
answers from their results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from agentruntime.scriptedmodel import application
from aiohttp.test_utils import TestServer


@pytest.fixture
async def model() -> AsyncIterator[openai.AsyncOpenAI]:
    server = TestServer(application())
    await server.start_server()
    async with openai.AsyncOpenAI(api_key="unused", base_url=str(server.make_url("/v1"))) as client:
        yield client
    await server.close()


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


SYSTEM = {"role": "system", "content": "You triage.\n\nYou are the agent triage in the Kubernetes namespace shop."}
TASK = {"role": "user", "content": "Why does the payments pod keep restarting?"}
TOOLS = [tool("memory_search"), tool("memory_store"), tool("namespace_events"), tool("k8s_list_objects")]


async def test_it_searches_reads_events_keeps_a_note_then_answers(model: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [SYSTEM, TASK]
    first = await model.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
    calls = first.choices[0].message.tool_calls or []
    assert first.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("memory_search", {"query": "payments restarting"}),
        ("namespace_events", {"namespace": "shop", "limit": 10}),
    ]
    assert first.usage is not None and first.usage.total_tokens > 0
    results = {
        "memory_search": "payments: OOMKilled at 128Mi last week",
        "namespace_events": "2026-11-28T10:00:00Z Warning BackOff Pod/payments-1: Back-off restarting\n"
        "2026-11-28T09:59:00Z Normal Pulled Pod/payments-1: pulled",
    }
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": results[call.function.name]})
    second = await model.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
    [store] = second.choices[0].message.tool_calls or []
    assert store.function.name == "memory_store"
    note = json.loads(store.function.arguments)["text"]
    assert note.startswith("Why does the payments pod keep restarting? -> the latest warning is 'Warning BackOff")
    messages.append(second.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": store.id, "content": "stored"})
    third = await model.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
    answer = third.choices[0].message.content or ""
    assert third.choices[0].finish_reason == "stop" and not third.choices[0].message.tool_calls
    assert answer.startswith("(scripted model) On 'Why does the payments pod keep restarting?': ")
    assert "Back-off restarting" in answer and "2 recent events" in answer
    assert "memory recalls: payments: OOMKilled at 128Mi" in answer


async def test_without_tools_it_answers_at_once(model: openai.AsyncOpenAI) -> None:
    reply = await model.chat.completions.create(model="scripted", messages=[TASK])
    assert reply.choices[0].message.content == (
        "(scripted model) On 'Why does the payments pod keep restarting?': no tool had anything to say."
    )


async def test_a_bad_request_is_a_400_naming_the_field(model: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="messages: a list of messages is required"):
        await model.chat.completions.create(model="scripted", messages="hello")
    with pytest.raises(openai.BadRequestError, match="stream: the scripted model does not stream"):
        await model.chat.completions.create(model="scripted", messages=[TASK], stream=True)
