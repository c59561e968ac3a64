"""agtool.otel inside a real pydantic-ai run: pydantic-ai's own ``execute_tool`` span for
a tool call that goes through the gate carries agtool's attributes, and no second span is
made (the conventions' "one span per call"). A ``FunctionModel`` scripts the model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from agtool import Gate
from agtool.otel import instrument

ARGS = {"sku": {"type": "str"}, "limit": {"type": "int", "min": 1, "max": 5}}
RETURNS = {"sku": {"type": "str"}, "count": {"type": "int"}}


def two_calls(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One good and one refused call in the first turn, then an answer."""
    if len(messages) > 1:
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[
        ToolCallPart("sku_count", {"sku": "A1", "limit": 2}, tool_call_id="call_1"),
        ToolCallPart("sku_count", {"sku": "A1", "limit": 9}, tool_call_id="call_2")])


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync-tool", "async-tool"])
def test_pydantic_ais_tool_span_is_the_one_span_of_a_gated_call(
        spans: tuple[TracerProvider, InMemorySpanExporter], asynchronous: bool) -> None:
    """Each model tool call is exactly one ``execute_tool sku_count`` span, pydantic-ai's,
    with agtool's request id, and the refused one's code as ``error.type``; the body ran once."""
    provider, exporter = spans
    runs: list[int] = []

    def body(sku: str, limit: int) -> dict[str, Any]:
        runs.append(limit)
        return {"sku": sku, "count": limit}

    gate = Gate({"sku_count": {"fn": body, "args": ARGS, "returns": RETURNS}})
    assert instrument(gate, tracer_provider=provider)
    settings = InstrumentationSettings(tracer_provider=provider)
    agent = Agent(FunctionModel(two_calls), capabilities=[Instrumentation(settings=settings)])
    answers: dict[str, Any] = {}
    if asynchronous:
        @agent.tool
        async def sku_count(ctx: RunContext[None], sku: str, limit: int) -> dict[str, Any]:
            answer = await gate.acall_for_model("sku_count", {"sku": sku, "limit": limit},
                                                step_id=ctx.tool_call_id)
            answers[str(ctx.tool_call_id)] = answer
            return answer
    else:  # a sync tool, which pydantic-ai runs on a worker thread
        @agent.tool
        def sku_count(ctx: RunContext[None], sku: str, limit: int) -> dict[str, Any]:
            answer = gate.call_for_model("sku_count", {"sku": sku, "limit": limit},
                                         step_id=ctx.tool_call_id)
            answers[str(ctx.tool_call_id)] = answer
            return answer
    # Run async either way: run_sync would leave the thread's event loop open behind it.
    assert asyncio.run(agent.run("stock?")).output == "done"
    assert runs == [2]
    tool_spans = [span for span in exporter.get_finished_spans()
                  if span.name.startswith("execute_tool")]
    assert [span.name for span in tool_spans] == ["execute_tool sku_count"] * 2
    assert {span.instrumentation_scope.name for span in tool_spans
            if span.instrumentation_scope is not None} == {"pydantic-ai"}
    by_call = {(span.attributes or {})["gen_ai.tool.call.id"]: dict(span.attributes or {})
               for span in tool_spans}
    assert by_call["call_1"]["agtool.request_id"] == answers["call_1"]["request_id"]
    assert by_call["call_2"]["agtool.request_id"] == answers["call_2"]["request_id"]
    assert "error.type" not in by_call["call_1"]
    assert by_call["call_2"]["error.type"] == "INVALID_ARGUMENT"
    assert by_call["call_2"]["agtool.reason"] == "args:max:limit"
