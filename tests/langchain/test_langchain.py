"""agtool.langchain: real ``create_agent`` runs and LangGraph ``ToolNode`` graphs, gated.

Every agent here is LangChain's or LangGraph's own, driven by a scripted chat
model (``tests/_fake_chat.py``) that makes the mistakes models make. Body
runs are counted by the tools themselves, never read from the gate.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from typing import Annotated, Any

import pytest
from _fake_chat import ScriptedChat, call, turn
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import NodeCancelledError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt

from agtool import Gate, to_json_schema, tool_spec
from agtool.langchain import (
    GatedTool,
    GateMiddleware,
    GateWrapper,
    gated_tool_node,
    gated_tools,
)

ROWS = [{"id": "T-1", "title": "Refund not received", "age_days": 3},
        {"id": "T-2", "title": "Wrong size", "age_days": 12}]
SEARCH_ARGS = {
    "status": {"type": "str", "allowed": ["open", "pending", "closed"]},
    "limit": {"type": "int", "min": 1, "max": 20},
    "assignee": {"type": "str", "required": False, "pattern": "[a-z]+"},
}
SEARCH_RETURNS = {"tickets": {"type": "list", "max_len": 20, "item": {
    "id": {"type": "str", "pattern": r"T-\d+"}, "title": {"type": "str"},
    "age_days": {"type": "int", "min": 0, "max": 3650}}}}
REFUND_ARGS = {"order": {"type": "str", "pattern": "O-[0-9]+"},
               "amount": {"type": "int", "min": 1, "max": 500}}
REFUND_RETURNS = {"refund_id": {"type": "str"}}
THREAD = {"configurable": {"thread_id": "conv-1"}}
WRITER = ["read_public", "reversible_write"]


class Desk:
    """A support desk's tools, counting their own body runs."""

    def __init__(self, *, asynchronous: bool = False) -> None:
        self.searches = 0
        self.refunds: list[str] = []
        if asynchronous:
            async def search(status: str, limit: int, assignee: str | None = None) -> Any:
                return self.search(status, limit, assignee)

            async def refund(order: str, amount: int) -> Any:
                return self.refund(order, amount)
            fns: tuple[Any, Any] = (search, refund)
        else:
            fns = (self.search, self.refund)
        self.table: dict[str, dict[str, Any]] = {
            "search_tickets": {"fn": fns[0], "description": "Support tickets by status.",
                               "args": SEARCH_ARGS, "returns": SEARCH_RETURNS},
            "issue_refund": {"fn": fns[1], "description": "Refund an order.",
                             "args": REFUND_ARGS, "returns": REFUND_RETURNS, "effect": "write",
                             "key_args": ["order"]},
        }

    def search(self, status: str, limit: int, assignee: str | None = None) -> Any:
        self.searches += 1
        return {"tickets": ROWS[:limit]}

    def refund(self, order: str, amount: int) -> Any:
        self.refunds.append(order)
        return {"refund_id": f"R-{len(self.refunds)}"}

    def agent_tools(self) -> list[StructuredTool]:
        """The same bodies as ordinary LangChain tools, with their own (lax) pydantic schemas."""
        @tool
        def search_tickets(status: str, limit: int, assignee: str | None = None) -> dict:
            """Support tickets by status."""
            return self.search(status, limit, assignee)

        @tool
        def issue_refund(order: str, amount: int) -> dict:
            """Refund an order."""
            return self.refund(order, amount)
        return [search_tickets, issue_refund]


def tool_messages(result: dict[str, Any]) -> dict[str, ToolMessage]:
    """The run's ToolMessages by tool-call id."""
    return {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}


def reason(message: ToolMessage) -> str:
    answer = json.loads(message.content)
    return "" if answer["ok"] else answer["error"]["details"]["reason"]


def search(args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return call("search_tickets", args, call_id)


#: The mistakes models make, each with the reason the gate must give.
MISTAKES = [
    ("renamed", {"state": "open", "limit": 5}, {"args:unexpected:state", "args:missing:status"}),
    ("str_for_int", {"status": "open", "limit": "5"}, {"args:type:limit"}),
    ("bool_for_int", {"status": "open", "limit": True}, {"args:type:limit"}),
    ("invented_enum", {"status": "opened", "limit": 5}, {"args:allowed:status"}),
    ("extra_arg", {"status": "open", "limit": 5, "team": "x"}, {"args:unexpected:team"}),
    ("float_for_int", {"status": "open", "limit": 5.0}, {"args:type:limit"}),
]
IDS = [name for name, _, _ in MISTAKES]


def gate_schema(table: dict[str, Any], name: str) -> dict[str, Any]:
    """The JSON Schema the gate enforces for ``name``, as a provider is sent it."""
    return {key: value for key, value in to_json_schema(table, name).items()
            if key != "$schema"}


# --- gated_tools ---------------------------------------------------------------------------


def test_model_is_shown_exactly_the_schema_the_gate_enforces() -> None:
    """What bind_tools sends for each gated tool is the gate's own exported schema and name."""
    desk = Desk()
    model = ScriptedChat(turns=[])
    create_agent(model, tools=gated_tools(Gate(desk.table))).invoke({"messages": [("user", "x")]})
    sent = {spec["function"]["name"]: spec["function"] for spec in model.bound[0]}
    assert set(sent) == set(desk.table)
    for name in desk.table:
        # Not the strict OpenAI export, which lists optional args as required and nullable:
        # LangChain sends the schema as given, so the model sees the one the gate checks.
        assert sent[name]["description"] == tool_spec(desk.table, name, "openai")[
            "function"]["description"]
        assert sent[name]["parameters"] == gate_schema(desk.table, name)


@pytest.mark.parametrize(("label", "args", "reasons"), MISTAKES, ids=IDS)
def test_create_agent_hands_every_mistake_to_the_gate_as_sent(
        label: str, args: dict[str, Any], reasons: set[str]) -> None:
    """Each model mistake reaches the gate uncoerced and comes back an error ToolMessage."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(search(args, "c1"))])
    result = create_agent(model, tools=gated_tools(Gate(desk.table))).invoke(
        {"messages": [("user", "open tickets")]})
    message = tool_messages(result)["c1"]
    assert message.status == "error"
    assert reason(message) in reasons
    assert json.loads(message.content)["error"]["code"] == "INVALID_ARGUMENT"
    assert desk.searches == 0
    assert isinstance(result["messages"][-1], AIMessage)  # the run went on to the model


def test_parallel_calls_are_each_gated_none_skipped() -> None:
    """Three calls in one turn, one bad: three answers, two successes, two body runs."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "a"),
                                     search({"status": "open", "limit": "2"}, "b"),
                                     search({"status": "closed", "limit": 2}, "c"))])
    result = create_agent(model, tools=gated_tools(Gate(desk.table))).invoke(
        {"messages": [("user", "x")]})
    messages = tool_messages(result)
    assert {key: m.status for key, m in messages.items()} == {
        "a": "success", "b": "error", "c": "success"}
    assert reason(messages["b"]) == "args:type:limit"
    assert json.loads(messages["c"].content)["data"] == {"tickets": ROWS[:2]}
    assert desk.searches == 2


def test_retried_write_with_the_same_call_id_runs_once() -> None:
    """A model that repeats a write under the same tool-call id gets the first outcome back."""
    desk = Desk()
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    model = ScriptedChat(turns=[turn(refund), turn(refund)])
    agent = create_agent(model, tools=gated_tools(Gate(desk.table), scope=WRITER))
    result = agent.invoke({"messages": [("user", "refund O-7")]}, THREAD)
    answers = [json.loads(m.content) for m in result["messages"]
               if isinstance(m, ToolMessage)]
    assert len(answers) == 2
    assert answers[0]["ok"]
    assert answers[1]["data"] == answers[0]["data"] == {"refund_id": "R-1"}
    assert desk.refunds == ["O-7"]


def test_a_new_call_id_is_a_new_write() -> None:
    """Two refunds of the same order under different tool-call ids are two steps: both run."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(call("issue_refund", {"order": "O-7", "amount": 20}, "w1"),
                                     call("issue_refund", {"order": "O-7", "amount": 20}, "w2"))])
    create_agent(model, tools=gated_tools(Gate(desk.table), scope=WRITER)).invoke(
        {"messages": [("user", "x")]}, THREAD)
    assert desk.refunds == ["O-7", "O-7"]


def test_a_write_needs_a_run_id_from_code() -> None:
    """Without a thread id or a run_id the write is refused write:no_key and does not run."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(call("issue_refund", {"order": "O-7", "amount": 20}, "w1"))])
    result = create_agent(model, tools=gated_tools(Gate(desk.table), scope=WRITER)).invoke(
        {"messages": [("user", "x")]})
    assert reason(tool_messages(result)["w1"]) == "write:no_key"
    assert desk.refunds == []
    fixed = gated_tools(Gate(desk.table), scope=WRITER, run_id="batch-9")
    model = ScriptedChat(turns=[turn(call("issue_refund", {"order": "O-7", "amount": 20}, "w1"))])
    result = create_agent(model, tools=fixed).invoke({"messages": [("user", "x")]})
    assert tool_messages(result)["w1"].status == "success"
    assert desk.refunds == ["O-7"]


def test_scope_comes_from_code_never_from_the_model() -> None:
    """The gate's scope refuses a write; the model's own 'scope' arg is refused; code grants it."""
    desk = Desk()
    refund = {"order": "O-7", "amount": 20}
    model = ScriptedChat(turns=[turn(call("issue_refund", refund, "w1"),
                                     call("issue_refund", {**refund, "scope": WRITER}, "w2"))])
    result = create_agent(model, tools=gated_tools(Gate(desk.table))).invoke(
        {"messages": [("user", "x")]}, THREAD)
    messages = tool_messages(result)
    assert reason(messages["w1"]) == "auth:scope:reversible_write"
    assert reason(messages["w2"]) == "auth:scope:reversible_write"  # scope is checked first
    assert desk.refunds == []
    per_run = {"configurable": {"thread_id": "conv-2", "agtool_scope": WRITER}}
    model = ScriptedChat(turns=[turn(call("issue_refund", refund, "w1"))])
    result = create_agent(model, tools=gated_tools(Gate(desk.table))).invoke(
        {"messages": [("user", "x")]}, per_run)
    assert tool_messages(result)["w1"].status == "success"
    assert desk.refunds == ["O-7"]


def test_approvals_are_read_on_every_call() -> None:
    """An approval appended after the tools were made lets exactly the approved args through."""
    desk = Desk()
    desk.table["issue_refund"]["risk"] = "external_effect"
    gate = Gate(desk.table)
    approvals: list[Any] = []
    tools = gated_tools(gate, scope=["read_public", "external_effect"], approvals=approvals)
    refund = {"order": "O-7", "amount": 20}
    model = ScriptedChat(turns=[turn(call("issue_refund", refund, "w1"))])
    result = create_agent(model, tools=tools).invoke({"messages": [("user", "x")]}, THREAD)
    assert reason(tool_messages(result)["w1"]) == "auth:approval"
    approvals.append(gate.approve("issue_refund", refund, by="ops"))
    model = ScriptedChat(turns=[turn(call("issue_refund", {**refund, "amount": 400}, "w2"),
                                     call("issue_refund", refund, "w3"))])
    result = create_agent(model, tools=tools).invoke({"messages": [("user", "x")]}, THREAD)
    messages = tool_messages(result)
    assert reason(messages["w2"]) == "auth:approval"
    assert messages["w3"].status == "success"
    assert desk.refunds == ["O-7"]


def test_a_raising_body_is_an_error_message_not_a_crash() -> None:
    """A body that raises gives an INTERNAL error ToolMessage and the agent's run completes."""
    def broken(status: str, limit: int, assignee: str | None = None) -> Any:
        raise ValueError("database is down: secret detail")
    table = {"search_tickets": {"fn": broken, "args": SEARCH_ARGS, "returns": SEARCH_RETURNS}}
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    result = create_agent(model, tools=gated_tools(Gate(table))).invoke(
        {"messages": [("user", "x")]})
    message = tool_messages(result)["c1"]
    assert message.status == "error"
    assert reason(message) == "raised:ValueError"
    assert "secret detail" not in str(message.content)
    assert result["messages"][-1].content == "done"


def test_a_bad_result_is_refused() -> None:
    """A body whose answer breaks its return contract is an error, never a success."""
    table = {"search_tickets": {"fn": lambda **_: {"tickets": []}, "args": SEARCH_ARGS,
                                "returns": SEARCH_RETURNS}}
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    result = create_agent(model, tools=gated_tools(Gate(table))).invoke(
        {"messages": [("user", "x")]})
    message = tool_messages(result)["c1"]
    assert message.status == "error"
    assert reason(message) == "result:empty"


def test_async_agent_uses_the_async_path() -> None:
    """ainvoke awaits async bodies through acall_for_model; mistakes and replays as on sync."""
    desk = Desk(asynchronous=True)
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": "5"}, "a"),
                                     search({"status": "open", "limit": 1}, "b"), refund),
                                turn(refund)])
    agent = create_agent(model, tools=gated_tools(Gate(desk.table), scope=WRITER))
    result = asyncio.run(agent.ainvoke({"messages": [("user", "x")]}, THREAD))
    statuses = [(m.tool_call_id, m.status) for m in result["messages"]
                if isinstance(m, ToolMessage)]
    assert statuses == [("a", "error"), ("b", "success"), ("w1", "success"), ("w1", "success")]
    assert desk.searches == 1
    assert desk.refunds == ["O-7"]


async def cancel_while_running(agent: Any, started: asyncio.Event) -> None:
    """Start the agent, cancel it once its tool body is running, and expect the cancellation."""
    task = asyncio.ensure_future(agent.ainvoke({"messages": [("user", "x")]}))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_cancellation_propagates_through_a_gated_tool() -> None:
    """A run cancelled while a gated body awaits is cancelled, not answered with a message."""
    async def main() -> None:
        started = asyncio.Event()

        async def slow(status: str, limit: int, assignee: str | None = None) -> Any:
            started.set()
            await asyncio.sleep(60)
        table = {"search_tickets": {"fn": slow, "args": SEARCH_ARGS, "returns": SEARCH_RETURNS}}
        model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
        await cancel_while_running(create_agent(model, tools=gated_tools(Gate(table))), started)
    asyncio.run(main())


def test_a_body_raising_cancelled_is_not_a_message() -> None:
    """A body that raises CancelledError itself reaches LangGraph, which fails the node."""
    async def cancelled(status: str, limit: int, assignee: str | None = None) -> Any:
        raise asyncio.CancelledError
    table = {"search_tickets": {"fn": cancelled, "args": SEARCH_ARGS, "returns": SEARCH_RETURNS}}
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    agent = create_agent(model, tools=gated_tools(Gate(table)))
    with pytest.raises(NodeCancelledError):
        asyncio.run(agent.ainvoke({"messages": [("user", "x")]}))


def test_bare_invoke_answers_the_dict_and_names_are_checked() -> None:
    """Invoked without a tool call a gated tool answers the gate's dict; unknown names raise."""
    desk = Desk()
    gate = Gate(desk.table)
    [search_tool] = gated_tools(gate, ["search_tickets"])
    assert isinstance(search_tool, GatedTool)
    answer = search_tool.invoke({"status": "open", "limit": 1})
    assert answer["ok"]
    assert answer["data"] == {"tickets": ROWS[:1]}
    odd = search_tool.invoke({"status": "open", "limit": 1, "self": 1, "config": 2})
    assert odd["error"]["details"]["reason"].startswith("args:unexpected:")
    for text in (search_tool.invoke("status=open"), asyncio.run(search_tool.ainvoke("x"))):
        assert text["error"]["details"]["reason"] == "args:not_object"  # LangChain would raise
    listed = {"type": "tool_call", "id": "c9", "name": "search_tickets", "args": ["open", 1]}
    for message in (search_tool.invoke(listed), asyncio.run(search_tool.ainvoke(listed))):
        assert message.status == "error"
        assert reason(message) == "args:not_object"
    with pytest.raises(ValueError, match="nope"):
        gated_tools(gate, ["nope"])
    with pytest.raises(TypeError, match=r"agtool\.Gate"):
        gated_tools(desk.table)


# --- GateMiddleware --------------------------------------------------------------------------


def test_without_the_gate_langchain_coerces_and_drops() -> None:
    """The control: the same agent with no middleware runs the body on "5" and drops an extra."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": "1", "team": "x"}, "c1"))])
    result = create_agent(model, tools=desk.agent_tools()).invoke({"messages": [("user", "x")]})
    assert tool_messages(result)["c1"].status == "success"
    assert desk.searches == 1


@pytest.mark.parametrize(("label", "args", "reasons"), MISTAKES, ids=IDS)
def test_middleware_refuses_each_mistake_before_the_agents_tool(
        label: str, args: dict[str, Any], reasons: set[str]) -> None:
    """With GateMiddleware the agent's own lax tool never sees a refused call."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(search(args, "c1"))])
    agent = create_agent(model, tools=desk.agent_tools(),
                         middleware=[GateMiddleware(Gate(desk.table))])
    message = tool_messages(agent.invoke({"messages": [("user", "x")]}))["c1"]
    assert message.status == "error"
    assert reason(message) in reasons
    assert desk.searches == 0


def test_middleware_runs_the_agents_tool_on_the_checked_args() -> None:
    """A valid call runs the agent's tool once, is checked, and a repeat is a memo hit."""
    desk = Desk()
    ok = {"status": "open", "limit": 2}
    model = ScriptedChat(turns=[
        turn(search(ok, "c1"), search({"status": "open", "limit": 1}, "c2")),
        turn(search(ok, "c3"))])
    middleware = GateMiddleware(Gate(desk.table))
    result = create_agent(model, tools=desk.agent_tools(), middleware=[middleware]).invoke(
        {"messages": [("user", "x")]}, THREAD)
    messages = tool_messages(result)
    assert [m.status for m in messages.values()] == ["success"] * 3
    assert json.loads(messages["c3"].content)["data"] == {"tickets": ROWS[:2]}
    assert desk.searches == 2
    assert middleware.gate.stats("search_tickets").hits == 1


def test_middleware_whitelists_the_table() -> None:
    """An agent tool the table does not name is refused UNKNOWN_TOOL and never runs."""
    desk = Desk()
    runs: list[str] = []

    @tool
    def delete_everything(confirm: bool) -> str:
        """Deletes everything."""
        runs.append("ran")
        return "deleted"
    model = ScriptedChat(turns=[turn(call("delete_everything", {"confirm": True}, "d1"))])
    agent = create_agent(model, tools=[*desk.agent_tools(), delete_everything],
                         middleware=[GateMiddleware(Gate(desk.table))])
    message = tool_messages(agent.invoke({"messages": [("user", "x")]}))["d1"]
    assert message.status == "error"
    assert reason(message) == "args:unknown_tool"
    assert json.loads(message.content)["error"]["code"] == "UNKNOWN_TOOL"
    assert runs == []


def test_middleware_checks_what_the_agents_tool_answered() -> None:
    """An agent tool answering an empty list, or a string, is refused by the return contract."""
    @tool
    def search_tickets(status: str, limit: int) -> dict:
        """Support tickets."""
        return {"tickets": []}

    @tool
    def issue_refund(order: str, amount: int) -> str:
        """Refund an order."""
        return "refunded, trust me"
    desk = Desk()
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"),
                                     call("issue_refund", {"order": "O-1", "amount": 5}, "w1"))])
    agent = create_agent(model, tools=[search_tickets, issue_refund],
                         middleware=[GateMiddleware(Gate(desk.table), scope=WRITER)])
    messages = tool_messages(agent.invoke({"messages": [("user", "x")]}, THREAD))
    assert reason(messages["c1"]) == "result:empty"
    assert reason(messages["w1"]) == "result:shape"


def test_middleware_retried_write_runs_the_agents_tool_once() -> None:
    """The same tool-call id twice in one thread runs the agent's write tool once."""
    desk = Desk()
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    model = ScriptedChat(turns=[turn(refund), turn(refund)])
    agent = create_agent(model, tools=desk.agent_tools(),
                         middleware=[GateMiddleware(Gate(desk.table), scope=WRITER)])
    result = agent.invoke({"messages": [("user", "x")]}, THREAD)
    answers = [json.loads(m.content) for m in result["messages"]
               if isinstance(m, ToolMessage)]
    assert [a["data"] for a in answers] == [{"refund_id": "R-1"}] * 2
    assert desk.refunds == ["O-7"]


def test_middleware_turns_a_raising_tool_into_an_error_message() -> None:
    """LangGraph re-raises a tool's error and ends the run; behind the gate it is a message."""
    @tool
    def search_tickets(status: str, limit: int) -> dict:
        """Support tickets."""
        raise KeyError("boom")
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    with pytest.raises(KeyError):
        create_agent(model, tools=[search_tickets]).invoke({"messages": [("user", "x")]})
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    agent = create_agent(model, tools=[search_tickets],
                         middleware=[GateMiddleware(Gate(Desk().table))])
    result = agent.invoke({"messages": [("user", "x")]})
    assert reason(tool_messages(result)["c1"]) == "raised:KeyError"
    assert result["messages"][-1].content == "done"


def test_middleware_an_error_message_from_the_tool_is_a_failure() -> None:
    """A tool that answers status="error" itself is a raised body, never a success."""
    def failing(status: str, limit: int) -> Any:
        from langchain_core.tools import ToolException
        raise ToolException("upstream said no")
    search_tickets = StructuredTool.from_function(failing, name="search_tickets",
                                                  description="d", handle_tool_error=True)
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    agent = create_agent(model, tools=[search_tickets],
                         middleware=[GateMiddleware(Gate(Desk().table))])
    message = tool_messages(agent.invoke({"messages": [("user", "x")]}))["c1"]
    assert message.status == "error"
    assert reason(message) == "raised:ToolFailed"


def test_middleware_async_agent() -> None:
    """ainvoke goes through awrap_tool_call: async agent tools, gated, replayed, in parallel."""
    desk = Desk()

    @tool
    async def search_tickets(status: str, limit: int) -> dict:
        """Support tickets."""
        return desk.search(status, limit)

    @tool
    async def issue_refund(order: str, amount: int) -> dict:
        """Refund an order."""
        return desk.refund(order, amount)
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": True}, "a"),
                                     search({"status": "open", "limit": 1}, "b"), refund),
                                turn(refund)])
    agent = create_agent(model, tools=[search_tickets, issue_refund],
                         middleware=[GateMiddleware(Gate(desk.table), scope=WRITER)])
    result = asyncio.run(agent.ainvoke({"messages": [("user", "x")]}, THREAD))
    statuses = [(m.tool_call_id, m.status) for m in result["messages"]
                if isinstance(m, ToolMessage)]
    assert statuses == [("a", "error"), ("b", "success"), ("w1", "success"), ("w1", "success")]
    assert desk.searches == 1
    assert desk.refunds == ["O-7"]


def test_middleware_cancellation_propagates() -> None:
    """A run cancelled while the agent's tool awaits behind the middleware is cancelled."""
    async def main() -> None:
        started = asyncio.Event()

        @tool
        async def search_tickets(status: str, limit: int) -> dict:
            """Support tickets."""
            started.set()
            await asyncio.sleep(60)
            return {}
        model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
        agent = create_agent(model, tools=[search_tickets],
                             middleware=[GateMiddleware(Gate(Desk().table))])
        await cancel_while_running(agent, started)
    asyncio.run(main())


def test_middleware_lets_an_interrupt_through_and_frees_the_write() -> None:
    """A tool's interrupt() pauses the run; on resume the write runs, once."""
    desk = Desk()

    @tool
    def issue_refund(order: str, amount: int) -> dict:
        """Refund an order."""
        if interrupt("approve?") != "yes":
            return {"refund_id": "none"}
        return desk.refund(order, amount)
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    model = ScriptedChat(turns=[turn(refund)])
    agent = create_agent(model, tools=[issue_refund], checkpointer=InMemorySaver(),
                         middleware=[GateMiddleware(Gate(desk.table), scope=WRITER)])
    paused = agent.invoke({"messages": [("user", "x")]}, THREAD)
    assert paused["__interrupt__"]
    assert desk.refunds == []
    done = agent.invoke(Command(resume="yes"), THREAD)
    assert tool_messages(done)["w1"].status == "success"
    assert desk.refunds == ["O-7"]


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_middleware_keeps_a_timed_tool_on_both_paths(run: str) -> None:
    """A contract with a timeout runs the agent's own tool within it, sync and async: the
    timed body's thread carries the call's context, where the agent's tool is found."""
    desk = Desk()
    desk.table["search_tickets"]["timeout"] = 5.0
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    agent = create_agent(model, tools=desk.agent_tools(),
                         middleware=[GateMiddleware(Gate(desk.table))])
    state = {"messages": [("user", "x")]}
    result = (agent.invoke(state) if run == "invoke"
              else asyncio.run(agent.ainvoke(state)))
    assert tool_messages(result)["c1"].status == "success"
    assert desk.searches == 1


def test_middleware_follows_a_replaced_entry() -> None:
    """The middleware's gate reads the caller's table live: a tightened contract applies."""
    desk = Desk()
    middleware = GateMiddleware(Gate(desk.table))
    desk.table["search_tickets"] = {**desk.table["search_tickets"],
                                    "args": {**SEARCH_ARGS, "limit": {"type": "int", "max": 1}}}
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 2}, "c1"))])
    agent = create_agent(model, tools=desk.agent_tools(), middleware=[middleware])
    message = tool_messages(agent.invoke({"messages": [("user", "x")]}))["c1"]
    assert reason(message) == "args:max:limit"
    assert desk.searches == 0


def test_middleware_needs_a_gate() -> None:
    """Anything but a Gate is refused when the middleware is made."""
    with pytest.raises(TypeError, match=r"agtool\.Gate"):
        GateMiddleware(Desk().table)


def test_missing_langchain_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without langchain, GateMiddleware says which extra to install; gated_tools still works."""
    for name in [n for n in sys.modules if n == "langchain" or n.startswith("langchain.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.delitem(sys.modules, "agtool.langchain._middleware")
    monkeypatch.delitem(sys.modules, "agtool.langchain")
    fresh = importlib.import_module("agtool.langchain")
    with pytest.raises(ImportError) as caught:
        fresh.GateMiddleware  # noqa: B018 - the attribute access is what is tested
    message = str(caught.value)
    assert "agtool-gate[langchain]" in message
    assert "\n" not in message
    assert fresh.gated_tools(Gate(Desk().table))[0].name == "search_tickets"
    with pytest.raises(AttributeError):
        fresh.nothing_here  # noqa: B018


# --- ToolNode --------------------------------------------------------------------------------


def graph_of(model: ScriptedChat, node: ToolNode) -> Any:
    """A hand-built ReAct graph: the model, then the tool node, until the model stops."""
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def test_tool_node_over_the_gates_tools() -> None:
    """gated_tool_node(gate): mistakes refused, parallel calls each answered, unknown names too."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": "3"}, "a"),
                                     search({"status": "open", "limit": 1}, "b"),
                                     call("drop_tables", {}, "c"))])
    result = graph_of(model, gated_tool_node(Gate(desk.table))).invoke(
        {"messages": [HumanMessage("x")]})
    messages = tool_messages(result)
    assert {k: m.status for k, m in messages.items()} == {"a": "error", "b": "success",
                                                         "c": "error"}
    assert reason(messages["a"]) == "args:type:limit"
    assert reason(messages["c"]) == "args:unknown_tool"
    assert desk.searches == 1


def test_tool_node_async_and_writes() -> None:
    """The gated ToolNode on ainvoke: async bodies, a retried write replayed, unknown refused."""
    desk = Desk(asynchronous=True)
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    model = ScriptedChat(turns=[turn(refund, call("nope", {}, "n")), turn(refund)])
    node = gated_tool_node(Gate(desk.table), scope=WRITER)
    result = asyncio.run(graph_of(model, node).ainvoke({"messages": [HumanMessage("x")]}, THREAD))
    statuses = [(m.tool_call_id, m.status) for m in result["messages"]
                if isinstance(m, ToolMessage)]
    assert statuses == [("w1", "success"), ("n", "error"), ("w1", "success")]
    assert desk.refunds == ["O-7"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_tool_node_gating_existing_tools(asynchronous: bool) -> None:
    """gated_tool_node(gate, tools): the given tools are the bodies, the table the contracts."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": "1"}, "a"),
                                     search({"status": "open", "limit": 1, "x": 1}, "b"),
                                     search({"status": "open", "limit": 1}, "c"))])
    node = gated_tool_node(Gate(desk.table), desk.agent_tools())
    graph = graph_of(model, node)
    start = {"messages": [HumanMessage("x")]}
    result = asyncio.run(graph.ainvoke(start)) if asynchronous else graph.invoke(start)
    messages = tool_messages(result)
    assert [reason(messages[k]) for k in "abc"] == ["args:type:limit", "args:unexpected:x", ""]
    assert desk.searches == 1


def test_wrapper_body_outside_a_call_raises_for_the_gate() -> None:
    """The stand-in body refuses to run when no agent call is bound, so the gate answers raised."""
    wrapper = GateWrapper(Gate(Desk().table))
    answer = wrapper.gate.call_for_model("search_tickets", {"status": "open", "limit": 1})
    assert answer["error"]["details"]["reason"] == "raised:RuntimeError"


def test_tool_node_schema_is_the_gates() -> None:
    """The tools of gated_tool_node(gate) convert to the gate's exported schemas."""
    desk = Desk()
    node = gated_tool_node(Gate(desk.table))
    assert set(node.tools_by_name) == set(desk.table)  # so the loop below checks every tool
    for name, bound in node.tools_by_name.items():
        assert convert_to_openai_tool(bound)["function"]["parameters"] == gate_schema(
            desk.table, name)


# --- what an agent's tool may answer, and hostile inputs ----------------------------------


def run_middleware(tools: list[Any], calls: list[dict[str, Any]],
                   table: dict[str, Any] | None = None) -> dict[str, ToolMessage]:
    model = ScriptedChat(turns=[turn(*calls)])
    agent = create_agent(model, tools=tools,
                         middleware=[GateMiddleware(Gate(table or Desk().table))])
    return tool_messages(agent.invoke({"messages": [("user", "x")]}))


def test_middleware_checks_an_artifact_not_its_summary() -> None:
    """A content_and_artifact tool is checked, and answered, by its artifact."""
    def found(status: str, limit: int) -> tuple[str, dict[str, Any]]:
        return "2 tickets", {"tickets": ROWS[:limit]}
    lookup = StructuredTool.from_function(found, name="search_tickets", description="d",
                                          response_format="content_and_artifact")
    messages = run_middleware([lookup], [search({"status": "open", "limit": 2}, "c1")])
    assert json.loads(messages["c1"].content)["data"] == {"tickets": ROWS[:2]}


def test_middleware_refuses_answers_no_dict_contract_keeps() -> None:
    """Content blocks and a Command are not a dict result: refused result:shape, not passed on."""
    @tool
    def search_tickets(status: str, limit: int) -> list:
        """Support tickets."""
        return [{"type": "text", "text": "T-1"}]

    @tool
    def issue_refund(order: str, amount: int,
                     tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Refund an order."""
        return Command(update={"messages": [ToolMessage("done", tool_call_id=tool_call_id)]})
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"),
                                     call("issue_refund", {"order": "O-1", "amount": 1}, "w1"))])
    agent = create_agent(model, tools=[search_tickets, issue_refund],
                         middleware=[GateMiddleware(Gate(Desk().table), scope=WRITER)])
    messages = tool_messages(agent.invoke({"messages": [("user", "x")]}, THREAD))
    assert reason(messages["c1"]) == "result:shape"
    assert reason(messages["w1"]) == "result:shape"


def test_middleware_async_interrupt_passes_through() -> None:
    """On ainvoke too, a tool's interrupt() pauses the run and the resumed write runs once."""
    desk = Desk()

    @tool
    async def issue_refund(order: str, amount: int) -> dict:
        """Refund an order."""
        interrupt("approve?")
        return desk.refund(order, amount)
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    agent = create_agent(ScriptedChat(turns=[turn(refund)]), tools=[issue_refund],
                         checkpointer=InMemorySaver(),
                         middleware=[GateMiddleware(Gate(desk.table), scope=WRITER)])

    async def main() -> dict[str, Any]:
        paused = await agent.ainvoke({"messages": [("user", "x")]}, THREAD)
        assert paused["__interrupt__"]
        assert desk.refunds == []
        return await agent.ainvoke(Command(resume="ok"), THREAD)
    done = asyncio.run(main())
    assert tool_messages(done)["w1"].status == "success"
    assert desk.refunds == ["O-7"]


def test_middleware_entry_broken_after_registration() -> None:
    """An entry replaced by garbage later answers INTERNAL, and the agent's tool does not run."""
    desk = Desk()
    middleware = GateMiddleware(Gate(desk.table))
    assert len(middleware.gate.table) == 2
    desk.table["search_tickets"] = "broken"  # type: ignore[assignment]
    model = ScriptedChat(turns=[turn(search({"status": "open", "limit": 1}, "c1"))])
    agent = create_agent(model, tools=desk.agent_tools(), middleware=[middleware])
    message = tool_messages(agent.invoke({"messages": [("user", "x")]}))["c1"]
    assert reason(message) == "args:bad_contract"
    assert desk.searches == 0


@pytest.mark.parametrize("gated", [False, True], ids=["wrapped_tools", "gated_tools"])
@pytest.mark.parametrize("args", ["status=open", ["open", 1], None], ids=["str", "list", "none"])
def test_tool_node_args_that_are_not_an_object(gated: bool, args: Any) -> None:
    """A tool call sent to the node with args that are not a dict is refused, never raised."""
    desk = Desk()
    bad = {"name": "search_tickets", "args": args, "id": "c1", "type": "tool_call"}
    builder = StateGraph(MessagesState)
    node = gated_tool_node(Gate(desk.table), None if gated else desk.agent_tools())
    builder.add_node("tools", node)
    # As create_agent dispatches each call: a Send carrying the call itself.
    builder.add_conditional_edges(START, lambda state: [Send("tools", {
        "__type": "tool_call_with_context", "tool_call": bad, "state": state})])
    graph = builder.compile()
    start = {"messages": [HumanMessage("x")]}
    for result in (graph.invoke(start), asyncio.run(graph.ainvoke(start))):
        message = tool_messages(result)["c1"]
        assert message.status == "error"
        assert reason(message) == "args:not_object"
    assert desk.searches == 0


def test_a_message_is_made_even_for_an_answer_with_no_json_form() -> None:
    """An answer that holds itself still becomes a message rather than a raise: the
    structured error ``result:unrenderable`` (tests/langchain/test_langchain_never_raises.py
    has every kind, through real tools)."""
    from agtool.langchain._answer import tool_message
    answer: dict[str, Any] = {"ok": True, "request_id": "req_1"}
    answer["data"] = answer
    message = tool_message(answer, "c1", "t")
    assert message.status == "error"
    assert message.tool_call_id == "c1"
    shown = json.loads(str(message.content))
    assert shown["error"]["details"] == {"reason": "result:unrenderable"}
    assert shown["request_id"] == "req_1"


def test_middleware_shows_the_model_the_gates_schema() -> None:
    """Behind GateMiddleware the model is bound with the table's schemas, and only its tools."""
    desk = Desk()

    @tool
    def delete_everything(confirm: bool) -> str:
        """Deletes everything."""
        return "deleted"
    built_in = {"type": "function", "function": {"name": "web_search", "description": "d",
                                                 "parameters": {"type": "object"}}}
    model = ScriptedChat(turns=[])
    agent = create_agent(model, tools=[*desk.agent_tools(), delete_everything, built_in],
                         middleware=[GateMiddleware(Gate(desk.table))])
    agent.invoke({"messages": [("user", "x")]})
    [bound] = model.bound
    exported = [tool_spec(desk.table, name, "openai")["function"] for name in desk.table]
    assert [spec["function"] for spec in bound] == [
        {"name": spec["name"], "description": spec["description"],
         "parameters": gate_schema(desk.table, spec["name"])} for spec in exported
    ] + [built_in["function"]]  # the provider's own tool, left as it was
    control = ScriptedChat(turns=[])
    create_agent(control, tools=desk.agent_tools()).invoke({"messages": [("user", "x")]})
    assert "enum" not in json.dumps(control.bound)  # what the model saw without the gate


def test_middleware_shows_async_runs_the_gates_schema_too() -> None:
    """ainvoke binds the same gate schemas as invoke."""
    desk = Desk()
    model = ScriptedChat(turns=[])
    agent = create_agent(model, tools=desk.agent_tools(),
                         middleware=[GateMiddleware(Gate(desk.table))])
    asyncio.run(agent.ainvoke({"messages": [("user", "x")]}))
    assert [spec["function"]["parameters"] for spec in model.bound[0]] == [
        gate_schema(desk.table, name) for name in desk.table]


def test_approvals_from_the_runs_config() -> None:
    """Approvals given in the run's config let that run's approved call through, and no other."""
    desk = Desk()
    desk.table["issue_refund"]["risk"] = "irreversible"
    gate = Gate(desk.table, scope=["read_public", "irreversible"])
    refund = {"order": "O-7", "amount": 20}
    config = {"configurable": {"thread_id": "conv-3",
                               "agtool_approvals": [gate.approve("issue_refund", refund)]}}
    model = ScriptedChat(turns=[turn(call("issue_refund", refund, "w1"),
                                     call("issue_refund", {**refund, "order": "O-8"}, "w2"))])
    result = create_agent(model, tools=gated_tools(gate)).invoke(
        {"messages": [("user", "x")]}, config)
    messages = tool_messages(result)
    assert messages["w1"].status == "success"
    assert reason(messages["w2"]) == "auth:approval"
    assert desk.refunds == ["O-7"]


@pytest.mark.parametrize("middleware", [False, True], ids=["gated_tools", "middleware"])
def test_a_write_without_a_call_id_is_not_run(middleware: bool) -> None:
    """A provider that gives no tool-call id gives no step id: the write is refused, not guessed."""
    desk = Desk()
    model = ScriptedChat(turns=[turn(call("issue_refund", {"order": "O-7", "amount": 1},
                                          None))])  # type: ignore[arg-type]
    gate = Gate(desk.table, scope=WRITER)
    agent = (create_agent(model, tools=desk.agent_tools(), middleware=[GateMiddleware(gate)])
             if middleware else create_agent(model, tools=gated_tools(gate)))
    result = agent.invoke({"messages": [("user", "x")]}, THREAD)
    [message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error"
    assert reason(message) == "write:no_key"
    assert desk.refunds == []


def test_middleware_shares_the_callers_store_and_records() -> None:
    """The middleware's gate writes to the caller's records and replays the caller's writes."""
    desk = Desk()
    records: list[Any] = []
    gate = Gate(desk.table, scope=WRITER, records=records.append)
    refund = call("issue_refund", {"order": "O-7", "amount": 20}, "w1")
    create_agent(ScriptedChat(turns=[turn(refund)]), tools=gated_tools(gate)).invoke(
        {"messages": [("user", "x")]}, THREAD)
    agent = create_agent(ScriptedChat(turns=[turn(refund)]), tools=desk.agent_tools(),
                         middleware=[GateMiddleware(gate)])
    result = agent.invoke({"messages": [("user", "x")]}, THREAD)
    assert tool_messages(result)["w1"].status == "success"
    assert desk.refunds == ["O-7"]  # the same key in the same store: replayed, not run again
    assert [(r.tool, r.replayed) for r in records] == [("issue_refund", False),
                                                       ("issue_refund", True)]


def test_middleware_gate_keeps_the_callers_memo_settings() -> None:
    """The middleware's own gate remembers for as long and as many values as the caller's."""
    from agtool import DEFAULT_MEMO_TTL

    assert Gate(Desk().table).memo_ttl == DEFAULT_MEMO_TTL
    middleware = GateMiddleware(Gate(Desk().table, memo_ttl=7, memo_size=3))
    assert middleware.gate.memo_ttl == 7
    assert middleware.gate.cache.size == 3
