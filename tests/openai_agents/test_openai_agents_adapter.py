"""agtool.openai_agents: real OpenAI Agents SDK runs, gated, driven by its ``ScriptedModel``.

``agents.testing.ScriptedModel`` is the SDK's own implementation of its
``Model`` interface for tests: it answers each model call with the next
scripted output items and records what it was sent. Runs are sync
(``Runner.run_sync``) and async (``Runner.run``); tracing is off, so nothing
is exported. Body runs are counted by the tools themselves.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import json
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from _desk import ROWS, SCOPE, SEARCH_ARGS, Desk
from _loops import closing_loop
from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from agtool import Gate, tool_spec
from agtool.openai_agents import function_tools, gate_guardrail

#: No trace leaves the process, and the run has an id to key writes by.
CONFIG = RunConfig(tracing_disabled=True, group_id="conv-1")
#: A context variable a caller sets around a run: a sync body must still see it.
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="unset")
#: Valid args of the desk's search, but for its limit.
SEARCH = {"status": "open", "assignee": None}



def run_sync(agent: Agent[Any], given: Any, config: RunConfig = CONFIG) -> Any:
    return closing_loop(Runner.run_sync, agent, given, run_config=config)


def run_async(agent: Agent[Any], given: Any, config: RunConfig = CONFIG) -> Any:
    return asyncio.run(Runner.run(agent, given, run_config=config))


RUNS = [pytest.param(run_sync, id="sync"), pytest.param(run_async, id="async")]
Run = Callable[..., Any]


def outputs(result: Any) -> dict[str, Any]:
    """What the model was handed for each tool call of the run, by call id, as JSON."""
    handed = {}
    for item in result.new_items:
        if isinstance(item, ToolCallOutputItem):
            text = item.output  # a gated tool's answer is JSON text; a plain tool's, its value
            handed[item.raw_item["call_id"]] = json.loads(text) if isinstance(text, str) else text
    return handed


def reason(handed: dict[str, Any]) -> str:
    return handed["error"]["details"]["reason"]


CARELESS = [
    function_call("search_tickets", {"status": "open", "limit": "5", "assignee": None},
                  call_id="str"),
    function_call("search_tickets", {"status": "open", "limit": True, "assignee": None},
                  call_id="bool"),
    function_call("search_tickets", {"status": "open", "limit": 5, "assignee": None,
                                     "team": "x"}, call_id="extra"),
    function_call("search_tickets", "not json", call_id="text"),
    function_call("search_tickets", {"status": "open", "limit": 2, "assignee": None},
                  call_id="good"),
]
CARELESS_REASONS = {"str": "args:type:limit", "bool": "args:type:limit",
                    "extra": "args:unexpected:team", "text": "args:not_object"}


def test_the_model_is_shown_the_gates_strict_schema() -> None:
    """Each tool's schema is the gate's OpenAI export: strict when the contract allows it."""
    desk = Desk()
    table = {**desk.table, "search_loose": {
        **desk.table["search_tickets"],
        "args": {**SEARCH_ARGS, "assignee": {"type": "str", "required": False,
                                             "nullable": False}}}}
    tools = {tool.name: tool for tool in function_tools(Gate(table))}
    for name, tool in tools.items():
        spec = tool_spec(table, name, "openai")["function"]
        assert tool.params_json_schema == spec["parameters"]
        assert tool.strict_json_schema is spec["strict"]
    assert tools["search_tickets"].strict_json_schema is True
    assert tools["search_loose"].strict_json_schema is False  # "optional, never null"
    assert [callable(tool.needs_approval) for tool in tools.values()] == [
        False, False, True, False]


@pytest.mark.parametrize("run", RUNS)
def test_careless_args_are_refused_in_one_turn_and_no_body_runs(run: Run) -> None:
    """"5" and True for an int, an extra arg and text that is not JSON, in parallel with one
    good call: each answered with its structured error, the good one run once."""
    desk = Desk()
    model = ScriptedModel([CARELESS, [assistant_message("done")]])
    agent = Agent(name="desk", model=model, tools=function_tools(Gate(desk.table)))
    result = run(agent, "tickets?")
    assert result.final_output == "done"
    handed = outputs(result)
    assert {call_id: reason(handed[call_id]) for call_id in CARELESS_REASONS} == (
        CARELESS_REASONS)
    assert handed["extra"]["error"]["code"] == "INVALID_ARGUMENT"
    assert handed["good"]["data"] == {"tickets": ROWS[:2]}
    assert desk.searches == [2]
    # The model was shown the gate's schema on its request.
    shown = {tool.name: tool for tool in model.first_call.tools}  # type: ignore[union-attr]
    assert shown["search_tickets"].params_json_schema["additionalProperties"] is False


def test_without_the_gate_the_sdk_runs_coerced_args_and_drops_extras() -> None:
    """The control: the SDK's own ``function_tool`` runs "5" as 5, True as 1, and an extra
    argument's call with the extra dropped."""
    desk = Desk()
    model = ScriptedModel([CARELESS[:3], [assistant_message("done")]])
    plain = function_tool(desk.search, name_override="search_tickets", strict_mode=False)
    run_sync(Agent(name="desk", model=model, tools=[plain]), "tickets?")
    assert sorted(desk.searches) == [1, 5, 5]


@pytest.mark.parametrize("run", RUNS)
def test_a_write_retried_under_the_same_call_id_runs_once(run: Run) -> None:
    """A run retried after a crash (a new run of the same group, the model's same call id)
    is answered the first refund; with no run id at all a write is refused, not run unkeyed."""
    desk = Desk()
    gate = Gate(desk.table, scope=SCOPE)
    refund = function_call("issue_refund", {"order": "O-7", "amount": 20}, call_id="w1")
    answers = []
    for _ in range(2):
        model = ScriptedModel([[refund], [assistant_message("done")]])
        result = run(Agent(name="desk", model=model, tools=function_tools(gate)), "refund O-7")
        answers.append(outputs(result)["w1"]["data"])
    assert answers == [{"refund_id": "R-1"}] * 2
    assert desk.refunds == ["O-7"]
    assert gate.stats("issue_refund").replayed == 1

    model = ScriptedModel([[refund], [assistant_message("done")]])
    agent = Agent(name="desk", model=model, tools=function_tools(gate))
    unkeyed = run(agent, "refund O-7", RunConfig(tracing_disabled=True))
    assert reason(outputs(unkeyed)["w1"]) == "write:no_key"
    assert desk.refunds == ["O-7"]


@pytest.mark.parametrize("run", RUNS)
def test_an_approval_needs_the_gates_approval_of_the_exact_args(run: Run) -> None:
    """The run is interrupted for a person; the SDK's approval by call id alone runs nothing;
    with ``gate.approve`` of the args the person saw, the email is sent once."""
    desk = Desk()
    gate = Gate(desk.table, scope=SCOPE)
    approvals: list[Any] = []
    email = function_call("send_email", {"to": "ann@example.com", "body": "Refunded."},
                          call_id="e1")

    def agent() -> Agent[Any]:
        model = ScriptedModel([[email], [assistant_message("done")]])
        return Agent(name="desk", model=model, tools=function_tools(gate, approvals=approvals))

    first = agent()
    asked = run(first, "email Ann")
    [item] = asked.interruptions
    assert item.name == "send_email"
    assert desk.emails == []
    state = asked.to_state()
    state.approve(item)
    unapproved = run(first, state)
    assert outputs(unapproved)["e1"]["error"]["code"] == "APPROVAL_REQUIRED"
    assert desk.emails == []

    second = agent()
    asked = run(second, "email Ann")
    [item] = asked.interruptions
    approvals.append(gate.approve(item.name, json.loads(item.arguments)))  # what was shown
    state = asked.to_state()
    state.approve(item)
    done = run(second, state)
    assert done.final_output == "done"
    assert desk.emails == ["ann@example.com"]


def test_a_person_is_never_asked_about_args_the_gate_refuses() -> None:
    """A careless call of a tool that needs an approval is answered with its refusal at once:
    no interruption, no body run."""
    desk = Desk()
    careless = function_call("send_email", {"to": "ann@example.com", "body": 7}, call_id="e1")
    model = ScriptedModel([[careless], [assistant_message("done")]])
    agent = Agent(name="desk", model=model,
                  tools=function_tools(Gate(desk.table, scope=SCOPE)))
    result = run_sync(agent, "email Ann")
    assert result.interruptions == []
    assert reason(outputs(result)["e1"]) == "args:type:body"
    assert desk.emails == []


@pytest.mark.parametrize("run", RUNS)
def test_the_guardrail_checks_an_agents_own_tool(run: Run) -> None:
    """A ``function_tool`` the agent has, guarded: careless calls rejected with the structured
    error and its body never run; the good call runs; a tool the table lacks is rejected."""
    desk = Desk()
    guard = gate_guardrail(Gate(desk.table))
    search = function_tool(desk.search, name_override="search_tickets", strict_mode=False,
                           tool_input_guardrails=[guard])

    def wipe() -> str:
        desk.refunds.append("wiped")
        return "wiped"

    unlisted = function_tool(wipe, tool_input_guardrails=[guard])
    model = ScriptedModel([[*CARELESS, function_call("wipe", {}, call_id="w")],
                           [assistant_message("done")]])
    result = run(Agent(name="desk", model=model, tools=[search, unlisted]), "tickets?")
    handed = outputs(result)
    assert {call_id: reason(handed[call_id]) for call_id in CARELESS_REASONS} == (
        CARELESS_REASONS)
    assert handed["w"]["error"]["code"] == "UNKNOWN_TOOL"
    assert desk.searches == [2]
    assert desk.refunds == []


@pytest.mark.parametrize("run", RUNS)
def test_parallel_calls_of_a_sync_body_run_at_once_off_the_loop_in_the_runs_context(
        run: Run) -> None:
    """Two parallel calls of a gated sync body: each runs in a worker thread, not the run's
    own, both at once (each waits for the other), and each sees the context variable the
    caller set before the run, as the SDK's own ``function_tool`` body would."""
    both = threading.Barrier(2, timeout=5.0)
    seen: list[tuple[int, str]] = []

    def search(status: str, limit: int, assignee: str | None = None) -> dict[str, Any]:
        seen.append((threading.get_ident(), CALLER.get()))
        both.wait()  # a second call that waits for the first to end breaks the barrier
        return {"tickets": ROWS[:limit]}

    table = {"search_tickets": {**Desk().table["search_tickets"], "fn": search}}
    model = ScriptedModel([[function_call("search_tickets", {**SEARCH, "limit": n},
                                          call_id=f"c{n}") for n in (1, 2)],
                           [assistant_message("done")]])
    agent = Agent(name="desk", model=model, tools=function_tools(Gate(table)))
    token = CALLER.set("the caller")
    try:
        handed = outputs(run(agent, "tickets?"))
    finally:
        CALLER.reset(token)
    assert {call_id: answer["data"] for call_id, answer in handed.items()} == {
        "c1": {"tickets": ROWS[:1]}, "c2": {"tickets": ROWS[:2]}}
    assert sorted(value for _, value in seen) == ["the caller", "the caller"]
    assert threading.get_ident() not in {ident for ident, _ in seen}
    assert len({ident for ident, _ in seen}) == 2


def test_the_adapters_refuse_what_is_not_a_gate_or_a_tool() -> None:
    """A programming mistake is raised when the tools are made, naming it."""
    with pytest.raises(TypeError, match=r"needs an agtool\.Gate"):
        function_tools(Desk().table)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"needs an agtool\.Gate"):
        gate_guardrail(Desk().table)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'nope' is not a valid tool"):
        function_tools(Gate(Desk().table), ["nope"])
    assert all(isinstance(tool, FunctionTool) for tool in function_tools(Gate(Desk().table)))


def test_without_the_openai_agents_extra_the_import_error_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """agtool.openai_agents says which extra to install, in one line."""
    monkeypatch.setitem(sys.modules, "agents", None)  # what a missing package looks like
    for name in [name for name in sys.modules if name.startswith("agtool.openai_agents")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError) as caught:
        importlib.import_module("agtool.openai_agents")
    assert str(caught.value) == ("agtool.openai_agents needs the openai-agents extra: "
                                 "pip install 'agtool-gate[openai-agents]'")
