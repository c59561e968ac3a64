"""Attacks on the LangChain and MCP adapters: hostile calls, retries, leaks and broken upstreams.

Every agent is LangChain's own ``create_agent`` or a LangGraph graph with a
``ToolNode``, driven by ``tests/_fake_chat.py``; every MCP peer is the SDK's
own client or server, in process or as a real subprocess (``agtool mcp serve``,
``agtool mcp proxy`` in front of ``tests/_hostile_server.py``). Body runs are
counted by the bodies themselves. A hostile call a validated ``AIMessage``
would refuse (a non-str key, a non-str name) is built with ``model_construct``,
as a provider parser or a hand-built graph may hand it over.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from _fake_chat import ScriptedChat, call, turn
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from agtool import Gate, UpstreamError
from agtool.langchain import GateMiddleware, gated_tool_node, gated_tools
from agtool.mcp import RUN_ID_META, server

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = str(ROOT / "tests" / "_hostile_server.py")
THREAD = {"configurable": {"thread_id": "conv-1"}}
WRITER = {"read_public", "reversible_write"}
#: Seconds a whole subprocess scenario may take, start-up included.
SCENARIO_TIMEOUT = 60
#: A sensitive value with a quote and a non-ASCII letter: JSON spells it two other ways.
CARD = 's\u00e9cr"et-4242'
CARD_FORMS = (CARD, json.dumps(CARD)[1:-1], json.dumps(CARD, ensure_ascii=False)[1:-1],
                "4242")


class Desk:
    """A read and a write, each counting its own body runs."""

    def __init__(self, *, asynchronous: bool = False) -> None:
        self.runs: list[Any] = []
        if asynchronous:
            async def echo(text: str) -> dict[str, Any]:
                await asyncio.sleep(0.05)
                return self.echo(text)

            async def pay(card: str, amount: int) -> dict[str, Any]:
                await asyncio.sleep(0.05)
                return self.pay(card, amount)
            fns: tuple[Any, Any] = (echo, pay)
        else:
            fns = (self.echo, self.pay_slowly)
        self.table: dict[str, dict[str, Any]] = {
            "echo": {"fn": fns[0], "description": "Echo a text.",
                     "args": {"text": {"type": "str"}}, "returns": {"text": {"type": "str"}}},
            "pay": {"fn": fns[1], "description": "Charge a card.", "effect": "write",
                    "args": {"card": {"type": "str", "sensitive": True,
                                      "pattern": "[^0-9]+-[0-9]+"},
                             "amount": {"type": "int", "min": 1}},
                    "returns": {"receipt": {"type": "str"},
                                "card": {"type": "str", "sensitive": True}}},
        }

    def echo(self, text: str) -> dict[str, Any]:
        self.runs.append(("echo", text))
        return {"text": text}

    def pay(self, card: str, amount: int) -> dict[str, Any]:
        self.runs.append(("pay", amount))
        return {"receipt": f"R-{len(self.runs)}", "card": card}

    def pay_slowly(self, card: str, amount: int) -> dict[str, Any]:
        time.sleep(0.05)  # long enough for a parallel twin to arrive while this one runs
        return self.pay(card, amount)


def agent_tools(desk: Desk) -> list[BaseTool]:
    """The desk's bodies as an agent's own LangChain tools, for ``GateMiddleware``."""
    @tool("echo")
    def echo_tool(text: str) -> dict[str, Any]:
        """Echo a text."""
        return desk.echo(text)

    @tool("pay")
    def pay_tool(card: str, amount: int) -> dict[str, Any]:
        """Charge a card."""
        return desk.pay(card, amount)
    return [echo_tool, pay_tool]


def raw_turn(*calls: dict[str, Any]) -> AIMessage:
    """A model turn whose tool calls skip ``AIMessage`` validation, as a hostile one may."""
    return AIMessage.model_construct(content="", tool_calls=list(calls), invalid_tool_calls=[],
                                     additional_kwargs={}, response_metadata={})


def run_agent(desk: Desk, turns: list[AIMessage], how: str, *, asynchronous: bool = False,
              scope: set[str] | None = None, gate: Gate | None = None) -> list[ToolMessage]:
    """The ToolMessages of one ``create_agent`` run over the desk, gated ``how``."""
    gate = Gate(desk.table) if gate is None else gate
    model = ScriptedChat(turns=turns)
    if how == "tools":
        agent = create_agent(model, tools=gated_tools(gate, scope=scope))
    else:
        agent = create_agent(model, tools=agent_tools(desk),
                             middleware=[GateMiddleware(gate, scope=scope)])
    state = {"messages": [("user", "go")]}
    result = (asyncio.run(agent.ainvoke(state, THREAD)) if asynchronous
              else agent.invoke(state, THREAD))
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def run_node(desk: Desk, turns: list[AIMessage], *, asynchronous: bool = False
             ) -> list[ToolMessage]:
    """The ToolMessages of a hand-built graph whose tools node is ``gated_tool_node``."""
    model = ScriptedChat(turns=turns)
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", gated_tool_node(Gate(desk.table)))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    app = graph.compile()
    state = {"messages": [("user", "go")]}
    result = asyncio.run(app.ainvoke(state, THREAD)) if asynchronous else app.invoke(state, THREAD)
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def reason_of(message: ToolMessage) -> str:
    answer = json.loads(message.content)
    return "" if answer["ok"] else answer["error"]["details"]["reason"]


class LyingKeys(dict):  # type: ignore[type-arg]
    """A dict whose ``keys`` name a key it does not hold, and not a str."""

    def keys(self) -> Any:
        return [1]


# --- LangChain: hostile args ----------------------------------------------------------------


@pytest.mark.parametrize("args", [{1: "a", "text": "b"}, LyingKeys(text="b")],
                         ids=["int_key", "lying_keys"])
@pytest.mark.parametrize("entry", ["bare", "bare_async", "tool_call", "tool_call_async"])
def test_gated_tool_hands_keys_it_cannot_unpack_to_the_gate(entry: str,
                                                            args: dict[Any, Any]) -> None:
    """Args LangChain cannot unpack as keywords get the gate's own answer, never a TypeError:
    a non-str key is refused, a dict whose keys() lies is read as the gate reads it."""
    desk = Desk()
    gate = Gate(desk.table)
    expected_ok = isinstance(args, LyingKeys)
    echo = gated_tools(gate)[0]
    given: Any = args if entry.startswith("bare") else {
        "type": "tool_call", "name": "echo", "id": "c1", "args": args}
    answer = (asyncio.run(echo.ainvoke(given)) if entry.endswith("async")
              else echo.invoke(given))
    if not entry.startswith("bare"):
        assert isinstance(answer, ToolMessage)
        assert answer.tool_call_id == "c1"
        assert answer.status == ("success" if expected_ok else "error")
        answer = answer.artifact
    assert answer["ok"] is expected_ok
    assert desk.runs == ([("echo", "b")] if expected_ok else [])


@pytest.mark.parametrize("asynchronous", [False, True])
def test_tool_node_refuses_a_non_str_key_as_a_message(asynchronous: bool) -> None:
    """A non-str key in a hand-built graph's tool call is an error ToolMessage; nothing runs."""
    desk = Desk()
    messages = run_node(desk, [raw_turn(call("echo", {1: "a"}, "c1"))],  # type: ignore[dict-item]
                        asynchronous=asynchronous)
    assert [(m.tool_call_id, m.status) for m in messages] == [("c1", "error")]
    assert desk.runs == []


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("args", [["a"], "text=a", None, {1: "a"}, LyingKeys(text="b")],
                         ids=["list", "str", "none", "int_key", "lying_keys"])
def test_middleware_answers_args_of_any_shape_as_a_message(args: Any, asynchronous: bool) -> None:
    """Args that are a list, a string, None or a dict with a non-str key are an error message
    before the agent's tool runs; a dict whose keys() lies is read as the gate reads it."""
    desk = Desk()
    messages = run_agent(desk, [raw_turn({"type": "tool_call", "name": "echo", "args": args,
                                          "id": "c1"})], "middleware",
                         asynchronous=asynchronous)
    expected_ok = isinstance(args, LyingKeys)
    assert [(m.tool_call_id, m.status) for m in messages] == [
        ("c1", "success" if expected_ok else "error")]
    assert desk.runs == ([("echo", "b")] if expected_ok else [])


AUTHORITY_NAMES = ["scope", "approvals", "run_id", "step_id", "config", "run_manager",
                   "callbacks", "self", "tool_call_id", "args", "kwargs", "dry_run"]


@pytest.mark.parametrize("how", ["tools", "middleware"])
@pytest.mark.parametrize("name", AUTHORITY_NAMES)
def test_an_argument_named_like_authority_is_just_an_unexpected_argument(name: str,
                                                                          how: str) -> None:
    """An arg the model names scope, config, self, tool_call_id... reaches the gate and is
    refused; named scope or approvals, it lets no write outside the code's scope run."""
    desk = Desk()
    calls = [call("echo", {"text": "hi", name: ["irreversible"]}, "c1"),
             call("pay", {"card": "card-1", "amount": 5, name: ["reversible_write"]}, "c2")]
    read_only = run_agent(desk, [turn(*calls)], how)
    assert [reason_of(m) for m in read_only] == [f"args:unexpected:{name}",
                                                 "auth:scope:reversible_write"]
    writer = run_agent(desk, [turn(*calls)], how, scope=WRITER)
    assert [reason_of(m) for m in writer] == [f"args:unexpected:{name}"] * 2
    assert desk.runs == []


@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_what_the_model_sent_is_what_the_body_gets(how: str) -> None:
    """A megabyte string and an exotic-but-valid text reach the body byte for byte."""
    desk = Desk()
    huge, odd = "x" * 1_000_000, "line\nbreak \u2028 \x00 \"quoted\""
    messages = run_agent(desk, [turn(call("echo", {"text": huge}, "c1"),
                                     call("echo", {"text": odd}, "c2"))], how)
    assert [m.status for m in messages] == ["success", "success"]
    assert sorted(desk.runs) == sorted([("echo", huge), ("echo", odd)])
    assert json.loads(messages[1].content)["data"] == {"text": odd}


@pytest.mark.parametrize("where", ["middleware", "node"])
@pytest.mark.parametrize("name", ["echo\n", "echo\nrun: pay", "e" * 100_000, 5, None],
                         ids=["newline", "injected", "huge", "int", "none"])
def test_a_hostile_tool_name_is_an_unknown_tool_message(name: Any, where: str) -> None:
    """A name with a newline, a huge one or a non-str one is answered UNKNOWN_TOOL; nothing runs."""
    desk = Desk()
    calls = [raw_turn({"type": "tool_call", "name": name, "args": {"text": "a"}, "id": "c1"})]
    messages = (run_node(desk, calls) if where == "node"
                else run_agent(desk, calls, "middleware"))
    assert [(m.tool_call_id, m.status, reason_of(m)) for m in messages] == [
        ("c1", "error", "args:unknown_tool")]
    assert desk.runs == []


@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_a_read_with_no_call_id_still_runs_and_answers(how: str) -> None:
    """A call whose id is None is answered a success message (its id empty), not an error."""
    desk = Desk()
    messages = run_agent(desk, [raw_turn({"type": "tool_call", "name": "echo",
                                          "args": {"text": "a"}, "id": None})], how)
    assert [(m.tool_call_id, m.status) for m in messages] == [("", "success")]
    assert desk.runs == [("echo", "a")]


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_many_parallel_calls_are_each_gated_and_answered(how: str, asynchronous: bool) -> None:
    """Six calls in one turn, good and bad mixed, get six answers under their own ids."""
    desk = Desk(asynchronous=asynchronous and how == "tools")
    calls = [call("echo", {"text": str(n)} if n % 2 else {"text": n}, f"c{n}") for n in range(6)]
    messages = run_agent(desk, [turn(*calls)], how, asynchronous=asynchronous)
    assert sorted((m.tool_call_id, m.status) for m in messages) == [
        (f"c{n}", "success" if n % 2 else "error") for n in range(6)]
    assert sorted(desk.runs) == [("echo", "1"), ("echo", "3"), ("echo", "5")]


# --- LangChain: writes run once ---------------------------------------------------------------


PAY = {"card": "card-7", "amount": 5}


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_the_same_call_id_twice_in_one_turn_runs_the_write_once(how: str,
                                                                asynchronous: bool) -> None:
    """Two parallel calls with one id: both answered with the one outcome, the body run once."""
    desk = Desk(asynchronous=asynchronous)
    messages = run_agent(desk, [turn(call("pay", PAY, "c1"), call("pay", PAY, "c1"))], how,
                         asynchronous=asynchronous, scope=WRITER)
    assert [m.status for m in messages] == ["success", "success"]
    assert json.loads(messages[0].content)["data"] == json.loads(messages[1].content)["data"]
    assert desk.runs == [("pay", 5)]


@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_a_retry_on_the_other_path_runs_the_write_once(how: str) -> None:
    """A write run sync and retried async (same thread, same call id) runs once."""
    desk = Desk()
    gate = Gate(desk.table)
    first = run_agent(desk, [turn(call("pay", PAY, "c1"))], how, scope=WRITER, gate=gate)
    retry = run_agent(desk, [turn(call("pay", PAY, "c1"))], how, asynchronous=True,
                      scope=WRITER, gate=gate)
    assert json.loads(first[0].content)["data"] == json.loads(retry[0].content)["data"]
    assert desk.runs == [("pay", 5)]


@pytest.mark.parametrize("order", [("tools", "middleware"), ("middleware", "tools")])
def test_gated_tools_and_the_middleware_share_one_write_store(order: tuple[str, str]) -> None:
    """A write made through one adapter is answered, not rerun, through the other on one gate."""
    desk = Desk()
    gate = Gate(desk.table)
    answers = [run_agent(desk, [turn(call("pay", PAY, "c1"))], how, scope=WRITER, gate=gate)[0]
               for how in order]
    assert [m.status for m in answers] == ["success", "success"]
    assert json.loads(answers[0].content)["data"] == json.loads(answers[1].content)["data"]
    assert desk.runs == [("pay", 5)]


# --- LangChain: nothing sensitive leaves -----------------------------------------------------


def leaked(*outputs: object) -> list[str]:
    """Every form of the secret found in the outputs, each searched as text and as JSON."""
    text = "\n".join(repr(output) + json.dumps(output, default=repr) for output in outputs)
    return [form for form in CARD_FORMS if form in text]


@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_a_sensitive_value_is_in_no_message_artifact_or_record(how: str) -> None:
    """The card, paid with or refused, is in no ToolMessage content, artifact or call record."""
    desk = Desk()
    records: list[Any] = []
    gate = Gate(desk.table, records=records.append)
    messages = run_agent(desk, [turn(call("pay", {"card": CARD, "amount": 5}, "ok"),
                                     call("pay", {"card": CARD + "x", "amount": 5}, "bad"),
                                     call("pay", {"card": [CARD], "amount": 5}, "list"))],
                         how, scope=WRITER, gate=gate)
    assert sorted((m.tool_call_id, m.status) for m in messages) == [
        ("bad", "error"), ("list", "error"), ("ok", "success")]
    assert leaked([m.content for m in messages], [m.artifact for m in messages],
                  [record.as_dict() for record in records]) == []
    assert len(records) == 3


# --- LangChain: what must propagate -----------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["tools", "middleware"])
def test_a_keyboard_interrupt_in_a_body_propagates(how: str, asynchronous: bool) -> None:
    """A KeyboardInterrupt in the tool ends the run; it is not turned into a message."""
    def stop(text: str) -> dict[str, Any]:
        raise KeyboardInterrupt

    desk = Desk()
    desk.table["echo"]["fn"] = stop
    if how == "middleware":
        desk.echo = stop  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        run_agent(desk, [turn(call("echo", {"text": "a"}, "c1"))], how,
                  asynchronous=asynchronous)


# --- MCP in process ---------------------------------------------------------------------------


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run one async scenario under the timeout."""
    async def bounded() -> Any:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            return await scenario()

    return anyio.run(bounded)


def mcp_calls(gate: Gate, calls: list[tuple[str, dict[str, Any], dict[str, Any] | None]],
              parallel: bool = False) -> list[Any]:
    """The results of ``calls`` (name, args, _meta) against ``server(gate)`` over the SDK client."""
    async def scenario() -> list[Any]:
        results: list[Any] = [None] * len(calls)
        async with Client(server(gate)) as client:
            async def one(index: int) -> None:
                name, args, meta = calls[index]
                results[index] = await client.call_tool(name, args, meta=meta)
            if parallel:
                async with anyio.create_task_group() as group:
                    for index in range(len(calls)):
                        group.start_soon(one, index)
            else:
                for index in range(len(calls)):
                    await one(index)
        return results

    return list(run(scenario))


def mcp_reason(result: Any) -> str:
    answer = json.loads(result.content[0].text)
    return "" if answer["ok"] else answer["error"]["details"]["reason"]


@pytest.mark.parametrize("name", ["echo\n", "echo\nrun: pay", "e" * 100_000, ""],
                         ids=["newline", "injected", "huge", "empty"])
def test_mcp_a_hostile_tool_name_is_an_error_result(name: str) -> None:
    """A name with a newline, a huge one or an empty one is isError UNKNOWN_TOOL; nothing runs."""
    desk = Desk()
    [result] = mcp_calls(Gate(desk.table), [(name, {"text": "a"}, None)])
    assert result.is_error is True
    assert mcp_reason(result) == "args:unknown_tool"
    assert desk.runs == []


@pytest.mark.parametrize("name", AUTHORITY_NAMES)
def test_mcp_an_argument_named_like_authority_is_refused(name: str) -> None:
    """An argument named scope, run_id, self... is refused like any unexpected one."""
    desk = Desk()
    [result] = mcp_calls(Gate(desk.table), [("echo", {"text": "a", name: "x"}, None)])
    assert mcp_reason(result) == f"args:unexpected:{name}"
    assert desk.runs == []


def test_mcp_meta_grants_no_authority() -> None:
    """A client's _meta naming a scope or approvals does not let a write outside the scope run."""
    desk = Desk()
    meta = {"agtool/scope": ["reversible_write"], "agtool/approvals": ["pay"],
            "scope": ["reversible_write"]}
    [result] = mcp_calls(Gate(desk.table), [("pay", PAY, meta)])
    assert result.is_error is True
    assert mcp_reason(result) == "auth:scope:reversible_write"
    assert desk.runs == []


def test_mcp_a_huge_argument_arrives_whole() -> None:
    """A megabyte string reaches the body as sent, and comes back as structured content."""
    desk = Desk()
    huge = "y" * 1_000_000
    [result] = mcp_calls(Gate(desk.table), [("echo", {"text": huge}, None)])
    assert result.structured_content == {"text": huge}
    assert desk.runs == [("echo", huge)]


def test_mcp_parallel_retries_of_one_write_run_it_once() -> None:
    """Three concurrent identical writes in one run: one body run, three equal answers."""
    desk = Desk(asynchronous=True)
    meta = {RUN_ID_META: "run-1"}
    results = mcp_calls(Gate(desk.table, scope=WRITER), [("pay", PAY, meta)] * 3, parallel=True)
    assert [result.is_error for result in results] == [False, False, False]
    assert len({json.dumps(result.structured_content) for result in results}) == 1
    assert desk.runs == [("pay", 5)]


def test_mcp_a_sensitive_value_is_in_no_result_or_record() -> None:
    """The card, paid with or refused, is in no text block, structuredContent or call record."""
    desk = Desk()
    records: list[Any] = []
    gate = Gate(desk.table, scope=WRITER, records=records.append)
    results = mcp_calls(gate, [("pay", {"card": CARD, "amount": 5}, None),
                               ("pay", {"card": CARD + "x", "amount": 5}, None),
                               ("pay", {"card": CARD, "amount": "5"}, None)])
    assert [result.is_error for result in results] == [False, True, True]
    assert leaked([result.content[0].text for result in results],
                  [result.structured_content for result in results],
                  [record.as_dict() for record in records]) == []


def test_mcp_an_upstream_that_echoes_a_secret_as_json_is_scrubbed() -> None:
    """An upstream error quoting the sensitive arg JSON-escaped is scrubbed in every form."""
    def lookup(token: str) -> dict[str, Any]:
        raise UpstreamError(502, json.dumps({"error": f"bad token {token}"}))

    table = {"lookup": {"fn": lookup, "args": {"token": {"type": "str", "sensitive": True}},
                        "returns": {"ok": {"type": "bool"}}}}
    [result] = mcp_calls(Gate(table), [("lookup", {"token": CARD}, None)])
    assert result.is_error is True
    assert mcp_reason(result) == "upstream:502"
    assert "bad token" in result.content[0].text  # the excerpt is kept, only the secret goes
    assert leaked(result.content[0].text, result.structured_content) == []


# --- MCP subprocesses -------------------------------------------------------------------------


def cli(*argv: str, env: dict[str, str] | None = None, stdin: bytes = b"",
        timeout: float = SCENARIO_TIMEOUT) -> subprocess.CompletedProcess[bytes]:
    """``python -m agtool._cli ARGV`` from the repository root."""
    return subprocess.run(  # noqa: S603 - this repository's own CLI
        [sys.executable, "-m", "agtool._cli", *argv], input=stdin, capture_output=True,
        cwd=str(ROOT), timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **(env or {})})


def hostile_runs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_the_proxy_survives_an_upstream_that_lies_hangs_and_crashes(tmp_path: Path) -> None:
    """Refused args never reach the upstream; a tool listed late, a hang, garbage, a crash and an
    escaped echo of a secret are each answered isError with nothing leaked, and nothing hangs."""
    runs = tmp_path / "runs.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agtool._cli", "mcp", "proxy", "--timeout", "1", "--env", "HOSTILE_RUNS",
              "--sensitive", "secret_echo.token", "--records", str(tmp_path / "records.jsonl"),
              "--", sys.executable, HOSTILE],
        cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), "HOSTILE_RUNS": str(runs)})
    calls: list[tuple[str, dict[str, Any]]] = [
        ("good", {"n": 1}), ("good", {"n": "1"}), ("good", {"n": 1, "extra": True}),
        ("secret_echo", {"token": CARD}), ("garbage", {}), ("line\\nbreak", {}),
        ("late", {}), ("hang", {}), ("good", {"n": 2}), ("crash", {}), ("good", {"n": 3})]

    async def scenario() -> tuple[list[str], list[Any], list[str]]:
        with (tmp_path / "proxy.err").open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                first = [tool.name for tool in (await session.list_tools()).tools]
                results = [await session.call_tool(name, args) for name, args in calls]
                again = [tool.name for tool in (await session.list_tools()).tools]
        return first, results, again

    first, results, again = run(scenario)
    # A name with a newline is served escaped, as the gate echoes any name a caller chose.
    assert first == again == ["good", "secret_echo", "crash", "hang", "garbage", "line\\nbreak"]
    by_call = dict(zip([f"{name}{args}" for name, args in calls], results, strict=True))
    assert by_call["good{'n': 1}"].structured_content == {"n": 1}
    assert mcp_reason(by_call["good{'n': '1'}"]) == "args:type:n"
    assert mcp_reason(by_call["good{'n': 1, 'extra': True}"]) == "args:unexpected:extra"
    assert mcp_reason(by_call["late{}"]) == "args:unknown_tool"
    assert by_call["line\\nbreak{}"].is_error is False
    assert by_call["good{'n': 2}"].structured_content == {"n": 2}  # after the hang: alive
    for name in ("secret_echo", "garbage", "hang", "crash"):
        assert by_call[f"{name}{{}}" if name != "secret_echo" else
                       f"secret_echo{{'token': {CARD!r}}}"].is_error is True
    assert mcp_reason(by_call["hang{}"]) == "timeout"
    assert mcp_reason(by_call["crash{}"]) == "upstream:connection"  # lost, not raised:MCPError
    # Answered, not hung: the upstream is being restarted (tests/mcp/test_proxy_faults.py
    # shows calls after a restart work), within --timeout 1 or not.
    assert by_call["good{'n': 3}"].content
    assert leaked([result.content[0].text for result in results],
                  [result.structured_content for result in results],
                  (tmp_path / "records.jsonl").read_text()) == []
    assert [run["tool"] for run in hostile_runs(runs)][:7] == [
        "good", "secret_echo", "garbage", "line\nbreak", "hang", "good", "crash"]


@pytest.mark.slow
@pytest.mark.parametrize("upstream", ["missing", "exit", "deep"])
def test_the_proxy_says_in_one_line_when_the_upstream_cannot_be_served(tmp_path: Path,
                                                                      upstream: str) -> None:
    """A missing command, an upstream that exits, one whose listing fails: exit 2, one line."""
    command = (["/nonexistent/mcp-server"] if upstream == "missing"
               else [sys.executable, HOSTILE])
    done = cli("mcp", "proxy", "--env", "HOSTILE_MODE", "--env", "HOSTILE_RUNS", "--", *command,
               env={"HOSTILE_MODE": upstream, "HOSTILE_RUNS": str(tmp_path / "runs")})
    own = [line for line in done.stderr.decode().splitlines() if line.startswith("agtool mcp")]
    assert done.returncode == 2
    assert len(own) == 1
    assert "upstream server" in own[0]
    assert b"agtool/" not in done.stderr.split(own[0].encode())[-1]  # no traceback of ours
    assert done.stdout == b""


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["mcp", "serve", "--table", "garbage"],
    ["mcp", "serve", "--table", "tests.fixtures.no_such_module:TOOLS"],
    ["mcp", "serve", "--table", "tests.fixtures.mcp_table:NOPE"],
    ["mcp", "serve", "--table", "tests.fixtures.mcp_table:TOOLS", "--store",
     "/nonexistent/dir/writes.db"],
    ["mcp", "serve", "--table", "tests.fixtures.mcp_table:TOOLS", "--http", "--port", "99999"],
    ["mcp", "proxy", "--timeout", "0", "--", "x"],
    ["mcp", "proxy", "--effect", "nonsense", "--", "x"],
    ["mcp", "proxy"],
], ids=["table_garbage", "table_missing_module", "table_missing_name", "store_unopenable",
        "port_out_of_range", "timeout_zero", "effect_garbage", "proxy_no_command"])
def test_the_mcp_commands_never_traceback_on_bad_input(argv: list[str]) -> None:
    """Bad command-line input is a short message on stderr and exit status 2, never a traceback."""
    done = cli(*argv, timeout=30)
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr
    assert done.stderr.strip()
    assert done.stdout == b""


NOISY_TABLE = '''
print("loading the noisy table")

def shout(text):
    print("the body speaks")
    return {"text": text}

TOOLS = {"shout": {"fn": shout, "args": {"text": {"type": "str"}},
                   "returns": {"text": {"type": "str"}}}}
'''


@pytest.mark.slow
def test_mcp_serve_stdout_carries_only_protocol(tmp_path: Path) -> None:
    """What the table's module and its bodies print goes to stderr; stdout is JSON-RPC only."""
    (tmp_path / "noisy_table.py").write_text(NOISY_TABLE)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "shout", "arguments": {"text": "hi"}}},
    ]
    stdin = "".join(json.dumps(request) + "\n" for request in requests).encode()
    with subprocess.Popen(
            [sys.executable, "-m", "agtool._cli", "mcp", "serve", "--table", "noisy_table:TOOLS"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=str(tmp_path), env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}) as process:
        assert process.stdin
        assert process.stdout
        assert process.stderr
        watchdog = threading.Timer(SCENARIO_TIMEOUT, process.kill)  # a hang fails, not blocks
        watchdog.start()
        process.stdin.write(stdin)
        process.stdin.flush()
        # Both answers, before the client leaves (a server whose stdin ends stops answering).
        lines = [process.stdout.readline(), process.stdout.readline()]
        process.stdin.close()
        process.wait(timeout=SCENARIO_TIMEOUT)
        lines += process.stdout.read().splitlines()
        err = process.stderr.read()
        watchdog.cancel()
    answers = [json.loads(line) for line in lines if line.strip()]  # each line is JSON
    assert [answer.get("id") for answer in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"] == {"text": "hi"}
    assert b"loading the noisy table" in err
    assert b"the body speaks" in err


@pytest.mark.slow
def test_a_trusted_tool_that_hangs_is_answered_an_error_too(tmp_path: Path) -> None:
    """A tool passed through ungated (--trust-tool) is also answered isError after --timeout."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agtool._cli", "mcp", "proxy", "--timeout", "1", "--env", "HOSTILE_RUNS",
              "--trust-tool", "hang",
              "--records", str(tmp_path / "records.jsonl"), "--", sys.executable, HOSTILE],
        cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), "HOSTILE_RUNS": str(tmp_path / "runs")})

    async def scenario() -> Any:
        with (tmp_path / "proxy.err").open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                return await session.call_tool("hang", {})

    result = run(scenario)
    assert result.is_error is True
    assert "TimeoutError" in result.content[0].text
    assert [run["tool"] for run in hostile_runs(tmp_path / "runs")] == ["hang"]
    records = [json.loads(line) for line in
               (tmp_path / "records.jsonl").read_text("utf-8").splitlines()]
    assert [(record["tool"], record["ok"], record["code"], record["reason"])
            for record in records] == [("hang", False, "UPSTREAM_ERROR", "ungated")]
