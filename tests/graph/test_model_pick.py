"""A chat model in the pick node: tool specs from the contracts, the model's calls gated,
its mistakes handed back as error ToolMessages, and the same budget and no-repeat rule.

The models are langchain-core fake chat models scripted with the mistakes real
models make; no network, no real model. Expected reasons are asked of the gate
for the planted call; expected rows come from ``STOCK``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import agtool.tools as tools
from agtool import ContractError, Gate
from agtool.graph._build import (
    MODEL_NO_TOOL_CALL,
    MODEL_RAISED,
    ORDER_NOT_OBJECT,
    REPAIR_REPEAT,
)
from agtool.tools import tool_specs

ORDER: dict[str, Any] = {"sku": "A100", "region": "busan", "limit": 2}
GOOD: dict[str, Any] = {"sku": "A100", "region": "busan", "limit": 2}


class ScriptedModel(GenericFakeChatModel):
    """A fake chat model answering from a script; records the tools bound and messages seen."""

    bound_tools: list[Any] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound_tools = list(tools)
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class RaisingModel(ScriptedModel):
    """A model whose provider call fails."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        raise ConnectionError("provider down")


def calling(tool: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": call_id}])


def scripted(*answers: AIMessage | str) -> ScriptedModel:
    return ScriptedModel(messages=iter(answers))


@pytest.fixture
def cleared() -> Iterator[None]:
    """An empty memo, so every call whose args pass runs its body."""
    tools.GATE.clear()
    yield
    tools.GATE.clear()


def error_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# --- tool specs from the contracts ---------------------------------------------------------


def test_tool_specs_carry_the_contract_table() -> None:
    """Names, descriptions, types, enums, bounds, required and closedness come from TOOLS."""
    specs = {spec["function"]["name"]: spec for spec in tool_specs(tools.TOOLS)}
    assert set(specs) == set(tools.TOOLS)
    for name, entry in tools.TOOLS.items():
        function = specs[name]["function"]
        assert specs[name]["type"] == "function"
        assert function["description"] == entry["description"]
        params = function["parameters"]
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert set(params["properties"]) == set(entry["args"])
        assert params["required"] == [arg for arg, spec in entry["args"].items()
                                      if spec.get("required", True)]
        region, limit = params["properties"]["region"], params["properties"]["limit"]
        assert region["enum"] == entry["args"]["region"]["allowed"] == tools.REGIONS
        assert (limit["type"], limit["minimum"], limit["maximum"]) == (
            "integer", entry["args"]["limit"]["min"], entry["args"]["limit"]["max"])
        assert params["properties"]["sku"]["type"] == "string"
        assert limit["description"] == entry["args"]["limit"]["description"]


def test_tool_specs_agree_from_table_gate_and_default() -> None:
    """A table, the gate over it, and the default source all give the same specs."""
    assert tool_specs(tools.TOOLS) == tool_specs(tools.GATE) == tool_specs()


def test_tool_specs_pass_through_langchain_unchanged() -> None:
    """LangChain takes the specs as finished OpenAI tools, so nothing is re-derived from fn."""
    specs = tool_specs()
    assert [spec["function"]["name"] for spec in specs] == list(tools.TOOLS)
    for spec in specs:
        assert convert_to_openai_tool(spec) == spec


def test_tool_spec_parameters_accept_and_refuse_what_the_gate_does() -> None:
    """The JSON Schema a model sees accepts a good call and refuses the planted mistakes."""
    params = tool_specs()[0]["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid(GOOD)
    for bad in ({**GOOD, "colour": "red"}, {**GOOD, "region": "daegu"},
                {**GOOD, "limit": tools.MAX_ROWS + 1}, {"sku": "A100", "region": "busan"},
                {**GOOD, "limit": "2"}):
        assert tools.validate_args("stock_lookup", bad) != ""
        assert not validator.is_valid(bad)


def test_tool_spec_covers_every_spec_key() -> None:
    """Lengths, anchored patterns, list items and optional args are written in JSON Schema terms."""
    table = {"t": {"fn": lambda **kw: kw, "args": {
        "code": {"type": "str", "pattern": "[A-Z]\\d+", "min_len": 2, "max_len": 5},
        "tags": {"type": "list", "min_len": 1, "max_len": 3, "item": {"type": "str"}},
        "pairs": {"type": "list", "item": {"k": {"type": "str"}, "v": {"type": "float"}}},
        "flag": {"type": "bool", "required": False},
        "extra": {"type": "dict", "required": False},
    }, "returns": {}}}
    function = tool_specs(table)[0]["function"]
    props = function["parameters"]["properties"]
    assert "description" not in function  # the table gave none
    assert props["code"] == {"type": "string", "minLength": 2, "maxLength": 5,
                             "pattern": "^(?:[A-Z]\\d+)$"}
    assert props["tags"] == {"type": "array", "minItems": 1, "maxItems": 3,
                             "items": {"type": "string"}}
    assert props["pairs"]["items"] == {
        "type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "number"}},
        "required": ["k", "v"], "additionalProperties": False}
    assert props["flag"] == {"type": ["boolean", "null"]}  # optional: null is "not given"
    assert props["extra"] == {"type": ["object", "null"]}
    assert function["parameters"]["required"] == ["code", "tags", "pairs"]


def test_tool_specs_refuse_a_malformed_table() -> None:
    """Specs are built from validated contracts: a bad table raises ContractError."""
    with pytest.raises(ContractError):
        tool_specs({"t": {"fn": len, "args": {"n": {"type": "number"}}, "returns": {}}})


def test_the_model_is_bound_to_the_contract_specs(cleared: None) -> None:
    """build_graph(model) binds exactly tool_specs() and sends the order to the model."""
    model = scripted(calling("stock_lookup", GOOD, "c1"))
    out = tools.handle(ORDER, model=model)
    assert model.bound_tools == tool_specs()
    assert out["ok"] is True
    assert out["rows"] == tools.STOCK["A100"]["busan"][: GOOD["limit"]]
    first_prompt = model.seen[0]
    assert any(isinstance(m, HumanMessage) and json.dumps(ORDER) in str(m.content)
               for m in first_prompt)


# --- mistakes models make, then correct ----------------------------------------------------

MISTAKES: dict[str, dict[str, Any]] = {
    "renamed argument": {"sku_id": "A100", "region": "busan", "limit": 2},
    "number as string": {"sku": "A100", "region": "busan", "limit": "2"},
    "bool as count": {"sku": "A100", "region": "busan", "limit": True},
    "region that does not exist": {"sku": "A100", "region": "daegu", "limit": 2},
    "extra argument": {"sku": "A100", "region": "busan", "limit": 2, "in_stock_only": True},
}


@pytest.mark.parametrize("bad", list(MISTAKES.values()), ids=list(MISTAKES))
def test_model_corrects_itself_from_the_reason(bad: dict[str, Any], cleared: None) -> None:
    """A refused call goes back to the model as an error ToolMessage and its fix is run."""
    reason = "args:" + tools.validate_args("stock_lookup", bad)
    assert reason != "args:"
    model = scripted(calling("stock_lookup", bad, "c1"), calling("stock_lookup", GOOD, "c2"))

    out = tools.handle(ORDER, model=model)

    assert out["ok"] is True
    assert out["errors"] == [reason]
    assert out["attempts"] == 2
    assert out["calls"] == [{"tool": "stock_lookup", "args": bad},
                            {"tool": "stock_lookup", "args": GOOD}]
    assert out["rows"] == tools.STOCK["A100"]["busan"][: GOOD["limit"]]
    assert out["tool_runs"] == 1  # the refused call ran no body
    assert {fix["reason"] for fix in out["fixes"]} == {reason}
    (feedback,) = error_messages(model.seen[1])
    assert feedback.status == "error"
    assert feedback.tool_call_id == "c1"
    answer = json.loads(str(feedback.content))
    assert answer["ok"] is False
    assert answer["error"]["details"]["reason"] == reason
    assert answer["error"]["code"] == "INVALID_ARGUMENT"
    assert answer["error"]["retryable"] is False


def test_allowed_reason_hands_the_model_the_allowed_values(cleared: None) -> None:
    """For ``allowed:region`` the ToolMessage lists the contract's allowed regions."""
    bad = MISTAKES["region that does not exist"]
    model = scripted(calling("stock_lookup", bad, "c1"), calling("stock_lookup", GOOD, "c2"))
    tools.handle(ORDER, model=model)
    (feedback,) = error_messages(model.seen[1])
    error = json.loads(str(feedback.content))["error"]
    (field,) = error["details"]["fields"]
    assert field["path"] == "region"
    assert field["rule"] == "allowed"
    assert field["allowed"] == tools.REGIONS
    assert error["message"].startswith("region must be one of " + ", ".join(tools.REGIONS))


def test_model_fixes_are_recorded_field_by_field(cleared: None) -> None:
    """The fixes of a model repair are the differences between its two calls."""
    bad = MISTAKES["renamed argument"]
    model = scripted(calling("stock_lookup", bad, "c1"), calling("stock_lookup", GOOD, "c2"))
    out = tools.handle(ORDER, model=model)
    reason = "args:unexpected:sku_id"
    assert sorted(out["fixes"], key=lambda fix: fix["field"]) == [
        {"reason": reason, "field": "sku", "action": "set", "was": None, "now": "A100"},
        {"reason": reason, "field": "sku_id", "action": "drop", "was": "A100", "now": None},
    ]


def test_model_switches_tool_on_too_big(cleared: None) -> None:
    """legacy_stock's oversized result is handed back and the model moves to stock_lookup."""
    args = {"sku": "A100", "region": "seoul", "limit": 2}
    assert len(tools.STOCK["A100"]["seoul"]) > tools.MAX_ROWS
    model = scripted(calling("legacy_stock", args, "c1"), calling("stock_lookup", args, "c2"))
    out = tools.handle({**args, "tool": "legacy_stock"}, model=model)
    assert out["ok"] is True
    assert out["errors"] == ["result:too_big"]
    assert out["tool_runs"] == 2
    (feedback,) = error_messages(model.seen[1])
    error = json.loads(str(feedback.content))["error"]
    assert error["code"] == "RESULT_TOO_LARGE"
    assert error["details"] == {"reason": "result:too_big", "tools": list(tools.TOOLS)}


def test_model_recovers_from_an_invented_tool(cleared: None) -> None:
    """An unknown tool name is refused before any body and the model is told the real names."""
    model = scripted(calling("stock_search", GOOD, "c1"), calling("stock_lookup", GOOD, "c2"))
    out = tools.handle(ORDER, model=model)
    assert out["errors"] == ["args:unknown_tool"]
    assert out["ok"] is True
    (feedback,) = error_messages(model.seen[1])
    error = json.loads(str(feedback.content))["error"]
    assert error["code"] == "UNKNOWN_TOOL"
    assert error["details"]["tools"] == list(tools.TOOLS)


def test_every_tool_call_of_a_refused_turn_is_answered(cleared: None) -> None:
    """When the model asks for two calls, both are gated and each gets its own ToolMessage:
    the bad one its error, the good one its result (none is skipped)."""
    bad = MISTAKES["region that does not exist"]
    two = AIMessage(content="", tool_calls=[
        {"name": "stock_lookup", "args": bad, "id": "c1"},
        {"name": "stock_lookup", "args": GOOD, "id": "c1b"}])
    model = scripted(two, calling("stock_lookup", GOOD, "c2"))
    out = tools.handle(ORDER, model=model)
    assert out["calls"][:2] == [{"tool": "stock_lookup", "args": bad},
                                {"tool": "stock_lookup", "args": GOOD}]
    replies = error_messages(model.seen[1])
    assert [m.tool_call_id for m in replies] == ["c1", "c1b"]
    assert [m.status for m in replies] == ["error", "success"]
    assert json.loads(str(replies[1].content))["data"]["rows"] == (
        tools.STOCK["A100"]["busan"][: GOOD["limit"]])


def test_model_must_copy_echo_arguments_from_the_order() -> None:
    """An echo argument the model leaves out or alters is refused until it copies the order's."""
    def lookup(sku: str, region: str, limit: int, request_id: str) -> dict[str, Any]:
        return tools.stock_lookup(sku, region, limit)

    entry = tools.TOOLS["stock_lookup"]
    args = {**entry["args"], "request_id": {"type": "str", "echo": True}}
    gate = Gate({"stock_lookup": {**entry, "fn": lookup, "args": args}})
    order = {**GOOD, "request_id": "r-17"}
    model = scripted(calling("stock_lookup", GOOD, "c1"),
                     calling("stock_lookup", {**GOOD, "request_id": "r-18"}, "c2"),
                     calling("stock_lookup", order, "c3"))

    state = tools.build_graph(model, gate=gate).invoke({"order": order})

    expected = [f"args:{gate.validate_args('stock_lookup', call, {'request_id': 'r-17'})}"
                for call in (GOOD, {**GOOD, "request_id": "r-18"})]
    assert state["errors"] == expected
    assert state["ok"] is True
    assert state["attempts"] == 3
    assert gate.stats("stock_lookup").runs == 1


# --- the budget and the no-repeat rule still hold ------------------------------------------


def test_a_model_that_never_corrects_itself_stops_at_max_attempts(cleared: None) -> None:
    """Ever-different wrong regions use up the budget; the model is not asked again after it."""
    wrong = ["daegu", "incheon", "gwangju", "ulsan"]
    assert not set(wrong) & set(tools.REGIONS)
    answers = [calling("stock_lookup", {**GOOD, "region": r}, f"c{i}")
               for i, r in enumerate(wrong)]
    model = scripted(*answers, calling("stock_lookup", GOOD, "never"))

    out = tools.handle(ORDER, model=model)

    assert out["ok"] is False
    assert out["attempts"] == tools.MAX_ATTEMPTS
    assert out["errors"] == ["args:allowed:region"] * tools.MAX_ATTEMPTS
    assert len(model.seen) == tools.MAX_ATTEMPTS
    assert out["tool_runs"] == 0


def test_a_model_repeating_its_call_is_stopped(cleared: None) -> None:
    """The same refused call twice is not made twice: the run ends with ``repair:repeat``."""
    bad = MISTAKES["number as string"]
    model = scripted(calling("stock_lookup", bad, "c1"), calling("stock_lookup", dict(bad), "c2"),
                     calling("stock_lookup", GOOD, "never"))
    out = tools.handle(ORDER, model=model)
    assert out["ok"] is False
    assert out["attempts"] == 1
    assert out["errors"] == ["args:type:limit", REPAIR_REPEAT]
    assert len(out["calls"]) == 1


def test_a_model_that_swaps_an_int_for_a_bool_is_not_repeating(cleared: None) -> None:
    """``limit: True`` after ``limit: 1`` is a different call (typed comparison), so it is made."""
    one = {**GOOD, "limit": 1}
    model = scripted(calling("stock_lookup", {**one, "colour": "red"}, "c1"),
                     calling("stock_lookup", {**one, "limit": True}, "c2"),
                     calling("stock_lookup", one, "c3"))
    out = tools.handle(ORDER, model=model)
    assert out["errors"] == ["args:unexpected:colour", "args:type:limit"]
    assert out["attempts"] == 3
    assert out["ok"] is True
    assert out["fixes"][-1] == {"reason": "args:type:limit", "field": "limit", "action": "set",
                                "was": True, "now": 1}


def test_empty_result_gives_up_without_asking_the_model_again(cleared: None) -> None:
    """``result:empty`` ends the run after one attempt even when a model could try again."""
    args = {"sku": "B200", "region": "busan", "limit": 2}
    assert tools.STOCK["B200"]["busan"] == []
    model = scripted(calling("stock_lookup", args, "c1"), calling("stock_lookup", GOOD, "never"))
    out = tools.handle(args, model=model)
    assert out["ok"] is False
    assert out["errors"] == ["result:empty"]
    assert out["attempts"] == 1
    assert len(model.seen) == 1


# --- a model that does not choose ----------------------------------------------------------


def test_a_model_answering_text_ends_ok_false() -> None:
    """No tool call from the first pick ends the run with ``model:no_tool_call`` and no call."""
    before = tools.CALLS
    out = tools.handle(ORDER, model=scripted("A100 is probably in stock in Busan."))
    assert out["ok"] is False
    assert out["errors"] == [MODEL_NO_TOOL_CALL]
    assert out["calls"] == []
    assert out["attempts"] == 0
    assert before == tools.CALLS


def test_a_model_answering_text_during_repair_ends_ok_false() -> None:
    """No tool call after a refused call ends the run with ``model:no_tool_call``."""
    bad = MISTAKES["region that does not exist"]
    out = tools.handle(ORDER, model=scripted(calling("stock_lookup", bad, "c1"), "Sorry."))
    assert out["ok"] is False
    assert out["errors"] == ["args:allowed:region", MODEL_NO_TOOL_CALL]
    assert out["attempts"] == 1


def test_a_model_that_raises_ends_ok_false() -> None:
    """A model whose call raises ends the run with ``model:raised:<Exception>``, not a crash."""
    model = RaisingModel(messages=iter([]))
    out = tools.handle(ORDER, model=model)
    assert out["ok"] is False
    assert out["errors"] == [f"{MODEL_RAISED}:ConnectionError"]
    assert out["answer"] == f"No answer: {MODEL_RAISED}:ConnectionError."
    assert len(model.seen) == 1


def test_a_non_dict_order_is_not_sent_to_the_model() -> None:
    """An order that is not a dict ends with ``order:not_object`` before the model is asked."""
    model = scripted(calling("stock_lookup", GOOD, "c1"))
    out = tools.handle(["A100", "busan"], model=model)
    assert out["errors"] == [ORDER_NOT_OBJECT]
    assert model.seen == []


def test_model_graph_has_the_same_shape() -> None:
    """The model graph draws the same nodes and repair loop as the rule graph."""
    model = scripted()
    drawn = tools.build_graph(model).get_graph()
    rule = tools.build_graph().get_graph()
    assert set(drawn.nodes) == set(rule.nodes)
    assert {(e.source, e.target) for e in drawn.edges} == {(e.source, e.target)
                                                           for e in rule.edges}
