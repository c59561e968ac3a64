"""agtool.otel under real LangChain agents: ``create_agent`` driven by a scripted model,
with the gate as ``GateMiddleware`` (over the agent's own tools) or as ``gated_tools``.

Each model tool call is one ``execute_tool`` span whose ``gen_ai.tool.call.id`` is the
model's call id, and the tool's own work nests under it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _fake_chat import ScriptedChat, call, turn
from langchain.agents import create_agent
from langchain_core.tools import tool
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agtool import Gate
from agtool.langchain import GateMiddleware, gated_tools
from agtool.otel import instrument

SEARCH_ARGS = {"status": {"type": "str", "allowed": ["open", "closed"]},
               "limit": {"type": "int", "min": 1, "max": 20}}
SEARCH_RETURNS = {"tickets": {"type": "list", "item": {"type": "str"}}}


def tool_spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {str((span.attributes or {})["gen_ai.tool.call.id"]): span
            for span in exporter.get_finished_spans() if span.name.startswith("execute_tool")}


def model() -> ScriptedChat:
    return ScriptedChat(turns=[turn(call("search_tickets", {"status": "open", "limit": 2}, "c1"),
                                    call("search_tickets", {"status": "opened", "limit": 2},
                                         "c2"))])


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_middleware_over_the_agents_own_tools_gives_one_span_per_tool_call(
        spans: tuple[TracerProvider, InMemorySpanExporter], asynchronous: bool) -> None:
    """``GateMiddleware`` of an instrumented gate: the good and the refused parallel call are
    a span each, by the model's call id; the agent's tool's own span is a child of its call's;
    the refused call ran nothing."""
    provider, exporter = spans
    runs: list[str] = []

    @tool
    def search_tickets(status: str, limit: int) -> dict:
        """Support tickets by status."""
        with provider.get_tracer("helpdesk").start_as_current_span("helpdesk query"):
            runs.append(status)
        return {"tickets": ["T-1", "T-2"][:limit]}

    gate = Gate({"search_tickets": {"fn": lambda status, limit: None, "args": SEARCH_ARGS,
                                    "returns": SEARCH_RETURNS}})
    assert instrument(gate, tracer_provider=provider)
    agent = create_agent(model(), tools=[search_tickets], middleware=[GateMiddleware(gate)])
    question = {"messages": [("user", "open tickets?")]}
    if asynchronous:
        asyncio.run(agent.ainvoke(question))
    else:
        agent.invoke(question)
    assert runs == ["open"]
    spans = tool_spans(exporter)
    assert sorted(spans) == ["c1", "c2"]
    assert (spans["c2"].attributes or {})["error.type"] == "INVALID_ARGUMENT"
    assert "error.type" not in (spans["c1"].attributes or {})
    (query,) = [span for span in exporter.get_finished_spans() if span.name == "helpdesk query"]
    assert query.parent is not None
    assert query.parent.span_id == spans["c1"].context.span_id


def test_gated_tools_give_one_span_per_tool_call(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """``gated_tools`` of an instrumented gate: a span per model call, by its call id."""
    provider, exporter = spans
    runs: list[str] = []

    def search_tickets(status: str, limit: int) -> dict[str, Any]:
        runs.append(status)
        return {"tickets": ["T-1", "T-2"][:limit]}

    gate = Gate({"search_tickets": {"fn": search_tickets, "args": SEARCH_ARGS,
                                    "returns": SEARCH_RETURNS,
                                    "description": "Support tickets by status."}})
    assert instrument(gate, tracer_provider=provider)
    create_agent(model(), tools=gated_tools(gate)).invoke({"messages": [("user", "x")]})
    assert runs == ["open"]
    spans = tool_spans(exporter)
    assert sorted(spans) == ["c1", "c2"]
    assert (spans["c2"].attributes or {})["agtool.reason"] == "args:allowed:status"
