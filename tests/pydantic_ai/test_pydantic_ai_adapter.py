"""agtool.pydantic_ai: real pydantic-ai agents, gated, driven by a scripted ``FunctionModel``.

Every agent here is pydantic-ai's own, run sync (``run_sync``) and async
(``run``). The scripted model makes the mistakes models make and records
what it was shown and answered; body runs are counted by the tools
themselves, never read from the gate.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from _desk import ROWS, SCOPE, Desk
from _loops import closing_loop
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved

from agtool import Gate, to_json_schema
from agtool.pydantic_ai import (
    APPROVALS_KEY,
    ARGS_KEY,
    ERROR_KEY,
    GateCapability,
    gated_toolset,
)


class Script:
    """A model that answers each request with the next scripted turn, then "done".

    ``shown`` holds the tool definitions of each request; ``answered`` the tool
    returns each request carried back to the model.
    """

    def __init__(self, *turns: list[ToolCallPart]) -> None:
        self.turns = list(turns)
        self.shown: list[list[Any]] = []
        self.answered: list[list[ToolReturnPart]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.shown.append(info.function_tools)
        last = messages[-1]
        returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if returns:
            self.answered.append(returns)
        if not self.turns:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=self.turns.pop(0))

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self)

    def returned(self) -> dict[str, ToolReturnPart]:
        """Every tool return the model was handed, by tool-call id (the last one wins)."""
        return {part.tool_call_id: part for parts in self.answered for part in parts}


def call(name: str, args: Any, call_id: str) -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id=call_id)


def run_sync(agent: Agent[Any, Any], *args: Any, **kwargs: Any) -> Any:
    return closing_loop(agent.run_sync, *args, **kwargs)


def run_async(agent: Agent[Any, Any], *args: Any, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(*args, **kwargs))


RUNS = [pytest.param(run_sync, id="sync"), pytest.param(run_async, id="async")]
Run = Callable[..., Any]


def content(part: ToolReturnPart) -> dict[str, Any]:
    """What the model was handed, as the JSON it reads."""
    text = part.content if isinstance(part.content, str) else json.dumps(part.content)
    return json.loads(text)


def reason(part: ToolReturnPart) -> str:
    return content(part)["error"]["details"]["reason"]


CARELESS = [
    call("search_tickets", {"status": "open", "limit": "5"}, "str"),
    call("search_tickets", '{"status": "open", "limit": true}', "bool"),
    call("search_tickets", {"status": "open", "limit": 5, "team": "x"}, "extra"),
    call("search_tickets", "[1, 2]", "list"),
    call("search_tickets", {"status": "open", "limit": 2}, "good"),
]
CARELESS_REASONS = {"str": "args:type:limit", "bool": "args:type:limit",
                    "extra": "args:unexpected:team", "list": "args:not_object"}


# --- gated_toolset -----------------------------------------------------------------------------


def test_the_model_is_shown_the_gates_schema() -> None:
    """Each tool is defined with the gate's own JSON Schema, strict where strict mode says it."""
    desk = Desk()
    script = Script()
    run_sync(Agent(script.model, toolsets=[gated_toolset(Gate(desk.table))]), "hi")
    shown = {tool.name: tool for tool in script.shown[0]}
    assert set(shown) == set(desk.table)
    for name, tool in shown.items():
        exported = to_json_schema(desk.table, name)
        del exported["$schema"]
        assert tool.parameters_json_schema == exported
        assert tool.strict is True
    assert shown["search_tickets"].description == "Tickets by status."


@pytest.mark.parametrize("run", RUNS)
def test_careless_args_are_refused_in_one_turn_and_no_body_runs(run: Run) -> None:
    """"5" and True for an int, an extra arg and a non-object, made in parallel with one good
    call: each refused with its reason as a retry prompt, the good one run once."""
    desk = Desk()
    script = Script(CARELESS)
    result = run(Agent(script.model, toolsets=[gated_toolset(Gate(desk.table))]), "tickets?")
    assert result.output == "done"
    returned = script.returned()
    assert {call_id: reason(returned[call_id]) for call_id in CARELESS_REASONS} == (
        CARELESS_REASONS)
    assert all(returned[call_id].outcome == "retried" for call_id in CARELESS_REASONS)
    assert content(returned["extra"])["error"]["code"] == "INVALID_ARGUMENT"
    assert content(returned["good"])["data"] == {"tickets": ROWS[:2]}
    assert desk.searches == [2]  # only the good call ran: "5" and True were not coerced


def test_without_the_gate_pydantic_ai_runs_coerced_args() -> None:
    """The control: the same calls to a plain pydantic-ai tool run "5" as 5 and True as 1."""
    desk = Desk()
    script = Script(CARELESS[:2])
    agent = Agent(script.model, retries=3)
    agent.tool_plain(desk.search, name="search_tickets")
    run_sync(agent, "tickets?")
    assert sorted(desk.searches) == [1, 5]


@pytest.mark.parametrize("run", RUNS)
def test_a_failure_the_model_cannot_fix_is_a_tool_failure(run: Run) -> None:
    """An empty result is ``ToolFailed`` (no retry asked for, no retry budget spent), even
    twice in a row under the default budget of one retry."""
    desk = Desk()
    closed = {"status": "closed", "limit": 5}
    script = Script([call("search_tickets", closed, "c1")], [call("search_tickets", closed, "c2")])
    run(Agent(script.model, toolsets=[gated_toolset(Gate(desk.table))]), "closed tickets?")
    returned = script.returned()
    for call_id in ("c1", "c2"):
        assert returned[call_id].outcome == "failed"
        assert content(returned[call_id])["error"]["code"] == "EMPTY_RESULT"
    assert desk.searches == [5, 5]


@pytest.mark.parametrize("run", RUNS)
def test_a_write_retried_under_the_same_call_id_runs_once(run: Run) -> None:
    """The same refund call id twice is one refund and the same answer; a new call id for
    the same refund is a new step, unless the adapter is given one fixed step id."""
    refund = {"order": "O-7", "amount": 20}
    desk = Desk()
    script = Script([call("issue_refund", refund, "w1")], [call("issue_refund", refund, "w1")],
                    [call("issue_refund", refund, "w2")])
    gate = Gate(desk.table, scope=SCOPE)
    run(Agent(script.model, toolsets=[gated_toolset(gate)]), "refund O-7")
    first, again, new_id = (content(parts[0]) for parts in script.answered)
    assert first["data"] == again["data"] == {"refund_id": "R-1"}
    assert new_id["data"] == {"refund_id": "R-2"}  # a re-prompt's new call id: a new step
    assert desk.refunds == ["O-7", "O-7"]

    desk = Desk()
    script = Script([call("issue_refund", refund, "w1")], [call("issue_refund", refund, "w2")])
    agent = Agent(script.model, toolsets=[gated_toolset(Gate(desk.table, scope=SCOPE),
                                                        step_id="refund")])
    run(agent, "refund O-7")
    assert desk.refunds == ["O-7"]  # one step for the run: the business key guards it


def test_a_write_is_keyed_by_the_conversation_across_runs() -> None:
    """A run resumed on the same conversation (pydantic-ai gives it a new run id) that makes
    the same call id again is answered from the write store."""
    refund = {"order": "O-7", "amount": 20}
    desk = Desk()
    gate = Gate(desk.table, scope=SCOPE)
    script = Script([call("issue_refund", refund, "w1")])
    first = run_sync(Agent(script.model, toolsets=[gated_toolset(gate)]), "refund O-7")
    script = Script([call("issue_refund", refund, "w1")])
    second = run_sync(Agent(script.model, toolsets=[gated_toolset(gate)]), "again",
                      message_history=first.all_messages())
    assert first.run_id != second.run_id
    assert content(script.answered[0][0])["data"] == {"refund_id": "R-1"}
    assert desk.refunds == ["O-7"]


def resume(agent: Agent[Any, Any], result: Any, run: Run, approval: Any,
           metadata: dict[str, Any] | None = None) -> Any:
    return run(agent, message_history=result.all_messages(),
               deferred_tool_results=DeferredToolResults(approvals={"e1": approval},
                                                         metadata=metadata or {}))


@pytest.mark.parametrize("run", RUNS)
def test_an_approval_is_a_deferred_call_and_binds_the_args_that_run(run: Run) -> None:
    """An external effect defers to a person; pydantic-ai's call-id approval alone runs
    nothing; ``gate.approve`` of the args runs them once; an approval of the model's args
    does not cover ``override_args``, whose call is deferred again, naming them."""
    desk = Desk()
    gate = Gate(desk.table, scope=SCOPE)
    email = {"to": "ann@example.com", "body": "Refunded."}
    script = Script([call("send_email", email, "e1")])
    agent = Agent(script.model, toolsets=[gated_toolset(gate)],
                  output_type=[str, DeferredToolRequests])
    asked = run(agent, "email Ann")
    assert isinstance(asked.output, DeferredToolRequests)
    assert [part.tool_call_id for part in asked.output.approvals] == ["e1"]
    assert asked.output.metadata["e1"][ERROR_KEY]["code"] == "APPROVAL_REQUIRED"
    assert asked.output.metadata["e1"][ARGS_KEY] == email
    assert desk.emails == []

    again = resume(agent, asked, run, True)  # approved by call id only
    assert isinstance(again.output, DeferredToolRequests)
    assert desk.emails == []

    other = {"to": "eve@example.com", "body": "Refunded."}
    changed = resume(agent, asked, run, ToolApproved(override_args=other),
                     {"e1": {APPROVALS_KEY: [gate.approve("send_email", email)]}})
    assert isinstance(changed.output, DeferredToolRequests)
    assert changed.output.metadata["e1"][ARGS_KEY] == other  # what would run, not the model's
    assert desk.emails == []

    done = resume(agent, asked, run, ToolApproved(override_args=other),
                  {"e1": {APPROVALS_KEY: gate.approve("send_email", other).token}})
    assert done.output == "done"
    assert desk.emails == ["eve@example.com"]


def test_the_toolset_composes_with_pydantic_ais_own_wrappers() -> None:
    """Prefixed, the model sees and calls the prefixed name and the gate its own tool."""
    desk = Desk()
    script = Script([call("desk_search_tickets", {"status": "open", "limit": "2"}, "str"),
                     call("desk_search_tickets", {"status": "open", "limit": 2}, "good")])
    toolset = gated_toolset(Gate(desk.table), ["search_tickets"]).prefixed("desk")
    run_sync(Agent(script.model, toolsets=[toolset]), "tickets?")
    assert [tool.name for tool in script.shown[0]] == ["desk_search_tickets"]
    returned = script.returned()
    assert reason(returned["str"]) == "args:type:limit"
    assert content(returned["good"])["source"]["tool"] == "search_tickets"
    assert desk.searches == [2]


def test_the_toolset_refuses_what_is_not_a_gate_or_a_tool() -> None:
    """A programming mistake is raised when the toolset is made, naming it."""
    with pytest.raises(TypeError, match=r"needs an agtool\.Gate"):
        gated_toolset(Desk().table)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'nope' is not a valid tool"):
        gated_toolset(Gate(Desk().table), ["nope"])


# --- GateCapability ----------------------------------------------------------------------------


def own_tools(desk: Desk) -> Agent[None, Any]:
    """An agent whose own tools are the desk's, plus one the table does not name."""
    agent: Agent[None, Any] = Agent(output_type=[str, DeferredToolRequests])

    @agent.tool
    def search_tickets(ctx: RunContext[None], status: str, limit: int) -> dict[str, Any]:
        return desk.search(status, limit)

    @agent.tool_plain
    async def issue_refund(order: str, amount: int) -> dict[str, Any]:
        if amount == 13:
            raise ModelRetry("13 is unlucky: pick another amount")
        return desk.refund(order, amount)

    agent.tool_plain(desk.email, name="send_email")

    @agent.tool_plain
    def delete_everything() -> str:
        desk.refunds.append("deleted")
        return "deleted"

    return agent


@pytest.mark.parametrize("run", RUNS)
def test_the_capability_gates_the_agents_own_tools(run: Run) -> None:
    """The model is shown the table's schemas and only the tools it names; careless args
    are refused before the agent's tool runs; a tool it does not name cannot be called."""
    desk = Desk()
    script = Script([*CARELESS, call("delete_everything", {}, "hidden")])
    agent = own_tools(desk)
    result = run(agent, "tickets?", model=script.model,
                 capabilities=[GateCapability(Gate(desk.contracts_only()))])
    assert result.output == "done"
    shown = {tool.name: tool.parameters_json_schema for tool in script.shown[0]}
    exported = to_json_schema(desk.table, "search_tickets")
    del exported["$schema"]
    assert set(shown) == {"search_tickets", "issue_refund", "send_email"}
    assert shown["search_tickets"] == exported
    returned = script.returned()
    assert {call_id: reason(returned[call_id]) for call_id in CARELESS_REASONS} == (
        CARELESS_REASONS)
    assert returned["hidden"].outcome == "retried"
    assert content(returned["good"])["data"] == {"tickets": ROWS[:2]}
    assert desk.searches == [2]
    assert desk.refunds == []


@pytest.mark.parametrize("run", RUNS)
def test_the_capability_runs_a_write_once_and_lets_the_tools_retry_through(run: Run) -> None:
    """A refund retried under its call id runs once; the tool's own ``ModelRetry`` reaches
    the model as the tool raised it, and frees the key: the fixed call then runs."""
    desk = Desk()
    refund = {"order": "O-7", "amount": 20}
    script = Script([call("issue_refund", refund, "w1")], [call("issue_refund", refund, "w1")],
                    [call("issue_refund", {**refund, "amount": 13}, "w2")],
                    [call("issue_refund", refund, "w2")])
    capability = GateCapability(Gate(desk.contracts_only(), scope=SCOPE))
    run(own_tools(desk), "refund", model=script.model, capabilities=[capability])
    first, again, unlucky, fixed = (parts[0] for parts in script.answered)
    assert content(first)["data"] == content(again)["data"] == {"refund_id": "R-1"}
    assert unlucky.outcome == "retried"
    assert unlucky.content == "13 is unlucky: pick another amount"
    assert content(fixed)["data"] == {"refund_id": "R-2"}
    assert desk.refunds == ["O-7", "O-7"]
    assert capability.shadow.stats("issue_refund").replayed == 1  # the retry of w1


@pytest.mark.parametrize("run", RUNS)
def test_the_capability_defers_an_approval_and_runs_only_what_was_approved(run: Run) -> None:
    """The agent's own email tool defers; resumed with an approval of the args, it runs once."""
    desk = Desk()
    gate = Gate(desk.contracts_only(), scope=SCOPE)
    email = {"to": "ann@example.com", "body": "Refunded."}
    script = Script([call("send_email", email, "e1")])
    agent = own_tools(desk)
    capabilities = [GateCapability(gate)]
    asked = run(agent, "email Ann", model=script.model, capabilities=capabilities)
    assert isinstance(asked.output, DeferredToolRequests)
    assert desk.emails == []
    done = run(agent, model=script.model, capabilities=capabilities,
               message_history=asked.all_messages(),
               deferred_tool_results=DeferredToolResults(
                   approvals={"e1": True},
                   metadata={"e1": {APPROVALS_KEY: [gate.approve("send_email", email)]}}))
    assert done.output == "done"
    assert desk.emails == ["ann@example.com"]


def test_the_capability_binds_an_approval_to_the_override_args() -> None:
    """Resumed with ``override_args`` and an approval of the model's args, the agent's own
    tool is deferred again, naming the args that would run; approved for those, it runs."""
    desk = Desk()
    gate = Gate(desk.contracts_only(), scope=SCOPE)
    email = {"to": "ann@example.com", "body": "Refunded."}
    other = {**email, "to": "eve@example.com"}
    script = Script([call("send_email", email, "e1")])
    agent, capabilities = own_tools(desk), [GateCapability(gate)]
    asked = run_sync(agent, "email Ann", model=script.model, capabilities=capabilities)

    def resumed(approval: Any) -> Any:
        return run_sync(agent, model=script.model, capabilities=capabilities,
                        message_history=asked.all_messages(),
                        deferred_tool_results=DeferredToolResults(
                            approvals={"e1": ToolApproved(override_args=other)},
                            metadata={"e1": {APPROVALS_KEY: [approval]}}))

    again = resumed(gate.approve("send_email", email))
    assert isinstance(again.output, DeferredToolRequests)
    assert again.output.metadata["e1"][ARGS_KEY] == other
    assert desk.emails == []
    assert resumed(gate.approve("send_email", other)).output == "done"
    assert desk.emails == ["eve@example.com"]


def test_the_capability_refuses_what_is_not_a_gate() -> None:
    """A programming mistake is raised when the capability is made; no agent spec names it."""
    with pytest.raises(TypeError, match=r"needs an agtool\.Gate"):
        GateCapability(Desk().table)  # type: ignore[arg-type]
    assert GateCapability.get_serialization_name() is None


# --- without the extra -------------------------------------------------------------------------


def test_without_the_pydantic_ai_extra_the_import_error_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """agtool.pydantic_ai says which extra to install, in one line."""
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # what a missing package looks like
    for name in [name for name in sys.modules if name.startswith("agtool.pydantic_ai")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError) as caught:
        importlib.import_module("agtool.pydantic_ai")
    assert str(caught.value) == (
        "agtool.pydantic_ai needs the pydantic-ai extra: pip install 'agtool-gate[pydantic-ai]'")
