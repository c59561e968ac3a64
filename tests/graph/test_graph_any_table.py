"""The repair graph on tables that are not the stock example: the README's ``search_tickets``,
a write tool, tables with floats and bools, and random tables.

Expected answers are built from what each test's own body returned, expected
reasons from the defect each order plants, and expected conversions from the
literal written in the test. The models are a scripted ``BaseChatModel``
replaying ``AIMessage`` s with tool calls; nothing is mocked below the graph.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import agtool.graph
import agtool.graph._build as graph_module
from agtool import STAGES, Gate, UpstreamError, parse_reason
from agtool._contract import check_table
from agtool.graph import (
    MAX_ATTEMPTS,
    build_graph,
    build_naive,
    default_repairs,
    exact_value,
    handle,
    rows_of,
)
from agtool.graph._build import AGENT_STAGES
from agtool.harness._checks import body_of, instrument
from agtool.harness.strategies import (
    contract_tables,
    mistake_kinds,
    model_mistakes,
    one_defect_args,
    valid_args,
    valid_results,
)
from agtool.harness.strategies._args import echo_values

# --- the README's table ("Your own tool, gated"), copied ------------------------------------

SEARCHED: list[dict[str, Any]] = []
TICKETS = [{"id": "T-1", "title": "Refund not received", "age_days": 3}]


def search_tickets(status, limit, assignee=None):  # type: ignore[no-untyped-def]
    SEARCHED.append({"status": status, "limit": limit, "assignee": assignee})  # counted here
    rows = [{"id": "T-1", "title": "Refund not received", "age_days": 3}]
    return {"tickets": rows[:limit]}


def searched_value(limit: int) -> dict[str, Any]:
    """What the ticket body answers, without calling it."""
    return {"tickets": TICKETS[:limit]}


TOOLS = {
    "search_tickets": {
        "fn": search_tickets,
        "description": "Open support tickets, newest first.",
        "args": {
            "status": {"type": "str", "allowed": ["open", "pending", "closed"]},
            "limit": {"type": "int", "min": 1, "max": 20},
            "assignee": {"type": "str", "required": False, "pattern": r"[a-z]+"},
        },
        "returns": {
            "tickets": {"type": "list", "max_len": 20, "item": {
                "id": {"type": "str", "pattern": r"T-\d+"},
                "title": {"type": "str"},
                "age_days": {"type": "int", "min": 0, "max": 3650},
            }},
        },
    },
}
LIMIT = TOOLS["search_tickets"]["args"]["limit"]
STATUSES = TOOLS["search_tickets"]["args"]["status"]["allowed"]
GOOD = {"status": "open", "limit": 5}


@pytest.fixture(autouse=True)
def searched() -> Iterator[list[dict[str, Any]]]:
    """The calls that reached the ticket body in this test."""
    SEARCHED.clear()
    yield SEARCHED
    SEARCHED.clear()


def quoted(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def ticket_sentence(rows: list[dict[str, Any]]) -> str:
    first = rows[0]
    fields = ", ".join(f"{key}={quoted(first[key])}" for key in ("id", "title", "age_days"))
    return f"search_tickets: {len(rows)} tickets; the first: {fields}."


def test_search_tickets_is_answered_from_its_own_result() -> None:
    """An order on the README's table runs its one tool and the answer quotes its result."""
    gate = Gate(TOOLS)
    out = handle(GOOD, gate=gate)
    rows = searched_value(GOOD["limit"])["tickets"]
    assert out["ok"] is True
    assert out["errors"] == []
    assert out["rows"] == rows
    assert out["answer"] == ticket_sentence(rows)
    assert "stock" not in out["answer"]
    assert out["tool_runs"] == 1


def test_the_answer_follows_the_result_not_fixed_words() -> None:
    """Another body's rows give another answer: the count and first row are the result's."""
    rows = [{"id": "T-9", "title": "Wrong size", "age_days": 12},
            {"id": "T-4", "title": "Late", "age_days": 1}]
    table = {"search_tickets": {**TOOLS["search_tickets"],
                                "fn": lambda status, limit, assignee=None: {"tickets": rows}}}
    out = handle(GOOD, gate=Gate(table))
    assert out["answer"] == ticket_sentence(rows)


def test_an_empty_result_is_not_answered() -> None:
    """A ticket search with no rows ends on ``result:empty``, with no claim made."""
    table = {"search_tickets": {**TOOLS["search_tickets"],
                                "fn": lambda status, limit, assignee=None: {"tickets": []}}}
    out = handle(GOOD, gate=Gate(table))
    assert out["ok"] is False
    assert out["errors"] == ["result:empty"]
    assert out["answer"] == "No answer: result:empty."


def test_the_naive_graph_answers_the_same_way() -> None:
    """``build_naive(gate=...)`` makes one call and answers from its result."""
    state = build_naive(gate=Gate(TOOLS)).invoke({"order": GOOD})
    assert state["ok"] is True
    assert state["answer"] == ticket_sentence(searched_value(GOOD["limit"])["tickets"])


def two_tools() -> dict[str, Any]:
    other = {"fn": lambda: {"n": 1}, "args": {}, "returns": {"n": {"type": "int"}}}
    return {**TOOLS, "count_tickets": other}


def test_an_order_without_a_tool_on_a_several_tool_table_is_unknown_tool() -> None:
    """With two tools and no ``tool`` field there is nothing to guess: the gate says so."""
    gate = Gate(two_tools())
    out = handle(GOOD, gate=gate)
    assert out["errors"] == ["args:unknown_tool"]
    assert out["attempts"] == 1
    named = handle({**GOOD, "tool": "search_tickets"}, gate=gate)
    assert named["ok"] is True


def test_a_result_without_a_declared_list_is_its_own_row() -> None:
    """``count_tickets`` returns no list: its row is the result and the answer names its fields."""
    gate = Gate(two_tools())
    out = handle({"tool": "count_tickets"}, gate=gate)
    assert out["ok"] is True
    assert out["rows"] == [{"n": 1}]
    assert out["answer"] == "count_tickets: n=1."
    assert rows_of(gate.contract("count_tickets"), {"n": 1}) == [{"n": 1}]


# --- a write tool --------------------------------------------------------------------------


class Outbox:
    """A reply-sending body that records what it sent and names each message."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def __call__(self, ticket: str, text: str) -> dict[str, Any]:
        self.sent.append({"ticket": ticket, "text": text})
        return {"message_id": f"m-{len(self.sent)}", "ticket": ticket}


def write_gate(fn: Any) -> Gate:
    table = {"reply_to_ticket": {
        "fn": fn, "effect": "write", "risk": "reversible_write",
        "description": "Send a reply on a ticket.",
        "args": {"ticket": {"type": "str", "pattern": r"T-\d+"}, "text": {"type": "str"}},
        "returns": {"message_id": {"type": "str"}, "ticket": {"type": "str"}},
    }}
    return Gate(table)


WRITE = {"ticket": "T-1", "text": "Refund sent today."}
AUTHORITY = {"scope": ["read_public", "reversible_write"], "run_id": "run-1"}


def test_a_write_runs_once_per_run_and_is_answered_from_its_result() -> None:
    """The write tool through the graph: its result makes the answer; a rerun replays it."""
    outbox = Outbox()
    gate = write_gate(outbox)
    first = handle(WRITE, gate=gate, **AUTHORITY)
    again = handle(WRITE, gate=gate, **AUTHORITY)
    assert first["ok"] is True
    assert first["answer"] == 'reply_to_ticket: message_id="m-1", ticket="T-1".'
    assert outbox.sent == [WRITE]
    assert again["answer"] == first["answer"]
    assert (first["tool_runs"], again["tool_runs"]) == (1, 0)
    handle(WRITE, gate=gate, scope=AUTHORITY["scope"], run_id="run-2")
    assert len(outbox.sent) == 2  # another run is another write


def test_a_write_needs_the_callers_scope() -> None:
    """Without ``reversible_write`` in the caller's scope the write is refused before its body."""
    outbox = Outbox()
    out = handle(WRITE, gate=write_gate(outbox), run_id="run-1")
    assert out["errors"] == ["auth:scope:reversible_write"]
    assert outbox.sent == []


def test_a_repaired_write_runs_once_with_the_repaired_args() -> None:
    """An extra argument is dropped and the write runs once, under the run's one step id."""
    outbox = Outbox()
    gate = write_gate(outbox)
    out = handle({**WRITE, "urgent": True}, gate=gate, **AUTHORITY)
    assert out["ok"] is True
    assert out["errors"] == ["args:unexpected:urgent"]
    assert outbox.sent == [WRITE]
    assert handle(WRITE, gate=gate, **AUTHORITY)["tool_runs"] == 0  # the same key: replayed


# --- the default repairs, by reason --------------------------------------------------------

# order planting one defect -> (its reason, the field fixed, its value after, the action)
REPAIRED: dict[str, tuple[dict[str, Any], str, str, Any, str]] = {
    "unexpected": ({**GOOD, "team": "billing"}, "args:unexpected:team", "team", None, "drop"),
    "below min": ({**GOOD, "limit": 0}, "args:min:limit", "limit", LIMIT["min"], "set"),
    "above max": ({**GOOD, "limit": 50}, "args:max:limit", "limit", LIMIT["max"], "set"),
    "number as string": ({**GOOD, "limit": "5"}, "args:type:limit", "limit", 5, "set"),
    "integral float": ({**GOOD, "limit": 5.0}, "args:type:limit", "limit", 5, "set"),
}


@pytest.mark.parametrize("case", list(REPAIRED), ids=list(REPAIRED))
def test_each_default_repair_fixes_its_reason(case: str) -> None:
    """Each default rule changes the one field its reason names, and the fixed call succeeds."""
    order, reason, field, value, action = REPAIRED[case]
    out = handle(order, gate=Gate(TOOLS))
    assert out["errors"] == [reason]
    assert out["ok"] is True
    assert out["attempts"] == 2
    (fix,) = out["fixes"]
    assert (fix["reason"], fix["field"], fix["action"]) == (reason, field, action)
    assert fix["now"] == value
    assert type(fix["now"]) is type(value)
    fixed = ({key: v for key, v in order.items() if key != field} if action == "drop"
             else {**order, field: value})
    assert [{**fixed, "assignee": None}] == SEARCHED  # the body ran once, on the fixed call


def test_an_answer_says_what_a_repair_changed() -> None:
    """The reply lists the repairs after the result, so it never passes off another call."""
    out = handle({**GOOD, "limit": 50}, gate=Gate(TOOLS))
    assert out["answer"].endswith(f" Repaired: limit 50 -> {LIMIT['max']}.")


@pytest.mark.parametrize("limit", [True, False, "5.5", 5.5, " 5", "05", "5_0", "\u0665", None, [5]],
                         ids=repr)
def test_no_inexact_conversion_is_made(limit: object) -> None:
    """A bool, a fraction, padded or non-JSON digits are never made an int: the run gives up."""
    out = handle({**GOOD, "limit": limit}, gate=Gate(TOOLS))
    assert out["ok"] is False
    assert out["errors"] == ["args:type:limit"]
    assert out["attempts"] == 1
    assert out["fixes"] == []
    assert SEARCHED == []


def test_a_converted_value_out_of_bounds_is_then_clamped() -> None:
    """``"50"`` is converted to 50, which is above max, then clamped: three attempts, ok."""
    out = handle({**GOOD, "limit": "50"}, gate=Gate(TOOLS))
    assert out["errors"] == ["args:type:limit", "args:max:limit"]
    assert [fix["now"] for fix in out["fixes"]] == [50, LIMIT["max"]]
    assert out["ok"] is True
    assert out["attempts"] == 3 == MAX_ATTEMPTS


EXACT: list[tuple[str, object, object]] = [
    ("int", "5", 5), ("int", "-12", -12), ("int", "5.0", 5), ("int", "2e3", 2000),
    ("int", 7.0, 7), ("float", "2.5", 2.5), ("float", "5", 5), ("float", "-0.125", -0.125),
    ("float", "1e+16", 1e16), ("float", "0.1", 0.1), ("bool", "true", True),
    ("bool", "false", False),
]
INEXACT: list[tuple[str, object]] = [
    ("int", True), ("int", False), ("int", "5.5"), ("int", 5.5), ("int", math.inf),
    ("int", "+5"), ("int", "0x10"), ("int", "1e-1"), ("int", "9" * 500), ("float", True),
    ("float", "nan"), ("float", "NaN"), ("float", "1e999"), ("float", "Infinity"),
    ("float", "0.10000000000000001"), ("float", ".5"), ("bool", "True"), ("bool", 1),
    ("bool", "yes"), ("str", 5), ("str", True), ("list", "[1]"), ("dict", "{}"),
]


@pytest.mark.parametrize(("type_name", "value", "expected"), EXACT, ids=repr)
def test_exact_conversions(type_name: str, value: object, expected: object) -> None:
    """Each exact reading converts, to a value of the contract type itself."""
    ok, converted = exact_value(type_name, value)
    assert ok is True
    assert converted == expected
    assert type(converted) is type(expected)


@pytest.mark.parametrize(("type_name", "value"), INEXACT, ids=repr)
def test_inexact_conversions_are_refused(type_name: str, value: object) -> None:
    """A bool as a number, a fraction as an int, a lossy or non-JSON number: no conversion."""
    assert exact_value(type_name, value) == (False, None)


def scored_gate() -> Gate:
    def rank(score: float, fresh: bool) -> dict[str, Any]:
        return {"score": score, "fresh": fresh}

    return Gate({"rank": {"fn": rank, "args": {"score": {"type": "float", "min": 0, "max": 1},
                                               "fresh": {"type": "bool"}},
                          "returns": {"score": {"type": "float"}, "fresh": {"type": "bool"}}}})


def test_a_float_and_a_bool_are_converted_exactly() -> None:
    """``"0.25"`` becomes 0.25 for a float and ``"true"`` True for a bool, one repair each."""
    out = handle({"score": "0.25", "fresh": "true"}, gate=scored_gate())
    assert out["ok"] is True
    assert sorted(out["errors"]) == ["args:type:fresh", "args:type:score"]
    assert out["rows"] == [{"score": 0.25, "fresh": True}]


def test_a_float_bound_is_kept_as_given() -> None:
    """A float above its max is clamped to the max itself."""
    out = handle({"score": 1.5, "fresh": False}, gate=scored_gate())
    assert out["ok"] is True
    assert out["rows"] == [{"score": 1, "fresh": False}]


def test_allowed_without_a_fallback_gives_up() -> None:
    """An invented enum value has no default fix: the rule graph ends on it at once."""
    out = handle({**GOOD, "status": "opened"}, gate=Gate(TOOLS))
    assert out["errors"] == ["args:allowed:status"]
    assert out["ok"] is False
    assert out["attempts"] == 1


def test_allowed_takes_the_declared_fallback() -> None:
    """``fallbacks={"status": "open"}`` replaces an invented status, and the answer says so."""
    out = handle({**GOOD, "status": "opened"}, gate=Gate(TOOLS), fallbacks={"status": "open"})
    assert out["ok"] is True
    assert out["fixes"] == [{"reason": "args:allowed:status", "field": "status",
                             "action": "set", "was": "opened", "now": "open"}]
    assert out["answer"].endswith(' Repaired: status "opened" -> "open".')


def test_a_fallback_the_contract_refuses_is_not_made_twice() -> None:
    """A fallback outside ``allowed`` is refused again; the repeat ends the run."""
    out = handle({**GOOD, "status": "opened"}, gate=Gate(TOOLS), fallbacks={"status": "gone"})
    assert out["errors"] == ["args:allowed:status", "args:allowed:status", "repair:repeat"]
    assert SEARCHED == []


def test_a_misspelt_fallback_is_a_programming_error() -> None:
    """A fallback for an argument no tool limits to allowed values raises at build time."""
    with pytest.raises(ValueError, match="'stauts'"):
        build_graph(gate=Gate(TOOLS), fallbacks={"stauts": "open"})
    with pytest.raises(ValueError, match="'limit'"):
        build_graph(gate=Gate(TOOLS), fallbacks={"limit": 5})


def test_custom_repairs_replace_the_defaults() -> None:
    """``repairs=`` is the whole table of rules: without ``args:type:*`` a ``"5"`` is not fixed."""
    only_drop = {"args:unexpected:*": default_repairs()["args:unexpected:*"]}
    gate = Gate(TOOLS)
    assert handle({**GOOD, "limit": "5"}, gate=gate, repairs=only_drop)["errors"] == [
        "args:type:limit"]
    assert handle({**GOOD, "x": 1}, gate=gate, repairs=only_drop)["ok"] is True
    with pytest.raises(ValueError, match="fallbacks"):
        build_graph(gate=gate, repairs=only_drop, fallbacks={"status": "open"})


def test_a_custom_reply_and_pick_are_used() -> None:
    """``pick`` and ``reply`` are nodes the caller may write; the gate still checks the call."""
    def pick(state: Any) -> dict[str, Any]:
        return {"tool": "search_tickets", "args": {"status": state["order"]["q"], "limit": 1}}

    def reply(state: Any) -> dict[str, Any]:
        return {"ok": True, "answer": f"{len(state['rows'])} found"}

    graph = build_graph(gate=Gate(TOOLS), pick=pick, reply=reply)
    state = graph.invoke({"order": {"q": "pending"}})
    assert state["answer"] == "1 found"
    assert state["run_id"]  # a pick that makes none still gets the run its key
    assert SEARCHED == [{"status": "pending", "limit": 1, "assignee": None}]


# --- a scripted chat model, parallel tool calls --------------------------------------------


class Scripted(BaseChatModel):
    """A chat model replaying scripted answers; it records every prompt it is sent."""

    script: list[AIMessage]
    seen: list[list[BaseMessage]]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def turn(*calls: tuple[str, dict[str, Any]], prefix: str = "c") -> AIMessage:
    return AIMessage(content="", tool_calls=[
        {"name": name, "args": args, "id": f"{prefix}{index}"}
        for index, (name, args) in enumerate(calls)])


def model(*answers: AIMessage) -> Scripted:
    return Scripted(script=list(answers), seen=[])


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [message for message in messages if isinstance(message, ToolMessage)]


def test_parallel_calls_are_all_gated_and_the_bad_one_is_repaired() -> None:
    """Two calls in one turn, one with an invented status: both gated, the good one answered
    with its result, the bad one with its allowed values, then fixed; none skipped."""
    bad = {"status": "opened", "limit": 5}
    fixed = {"status": "pending", "limit": 5}
    chat = model(turn(("search_tickets", GOOD), ("search_tickets", bad)),
                 turn(("search_tickets", fixed), prefix="r"))
    gate = Gate(TOOLS)

    state = build_graph(chat, gate=gate).invoke({"order": {"ask": "open and pending"}})

    assert [call["args"] for call in state["calls"]] == [GOOD, bad, fixed]
    assert state["errors"] == ["args:allowed:status"]
    assert state["ok"] is True
    assert state["attempts"] == 2
    good_reply, bad_reply = tool_messages(chat.seen[1])
    assert (good_reply.tool_call_id, good_reply.status) == ("c0", "success")
    assert json.loads(str(good_reply.content))["data"] == searched_value(GOOD["limit"])
    assert (bad_reply.tool_call_id, bad_reply.status) == ("c1", "error")
    error = json.loads(str(bad_reply.content))["error"]
    assert error["details"]["fields"][0]["allowed"] == STATUSES
    assert [m.tool_call_id for m in tool_messages(state["messages"])] == ["c0", "c1", "r0"]
    assert "skipped" not in json.dumps([str(m.content) for m in state["messages"]])
    rows = searched_value(GOOD["limit"])["tickets"]
    assert state["answer"] == f"{ticket_sentence(rows)} {ticket_sentence(rows)} Repaired: " \
                              'status "opened" -> "pending".'
    assert [call["status"] for call in SEARCHED] == ["open", "pending"]


def test_a_parallel_call_that_cannot_succeed_ends_the_run_with_every_call_answered() -> None:
    """One call's body raises: the run gives up on it, the other call keeps its result."""
    def broken() -> dict[str, Any]:
        raise KeyError("count")

    table = {**TOOLS, "count_tickets": {"fn": broken, "args": {},
                                        "returns": {"n": {"type": "int"}}}}
    chat = model(turn(("search_tickets", GOOD), ("count_tickets", {})))
    state = build_graph(chat, gate=Gate(table)).invoke({"order": {}})
    assert state["ok"] is False
    assert state["errors"] == ["raised:KeyError"]
    replies = tool_messages(state["messages"])
    assert [(m.tool_call_id, m.status) for m in replies] == [("c0", "success"), ("c1", "error")]
    assert len(chat.seen) == 1  # the model cannot fix a raising body, so it is not asked


def test_a_retryable_parallel_call_is_retried_alone_with_its_own_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 429 on one write of two: only that call is repeated, with its tool-call id as step id,
    so each write body runs once per key and the model is not asked again."""
    monkeypatch.setattr(graph_module.time, "sleep", lambda seconds: None)
    outbox, failures = Outbox(), [UpstreamError(429, "busy", applied=False)]

    def flaky(ticket: str, text: str) -> dict[str, Any]:
        if failures and ticket == "T-2":
            raise failures.pop()
        return outbox(ticket, text)

    gate = write_gate(flaky)
    chat = model(turn(("reply_to_ticket", WRITE), ("reply_to_ticket", {**WRITE, "ticket": "T-2"})))

    state = build_graph(chat, gate=gate).invoke({"order": {}, **AUTHORITY})

    assert state["ok"] is True
    assert state["errors"] == ["upstream:429"]
    assert [call["args"]["ticket"] for call in state["calls"]] == ["T-1", "T-2", "T-2"]
    assert [sent["ticket"] for sent in outbox.sent] == ["T-1", "T-2"]
    assert [m.tool_call_id for m in tool_messages(state["messages"])] == ["c0", "c1"]
    assert len(chat.seen) == 1
    key = gate.idempotency_key("reply_to_ticket", {**WRITE, "ticket": "T-2"}, "run-1", "c1")
    assert key is not None
    assert gate.store.lookup(key) is not None


def test_a_model_that_never_fixes_its_call_stops_at_max_attempts() -> None:
    """Every turn repeats one good call and a new bad one: each call is tried at most
    MAX_ATTEMPTS times and the run ends there, the model not asked again."""
    bad = [{"status": word, "limit": 5} for word in ("opened", "shut", "done", "later")]
    answers = [turn(("search_tickets", GOOD), ("search_tickets", args), prefix=f"t{n}-")
               for n, args in enumerate(bad)]
    chat = model(*answers)
    state = build_graph(chat, gate=Gate(TOOLS)).invoke({"order": {}})
    assert state["ok"] is False
    assert state["attempts"] == MAX_ATTEMPTS
    assert state["errors"] == ["args:allowed:status"] * MAX_ATTEMPTS
    assert len(chat.seen) == MAX_ATTEMPTS
    assert len(SEARCHED) == 1  # the good call's repeats were memo hits


def test_the_system_prompt_comes_from_the_table() -> None:
    """The model is told the table's tools and descriptions, nothing about stock."""
    chat = model(turn(("search_tickets", GOOD)))
    build_graph(chat, gate=Gate(two_tools())).invoke({"order": {}})
    prompt = str(chat.seen[0][0].content)
    assert "search_tickets: Open support tickets, newest first." in prompt
    assert "count_tickets" in prompt
    assert "stock" not in prompt.lower()


def test_a_model_graph_refuses_rule_options() -> None:
    """A model picks and repairs: rule repairs or a rule pick beside it are a mistake."""
    with pytest.raises(ValueError, match="model"):
        build_graph(model(), gate=Gate(TOOLS), fallbacks={"status": "open"})


# --- properties on random tables -----------------------------------------------------------


def exactly_convertible(type_name: str, value: object) -> bool:
    """The test's own idea of an exact reading: canonical JSON text of a value of the type."""
    if type_name == "int" and type(value) is float:
        return math.isfinite(value) and value.is_integer()
    if type(value) is not str:
        return False
    try:
        parsed = json.loads(value)
    except ValueError:
        return False
    kinds = {"int": (int,), "float": (int, float), "bool": (bool,)}.get(type_name, ())
    if type(parsed) not in kinds or (type(parsed) is float and not math.isfinite(parsed)):
        return False
    return value in (json.dumps(parsed), repr(parsed))


def fixable(kind: str, path: tuple[Any, ...], spec: Any, value: object) -> bool:
    """Whether the default repairs (with a fallback for every enum) must fix this defect."""
    if path:  # a defect inside a list is reported against the list, which has no such rule
        return False
    if kind == "unexpected":
        # Only a key the contract does not name is dropped: an unexpected key inside a
        # declared dict argument is reported against that argument, which is never dropped.
        return spec is None
    if kind in ("min", "max"):
        return True
    if kind == "allowed":
        return not spec.echo
    return kind == "type" and exactly_convertible(spec.type, value)


@st.composite
def single_defect_runs(draw: st.DrawFn, side_effects: bool) -> tuple[Any, ...]:
    table = draw(contract_tables(side_effects=side_effects))
    name = draw(st.sampled_from(sorted(table)))
    contract = check_table(table)[name]
    assume("tool" not in contract.args)
    defective = draw(one_defect_args(table, name))
    # The order is the args, so it cannot miscopy an echo value; a key "tool" names the tool.
    assume(defective.kind != "echo" and "tool" not in defective.args)
    gate = instrument(table, [name], stub=True)
    body_of(gate, name).value = draw(valid_results(table, name))
    # An echo value must be the order's, so no fallback may stand in for it.
    fallbacks = {arg: spec.allowed[0] for arg, spec in contract.args.items()
                 if spec.allowed is not None and not spec.echo}
    return gate, name, contract, defective, fallbacks


def assert_bodies_took_valid_args(gate: Gate, name: str) -> Any:
    """Every body run took args the gate accepts (echo values as the order gave them)."""
    body = body_of(gate, name)
    specs = gate.contract(name).args  # type: ignore[union-attr]
    for args in body.seen:
        assert gate.validate_args(name, args, echo_values(specs, args)) == "", args
    return body


@pytest.mark.slow
@given(run=single_defect_runs(side_effects=False))
def test_on_random_tables_a_fixable_defect_is_repaired_within_the_budget(run: Any) -> None:
    """A single defect the default rules can fix ends ok within MAX_ATTEMPTS; every repaired
    call changes only the defective argument, and the last one passes the gate."""
    gate, name, contract, defective, fallbacks = run
    value = defective.args.get(defective.arg)
    spec = contract.args.get(defective.arg)
    out = handle({**defective.args, "tool": name}, gate=gate, fallbacks=fallbacks)

    assert out["attempts"] == len(out["calls"]) <= MAX_ATTEMPTS
    assert {fix["field"] for fix in out["fixes"]} <= {defective.arg}
    body = assert_bodies_took_valid_args(gate, name)
    if fixable(defective.kind, defective.site.path, spec, value):
        assert out["ok"], out
        assert out["errors"][0] == defective.error
        last = out["calls"][-1]["args"]
        assert gate.validate_args(name, last, echo_values(contract.args, last)) == ""
        assert body.runs == 1
    else:
        assert out["errors"][0] == defective.error
        assert out["ok"] is False


@pytest.mark.slow
@given(run=single_defect_runs(side_effects=True), junk=st.none() | st.dictionaries(
    st.text(max_size=4), st.integers() | st.text(max_size=3) | st.booleans(), max_size=4))
def test_on_random_tables_any_order_stays_within_the_budget(run: Any, junk: Any) -> None:
    """Whatever the table and order (writes and risky tools included): an outcome, never an
    exception, at most MAX_ATTEMPTS calls, and no body run on arguments the gate refuses."""
    gate, name, _, defective, fallbacks = run
    for order in ({**defective.args, "tool": name}, junk):
        out = handle(order, gate=gate, fallbacks=fallbacks, run_id="run-p")
        assert type(out["ok"]) is bool
        assert out["attempts"] == len(out["calls"]) <= MAX_ATTEMPTS
        for reason in out["errors"]:
            assert parse_reason(reason).stage in (*STAGES, *AGENT_STAGES)
    assert_bodies_took_valid_args(gate, name)


@pytest.mark.slow
@given(data=st.data())
def test_on_random_tables_every_parallel_call_is_gated_and_answered_once(data: Any) -> None:
    """A model turn of one valid call and one with a model's mistake, then the valid call
    again: every tool call is answered by exactly one ToolMessage, within MAX_ATTEMPTS, no
    body runs on refused args, and the run ends ok once the mistake is dropped."""
    table = data.draw(contract_tables(side_effects=False))
    name = data.draw(st.sampled_from(sorted(table)))
    contract = check_table(table)[name]
    # A name a provider refuses cannot be bound to a model (build_graph raises SchemaError).
    assume(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) is not None)
    assume(not any(spec.echo for spec in contract.args.values()))
    kinds = mistake_kinds(table, name)
    assume(kinds)
    good = data.draw(valid_args(table, name))
    mistake = data.draw(model_mistakes(table, name))
    gate = instrument(table, [name], stub=True)
    body_of(gate, name).value = data.draw(valid_results(table, name))
    chat = model(turn((name, good), (name, mistake.args)),
                 *[turn((name, good), prefix=f"r{n}-") for n in range(MAX_ATTEMPTS)])

    state = build_graph(chat, gate=gate).invoke({"order": {}})

    asked = [call["id"] for message in state["messages"] if isinstance(message, AIMessage)
             for call in message.tool_calls]
    answered = [message.tool_call_id for message in tool_messages(state["messages"])]
    assert sorted(answered) == sorted(asked)
    assert state["attempts"] <= MAX_ATTEMPTS
    assert len(chat.seen) <= MAX_ATTEMPTS
    assert_bodies_took_valid_args(gate, name)
    assert state["errors"][0] in {"args:" + reason for reason in mistake.reasons}
    assert state["ok"] is True
    assert state["attempts"] == 2


# --- the module layout ---------------------------------------------------------------------


def test_the_public_graph_module_exports_what_it_lists() -> None:
    """``agtool.graph`` names exactly the public surface of the reusable graph."""
    import agtool.graph as public

    assert set(public.__all__) == {
        "MAX_ATTEMPTS", "STEP_ID", "Call", "Fix", "ModelState", "Outcome", "RepairRule",
        "State", "build_graph", "build_naive", "convert_exactly", "default_repairs",
        "drop_argument", "exact_value", "giveup", "handle", "order_pick", "result_reply",
        "rows_of", "rule_for", "run_graph", "to_bound", "tool_specs", "use_fallback",
        "use_successor"}
    assert all(hasattr(public, name) for name in public.__all__)


@pytest.mark.slow
def test_the_reusable_graph_does_not_import_the_reference_tools() -> None:
    """Importing the graph, its repairs and the stock agent leaves ``agtool.tools`` unloaded:
    no import cycle, and no reference table behind a user's graph."""
    import subprocess
    import sys

    code = ("import sys, agtool.graph, agtool._stock_agent; "
            "assert 'agtool.tools' not in sys.modules, 'agtool.tools was imported'")
    done = subprocess.run(  # noqa: S603  # runs this test's own script
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_graph_modules_are_layered() -> None:
    """``_parts`` imports neither graph and ``_model`` not the rule graph, so only ``_build``
    sits on top: the model path is its own module with no import cycle (read from the source:
    importing any of them runs the package's face, which imports them all)."""
    import ast

    folder = Path(agtool.graph.__file__).parent

    def imported(module: str) -> set[str]:
        tree = ast.parse((folder / f"{module}.py").read_text("utf-8"))
        return {node.module or "" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1}

    assert imported("_parts").isdisjoint({"_build", "_model"})
    assert "_parts" in imported("_model")
    assert "_build" not in imported("_model")
    assert {"_parts", "_model"} <= imported("_build")


def test_an_unexpected_key_inside_a_declared_dict_is_not_dropped() -> None:
    """The case a random table found: ``{"0": {"0_id": None}}`` against a dict argument with
    named keys answers ``args:unexpected:0``, reported against the declared argument, which
    no rule drops; the run ends without a repair and the body never runs."""
    runs: list[dict[str, Any]] = []

    def look(**args: Any) -> dict[str, Any]:
        runs.append(args)
        return {}

    table = {"look": {"fn": look, "returns": {},
                      "args": {"0": {"type": "dict", "item": {"0": {"type": "int",
                                                                    "required": False}}}}}}
    out = handle({"0": {"0_id": None}, "tool": "look"}, gate=Gate(table))
    assert out["ok"] is False
    assert out["errors"][0] == "args:unexpected:0"
    assert out["fixes"] == []
    assert runs == []
