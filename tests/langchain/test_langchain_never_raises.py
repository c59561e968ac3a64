"""LangChain's adapters never raise into the agent: a timed async tool runs on the agent's own
loop, and a result with no JSON text is a structured error with its own reason.

Real LangChain tool invocations and real ``create_agent`` runs, driven by a scripted model;
the bodies count their runs and note the loop and context they ran in.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

import pytest
from _fake_chat import ScriptedChat, call, turn
from fixtures.unrenderable_table import RESULTS, TOOLS
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from agtool import Gate
from agtool.langchain import GateMiddleware, gated_tools

WRITER = ["read_public", "reversible_write"]
THREAD = {"configurable": {"thread_id": "conv-1"}}
TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="unset")


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [message for message in result["messages"] if isinstance(message, ToolMessage)]


# -- (a) a timed async tool runs on the agent's loop -------------------------------------------

class Refunds:
    """The agent's async refund tool: notes its loop and the agent's trace, and waits on an
    event made on the agent's loop (a loop-bound object: another loop cannot wait on it)."""

    def __init__(self) -> None:
        self.orders: list[str] = []
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.traces: list[str] = []
        self.cancelled = 0
        self.proceed: asyncio.Event | None = None

    def table(self, timeout: float, effect: str = "write") -> dict[str, Any]:
        entry: dict[str, Any] = {
            "fn": lambda **_: {"refund_id": "never called: the agent's tool is the body"},
            "args": {"order": {"type": "str"}}, "returns": {"refund_id": {"type": "str"}},
            "timeout": timeout}
        if effect == "write":
            entry.update(effect="write", risk="reversible_write")
        return {"issue_refund": entry}

    def agent_tool(self) -> Any:
        @tool
        async def issue_refund(order: str) -> dict:
            """Refund an order."""
            self.loops.append(asyncio.get_running_loop())
            self.traces.append(TRACE.get())
            assert self.proceed is not None
            try:
                await self.proceed.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.orders.append(order)
            return {"refund_id": f"R-{len(self.orders)}"}
        return issue_refund


def run_agent(refunds: Refunds, timeout: float, *, effect: str = "write", proceed: bool = True,
              turns: int = 1) -> tuple[dict[str, Any], asyncio.AbstractEventLoop]:
    gate = Gate(refunds.table(timeout, effect), scope=WRITER)
    script = [turn(call("issue_refund", {"order": "O-7"}, "c1")) for _ in range(turns)]
    agent = create_agent(ScriptedChat(turns=script), tools=[refunds.agent_tool()],
                         middleware=[GateMiddleware(gate, scope=WRITER)])

    async def main() -> tuple[dict[str, Any], asyncio.AbstractEventLoop]:
        TRACE.set("the agent's trace")
        refunds.proceed = asyncio.Event()
        if proceed:
            refunds.proceed.set()
        result = await agent.ainvoke({"messages": [("user", "refund O-7")]}, THREAD)
        refunds.proceed.set()  # a body still waiting finishes now, on this loop
        for _ in range(50):
            await asyncio.sleep(0)
        return result, asyncio.get_running_loop()

    return asyncio.run(main())


def test_a_timed_async_write_runs_once_on_the_agents_loop_and_sees_its_context() -> None:
    """Through GateMiddleware, the agent's async tool with a timeout runs on the agent's own
    event loop, sees the agent's context variable, and is answered; the retry (same call id)
    is a replay."""
    refunds = Refunds()
    result, loop = run_agent(refunds, timeout=30, turns=2)
    answers = [json.loads(message.content) for message in tool_messages(result)]
    assert [answer["data"] for answer in answers] == [{"refund_id": "R-1"}] * 2
    assert refunds.loops == [loop]
    assert refunds.traces == ["the agent's trace"]
    assert refunds.orders == ["O-7"]


def test_a_timed_async_read_past_its_timeout_is_a_refusal_and_the_tool_is_cancelled() -> None:
    refunds = Refunds()
    result, loop = run_agent(refunds, timeout=0.05, effect="read", proceed=False)
    [message] = tool_messages(result)
    assert message.status == "error"
    assert json.loads(message.content)["error"]["details"] == {"reason": "timeout"}
    assert refunds.loops == [loop]
    assert (refunds.cancelled, refunds.orders) == (1, [])


def test_a_timed_async_write_past_its_timeout_is_a_refusal_and_runs_on_once() -> None:
    """A write is not cut half-way: refused ``timeout``, it finishes on the agent's loop."""
    refunds = Refunds()
    result, loop = run_agent(refunds, timeout=0.05, proceed=False)
    [message] = tool_messages(result)
    assert json.loads(message.content)["error"]["details"] == {"reason": "timeout"}
    assert refunds.loops == [loop]
    assert (refunds.cancelled, refunds.orders) == (0, ["O-7"])


# -- (b) a result with no JSON text is a structured error ---------------------------------------

@pytest.mark.parametrize("name", list(RESULTS))
@pytest.mark.parametrize("path", ["invoke", "ainvoke", "agent"])
def test_an_unrenderable_result_is_a_structured_error_through_a_real_tool(
        name: str, path: str) -> None:
    """A result that passed its contract but has no JSON text reaches the model as a
    ``ToolMessage`` with ``status="error"`` and the reason ``result:unrenderable``; nothing is
    raised into LangChain, and a plain tool beside it still answers."""
    gate = Gate(TOOLS)
    tools = {gated.name: gated for gated in gated_tools(gate)}
    tool_call = {"type": "tool_call", "name": name, "args": {}, "id": "c1"}
    if path == "invoke":
        messages = [tools[name].invoke(tool_call)]
    elif path == "ainvoke":
        messages = [asyncio.run(tools[name].ainvoke(tool_call))]
    else:
        agent = create_agent(ScriptedChat(turns=[turn(call(name, {}, "c1"),
                                                      call("plain", {}, "c2"))]),
                             tools=list(tools.values()))
        messages = tool_messages(agent.invoke({"messages": [("user", "go")]}))
    refused = messages[0]
    assert isinstance(refused, ToolMessage)
    assert refused.status == "error"
    error = json.loads(refused.content)["error"]
    assert error["details"] == {"reason": "result:unrenderable"}
    assert (error["code"], error["retryable"]) == ("BAD_RESULT", False)
    assert refused.artifact["error"] == error
    if path == "agent":
        assert json.loads(messages[1].content)["data"] == {"value": 1}
